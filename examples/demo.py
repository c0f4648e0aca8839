"""`make demo`: one long support thread, before and after convomem.

Maya Chen's six-week thread with Ada, a support agent (examples/support_conversation.json,
made by make_conversation.py), ends with a question that needs its oldest facts. The
demo shows what a model with a small context would get without memory (the newest
messages that fit) and with ``ConversationMemory``: what was kept, dropped, summarized
and compressed, and why, then the same from the command line.

Runs from a source checkout with no install and no dependency:
``PYTHONPATH=src python examples/demo.py``. Token counts use the built-in ``approx``
counter; pass ``tokenizer="tiktoken:cl100k_base"`` (extra ``tiktoken``) for exact ones.
"""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

from convomem import ConversationMemory, Message, Packer, from_openai, get_tokenizer
from convomem.model import COMPRESSED_KEY
from convomem.tokens import Tokenizer

EXAMPLE = Path(__file__).with_name("support_conversation.json")
BUDGET = 2_500
"""Tokens the model's context may hold (the thread is about twice that)."""

NEEDED = {
    "her office address": "1550 Larimer St",
    "her email-only preference": "never call me",
    "refund R-4417-1": "R-4417-1",
    "warranty claim W-7730": "W-7730",
    "her second order, 4532": "4532",
}
"""What the last question needs, and the text that shows the context still has it."""

WIDTH = 88


def banner(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, WIDTH - 4 - len(title)))


def say(text: str, first: str = "", rest: str | None = None) -> None:
    """Print ``text`` wrapped at word boundaries (never cut inside a word)."""
    rest = first if rest is None else rest
    print(textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=rest))


def bullet(text: str) -> None:
    say(text, "  - ", "    ")


def recall(context: Sequence[Message]) -> dict[str, bool]:
    text = "\n".join(m.text() for m in context)
    return {what: needle in text for what, needle in NEEDED.items()}


def show_recall(found: dict[str, bool], thread: Sequence[Message]) -> None:
    for what, ok in found.items():
        first = next(i for i, m in enumerate(thread) if NEEDED[what] in m.text())
        print(f"    [{'x' if ok else ' '}] {what} (first said in #{first})")


def remember(thread: Sequence[Message], tokenizer: Tokenizer) -> ConversationMemory:
    """The thread fed to a ConversationMemory one message at a time, as an agent loop would.

    Long tool outputs get priority 1: the memory shortens them before it evicts them.
    """
    memory = ConversationMemory(max_tokens=BUDGET, tokenizer=tokenizer)
    for m in thread:
        if m.role == "tool" and tokenizer.count_message(m) > 60:
            m = m.replace(priority=1)
        memory.add_message(m)
    return memory


def spans(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"#0-2, #5"``."""
    out: list[str] = []
    for i in indices:
        if out and out[-1].endswith(f"-{i - 1}"):
            out[-1] = out[-1].rsplit("-", 1)[0] + f"-{i}"
        elif out and out[-1] == f"#{i - 1}":
            out[-1] += f"-{i}"
        else:
            out.append(f"#{i}")
    return ", ".join(out)


def main() -> None:
    thread = from_openai(json.loads(EXAMPLE.read_text()))
    tok = get_tokenizer("approx")
    total = tok.count_messages(thread)
    calls = sum(len(m.tool_use_ids()) for m in thread)
    question = thread[-1]

    banner("The thread: one customer, six weeks")
    say(
        f"{len(thread)} messages ({sum(m.role == 'user' for m in thread)} from Maya, "
        f"{calls} tool calls), {total:,} tokens; the model's context holds {BUDGET:,}."
    )
    say(f'Her last message: "{question.text()}"', "  ")

    banner(f"Before: the newest messages that fit {BUDGET:,} tokens")
    plain = Packer(budget=BUDGET, tokenizer=tok).pack(thread)
    first_kept = next(i for i, m in enumerate(thread) if m is plain.kept[1])
    say(
        f"A Packer with Recency keeps the system prompt and #{first_kept}-#{len(thread) - 1} "
        f"({len(plain.kept)} messages, {plain.token_count:,} tokens) and drops the "
        f"{len(plain.dropped)} older messages for good. Can the model answer her?"
    )
    show_recall(recall(plain.kept), thread)

    banner(f"After: ConversationMemory(max_tokens={BUDGET:,})")
    memory = remember(thread, tok)
    context = memory.context(format="messages")
    stats = memory.stats()
    log = memory.messages()
    where = {m.id: i for i, m in enumerate(log)}
    verbatim = [where[m.id] for m in context if m.id in where and COMPRESSED_KEY not in m.metadata]
    compressed = [where[m.id] for m in context if COMPRESSED_KEY in m.metadata]
    summaries = [m for m in context if m.id not in where]
    in_view = {m.id for m in context}
    evicted = [i for i, m in enumerate(log) if m.id not in in_view]
    say(
        f"Each message was added as it arrived. The context is now {len(context)} messages, "
        f"{stats.context_tokens:,} of {BUDGET:,} tokens:"
    )
    bullet(f"kept verbatim: {spans(verbatim)} (the system prompt is pinned, never evicted)")
    bullet(
        f"summarized: {stats.summarized_messages} older messages, folded into one summary "
        f"by {stats.summarizer_calls} summarizer calls over {stats.compactions} compactions; "
        f"the summarizer read {stats.summarizer_input_tokens:,} tokens in all, "
        f"{stats.summarizer_input_tokens / total:.1f}x the thread: no message twice"
    )
    outputs = (
        "1 long tool output was"
        if stats.compressions == 1
        else (f"{stats.compressions} long tool outputs were")
    )
    bullet(
        f"compressed: {outputs} shortened (priority 1) before being evicted"
        + (f"; shortened and still in view: {spans(compressed)}" if compressed else "")
    )
    bullet(
        f"dropped from the context: {spans(evicted)}, but not from the log: "
        f"memory.messages() still returns all {len(log)}"
    )
    say(
        "Why: when the history passes its trigger share of the budget, the oldest turns are "
        "evicted, down to a target share and whole (a tool call leaves with its results), "
        "so between compactions the context grows at its end only and a provider's prompt "
        "cache keeps serving its start.",
        "  ",
    )
    if summaries:
        print("\nThe summary the model reads (wrapped for the screen, nothing cut):")
        for line in summaries[0].text().splitlines():
            if line.strip():
                say(line, "    ", "      ")
            else:
                print()
    print("\nCan the model answer her now?")
    show_recall(recall(context), thread)

    banner("The same from the command line")
    path = "examples/support_conversation.json"
    commands = [
        ["estimate", path],
        ["pack", path, "--budget", str(BUDGET), "--strategy", "memory", "--explain", "--tail", "4"],
        ["simulate", path, "--budget", str(BUDGET)],
    ]
    for argv in commands:
        print(f"$ python -m convomem {' '.join(argv)}")
    print("(or `convomem ...` once installed with `pip install -e .`)\n")
    from convomem.cli import main as cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        cli(["pack", path, "--budget", str(BUDGET), "--strategy", "memory"], out=io.StringIO())
    say(f"pack (no priority marks in the file): {err.getvalue().strip()}")


if __name__ == "__main__":
    main()
