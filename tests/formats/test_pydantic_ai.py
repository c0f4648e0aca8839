"""pydantic-ai messages <-> convomem messages, against pydantic-ai's own types.

The oracle is pydantic-ai's serializer (``ModelMessagesTypeAdapter``): a round trip gives
back what it dumps identically. Examples per property: ``CONVOMEM_FORMAT_EXAMPLES``
(default 60).
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lazy import lazy
from convomem import ConversationMemory, Message
from convomem.errors import InvalidMessage, MissingDependency, NotAMessage
from convomem.formats.pydantic_ai import MARK, from_pydantic_ai, key, model_key, to_pydantic_ai
from convomem.model import TextBlock, ToolResultBlock, ToolUseBlock, is_derived_id

pm = lazy("pydantic_ai.messages")
EXAMPLES = int(os.environ.get("CONVOMEM_FORMAT_EXAMPLES", "60"))
T0 = datetime(2025, 1, 1, tzinfo=UTC)

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
stamps = st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s))
names = st.sampled_from(["search", "weather", "add"])
args = st.one_of(
    st.dictionaries(st.sampled_from("abc"), st.integers() | texts, max_size=3),
    st.just('{"broken": '),
)


def dump(messages: list[Any]) -> list[Any]:
    return pm.ModelMessagesTypeAdapter.dump_python(messages, mode="json")


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    """A run-shaped history: requests and responses, every tool call answered next."""
    out: list[Any] = []
    calls = 0
    if draw(st.booleans()):
        out.append(
            pm.ModelRequest(
                parts=[
                    pm.SystemPromptPart(draw(texts), timestamp=draw(stamps)),
                    pm.UserPromptPart(draw(texts), timestamp=draw(stamps)),
                ]
            )
        )
    for _ in range(draw(st.integers(1, 5))):
        content: Any = draw(texts)
        if draw(st.booleans()):
            content = [draw(texts), pm.ImageUrl("https://example.com/i.png")]
        out.append(
            pm.ModelRequest(
                parts=[pm.UserPromptPart(content, timestamp=draw(stamps))],
                instructions=draw(st.none() | texts),
            )
        )
        parts: list[Any] = []
        if draw(st.booleans()):
            parts.append(pm.ThinkingPart(draw(texts)))
        made = []
        for _ in range(draw(st.integers(0, 2))):
            calls += 1
            made.append((f"call_{calls}", draw(names)))
            parts.append(pm.ToolCallPart(made[-1][1], draw(args), tool_call_id=made[-1][0]))
        parts.append(pm.TextPart(draw(texts)))
        out.append(pm.ModelResponse(parts=parts, timestamp=draw(stamps), model_name="m"))
        if made:
            out.append(
                pm.ModelRequest(
                    parts=[
                        pm.ToolReturnPart(
                            name,
                            draw(texts | st.dictionaries(texts, st.integers())),
                            tool_call_id=cid,
                            timestamp=draw(stamps),
                            outcome=draw(st.sampled_from(["success", "failed"])),
                        )
                        for cid, name in made
                    ]
                )
            )
            out.append(pm.ModelResponse(parts=[pm.TextPart(draw(texts))], timestamp=draw(stamps)))
    return out


@settings(max_examples=EXAMPLES)
@given(histories())
def test_round_trip_is_exact_under_pydantic_ais_serializer(history: list[Any]) -> None:
    ours = from_pydantic_ai(history)
    assert dump(to_pydantic_ai(ours)) == dump(history)
    stored = [Message.from_dict(m.to_dict()) for m in ours]  # through a store's JSON
    assert dump(to_pydantic_ai(stored)) == dump(history)
    assert from_pydantic_ai(to_pydantic_ai(ours)) == ours


@settings(max_examples=EXAMPLES)
@given(histories())
def test_ids_are_unique_and_keys_name_the_model_message(history: list[Any]) -> None:
    ours = from_pydantic_ai(history)
    assert len({m.id for m in ours}) == len(ours)
    assert all(is_derived_id(m.id) for m in ours)
    # every convomem message names the ModelMessage it came from, whatever its neighbours
    keys = [model_key(m) for m in history]
    assert [key(m) for m in ours if not m.id.endswith(":system")] == keys
    for k in range(len(history)):
        assert [key(m) for m in from_pydantic_ai(history[k:])] == [
            key(m) for m in ours[len(ours) - len(from_pydantic_ai(history[k:])) :]
        ]


def test_the_same_message_twice_is_kept_twice() -> None:
    req = pm.ModelRequest(parts=[pm.UserPromptPart("again", timestamp=T0)])
    first, second = from_pydantic_ai([req, req])
    assert first.id != second.id and key(first) == key(second) == model_key(req)
    memory = ConversationMemory(500)
    memory.add_message(from_pydantic_ai([req])[0])
    memory.add_message(from_pydantic_ai([req])[0])  # converted alone: a fresh id is given
    assert [m.text() for m in memory.messages()] == ["again", "again"]


@settings(max_examples=EXAMPLES)
@given(histories())
def test_calls_and_returns_pair_by_id(history: list[Any]) -> None:
    ours = from_pydantic_ai(history)
    calls = {b.id: b.name for m in ours for b in m.blocks if isinstance(b, ToolUseBlock)}
    results = [b for m in ours for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert {r.tool_use_id for r in results} == set(calls)
    for m in ours:
        if any(isinstance(b, ToolResultBlock) for b in m.blocks):
            assert m.role == "tool"


@settings(max_examples=EXAMPLES)
@given(histories(), st.data())
def test_a_views_subsequence_is_valid_pydantic_ai(history: list[Any], data: st.DataObject) -> None:
    """What a view sends (some messages left out, some texts replaced) converts to messages
    pydantic-ai serializes; unchanged ones exactly, results keeping their tools' names."""
    ours = from_pydantic_ai(history)
    keep = data.draw(st.lists(st.booleans(), min_size=len(ours), max_size=len(ours)))
    view = []
    for m, kept in zip(ours, keep, strict=True):
        if kept and m.role == "tool" and data.draw(st.booleans()):  # a compressed stand-in
            first = m.blocks[0]
            assert isinstance(first, ToolResultBlock)
            m = m.replace(content=[ToolResultBlock(first.tool_use_id, "(compressed)")])
        if kept:
            view.append(m)
    back = to_pydantic_ai(view)
    pm.ModelMessagesTypeAdapter.validate_python(dump(back))
    returns = [p for r in back for p in r.parts if isinstance(p, pm.ToolReturnPart)]
    called = {
        p.tool_call_id: p.tool_name
        for r in history
        for p in r.parts
        if isinstance(p, pm.ToolCallPart)
    }
    for p in returns:
        assert p.tool_name == called[p.tool_call_id]


def test_system_prompt_parts_are_their_own_pinned_message() -> None:
    req = pm.ModelRequest(
        parts=[pm.UserPromptPart("hi", timestamp=T0), pm.SystemPromptPart("be brief", timestamp=T0)]
    )
    system, user = from_pydantic_ai([req])
    assert (system.role, system.text(), user.role, user.text()) == (
        "system",
        "be brief",
        "user",
        "hi",
    )
    assert system.id == user.id + ":system" and key(system) == key(user) == model_key(req)
    assert dump(to_pydantic_ai([system, user])) == dump([req])  # the parts' order kept
    (alone,) = to_pydantic_ai([system])  # a view keeping only the pinned half
    assert [type(p) for p in alone.parts] == [pm.SystemPromptPart]
    memory = ConversationMemory(200)
    for m in from_pydantic_ai([req]):
        memory.add_message(m)
    for i in range(40):
        memory.add("user", f"filler message number {i} " * 3)
    view = memory.context("messages")
    assert view[0].id == system.id and user.id not in {m.id for m in view}


@settings(max_examples=EXAMPLES)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["system", "user", "assistant"]),
            texts,
            st.none() | st.sampled_from(["ann", "bo"]),
            st.integers(0, 2),
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_convomem_messages_come_back_the_same(rows: list[Any], with_tool: bool) -> None:
    ours = [
        Message(
            f"m{i}",
            role,
            content=text,
            name=name,
            priority=prio,
            metadata={"k": i},
            created_at=float(i),
        )
        for i, (role, text, name, prio) in enumerate(rows)
    ]
    if with_tool:
        ours += [
            Message("c", "assistant", content=[TextBlock("x"), ToolUseBlock("t1", "f", {"a": 1})]),
            Message("r", "tool", content=[ToolResultBlock("t1", "out", is_error=True)]),
        ]
    theirs = to_pydantic_ai(ours)
    assert all(isinstance(t.metadata, dict) and MARK in t.metadata for t in theirs)
    assert from_pydantic_ai(theirs) == ours
    assert from_pydantic_ai(pm.ModelMessagesTypeAdapter.validate_python(dump(theirs))) == ours


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidMessage, match=r"messages\[1\]"):
        from_pydantic_ai([pm.ModelRequest(parts=[]), {"kind": "request"}])
    with pytest.raises(InvalidMessage, match="list"):
        from_pydantic_ai(pm.ModelRequest(parts=[]))  # type: ignore[arg-type]
    with pytest.raises(NotAMessage, match=r"messages\[0\]"):
        to_pydantic_ai(["hello"])  # type: ignore[list-item]
    orphan = Message("r", "tool", content=[ToolResultBlock("nowhere", "x")])
    with pytest.raises(InvalidMessage, match="tool's name"):
        to_pydantic_ai([orphan])


def test_missing_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai.messages", None)
    with pytest.raises(MissingDependency, match=r"convomem\[pydantic-ai\]"):
        from_pydantic_ai([])
