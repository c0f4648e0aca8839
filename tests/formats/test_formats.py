"""Format converters: OpenAI Chat Completions, Anthropic Messages, LangChain."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import InvalidMessage, MissingDependency
from convomem.formats.anthropic import from_anthropic, to_anthropic
from convomem.formats.openai import from_openai, to_openai
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    validate_pairs,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_conversation.json"


def fn_call(call_id: str, name: str, args: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


# ======================================================================================
# OpenAI
# ======================================================================================

OPENAI_SAMPLE: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "system", "content": "You are Ada."},
    {"role": "user", "content": "Where is order 2824?", "name": "maya"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            fn_call("call_1", "lookup_order", '{"order_id": "2824"}'),
            fn_call("call_2", "track_shipment", '{"order_id": "2824"}'),
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "in transit"},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "found"}]},
    {"role": "assistant", "content": "It is in transit.", "refusal": None, "annotations": []},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Is this the box?"},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    },
    {"role": "assistant", "content": "", "tool_calls": [fn_call("call_3", "zoom", '{"x":1}')]},
    {"role": "tool", "tool_call_id": "call_3", "content": None},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [fn_call("call_4", "f")]},
    {"role": "tool", "tool_call_id": "call_4", "content": ""},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Parts."}],
        "tool_calls": [fn_call("call_5", "g", "not json")],
    },
    {"role": "tool", "tool_call_id": "call_5", "content": "ok"},
    {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
    {"role": "assistant", "content": "no calls", "tool_calls": []},
    {"role": "user", "content": [], "name": None},
]


def test_openai_round_trip_sample() -> None:
    original = copy.deepcopy(OPENAI_SAMPLE)
    messages = from_openai(OPENAI_SAMPLE)
    assert original == OPENAI_SAMPLE  # the input is not modified
    assert to_openai(messages) == OPENAI_SAMPLE


def test_openai_round_trip_example_conversation() -> None:
    data = json.loads(EXAMPLE.read_text())
    messages = from_openai(data)
    assert to_openai(messages) == data
    assert validate_pairs(messages) == []


def test_openai_mapping_to_blocks() -> None:
    ms = from_openai(OPENAI_SAMPLE)
    assert ms[0].role == "system" and ms[0].content == "Be brief."
    assert ms[2].name == "maya" and ms[2].content == "Where is order 2824?"
    calls = ms[3]
    assert calls.role == "assistant"
    assert calls.content == (
        ToolUseBlock("call_1", "lookup_order", {"order_id": "2824"}),
        ToolUseBlock("call_2", "track_shipment", {"order_id": "2824"}),
    )
    assert ms[4].content == (ToolResultBlock("call_2", "in transit"),)
    assert ms[5].content == (ToolResultBlock("call_1", (TextBlock("found"),)),)
    assert ms[6].metadata == {"openai": {"refusal": None, "annotations": []}}
    assert ms[7].content == (
        TextBlock("Is this the box?"),
        ImageBlock("https://x.test/a.png"),
        ImageBlock("data:image/png;base64,iVBORw0KGgo="),
    )
    assert ms[10].content == (TextBlock("Let me check."), ToolUseBlock("call_4", "f", {}))
    # arguments that are not canonical JSON are kept verbatim, so they round-trip exactly
    assert ms[8].content == (ToolUseBlock("call_3", "zoom", '{"x":1}'),)
    assert ms[12].content[1] == ToolUseBlock("call_5", "g", "not json")
    assert validate_pairs(ms) == []


def test_openai_from_native_messages() -> None:
    results = Message(
        "r",
        "user",
        content=[
            ToolResultBlock("c1", "one"),
            ToolResultBlock("c2", (TextBlock("two"),), is_error=True),
            TextBlock("and a note"),
        ],
    )
    assert to_openai([Message("u1", "user", 30), results]) == [
        {"role": "user", "content": ""},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "two"}]},
        {"role": "user", "content": [{"type": "text", "text": "and a note"}]},
    ]
    call = Message(
        "a",
        "assistant",
        content=[TextBlock("a"), TextBlock("b"), ToolUseBlock("c1", "f", {"q": "café"})],
    )
    assert to_openai([call]) == [
        {
            "role": "assistant",
            "content": "a\nb",
            "tool_calls": [fn_call("c1", "f", '{"q": "café"}')],
        }
    ]
    with_image = Message(
        "a", "assistant", content=[ImageBlock("https://x/y.png"), ToolUseBlock("c", "f")]
    )
    assert to_openai([with_image])[0]["content"] == [
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    ]


@pytest.mark.parametrize(
    ("data", "field", "value"),
    [
        ([{"role": "user", "content": "a"}, "oops"], "messages[1]", "oops"),
        ([{"content": "a"}], "messages[0].role", None),
        (
            [{"role": "user", "content": "a"}] * 3 + [{"role": "robot", "content": "b"}],
            "messages[3].role",
            "robot",
        ),
        ([{"role": "function", "name": "f", "content": "x"}], "messages[0].role", "function"),
        ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id", None),
        ([{"role": "tool", "tool_call_id": "", "content": "x"}], "messages[0].tool_call_id", ""),
        ([{"role": "user", "content": 5}], "messages[0].content", 5),
        ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]", "hi"),
        (
            [{"role": "user", "content": [{"kind": "audio"}]}],
            "messages[0].content[0].type",
            None,
        ),
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": "x"}]}],
            "messages[0].content[0].input_audio",
            "x",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": 3}]}],
            "messages[0].content[0].text",
            3,
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
            "messages[0].content[0].image_url.url",
            None,
        ),
        (
            [{"role": "user", "content": "x", "tool_calls": [fn_call("c", "f")]}],
            "messages[0].tool_calls",
            [fn_call("c", "f")],
        ),
        ([{"role": "assistant", "content": "x", "tool_calls": "f"}], "messages[0].tool_calls", "f"),
        ([{"role": "assistant", "tool_calls": ["f"]}], "messages[0].tool_calls[0]", "f"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c"}]}],
            "messages[0].tool_calls[0].function",
            None,
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
            "messages[0].tool_calls[0].id",
            None,
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}],
            "messages[0].tool_calls[0].function.name",
            None,
        ),
        ([{"role": "user", "content": "x"}, {"role": "user", "name": 7}], "messages[1].name", 7),
        ([{"role": "user", "content": "x", "id": 12}], "messages[0].id", 12),
    ],
)
def test_openai_malformed_input_names_position(data: Any, field: str, value: Any) -> None:
    with pytest.raises(InvalidMessage) as info:
        from_openai(data)
    assert info.value.field == field
    assert info.value.value == value
    assert str(info.value).startswith(f"{field}=")


def test_openai_ids_are_deterministic() -> None:
    first = [m.id for m in from_openai(OPENAI_SAMPLE)]
    again = [m.id for m in from_openai(copy.deepcopy(OPENAI_SAMPLE))]
    assert first == again
    assert len(set(first)) == len(first)
    # a longer list keeps the ids of the messages it shares with the shorter one
    longer = [m.id for m in from_openai([*OPENAI_SAMPLE, {"role": "user", "content": "more"}])]
    assert longer[: len(first)] == first


def test_openai_identical_dicts_get_distinct_ids() -> None:
    same = [{"role": "user", "content": "ok"}] * 3
    ids = [m.id for m in from_openai(same)]
    assert len(set(ids)) == 3
    assert ids == [m.id for m in from_openai(same)]
    assert ids[0] == from_openai([{"role": "user", "content": "ok"}])[0].id


def test_openai_explicit_ids_are_used() -> None:
    (m,) = from_openai([{"role": "user", "content": "x", "id": "u1"}])
    assert m.id == "u1"


_json_args = st.dictionaries(
    st.text("abcxyz_", min_size=1, max_size=5),
    st.integers(-5, 5) | st.text(max_size=5) | st.booleans() | st.none(),
    max_size=3,
)
_text_part = st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=12))
_image_part = st.builds(
    lambda url, detail: {"type": "image_url", "image_url": {"url": url, **detail}},
    st.sampled_from(["https://x.test/a.png", "data:image/png;base64,AAAA"]),
    st.sampled_from([{}, {"detail": "low"}]),
)
_parts = st.lists(_text_part | _image_part, max_size=3)


@st.composite
def openai_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    n_calls = 0
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["system", "developer", "user", "assistant", "calls"]))
        extra = draw(st.sampled_from([{}, {"name": "bob"}, {"refusal": None}, {"x_custom": [1]}]))
        if kind == "calls":
            k = draw(st.integers(1, 3))
            ids = [f"call_{n_calls + j}" for j in range(k)]
            n_calls += k
            calls = [
                fn_call(c, draw(st.sampled_from(["f", "g"])), json.dumps(draw(_json_args)))
                for c in ids
            ]
            content = draw(st.sampled_from([None, "", "thinking"]) | _parts)
            msg: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": calls}
            out.append({**msg, **extra})
            for c in draw(st.permutations(ids)):
                result = draw(st.text(max_size=10) | st.lists(_text_part, max_size=2))
                out.append({"role": "tool", "tool_call_id": c, "content": result})
        else:
            role = "assistant" if kind == "assistant" else kind
            content = draw(st.text(max_size=20) | _parts)
            out.append({"role": role, "content": content, **extra})
    return out


@settings(max_examples=120, deadline=None)
@given(openai_conversations())
def test_openai_round_trip_property(data: list[dict[str, Any]]) -> None:
    messages = from_openai(data)
    assert to_openai(messages) == data
    assert [m.id for m in from_openai(data)] == [m.id for m in messages]
    assert validate_pairs(messages) == []
    # the native form loses nothing either
    assert to_openai([Message.from_dict(m.to_dict()) for m in messages]) == data


# ======================================================================================
# Anthropic
# ======================================================================================

PNG = "iVBORw0KGgo="
ANTHROPIC_SYSTEM = "You are Ada."
ANTHROPIC_SAMPLE: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is order 2824?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I should look it up.", "signature": "sig=="},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": "2824"}},
            {"type": "tool_use", "id": "toolu_2", "name": "track", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "in transit"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [
                    {"type": "text", "text": "found"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
                "is_error": False,
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": "Also, hurry."},
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "In transit.", "citations": [{"cited_text": "x"}]}],
    },
    {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "url", "url": "https://x.test/box.jpg"}},
            {"type": "image", "source": {"type": "file", "file_id": "file_011"}},
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "d"},
            },
            {"type": "text", "text": "Is this it?", "cache_control": {"type": "ephemeral"}},
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_3", "name": "zoom", "input": {"x": 1}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "is_error": True}],
    },
    {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "abc"}]},
]


def test_anthropic_round_trip_sample() -> None:
    original = copy.deepcopy(ANTHROPIC_SAMPLE)
    messages = from_anthropic(ANTHROPIC_SAMPLE, system=ANTHROPIC_SYSTEM)
    assert original == ANTHROPIC_SAMPLE
    assert to_anthropic(messages) == (ANTHROPIC_SYSTEM, ANTHROPIC_SAMPLE)
    again = to_anthropic([Message.from_dict(m.to_dict()) for m in messages])
    assert again == (ANTHROPIC_SYSTEM, ANTHROPIC_SAMPLE)


def test_anthropic_mapping_to_blocks() -> None:
    ms = from_anthropic(ANTHROPIC_SAMPLE, system=ANTHROPIC_SYSTEM)
    assert ms[0].role == "system" and ms[0].content == ANTHROPIC_SYSTEM
    assert ms[1].role == "user" and ms[1].content == "Where is order 2824?"
    assert ms[2].content == (
        OpaqueBlock("anthropic", ANTHROPIC_SAMPLE[1]["content"][0]),
        TextBlock("Let me check."),
        ToolUseBlock("toolu_1", "lookup", {"id": "2824"}),
        ToolUseBlock("toolu_2", "track", {}),
    )
    assert ms[2].text() == "I should look it up.\nLet me check."
    results = ms[3]
    assert results.role == "tool"  # a user turn that carries tool results
    assert results.tool_result_ids() == ["toolu_2", "toolu_1"]
    assert results.content[1] == ToolResultBlock(
        "toolu_1", (TextBlock("found"), ImageBlock(f"data:image/png;base64,{PNG}", "image/png"))
    )
    assert results.content[2] == TextBlock("Also, hurry.")
    assert ms[5].content[:2] == (ImageBlock("https://x.test/box.jpg"), ImageBlock("file_011"))
    assert ms[7].content == (ToolResultBlock("toolu_3", "", is_error=True),)
    assert validate_pairs(ms) == []


def test_anthropic_parallel_results_share_one_user_message() -> None:
    ms = from_openai(
        [
            {"role": "system", "content": "S1"},
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [fn_call("a", "f"), fn_call("b", "g")],
            },
            {"role": "tool", "tool_call_id": "b", "content": "B"},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "user", "content": "thanks"},
            {"role": "system", "content": "S2"},
            {"role": "assistant", "content": "done"},
        ]
    )
    system, out = to_anthropic(ms)
    assert system == "S1\n\nS2"
    assert out == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                {"type": "tool_use", "id": "b", "name": "g", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "b", "content": "B"},
                {"type": "tool_result", "tool_use_id": "a", "content": "A"},
            ],
        },
        {"role": "user", "content": "thanks"},  # after the results: the API joins the turns
        {"role": "assistant", "content": "done"},
    ]


def test_anthropic_results_always_come_first() -> None:
    ms = [
        Message("a", "assistant", content=[ToolUseBlock("c1", "f"), ToolUseBlock("c2", "f")]),
        Message("u", "user", content="interjection"),
        Message("t1", "tool", content=[TextBlock("note"), ToolResultBlock("c1", "one")]),
        Message("t2", "tool", content=[ToolResultBlock("c2", "two")]),
    ]
    _, out = to_anthropic(ms)
    assert len(out) == 2
    kinds = [b["type"] for b in out[1]["content"]]
    assert kinds == ["tool_result", "tool_result", "text", "text"]


def test_anthropic_no_system_and_empty() -> None:
    assert to_anthropic([]) == (None, [])
    assert to_anthropic([Message("u", "user", content="hi")]) == (
        None,
        [{"role": "user", "content": "hi"}],
    )
    assert from_anthropic([]) == []


def test_anthropic_system_as_blocks() -> None:
    system = [
        {"type": "text", "text": "You are Ada.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be brief."},
    ]
    ms = from_anthropic([{"role": "user", "content": "hi"}], system=system)
    assert ms[0].role == "system"
    assert ms[0].content == (TextBlock("You are Ada."), TextBlock("Be brief."))
    assert to_anthropic(ms)[0] == system  # as blocks: prompt caching kept
    assert from_anthropic([], system=system)[0].id == ms[0].id


def test_anthropic_from_native_messages() -> None:
    ms = [
        Message("u", "user", content=[TextBlock("see"), ImageBlock("data:image/jpeg;base64,/9j/")]),
        Message("a", "assistant", content=[ToolUseBlock("c", "f", '{"q":1}')]),
        Message("t", "tool", content=[ToolResultBlock("c", (TextBlock("r"),), is_error=True)]),
        Message("n", "user", content="named", name="maya"),
    ]
    _, out = to_anthropic(ms)
    assert out[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
    }
    assert out[1]["content"][0]["input"] == {"q": 1}
    assert out[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c",
                "content": [{"type": "text", "text": "r"}],
                "is_error": True,
            },
        ],
    }
    assert out[3] == {"role": "user", "content": "named"}  # Anthropic has no name


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (Message("t", "tool", content="bare"), "messages[0].content"),
        (Message("u", "user", content=[ToolUseBlock("c", "f")]), "messages[0].content[0]"),
        (
            Message("a", "assistant", content=[ToolResultBlock("c", "r")]),
            "messages[0].content[0]",
        ),
        (
            Message("a", "assistant", content=[ToolUseBlock("c", "f", "[1, 2]")]),
            "messages[0].content[0].input",
        ),
        (
            Message("u", "user", content=[ImageBlock("data:image/svg+xml,<svg/>")]),
            "messages[0].content[0].source",
        ),
    ],
)
def test_anthropic_unconvertible_messages(message: Message, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        to_anthropic([message])
    assert info.value.field == field


@pytest.mark.parametrize(
    ("data", "system", "field", "value"),
    [
        ([{"role": "system", "content": "x"}], None, "messages[0].role", "system"),
        ([{"role": "user", "content": "x"}, "nope"], None, "messages[1]", "nope"),
        ([{"role": "user", "content": 3}], None, "messages[0].content", 3),
        ([{"role": "user", "content": ["x"]}], None, "messages[0].content[0]", "x"),
        ([{"role": "user", "content": [{"text": "x"}]}], None, "messages[0].content[0].type", None),
        (
            [{"role": "user", "content": [{"type": "text", "text": None}]}],
            None,
            "messages[0].content[0].text",
            None,
        ),
        (
            [{"role": "user", "content": [{"type": "tool_use", "id": "c", "name": "f"}]}],
            None,
            "messages[0].content[0].type",
            "tool_use",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "c"}]}],
            None,
            "messages[0].content[0].type",
            "tool_result",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
            None,
            "messages[0].content[0].id",
            None,
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "c", "input": {}}]}],
            None,
            "messages[0].content[0].name",
            None,
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "c", "name": "f", "input": "x"}],
                }
            ],
            None,
            "messages[0].content[0].input",
            "x",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "content": "r"}]}],
            None,
            "messages[0].content[0].tool_use_id",
            None,
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "c", "is_error": 1}],
                }
            ],
            None,
            "messages[0].content[0].is_error",
            1,
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "c",
                            "content": [{"kind": "document"}],
                        }
                    ],
                }
            ],
            None,
            "messages[0].content[0].content[0].type",
            None,
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}],
                }
            ],
            None,
            "messages[0].content[0].source.media_type",
            None,
        ),
        (
            [{"role": "user", "content": [{"type": "image", "source": "https://x"}]}],
            None,
            "messages[0].content[0].source",
            "https://x",
        ),
        ([], 42, "system", 42),
        ([], [{"type": "image"}], "system[0]", {"type": "image"}),
        ([], [{"type": "text", "text": 1}], "system[0].text", 1),
        ([{"role": "user", "content": "x", "id": 5}], None, "messages[0].id", 5),
    ],
)
def test_anthropic_malformed_input_names_position(
    data: Any, system: Any, field: str, value: Any
) -> None:
    with pytest.raises(InvalidMessage) as info:
        from_anthropic(data, system=system)
    assert info.value.field == field
    assert info.value.value == value


def test_anthropic_response_objects_and_sdk_models() -> None:
    class FakeModel:
        def __init__(self, **data: Any) -> None:
            self.data = data

        def model_dump(self, *, exclude_none: bool = False) -> dict[str, Any]:
            return {k: v for k, v in self.data.items() if not (exclude_none and v is None)}

    response = {
        "id": "msg_01Aq",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "content": [
            FakeModel(type="text", text="Checking.", citations=None),
            FakeModel(type="tool_use", id="toolu_9", name="f", input={"a": 1}),
        ],
    }
    (m,) = from_anthropic([response])
    assert m.id == "msg_01Aq"
    assert m.content == (TextBlock("Checking."), ToolUseBlock("toolu_9", "f", {"a": 1}))
    assert m.metadata["anthropic"]["message"]["usage"] == {"input_tokens": 10, "output_tokens": 5}
    # only what the API accepts goes back
    assert to_anthropic([m])[1] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"a": 1}},
            ],
        }
    ]
    (whole,) = from_anthropic([FakeModel(role="user", content="hi", id=None)])
    assert whole.content == "hi"


def test_anthropic_kept_keys_follow_their_block() -> None:
    (m,) = from_anthropic(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
            }
        ]
    )
    changed = m.replace(content=[ImageBlock("https://x/y.png")])
    # the kept cache_control belonged to a text block; it is not put on the image
    assert to_anthropic([changed])[1][0]["content"] == [
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    ]


def test_anthropic_ids_are_deterministic() -> None:
    a = [m.id for m in from_anthropic(ANTHROPIC_SAMPLE, system=ANTHROPIC_SYSTEM)]
    b = [m.id for m in from_anthropic(copy.deepcopy(ANTHROPIC_SAMPLE), system=ANTHROPIC_SYSTEM)]
    assert a == b and len(set(a)) == len(a)
    same = [m.id for m in from_anthropic([{"role": "user", "content": "ok"}] * 3)]
    assert len(set(same)) == 3


def test_openai_to_anthropic_and_back_keeps_the_conversation() -> None:
    data = json.loads(EXAMPLE.read_text())
    system, anthropic_messages = to_anthropic(from_openai(data))
    roundtrip = to_openai(from_anthropic(anthropic_messages, system=system))
    assert roundtrip == data


_a_text = st.builds(lambda t: {"type": "text", "text": t}, st.text(min_size=1, max_size=10))
_a_image = st.sampled_from(
    [
        {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0l"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
    ]
)
_a_opaque = st.sampled_from(
    [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "redacted_thinking", "data": "zz"},
    ]
)
_a_cache = st.sampled_from([{}, {"cache_control": {"type": "ephemeral"}}])


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    n = 0
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):  # a plain turn pair
            user = draw(st.text(max_size=10) | st.lists(_a_text | _a_image, min_size=1, max_size=3))
            out.append({"role": "user", "content": user})
            reply = draw(
                st.text(max_size=10) | st.lists(_a_text | _a_opaque, min_size=1, max_size=2)
            )
            out.append({"role": "assistant", "content": reply})
            continue
        k = draw(st.integers(1, 3))
        ids = [f"toolu_{n + j}" for j in range(k)]
        n += k
        lead = draw(st.lists(_a_opaque | _a_text, max_size=2))
        uses = [
            {"type": "tool_use", "id": c, "name": "f", "input": draw(_json_args), **draw(_a_cache)}
            for c in ids
        ]
        out.append({"role": "assistant", "content": lead + uses})
        results = []
        for c in draw(st.permutations(ids)):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": c}
            content = draw(
                st.none() | st.text(max_size=8) | st.lists(_a_text | _a_image, max_size=2)
            )
            if content is not None:
                block["content"] = content
            block.update(draw(st.sampled_from([{}, {"is_error": True}, {"is_error": False}])))
            block.update(draw(_a_cache))
            results.append(block)
        tail = draw(st.lists(_a_text, max_size=1))
        out.append({"role": "user", "content": results + tail})
    return out


@settings(max_examples=120, deadline=None)
@given(anthropic_conversations(), st.none() | st.text(max_size=10))
def test_anthropic_round_trip_property(data: list[dict[str, Any]], system: str | None) -> None:
    messages = from_anthropic(data, system=system)
    expected = (system or None, anthropic_normalized(data))  # an empty system is left out
    assert to_anthropic(messages) == expected
    assert validate_pairs(messages) == []
    stored = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]
    assert to_anthropic(stored) == expected


def anthropic_normalized(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``data`` as to_anthropic writes it back: no empty text block, no empty message."""

    def keep(block: dict[str, Any]) -> bool:
        return not (block["type"] == "text" and block["text"] == "")

    out = []
    for message in copy.deepcopy(data):
        content = message["content"]
        if isinstance(content, list):
            content = [b for b in content if keep(b)]
            for b in content:
                if b["type"] == "tool_result" and isinstance(b.get("content"), list):
                    b["content"] = [p for p in b["content"] if keep(p)]
        if content:
            out.append({**message, "content": content})
    return out


# ======================================================================================
# LangChain
# ======================================================================================

lc = pytest.importorskip("langchain_core.messages")
from convomem.formats.langchain import from_langchain, to_langchain  # noqa: E402


def lc_sample() -> list[Any]:
    return [
        lc.SystemMessage("Be nice."),
        lc.HumanMessage("Where is 2824?", name="maya", id="u1"),
        lc.AIMessage(
            "",
            id="a1",
            tool_calls=[
                {"name": "lookup", "args": {"id": "2824"}, "id": "call_1"},
                {"name": "track", "args": {}, "id": "call_2"},
            ],
            usage_metadata={"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
            response_metadata={"model_name": "gpt-x"},
        ),
        lc.ToolMessage("in transit", tool_call_id="call_2"),
        lc.ToolMessage(
            [{"type": "text", "text": "missing"}],
            tool_call_id="call_1",
            status="error",
            name="lookup",
            artifact={"raw": [1, 2]},
        ),
        lc.AIMessage(
            [
                {"type": "text", "text": "Checking more."},
                {"type": "tool_use", "id": "toolu_3", "name": "zoom", "input": {"x": 1}},
            ],
            tool_calls=[{"name": "zoom", "args": {"x": 1}, "id": "toolu_3"}],
        ),
        lc.ToolMessage("zoomed", tool_call_id="toolu_3"),
        lc.AIMessage([{"type": "reasoning", "reasoning": "hm"}, {"type": "text", "text": "Done."}]),
        lc.HumanMessage(["plain", {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]),
        lc.HumanMessage([{"type": "image", "url": "https://x/b.png"}]),
        lc.ChatMessage(role="developer", content="dev note"),
        lc.AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}]),
        lc.AIMessage(
            "bad", invalid_tool_calls=[{"name": "f", "args": "{", "id": "x", "error": "json"}]
        ),
    ]


def test_langchain_round_trip_sample() -> None:
    sample = lc_sample()
    messages = from_langchain(sample)
    assert to_langchain(messages) == sample
    assert to_langchain([Message.from_dict(m.to_dict()) for m in messages]) == sample


def test_langchain_mapping() -> None:
    ms = from_langchain(lc_sample())
    assert [m.role for m in ms[:7]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
    ]
    assert ms[1].id == "u1" and ms[1].name == "maya"
    assert ms[2].content == (
        ToolUseBlock("call_1", "lookup", {"id": "2824"}),
        ToolUseBlock("call_2", "track", {}),
    )
    assert ms[3].content == (ToolResultBlock("call_2", "in transit"),)
    assert ms[4].content == (ToolResultBlock("call_1", (TextBlock("missing"),), is_error=True),)
    assert ms[4].name is None  # a tool's name is kept aside, not as the message's name
    assert ms[5].content == (TextBlock("Checking more."), ToolUseBlock("toolu_3", "zoom", {"x": 1}))
    assert ms[7].content == (  # a provider item is kept and counted, not skipped
        OpaqueBlock("langchain", {"type": "reasoning", "reasoning": "hm"}),
        TextBlock("Done."),
    )
    assert "hm" in ms[7].countable_text()
    assert ms[8].content == (TextBlock("plain"), ImageBlock("https://x/a.png"))
    assert ms[9].content == (ImageBlock("https://x/b.png"),)
    assert ms[10].role == "system"
    assert ms[11].tool_use_ids() == [f"{ms[11].id}:call0"]
    assert validate_pairs(ms[:7]) == []


def test_langchain_from_native_messages() -> None:
    ms = [
        Message("s", "system", content="sys"),
        Message("a", "assistant", content=[TextBlock("hm"), ToolUseBlock("c1", "f", {"q": 1})]),
        Message(
            "r",
            "user",
            content=[
                ToolResultBlock("c1", "one"),
                ToolResultBlock("c2", (TextBlock("two"),), is_error=True),
                TextBlock("note"),
            ],
        ),
        Message("i", "user", content=[TextBlock("look"), ImageBlock("https://x/y.png")]),
    ]
    out = to_langchain(ms)
    assert out == [
        lc.SystemMessage("sys", id="s"),
        lc.AIMessage(
            "hm",
            id="a",
            tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1", "type": "tool_call"}],
        ),
        lc.ToolMessage("one", tool_call_id="c1", id="r"),
        lc.ToolMessage(
            [{"type": "text", "text": "two"}], tool_call_id="c2", id="r#1", status="error"
        ),
        lc.HumanMessage([{"type": "text", "text": "note"}], id="r#text"),
        lc.HumanMessage(
            [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
            id="i",
        ),
    ]
    assert out[1].tool_calls[0] == {"name": "f", "args": {"q": 1}, "id": "c1", "type": "tool_call"}


def test_langchain_kept_content_is_dropped_when_blocks_change() -> None:
    (m,) = from_langchain(
        [lc.AIMessage([{"type": "reasoning", "reasoning": "r"}, {"type": "text", "text": "a"}])]
    )
    (same,) = to_langchain([m])
    assert same.content == [{"type": "reasoning", "reasoning": "r"}, {"type": "text", "text": "a"}]
    (changed,) = to_langchain([m.replace(content=[TextBlock("b")])])
    assert changed.content == [{"type": "text", "text": "b"}]


def test_langchain_via_openai_round_trip() -> None:
    data = json.loads(EXAMPLE.read_text())
    back = from_langchain(to_langchain(from_openai(data)))
    assert to_openai(back) == data
    assert [m.id for m in back] == [m.id for m in from_openai(data)]


def test_langchain_ids_are_deterministic() -> None:
    a = [m.id for m in from_langchain(lc_sample())]
    assert a == [m.id for m in from_langchain(lc_sample())]
    assert len(set(a)) == len(a)
    twins = [m.id for m in from_langchain([lc.HumanMessage("ok"), lc.HumanMessage("ok")])]
    assert len(set(twins)) == 2
    # no id was invented for the LangChain side
    assert to_langchain(from_langchain([lc.HumanMessage("ok")]))[0].id is None


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ("not a message", "messages[1]"),
        (lc.FunctionMessage(content="x", name="f"), "messages[1]"),
        (lc.ChatMessage(role="narrator", content="x"), "messages[1]"),
        (lc.RemoveMessage(id="x"), "messages[1]"),
    ],
)
def test_langchain_unsupported_input_names_position(bad: Any, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        from_langchain([lc.HumanMessage("ok"), bad])
    assert info.value.field == field


def test_langchain_unconvertible_messages() -> None:
    with pytest.raises(InvalidMessage) as info:
        to_langchain([Message("u", "user", content="x"), Message("t", "tool", content="bare")])
    assert info.value.field == "messages[1].content"
    with pytest.raises(InvalidMessage, match="JSON object"):
        to_langchain([Message("a", "assistant", content=[ToolUseBlock("c", "f", "[1]")])])


def test_langchain_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)
    for call in (lambda: from_langchain([]), lambda: to_langchain([])):
        with pytest.raises(MissingDependency) as info:
            call()
        assert info.value.extra == "langchain"
        assert "convomem[langchain]" in str(info.value)


def test_langchain_module_imports_without_langchain() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None; "
        "import convomem.formats.langchain as m; "
        "assert 'langchain_core.messages' not in sys.modules; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr


_lc_text = st.text(max_size=10)
_lc_parts = st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, _lc_text)
    | st.just({"type": "image_url", "image_url": {"url": "https://x/p.png"}})
    | st.just({"type": "reasoning", "reasoning": "r"}),
    max_size=3,
)


@st.composite
def lc_conversations(draw: st.DrawFn) -> list[Any]:
    out: list[Any] = []
    n = 0
    for _ in range(draw(st.integers(0, 6))):
        ident = draw(st.sampled_from([None, f"id{len(out)}"]))
        kind = draw(st.sampled_from(["system", "human", "ai", "calls"]))
        content = draw(_lc_text | _lc_parts)
        if kind == "system":
            out.append(lc.SystemMessage(content, id=ident))
        elif kind == "human":
            out.append(lc.HumanMessage(content, id=ident, name=draw(st.none() | st.just("bo"))))
        elif kind == "ai":
            out.append(lc.AIMessage(content, id=ident))
        else:
            k = draw(st.integers(1, 2))
            ids = [f"call_{n + j}" for j in range(k)]
            n += k
            calls = [{"name": "f", "args": draw(_json_args), "id": c} for c in ids]
            out.append(lc.AIMessage(content, id=ident, tool_calls=calls))
            for c in draw(st.permutations(ids)):
                out.append(
                    lc.ToolMessage(
                        draw(_lc_text | _lc_parts),
                        tool_call_id=c,
                        status=draw(st.sampled_from(["success", "error"])),
                    )
                )
    return out


@settings(max_examples=80, deadline=None)
@given(lc_conversations())
def test_langchain_round_trip_property(data: list[Any]) -> None:
    messages = from_langchain(data)
    assert to_langchain(messages) == data
    assert validate_pairs(messages) == []
