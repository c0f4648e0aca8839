"""A durable ConversationMemory resumes exactly: restart at any point equals no restart.

Over every store backend (``backend`` fixture), sync and async: a conversation (plain
turns, tool calls answered at once or later, several calls at once, priority 1 and 2
messages, moving pins, a turn limit) runs uninterrupted in one memory (A) and, on another
database, in memories that are closed and reopened at random points (B); large tool
results are held reduced in the view, and a resume brings back the same copies. After every
message both return byte-identical contexts (OpenAI and Anthropic dicts), and B's
summarizer calls add up to A's: a resume calls no summarizer for what was done before.
``CONVOMEM_RESUME_EXAMPLES`` raises the number of examples.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convomem import ConversationMemory, aopen_store, open_store
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.summaries import ExtractiveSummarizer
from convomem.tokens import get_tokenizer
from session.test_memory_stateful import anthropic_problems, openai_problems

EXAMPLES = int(os.environ.get("CONVOMEM_RESUME_EXAMPLES", "12"))
TOK = get_tokenizer("approx")
_TEXT = (
    "the parcel was delayed again and we talked about shipping options while support "
    "checked the queue for order 1182 and ticket TK-5521 before the weekend"
)
WORDS = tuple(_TEXT.split(" "))


class Counting:
    """A summarizer that counts its calls (extractive underneath, so texts are real)."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0
        self._inner = ExtractiveSummarizer(40, TOK)

    def __call__(self, messages: Any, previous: Any = None) -> str:
        self.calls += 1
        return str(self._inner(messages, previous))


@dataclass(frozen=True)
class Config:
    budget: int
    pin: tuple[Any, ...]
    max_turns: int | None
    facts: bool


configs = st.builds(
    Config,
    budget=st.sampled_from([260, 400, 700]),
    pin=st.sampled_from([("system",), ("system", "last_user"), ("system", -2), ("first_user",)]),
    max_turns=st.one_of(st.none(), st.integers(2, 4)),
    facts=st.booleans(),
)
# (kind, size, priority): "user" / "assistant" text, "call" (1-2 tool calls, answered at
# once when size is even, else later), "answer" (answer every open call), "big" (a call
# answered at once by a JSON list of 20 * size items: reduced in the view).
steps = st.lists(
    st.tuples(
        st.sampled_from(["user", "user", "assistant", "assistant", "call", "answer", "big"]),
        st.integers(1, 30),
        st.sampled_from([0, 0, 0, 1, 2]),
    ),
    min_size=4,
    max_size=45,
)


def script(raw: list[tuple[str, int, int]]) -> list[Message]:
    """The messages of a generated conversation (fixed ids: both runs add the same)."""
    out = [Message("sys", "system", content="You are a helpful support agent.")]
    open_calls: list[str] = []
    for i, (kind, size, prio) in enumerate(raw):
        text = " ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(size))
        if kind in ("user", "assistant"):
            out.append(Message(f"m{i}", kind, content=text, priority=prio))
        elif kind == "big":
            rows = [{"id": f"{i}-{k}", "note": WORDS[k % len(WORDS)]} for k in range(20 * size)]
            out.append(Message(f"m{i}", "assistant", content=[ToolUseBlock(f"c{i}", "list")]))
            out.append(
                Message(f"m{i}r", "tool", content=[ToolResultBlock(f"c{i}", json.dumps(rows))])
            )
        elif kind == "call":
            width = 1 + size % 2
            calls = [ToolUseBlock(f"c{i}_{k}", "lookup", {"q": text[:20]}) for k in range(width)]
            out.append(Message(f"m{i}", "assistant", content=calls, priority=prio))
            ids = [c.id for c in calls]
            if size % 2 == 0:
                out += [
                    Message(f"m{i}r{k}", "tool", content=[ToolResultBlock(c, text)])
                    for k, c in enumerate(ids)
                ]
            else:
                open_calls += ids
        elif open_calls:
            out += [
                Message(f"m{i}r{k}", "tool", content=[ToolResultBlock(c, text)], priority=prio)
                for k, c in enumerate(open_calls)
            ]
            open_calls = []
    return out


def memory(cfg: Config, store: Any, counter: Counting) -> ConversationMemory:
    return ConversationMemory(
        cfg.budget,
        store=store,
        summarizer=counter,
        pin=cfg.pin,
        max_turns=cfg.max_turns,
        facts=cfg.facts,
    )


def reopen(url: str, db: Any) -> Any:
    """A new handle on the same database (an in-memory SQLite database has only one)."""
    if url == "sqlite://":
        return db
    db.close()
    return open_store(url)


async def areopen(url: str, db: Any) -> Any:
    if url == "sqlite://":
        return db
    await db.aclose()
    return await aopen_store(url)


def contexts(mem: ConversationMemory) -> tuple[Any, Any]:
    return mem.context(), mem.context("anthropic")


def run_sync(
    cfg: Config, messages: list[Message], restarts: set[int], a_url: str, b_url: str
) -> None:
    a_db, b_db = open_store(a_url), open_store(b_url)
    a_count, b_counts = Counting(), [Counting()]
    a = memory(cfg, a_db.session("s", user_id="u"), a_count)
    b = memory(cfg, b_db.session("s", user_id="u"), b_counts[0])
    for i, m in enumerate(messages):
        if i in restarts:
            b_db = reopen(b_url, b_db)
            b_counts.append(Counting())
            b = memory(cfg, b_db.session("s", user_id="u"), b_counts[-1])
        a.add_message(m)
        b.add_message(m)
        want = contexts(a)
        assert contexts(b) == want, f"after message {i} ({m.id})"
        assert openai_problems(want[0]) == [] and anthropic_problems(want[1]) == []
    assert sum(c.calls for c in b_counts) == a_count.calls
    # A last reopen reads the state of the end: the same context, no summarizer call.
    b_db = reopen(b_url, b_db)
    last = Counting()
    again = memory(cfg, b_db.session("s", user_id="u"), last)
    assert contexts(again) == contexts(a)
    assert last.calls == 0
    a_db.close()
    b_db.close()


async def run_async(
    cfg: Config, messages: list[Message], restarts: set[int], a_url: str, b_url: str
) -> None:
    a_db, b_db = await aopen_store(a_url), await aopen_store(b_url)
    a_count, b_counts = Counting(), [Counting()]
    a = memory(cfg, a_db.session("s", user_id="u"), a_count)
    b = memory(cfg, b_db.session("s", user_id="u"), b_counts[0])
    for i, m in enumerate(messages):
        if i in restarts:
            b_db = await areopen(b_url, b_db)
            b_counts.append(Counting())
            b = memory(cfg, b_db.session("s", user_id="u"), b_counts[-1])
        await a.aadd_message(m)
        await b.aadd_message(m)
        want = (await a.acontext(), await a.acontext("anthropic"))
        assert (await b.acontext(), await b.acontext("anthropic")) == want, f"after {m.id}"
    assert sum(c.calls for c in b_counts) == a_count.calls
    await a_db.aclose()
    await b_db.aclose()


@pytest.mark.parametrize("mode", ["sync", "async"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cfg=configs, raw=steps, data=st.data())
def test_a_restart_anywhere_changes_nothing(
    backend: Any, mode: str, cfg: Config, raw: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    messages = script(raw)
    cuts = (
        st.lists(st.integers(1, len(messages) - 1), max_size=4)
        if len(messages) > 1
        else st.just([])
    )
    restarts = set(data.draw(cuts))  # a restart between two messages
    a_url, b_url = backend.fresh_url(), backend.fresh_url()
    if mode == "sync":
        run_sync(cfg, messages, restarts, a_url, b_url)
    else:
        asyncio.run(run_async(cfg, messages, restarts, a_url, b_url))
