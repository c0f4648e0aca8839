"""The session view's ordering of tool exchanges (``answers_first``), against brute force."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message, TextBlock, ToolResultBlock, ToolUseBlock
from convomem.session.view import answers_first

EXAMPLES = int(os.environ.get("CONVOMEM_VIEW_EXAMPLES", "300"))


def call(mid: str, *ids: str) -> Message:
    return Message(mid, "assistant", content=[ToolUseBlock(i, "lookup", {"q": i}) for i in ids])


def answer(mid: str, *ids: str, role: str = "tool") -> Message:
    blocks: list[Any] = [ToolResultBlock(i, f"result {i}") for i in ids]
    if role == "user":
        blocks.append(TextBlock("Here is what the tools found."))
    return Message(mid, role, content=blocks)


def result_before_call(messages: list[Message]) -> list[str]:
    """Results of ``messages`` that come before their call (brute force)."""
    made: set[str] = set()
    bad: list[str] = []
    for m in messages:
        bad += [r for r in m.tool_result_ids() if r not in made]
        made.update(m.tool_use_ids())
    return bad


def between_call_and_results(messages: list[Message]) -> int:
    """How many messages come between a call and one of its results (brute force)."""
    n = 0
    for i, m in enumerate(messages):
        for c in m.tool_use_ids():
            last = max((j for j, r in enumerate(messages) if c in r.tool_result_ids()), default=i)
            n += sum(1 for r in messages[i + 1 : last] if c not in r.tool_result_ids() and r.blocks)
    return n


@st.composite
def exchanges(draw: st.DrawFn) -> list[Message]:
    """A log as a session's chunk holds it: every result after its call, each call
    answered at most once, results of several calls in one message, other messages
    typed while calls are open."""
    out: list[Message] = []
    unanswered: list[str] = []
    for serial in range(1, draw(st.integers(1, 12)) + 1):
        kind = draw(st.sampled_from(["call", "answer", "user", "assistant"]))
        if kind == "call":
            ids = [f"c{serial}_{k}" for k in range(draw(st.integers(1, 3)))]
            out.append(call(f"a{serial}", *ids))
            unanswered += ids
        elif kind == "answer" and unanswered:
            picks = draw(st.lists(st.sampled_from(unanswered), min_size=1, max_size=3, unique=True))
            role = draw(st.sampled_from(["tool", "user"]))
            out.append(answer(f"r{serial}", *picks, role=role))
            unanswered = [c for c in unanswered if c not in picks]
        else:
            role = "user" if kind == "user" else "assistant"
            out.append(Message(f"m{serial}", role, content=f"message {serial}"))
    return out


@settings(max_examples=EXAMPLES, deadline=None)
@given(exchanges())
def test_answers_first_never_puts_a_result_before_its_call(log: list[Message]) -> None:
    out = answers_first(log)
    assert sorted(m.id for m in out) == sorted(m.id for m in log)  # a permutation
    assert result_before_call(out) == []
    # It never makes things worse than the log order.
    assert between_call_and_results(out) <= between_call_and_results(log)


def test_one_message_answering_two_exchanges_comes_after_both_calls() -> None:
    """The soak's reproducer: a user turn answers c6 (a call made while c3, c4 were
    open) and c3; the result of c4 comes last. c6's result used to come before c6."""
    log = [
        call("a2", "c3", "c4"),
        call("a3", "c6"),
        answer("r4", "c6", "c3", role="user"),
        answer("r5", "c4"),
    ]
    out = answers_first(log)
    assert [m.id for m in out] == ["a2", "r5", "a3", "r4"]
    assert result_before_call(out) == []


def test_a_message_typed_while_a_call_runs_waits_for_its_result() -> None:
    log = [
        call("a1", "c1"),
        Message("u", "user", content="Also cancel it."),
        answer("t1", "c1"),
    ]
    assert [m.id for m in answers_first(log)] == ["a1", "t1", "u"]
