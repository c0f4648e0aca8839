"""LlamaIndex ``ChatMessage`` lists <-> convomem messages, against LlamaIndex's own types.

The oracle is LlamaIndex's serializer (``model_dump(mode="json")``): a round trip gives
back what it dumps identically. Examples per property: ``CONVOMEM_FORMAT_EXAMPLES``
(default 60).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lazy import lazy
from convomem import Message
from convomem.errors import InvalidMessage, MissingDependency, NotAMessage
from convomem.formats.llamaindex import from_llamaindex, to_llamaindex
from convomem.model import TextBlock, ToolResultBlock, ToolUseBlock, is_derived_id

li = lazy("llama_index.core.base.llms.types")
EXAMPLES = int(os.environ.get("CONVOMEM_FORMAT_EXAMPLES", "60"))
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
kwargs = st.dictionaries(st.sampled_from(["a", "b"]), st.integers() | texts, max_size=2)


def dump(messages: list[Any]) -> list[Any]:
    return [m.model_dump(mode="json") for m in messages]


def user_blocks() -> st.SearchStrategy[list[Any]]:
    block = st.one_of(
        texts.map(lambda t: li.TextBlock(text=t)),
        st.just(li.ImageBlock(url="https://example.com/a.png")),
        st.binary(min_size=1, max_size=8).map(
            lambda b: li.ImageBlock(image=b, image_mimetype="image/png")
        ),
        st.just(li.DocumentBlock(data=b"%PDF-1.4", document_mimetype="application/pdf")),
    )
    return st.lists(block, min_size=1, max_size=3)


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    out: list[Any] = []
    if draw(st.booleans()):
        out.append(li.ChatMessage(role="system", content=draw(texts)))
    calls = 0
    for _ in range(draw(st.integers(1, 5))):
        out.append(li.ChatMessage(role="user", blocks=draw(user_blocks())))
        blocks: list[Any] = []
        if draw(st.booleans()):
            blocks.append(li.ThinkingBlock(content=draw(texts)))
        made = []
        for _ in range(draw(st.integers(0, 2))):
            calls += 1
            cid = draw(st.none() | st.just(f"call_{calls}"))
            made.append(cid)
            args = draw(kwargs | st.just('{"partial": '))
            blocks.append(li.ToolCallBlock(tool_call_id=cid, tool_name="search", tool_kwargs=args))
        out.append(li.ChatMessage(role="assistant", blocks=blocks or [li.TextBlock(text="ok")]))
        for cid in made:
            if cid is not None:
                out.append(
                    li.ChatMessage(
                        role="tool", content=draw(texts), additional_kwargs={"tool_call_id": cid}
                    )
                )
    return out


@settings(max_examples=EXAMPLES)
@given(histories())
def test_round_trip_is_exact_under_llamaindexs_serializer(history: list[Any]) -> None:
    ours = from_llamaindex(history)
    assert dump(to_llamaindex(ours)) == dump(history)
    stored = [Message.from_dict(m.to_dict()) for m in ours]
    assert dump(to_llamaindex(stored)) == dump(history)
    assert from_llamaindex(to_llamaindex(ours)) == ours
    assert all(is_derived_id(m.id) for m in ours) and len({m.id for m in ours}) == len(ours)


@settings(max_examples=EXAMPLES)
@given(histories())
def test_a_changed_message_is_rebuilt_from_its_blocks(history: list[Any]) -> None:
    """A message convomem changed (here: its kept serialization no longer matches) is
    rebuilt from its blocks: same role, same text, same calls and results."""
    ours = [
        m.replace(content=[*m.blocks, TextBlock("!")]) if m.role != "tool" else m
        for m in from_llamaindex(history)
    ]
    back = to_llamaindex(ours)
    for before, after in zip(ours, from_llamaindex(back), strict=True):
        assert after.role == before.role
        assert after.text() == before.text()
        calls = [(b.name, b.input) for b in after.blocks if isinstance(b, ToolUseBlock)]
        assert calls == [(b.name, b.input) for b in before.blocks if isinstance(b, ToolUseBlock)]


def test_tool_calls_and_results_pair_up() -> None:
    history = [
        li.ChatMessage(role="user", content="weather?"),
        li.ChatMessage(
            role="assistant",
            blocks=[
                li.ToolCallBlock(
                    tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Oslo"}
                ),
            ],
        ),
        li.ChatMessage(role="tool", content="cold", additional_kwargs={"tool_call_id": "c1"}),
        # an older OpenAI-style LLM writes its calls in additional_kwargs
        li.ChatMessage(
            role="assistant",
            content="",
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
                    },
                ]
            },
        ),
        li.ChatMessage(role="tool", content="warm", additional_kwargs={"tool_call_id": "c2"}),
        li.ChatMessage(role="tool", content="an observation"),  # no call: kept as user text
    ]
    ours = from_llamaindex(history)
    assert ours[1].blocks == (ToolUseBlock("c1", "weather", {"city": "Oslo"}),)
    assert ours[2].blocks == (ToolResultBlock("c1", "cold"),)
    assert ours[3].blocks == (TextBlock(""), ToolUseBlock("c2", "weather", {"city": "Rome"}))
    assert ours[5].role == "user" and ours[5].text() == "an observation"
    assert dump(to_llamaindex(ours)) == dump(history)
    # several results in one message (Anthropic style): one tool message each
    anthropic_style = Message(
        "m", "user", content=[ToolResultBlock("a", "1"), ToolResultBlock("b", "2"), TextBlock("go")]
    )
    back = to_llamaindex([anthropic_style])
    assert [(m.role.value, m.additional_kwargs.get("tool_call_id"), m.content) for m in back] == [
        ("tool", "a", "1"),
        ("tool", "b", "2"),
        ("user", None, "go"),
    ]


def test_convomem_messages_convert_to_llamaindex() -> None:
    ours = [
        Message("s", "system", content="be brief"),
        Message("u", "user", content="hi"),
        Message("a", "assistant", content=[ToolUseBlock("t", "f", {"x": 1})]),
        Message("r", "tool", content=[ToolResultBlock("t", "done")]),
    ]
    back = to_llamaindex(ours)
    assert [m.role.value for m in back] == ["system", "user", "assistant", "tool"]
    again = from_llamaindex(back)
    assert [(m.role, m.blocks) for m in again] == [(m.role, m.blocks) for m in ours]


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidMessage, match=r"messages\[1\]"):
        from_llamaindex([li.ChatMessage(content="x"), {"role": "user"}])
    with pytest.raises(InvalidMessage, match=r"messages\[0\].additional_kwargs.tool_calls\[0\]"):
        from_llamaindex(
            [
                li.ChatMessage(
                    role="assistant", content="", additional_kwargs={"tool_calls": [{"id": "x"}]}
                )
            ]
        )
    with pytest.raises(NotAMessage, match=r"messages\[0\]"):
        to_llamaindex([{"role": "user"}])  # type: ignore[list-item]


def test_missing_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_index.core.base.llms.types", None)
    with pytest.raises(MissingDependency, match=r"convomem\[llamaindex\]"):
        from_llamaindex([])
