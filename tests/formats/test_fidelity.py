"""Format fidelity for real APIs: what convomem does not interpret is kept and counted.

Issue 7 section 3 and the format reproducers of issue 8 (#5, #9, #10).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConvomemError, InvalidMessage, NotAMessage
from convomem.formats import from_anthropic, from_openai, to_anthropic, to_openai
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

EPHEMERAL = {"type": "ephemeral"}


def fn_call(call_id: str, name: str, args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def stored(messages: list[Message]) -> list[Message]:
    """The messages after a trip through JSON, as a store keeps them."""
    return [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]


# -- Anthropic: system blocks, cache_control, blocks inside tool results -----------------


def test_system_block_list_with_cache_control_round_trips() -> None:
    system = [
        {"type": "text", "text": "You are Ada.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "Long policy text.", "cache_control": {"type": "ephemeral"}},
    ]
    data = [{"role": "user", "content": "hi"}]
    ms = from_anthropic(data, system=system)
    assert ms[0].content == (TextBlock("You are Ada."), TextBlock("Long policy text."))
    assert to_anthropic(ms) == (system, data)
    assert to_anthropic(stored(ms)) == (system, data)
    assert to_anthropic(from_anthropic(data, system="plain"))[0] == "plain"  # a string stays one


def test_system_messages_mixed_become_blocks_with_text_only() -> None:
    ms = [
        Message("s1", "system", content="Be brief."),
        Message("s2", "system", content=[TextBlock("Rules."), ImageBlock("https://x/logo.png")]),
        Message("u", "user", content="hi"),
    ]
    system, out = to_anthropic(ms)
    assert system == [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Rules."}]
    assert out == [{"role": "user", "content": "hi"}]
    assert to_anthropic([Message("s", "system", content="A"), Message("t", "system", content="B")])[
        0
    ] == ("A\n\nB")


def test_cache_control_inside_tool_results_is_kept() -> None:
    data = [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "kb", "input": {"q": "x"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [
                        {"type": "text", "text": "big result", "cache_control": EPHEMERAL},
                        {"type": "text", "text": "tail"},
                    ],
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]
    ms = from_anthropic(data)
    assert ms[2].content == (ToolResultBlock("t1", (TextBlock("big result"), TextBlock("tail"))),)
    assert to_anthropic(ms) == (None, data)
    assert to_anthropic(stored(ms)) == (None, data)


SEARCH_RESULT = {
    "type": "search_result",
    "source": "https://kb.test/returns",
    "title": "Returns",
    "content": [{"type": "text", "text": "Returns within 30 days."}],
    "citations": {"enabled": True},
}
DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "Order 2824 shipped."},
    "title": "Order log",
}


def test_search_result_and_document_inside_tool_results() -> None:
    # Issue 8 #10: these were rejected.
    data = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [SEARCH_RESULT, DOCUMENT]}
            ],
        },
    ]
    ms = from_anthropic(data)
    (result,) = ms[1].content
    assert isinstance(result, ToolResultBlock)
    assert result.content == (
        OpaqueBlock("anthropic", SEARCH_RESULT),
        OpaqueBlock("anthropic", DOCUMENT),
    )
    assert "Returns within 30 days." in ms[1].countable_text()
    assert "Order 2824 shipped." in ms[1].countable_text()
    assert to_anthropic(ms) == (None, data)
    assert to_anthropic(stored(ms)) == (None, data)
    # OpenAI has no such blocks: their text goes, as text parts of the tool message.
    tool = to_openai(ms)[1]
    assert tool["role"] == "tool" and [p["type"] for p in tool["content"]] == ["text", "text"]
    assert "Returns within 30 days." in tool["content"][0]["text"]


ANTHROPIC_OPAQUE = [
    {"type": "thinking", "thinking": "The user wants order 2824.", "signature": "EqQBCgIYAh=="},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://x.test", "title": "X"}],
    },
]


def test_anthropic_opaque_blocks_round_trip_and_count() -> None:
    data = [
        {"role": "user", "content": "Where is order 2824?"},
        {"role": "assistant", "content": [*ANTHROPIC_OPAQUE, {"type": "text", "text": "Shipped."}]},
    ]
    ms = from_anthropic(data)
    assert all(isinstance(b, OpaqueBlock) for b in ms[1].content[:4])
    assert "The user wants order 2824." in ms[1].countable_text()
    assert "web_search" in ms[1].countable_text()  # an unknown kind: its JSON is counted
    assert ms[1].flat_cost_blocks() == 1  # redacted thinking
    assert to_anthropic(ms) == (None, data)
    assert to_anthropic(stored(ms)) == (None, data)
    # Chat Completions has no equivalent for any of them: only the text goes.
    assert to_openai(ms)[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Shipped."}],
    }


def test_legacy_verbatim_metadata_is_still_written_back() -> None:
    # Messages stored by convomem 0.1 kept unknown blocks in metadata["anthropic"]["verbatim"].
    m = Message(
        "a",
        "assistant",
        content=[TextBlock("Shipped.")],
        metadata={"anthropic": {"verbatim": [[0, ANTHROPIC_OPAQUE[0]]]}},
    )
    assert to_anthropic([m])[1] == [
        {
            "role": "assistant",
            "content": [ANTHROPIC_OPAQUE[0], {"type": "text", "text": "Shipped."}],
        }
    ]


# -- to_anthropic never emits empty content ----------------------------------------------


def test_to_anthropic_leaves_out_what_would_be_empty() -> None:
    ms = [
        Message("u1", "user", content="hi"),
        Message("a1", "assistant", content=""),
        Message("a2", "assistant", content=[TextBlock("")]),
        Message("a3", "assistant", content=[OpaqueBlock("openai", {"audio": {"id": "a"}})]),
        Message("u2", "user", content=[TextBlock(""), TextBlock("more")]),
        Message("u3", "user", content=[]),
    ]
    assert to_anthropic(ms) == (
        None,
        [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": [{"type": "text", "text": "more"}]},
        ],
    )


def _any_block() -> st.SearchStrategy[Any]:
    text = st.builds(TextBlock, st.sampled_from(["", "hi", " x "]))
    opaque = st.sampled_from(
        [
            OpaqueBlock("openai", {"type": "refusal", "refusal": "no"}),
            OpaqueBlock("openai", {"type": "refusal", "refusal": ""}),
            OpaqueBlock(
                "openai", {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}
            ),
            OpaqueBlock("openai", {"audio": {"id": "a1"}}),
            OpaqueBlock("anthropic", ANTHROPIC_OPAQUE[0]),
            OpaqueBlock("anthropic", SEARCH_RESULT),
            OpaqueBlock("acme", {"type": "hologram"}),
        ]
    )
    image = st.just(ImageBlock("https://x.test/a.png"))
    return text | opaque | image


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["system", "user", "assistant"]),
            st.text(max_size=3) | st.lists(_any_block(), max_size=3),
        ),
        max_size=6,
    )
)
def test_to_anthropic_output_never_has_empty_content(spec: list[tuple[str, Any]]) -> None:
    ms = [Message(f"m{i}", role, content=content) for i, (role, content) in enumerate(spec)]
    system, out = to_anthropic(ms)
    for message in out:
        assert message["content"] not in ("", [])
        if isinstance(message["content"], list):
            assert all(b.get("text") != "" for b in message["content"])
    if isinstance(system, list):
        assert system and all(b["type"] == "text" and b["text"] for b in system)
    json.dumps([system, out])  # plain JSON


# -- OpenAI: opaque parts, fields, arguments, tool calls beside results ------------------


OPENAI_OPAQUE = [
    {"role": "system", "content": "You are Ada."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Listen to this and read the file."},
            {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-abc123"}},
            {
                "type": "file",
                "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
            },
            {"type": "text", "text": "cached", "cache_control": EPHEMERAL},
            {
                "type": "image_url",
                "image_url": {"url": "https://x.test/a.png"},
                "cache_control": EPHEMERAL,
            },
        ],
    },
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't open files."}]},
    {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    {"role": "assistant", "content": "Here it is.", "audio": {"id": "audio_abc"}, "refusal": None},
    {"role": "assistant", "content": "", "tool_calls": [fn_call("call_1", "ping", "")]},
    {"role": "tool", "tool_call_id": "call_1", "content": "pong"},
]


def test_openai_opaque_parts_and_fields_round_trip_and_count() -> None:
    original = copy.deepcopy(OPENAI_OPAQUE)
    ms = from_openai(OPENAI_OPAQUE)
    assert original == OPENAI_OPAQUE  # the input is not touched
    assert to_openai(ms) == OPENAI_OPAQUE
    assert to_openai(stored(ms)) == OPENAI_OPAQUE
    user, refused, field, audio = ms[1], ms[2], ms[3], ms[4]
    assert user.flat_cost_blocks() == 4  # audio, two files and the image with its own keys
    assert "cached" in user.countable_text()
    assert refused.countable_text() == "I can't open files."
    assert (
        field.countable_text() == "I can't help with that."
        and field.text() == field.countable_text()
    )
    assert audio.flat_cost_blocks() == 1 and audio.text() == "Here it is."


def test_openai_empty_arguments_stay_empty() -> None:
    # Issue 8 #10: arguments "" came back as "{}".
    for args in ("", " ", "{}", '{"a": 1}', '{"a":1}', "not json", "[1, 2]", "null"):
        data = [{"role": "assistant", "content": None, "tool_calls": [fn_call("c", "f", args)]}]
        assert to_openai(from_openai(data)) == data, args
    (m,) = from_openai([{"role": "assistant", "tool_calls": [fn_call("c", "f", "")]}])
    assert m.content == (ToolUseBlock("c", "f", ""),)
    assert to_anthropic([m])[1][0]["content"][0]["input"] == {}  # Anthropic needs an object


def test_to_openai_keeps_tool_calls_that_travel_with_results() -> None:
    # Issue 8 #5: [tool_result, text, tool_use] in one message lost the tool call.
    m = Message(
        "a",
        "assistant",
        content=[
            ToolResultBlock("c0", "done"),
            TextBlock("Next:"),
            ToolUseBlock("c1", "f", {"x": 1}),
        ],
    )
    assert to_openai([m]) == [
        {"role": "tool", "tool_call_id": "c0", "content": "done"},
        {"role": "assistant", "content": "Next:", "tool_calls": [fn_call("c1", "f", '{"x": 1}')]},
    ]
    # A result answering a call of the same message follows that call.
    same = Message("b", "assistant", content=[ToolResultBlock("c1", "r"), ToolUseBlock("c1", "f")])
    assert [d["role"] for d in to_openai([same])] == ["assistant", "tool"]
    # Text beside results in a tool message goes as a user message, as before.
    tool = Message("t", "tool", content=[ToolResultBlock("c0", "r"), TextBlock("note")])
    assert to_openai([tool])[1] == {"role": "user", "content": [{"type": "text", "text": "note"}]}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                ToolResultBlock("r1", "x"),
                ToolResultBlock("r2", (TextBlock("y"),)),
                TextBlock("t"),
                ToolUseBlock("u1", "f", {"a": 1}),
                ToolUseBlock("u2", "g", "raw"),
                ImageBlock("https://x.test/i.png"),
                OpaqueBlock("openai", {"type": "refusal", "refusal": "no"}),
                OpaqueBlock("anthropic", ANTHROPIC_OPAQUE[0]),
            ]
        ),
        max_size=6,
        unique=True,
    ),
    st.sampled_from(["user", "assistant", "tool", "system"]),
)
def test_to_openai_loses_no_tool_call_or_result(blocks: list[Any], role: str) -> None:
    m = Message("m", role, content=blocks)
    if role == "tool" and not m.has_tool_result():
        with pytest.raises(InvalidMessage, match="needs a ToolResultBlock"):
            to_openai([m])
        return
    if role != "assistant" and m.has_tool_use():
        with pytest.raises(InvalidMessage, match="only the assistant calls tools"):
            to_openai([m])
        return
    out = to_openai([m])
    calls = [c["id"] for d in out for c in d.get("tool_calls", [])]
    results = [d["tool_call_id"] for d in out if d["role"] == "tool"]
    assert calls == m.tool_use_ids()
    assert results == m.tool_result_ids()
    assert all(d["role"] == "assistant" for d in out if "tool_calls" in d)
    json.dumps(out)


# -- cross-provider equivalents ----------------------------------------------------------


def test_openai_blocks_to_anthropic() -> None:
    ms = from_openai(OPENAI_OPAQUE)
    system, out = to_anthropic(ms)
    assert system == "You are Ada."
    user = out[0]["content"]
    assert user[0] == {"type": "text", "text": "Listen to this and read the file."}
    assert user[1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
        "title": "a.pdf",
    }
    assert user[2] == {"type": "text", "text": "cached", "cache_control": EPHEMERAL}
    assert user[3] == {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
    assert len(user) == 4  # the audio and the file by id have no Anthropic equivalent
    assert out[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I can't open files."}],
    }
    assert out[2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I can't help with that."}],
    }
    assert out[3] == {"role": "assistant", "content": [{"type": "text", "text": "Here it is."}]}


def test_anthropic_document_to_openai_file() -> None:
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
    }
    url_doc = {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}
    ms = from_anthropic([{"role": "user", "content": [pdf, url_doc, DOCUMENT]}])
    assert to_openai(ms)[0]["content"] == [
        {
            "type": "file",
            "file": {
                "filename": "document.pdf",
                "file_data": "data:application/pdf;base64,JVBERi0x",
            },
        },
        {"type": "text", "text": "Order log\nOrder 2824 shipped."},
    ]


# -- SDK objects and malformed input -----------------------------------------------------


class FakeSDKMessage:
    """What the OpenAI SDK returns: a pydantic model, read through model_dump()."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        if exclude_none:
            return {k: v for k, v in self.data.items() if v is not None}
        return dict(self.data)


def test_from_openai_accepts_sdk_message_objects() -> None:
    reply = FakeSDKMessage(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [fn_call("call_9", "lookup", '{"id": "2824"}')],
        }
    )
    (m,) = from_openai([reply])
    assert m.content == (ToolUseBlock("call_9", "lookup", {"id": "2824"}),)
    assert from_openai([reply])[0].id == m.id


def test_from_openai_accepts_the_real_sdk_objects() -> None:
    chat = pytest.importorskip("openai.types.chat")
    reply = chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": "Found it.",
            "tool_calls": [fn_call("call_1", "lookup", '{"id": "2824"}')],
        }
    )
    (m,) = from_openai([{"role": "user", "content": "Where?"}, reply])[1:]
    assert m.text() == "Found it." and m.tool_use_ids() == ["call_1"]
    refusal = chat.ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "refusal": "No."}
    )
    assert from_openai([refusal])[0].countable_text() == "No."


@pytest.mark.parametrize("convert", [from_openai, from_anthropic])
@pytest.mark.parametrize("bad", [None, 5, "text", b"bytes", {"role": "user", "content": "x"}])
def test_not_a_list_of_messages(convert: Any, bad: Any) -> None:
    # Issue 8 #9: from_openai(None) raised TypeError.
    with pytest.raises(InvalidMessage) as info:
        convert(bad)
    assert info.value.field == "messages"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([{"role": "user", "content": "bad \ud800"}], "messages[0].content"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "\udc00"}]}],
            "messages[0].content[0].text",
        ),
        ([{"role": "user", "content": "x", "name": "\ud800"}], "messages[0].name"),
        ([{"role": "user", "content": "x", "extra": {"k": "\ud800"}}], "messages[0].extra.k"),
        ([{"role": "user", "content": "x", "id": "id\ud800"}], "messages[0].id"),
        (
            [{"role": "assistant", "tool_calls": [fn_call("c", "f", '{"a": "\ud800"}')]}],
            "messages[0].tool_calls[0].function.arguments",
        ),
        ([{"role": "tool", "tool_call_id": "c\ud800", "content": "r"}], "messages[0].tool_call_id"),
    ],
)
def test_openai_lone_surrogates_are_invalid_messages(data: Any, field: str) -> None:
    # Issue 8 #9: UnicodeEncodeError escaped.
    with pytest.raises(InvalidMessage) as info:
        from_openai(data)
    assert info.value.field.startswith(field), info.value.field


@pytest.mark.parametrize(
    ("data", "system", "field"),
    [
        ([{"role": "user", "content": "bad \ud800"}], None, "messages[0]"),
        ([{"role": "user", "content": [{"type": "text", "text": "\udc00"}]}], None, "messages[0]"),
        (
            [{"role": "user", "content": [{"type": "thinking", "thinking": "\ud800"}]}],
            None,
            "messages[0]",
        ),
        ([], "sys \ud800", "system"),
        ([], [{"type": "text", "text": "\ud800"}], "system"),
    ],
)
def test_anthropic_lone_surrogates_are_invalid_messages(data: Any, system: Any, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        from_anthropic(data, system=system)
    assert info.value.field.startswith(field), info.value.field


def test_deep_input_is_an_invalid_message() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    for convert in (from_openai, from_anthropic):
        with pytest.raises(InvalidMessage):
            convert([{"role": "user", "content": "x", "extra": deep}])
    args = "[" * 5000 + "]" * 5000  # arguments too deep to parse are kept as text
    (m,) = from_openai([{"role": "assistant", "tool_calls": [fn_call("c", "f", args)]}])
    assert m.content == (ToolUseBlock("c", "f", args),)
    with pytest.raises(InvalidMessage):
        to_anthropic([m])  # Anthropic needs an object; it says so instead of crashing


@pytest.mark.parametrize("convert", [to_openai, to_anthropic])
def test_to_formats_reject_what_is_not_a_message(convert: Any) -> None:
    with pytest.raises(NotAMessage) as info:
        convert([Message("u", "user", content="x"), {"role": "user"}])
    assert info.value.field == "messages[1]"
    assert isinstance(info.value, ConvomemError)


# -- LangChain: provider items are kept and counted --------------------------------------


def test_langchain_provider_items_are_counted_once() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    from convomem.formats.langchain import from_langchain, to_langchain

    thinking = {"type": "thinking", "thinking": "Look it up first.", "signature": "s"}
    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": 1}}
    ai = lc.AIMessage(
        [thinking, {"type": "text", "text": "Checking."}, use],
        tool_calls=[{"name": "lookup", "args": {"id": 1}, "id": "toolu_1", "type": "tool_call"}],
        id="a1",
    )
    (m,) = from_langchain([ai])
    assert m.content == (
        OpaqueBlock("langchain", thinking),
        TextBlock("Checking."),
        ToolUseBlock("toolu_1", "lookup", {"id": 1}),
    )  # the tool_use item repeats tool_calls: counted once, as the call
    assert m.countable_text().count("lookup") == 1 and "Look it up first." in m.countable_text()
    (back,) = to_langchain([m])
    assert back.content == ai.content and back.tool_calls == ai.tool_calls
    # Anthropic blocks and an OpenAI refusal field go where LangChain keeps them.
    (an,) = to_langchain(from_anthropic([{"role": "assistant", "content": [thinking]}]))
    assert an.content == [thinking]
    (oa,) = to_langchain(from_openai([{"role": "assistant", "content": None, "refusal": "No."}]))
    assert oa.additional_kwargs["refusal"] == "No."
