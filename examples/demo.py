"""`make demo`: one long support thread, before and after convomem.

Maya Chen's six-week thread with Ada, a support agent (examples/support_conversation.json,
made by make_conversation.py), ends with a question that needs its oldest facts. The
demo shows what a model with a small context would get without memory (the newest
messages that fit) and with ``ConversationMemory``: what was kept, dropped, summarized
and compressed, and why, then the same from the command line.

The memory keeps its session in a SQLite file (``.convomem-demo.db`` in the working
directory; ``--db PATH`` or ``$CONVOMEM_DEMO_DB`` to put it elsewhere). Run it again and
it resumes that session instead of replaying the thread: it reports the messages it
found, the summary it kept and the summarizer calls the resume needed.
``--fresh`` (``make demo ARGS=--fresh``) deletes the session and starts over.
``--budget N`` (``make demo ARGS="--budget 1000"``) gives the model's context N tokens
instead of 2,500; each budget keeps its own session.

Runs from a source checkout with no install and no dependency (SQLite is in the
standard library): ``PYTHONPATH=src python examples/demo.py``. Token counts use the
built-in ``approx`` counter; pass ``tokenizer="tiktoken:cl100k_base"`` (extra
``tiktoken``) for exact ones.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from convomem import (
    ConversationMemory,
    ConvomemError,
    Message,
    Packer,
    from_openai,
    get_tokenizer,
    open_store,
)
from convomem.model import COMPRESSED_KEY
from convomem.stores import SessionStore, StoreDatabase
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
DB_FILE = ".convomem-demo.db"
"""Where the session is kept, in the working directory (``--db`` or
``$CONVOMEM_DEMO_DB`` to choose another file)."""
SESSION = "maya-chen-support"
USER = "maya"


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


def open_memory(
    tokenizer: Tokenizer, store: SessionStore | None = None, budget: int = BUDGET
) -> ConversationMemory:
    """The demo's memory: the same options on the first run and on a resume."""
    return ConversationMemory(max_tokens=budget, tokenizer=tokenizer, store=store)


def remember(
    thread: Sequence[Message],
    tokenizer: Tokenizer,
    store: SessionStore | None = None,
    budget: int = BUDGET,
) -> ConversationMemory:
    """The thread fed to a ConversationMemory one message at a time, as an agent loop would.

    Long tool outputs get priority 1: the memory shortens them before it evicts them.
    """
    memory = open_memory(tokenizer, store, budget)
    for m in thread:
        memory.add_message(prioritized(m, tokenizer))
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


def print_summary(summary: Message) -> None:
    print("\nThe summary the model reads (wrapped for the screen, nothing cut):")
    for line in summary.text().splitlines():
        if line.strip():
            say(line, "    ", "      ")
        else:
            print()


def prioritized(m: Message, tokenizer: Tokenizer) -> Message:
    """Long tool outputs get priority 1: the memory shortens them before it evicts them."""
    if m.role == "tool" and tokenizer.count_message(m) > 60:
        return m.replace(priority=1)
    return m


def story(
    thread: Sequence[Message], tok: Tokenizer, store: SessionStore | None, budget: int = BUDGET
) -> None:
    """The first run: the thread without memory, then through a ConversationMemory."""
    total = tok.count_messages(thread)
    calls = sum(len(m.tool_use_ids()) for m in thread)
    question = thread[-1]

    banner("The thread: one customer, six weeks")
    say(
        f"{len(thread)} messages ({sum(m.role == 'user' for m in thread)} from Maya, "
        f"{calls} tool calls), {total:,} tokens; the model's context holds {budget:,}."
    )
    say(f'Her last message: "{question.text()}"', "  ")

    banner(f"Before: the newest messages that fit {budget:,} tokens")
    plain = Packer(budget=budget, tokenizer=tok).pack(thread)
    first_kept = next(i for i, m in enumerate(thread) if m is plain.kept[1])
    say(
        f"A Packer with Recency keeps the system prompt and #{first_kept}-#{len(thread) - 1} "
        f"({len(plain.kept)} messages, {plain.token_count:,} tokens) and drops the "
        f"{len(plain.dropped)} older messages for good. Can the model answer her?"
    )
    show_recall(recall(plain.kept), thread)

    banner(f"After: ConversationMemory(max_tokens={budget:,})")
    memory = remember(thread, tok, store, budget)
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
        f"{stats.context_tokens:,} of {budget:,} tokens:"
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
        print_summary(summaries[0])
    print("\nCan the model answer her now?")
    show_recall(recall(context), thread)

    banner("The same from the command line")
    path = os.path.relpath(EXAMPLE)
    path = str(EXAMPLE) if path.startswith("..") else path
    commands = [
        ["estimate", path],
        ["pack", path, "--budget", str(budget), "--strategy", "memory", "--explain", "--tail", "4"],
        ["simulate", path, "--budget", str(budget)],
    ]
    for argv in commands:
        print(f"$ python -m convomem {' '.join(argv)}")
    print("(or `convomem ...` once installed with `pip install -e .`)\n")
    from convomem.cli import main as cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        cli(["pack", path, "--budget", str(budget), "--strategy", "memory"], out=io.StringIO())
    say(f"pack (no priority marks in the file): {err.getvalue().strip()}")


def resume(
    thread: Sequence[Message],
    tok: Tokenizer,
    store: SessionStore,
    where: str,
    stored: int,
    budget: int = BUDGET,
) -> None:
    """A later run: a new ConversationMemory over the stored session, as after a restart."""
    session = session_id(budget)
    banner(f"Resumed: session {session!r}")
    say(
        f"A previous run left {stored} messages in this session, in {where}. A new "
        "ConversationMemory over the same store (a new process, as after a restart) picks "
        "it up:"
    )
    memory = open_memory(tok, store, budget)
    missing = [prioritized(m, tok) for m in thread[stored:]]
    for m in missing:  # a previous run stopped early: carry on where it stopped
        memory.add_message(m)
    context = memory.context(format="messages")
    stats = memory.stats()
    current = memory.summary.current()
    summary = next((m for m in context if current is not None and m.id == current.id), None)
    if missing:
        bullet(f"the previous run stopped early: added the {len(missing)} messages it lacked")
    bullet(
        f"the context: {stats.context_messages} messages, {stats.context_tokens:,} of "
        f"{budget:,} tokens, read back from the store"
    )
    bullet(
        f"the summary it kept: {stats.summarized_messages} older messages in "
        f"{stats.summary_tokens:,} tokens" + (" (degraded)" if stats.degraded else "")
    )
    if stats.summarizer_calls == 0:
        bullet("summarizer calls to resume: none; the summary was read back, not remade")
    else:
        bullet(
            f"summarizer calls to resume: {stats.summarizer_calls} (this version rebuilds "
            "the summary by replaying the log)"
        )
    if summary is not None:
        print_summary(summary)
    print("\nCan the model answer her now?")
    show_recall(recall(context), thread)

    banner("The stored session from the command line")
    argv = ["sessions", "show", session, "--store", f"sqlite:///{where}", "--tail", "3"]
    print(f"$ python -m convomem {' '.join(argv)}")
    from convomem.cli import main as cli

    out = io.StringIO()
    cli(argv, out=out)
    for line in out.getvalue().splitlines():
        print(line[:WIDTH])
    print()
    say(
        "Run it again to resume again; `make demo ARGS=--fresh` (or "
        "`python examples/demo.py --fresh`) starts over."
    )


def session_id(budget: int) -> str:
    """The session of a budget: the default one is ``SESSION``."""
    return SESSION if budget == BUDGET else f"{SESSION}-{budget}"


def options(argv: Sequence[str] | None) -> tuple[str, bool, int]:
    """``(database path, fresh, budget)`` from the command line."""
    parser = argparse.ArgumentParser(description="The convomem demo (see examples/demo.py).")
    parser.add_argument("--db", help=f"SQLite file of the session (default: {DB_FILE})")
    parser.add_argument("--fresh", action="store_true", help="delete the session, start over")
    parser.add_argument(
        "--budget", type=int, default=BUDGET, help=f"the context's tokens (default: {BUDGET})"
    )
    args = parser.parse_args(argv)
    if args.budget < 200:
        parser.error(f"--budget={args.budget}: must be at least 200 tokens")
    return args.db or os.environ.get("CONVOMEM_DEMO_DB") or DB_FILE, args.fresh, args.budget


def main(argv: Sequence[str] | None = None) -> int:
    path, fresh, budget = options(argv)
    session = session_id(budget)
    thread = from_openai(json.loads(EXAMPLE.read_text()))
    tok = get_tokenizer("approx")
    try:
        db: StoreDatabase = open_store(f"sqlite:///{path}")
    except ConvomemError as exc:
        print(f"demo: cannot open {path}: {exc}", file=sys.stderr)
        return 1
    try:
        if fresh and db.delete_session(session, user_id=USER):
            print(f"Deleted the session saved in {path}: starting over.")
        store = db.session(session, user_id=USER)
        info = store.info()
        if info is not None and info.message_count:
            resume(thread, tok, store, path, info.message_count, budget)
        else:
            story(thread, tok, store, budget)
            print()
            say(
                f"The session is saved in {path}: run the demo again to resume it "
                "(`make demo`), or start over with `make demo ARGS=--fresh`."
            )
    except ConvomemError as exc:
        print(f"demo: {exc} (`make demo ARGS=--fresh` starts over)", file=sys.stderr)
        return 1
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
