"""Responses API items <-> messages: the round trip is exact, the messages are real ones.

Examples per property: ``CONVOMEM_RESPONSES_EXAMPLES`` (default 100).
"""

from __future__ import annotations

import copy
import json
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _packing_support import histories
from convomem.errors import ConvomemError, InvalidMessage, NotAMessage
from convomem.formats import from_anthropic, to_anthropic, to_openai
from convomem.formats.openai_responses import META, from_responses, to_responses
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    is_derived_id,
)
from convomem.model.chunks import ChunkBuilder
from convomem.packing import Packer

EXAMPLES = int(os.environ.get("CONVOMEM_RESPONSES_EXAMPLES", "100"))
prop = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def as_json(value: Any) -> str:
    """Key order ignored; 1, 1.0 and True told apart (the oracle of "exactly equal")."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# -- items as the API and the Agents SDK write them, with keys no schema lists -------------

texts = st.sampled_from(["", "x", "hello", "é😀", "{}", '{"a":1}']) | st.text(max_size=6)
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.5, -0.0, 0.0]) | texts
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=5,
)
ids = st.sampled_from(["call_1", "call_2", "fc_9", "__fake_id__"])
extra_keys = st.sampled_from(["id", "status", "x_unknown", "phase", "namespace", "caller"])


@st.composite
def extras(draw: st.DrawFn, item: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``item`` plus some keys of its own (ids, status, keys not known today)."""
    item = copy.deepcopy(item)
    for _ in range(draw(st.integers(0, 2))):
        key = draw(extra_keys)
        if key not in item:
            item[key] = draw(values)
    return item


@st.composite
def parts(draw: st.DrawFn, role: str) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["input_text", "output_text", "input_image", "input_file", "refusal", "x_part"]
        )
    )
    if kind in ("input_text", "output_text"):
        part: dict[str, Any] = {"type": kind, "text": draw(texts)}
        if kind == "output_text" and draw(st.booleans()):
            part["annotations"] = draw(st.lists(values, max_size=2))
            part["logprobs"] = []
    elif kind == "input_image":
        part = {"type": kind, "detail": draw(st.sampled_from(["auto", "low", "high"]))}
        part[draw(st.sampled_from(["image_url", "file_id"]))] = draw(
            st.sampled_from(["https://x/a.png", "data:image/png;base64,AA", "file-1"])
        )
    elif kind == "input_file":
        part = {"type": kind, "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}
    elif kind == "refusal":
        part = {"type": kind, "refusal": draw(texts)}
    else:
        part = {"type": kind, "payload": draw(values)}
    if draw(st.integers(0, 4)) == 0:
        part["prompt_cache_breakpoint"] = {"mode": "explicit"}
    return part


@st.composite
def message_items(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "system", "developer"]))
    content: Any = draw(texts) if draw(st.booleans()) else draw(st.lists(parts(role), max_size=3))
    item: dict[str, Any] = {"role": role, "content": content}
    if draw(st.booleans()):
        item["type"] = "message"
        if role == "assistant":
            item["id"] = draw(ids)
            item["status"] = "completed"
    return item


def arguments() -> st.SearchStrategy[str]:
    return st.sampled_from(["", "{}", '{"city":"Paris"}', '{"city": "Paris"}', "not json"]) | (
        st.builds(json.dumps, st.dictionaries(texts, scalars, max_size=2))
    )


@st.composite
def call_items(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        item = {"type": "function_call", "call_id": draw(ids), "name": "get_weather"}
        item["arguments"] = draw(arguments())
    else:
        item = {"type": "custom_tool_call", "call_id": draw(ids), "name": "grep", "input": "x"}
    return item


@st.composite
def output_items(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["function_call_output", "custom_tool_call_output"]))
    output: Any = draw(texts) if draw(st.booleans()) else draw(st.lists(parts("user"), max_size=2))
    return {"type": kind, "call_id": draw(ids), "output": output}


other_items = st.sampled_from(
    [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Thinking"}],
            "encrypted_content": "gAAA",
        },
        {"type": "reasoning", "id": "rs_2", "summary": [], "content": []},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"q": "x"}},
        {"type": "file_search_call", "id": "fs", "queries": ["a"], "status": "completed"},
        {"type": "computer_call", "id": "cu", "call_id": "cc_1", "action": {"type": "click"}},
        {
            "type": "computer_call_output",
            "call_id": "cc_1",
            "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"},
        },
        {"type": "computer_call_output", "call_id": "cc_1", "output": {"type": "x"}},
        {"type": "shell_call", "call_id": "sh_1", "action": {"commands": ["ls"]}},
        {"type": "shell_call_output", "call_id": "sh_1", "output": []},
        {"type": "image_generation_call", "id": "ig", "result": None, "status": "generating"},
        {"type": "mcp_call", "id": "m", "arguments": "{}", "name": "n", "server_label": "s"},
        {"type": "mcp_list_tools", "id": "ml", "server_label": "s", "tools": []},
        {"type": "mcp_approval_response", "approval_request_id": "a", "approve": True},
        {"type": "item_reference", "id": "msg_1"},
        {"id": "msg_2"},
        {"type": "compaction", "encrypted_content": "zz"},
        {"type": "a_type_from_next_year", "whatever": [1, 2.5, True, None]},
    ]
)
items = st.lists(
    st.one_of(message_items(), call_items(), output_items(), other_items).flatmap(extras),
    max_size=6,
)


@prop
@given(items)
def test_round_trip_is_exact(batch: list[dict[str, Any]]) -> None:
    snapshot = as_json(batch)
    messages = from_responses(batch)
    assert len(messages) == len(batch)
    assert as_json(to_responses(messages)) == snapshot
    assert as_json(batch) == snapshot  # the input is not changed
    # Through the native form (what a store keeps) it is still exact.
    stored = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]
    assert stored == messages
    assert as_json(to_responses(stored)) == snapshot
    assert [m.id for m in from_responses(batch)] == [m.id for m in messages]
    assert all(is_derived_id(m.id) for m in messages)


# -- the messages are real convomem messages ---------------------------------------------

SDK_TURN = [
    {"content": "Weather in Paris?", "role": "user"},
    {
        "arguments": '{"city":"Paris"}',
        "call_id": "call_1",
        "name": "get_weather",
        "type": "function_call",
        "id": "__fake_id__",
    },
    {"call_id": "call_1", "output": "sunny in Paris", "type": "function_call_output"},
    {
        "id": "__fake_id__",
        "content": [
            {"annotations": [], "text": "It is sunny.", "type": "output_text", "logprobs": []}
        ],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    },
]


def test_sdk_turn_becomes_a_tool_exchange() -> None:
    user, call, output, answer = from_responses(SDK_TURN)
    assert (user.role, user.content) == ("user", "Weather in Paris?")
    assert call.role == "assistant"
    assert call.content == (ToolUseBlock("call_1", "get_weather", '{"city":"Paris"}'),)
    assert output.role == "tool"
    assert output.content == (ToolResultBlock("call_1", "sunny in Paris"),)
    assert answer.role == "assistant" and answer.content == (TextBlock("It is sunny."),)
    assert answer.text() == "It is sunny."
    assert len({m.id for m in (call, answer)}) == 2  # the SDK's shared placeholder id
    assert not user.metadata and not output.metadata  # what any message renders as
    assert answer.metadata == {META: {"type": "message", "set": {"id": "__fake_id__"}}}
    chunks = ChunkBuilder()
    for i, m in enumerate((user, call, output, answer)):
        chunks.add(m, i)
    assert [[m.id for m in c.messages] for c in chunks.chunks] == [
        [user.id],
        [call.id, output.id],
        [answer.id],
    ]
    # Other providers get the exchange too.
    assert to_openai([call, output])[0]["tool_calls"][0]["id"] == "call_1"
    _, anthropic = to_anthropic([user, call, output, answer])
    assert anthropic[1]["content"][0]["input"] == {"city": "Paris"}


def test_a_json_object_written_by_json_dumps_is_parsed() -> None:
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'}
    (m,) = from_responses([item])
    assert m.content == (ToolUseBlock("c", "f", {"a": 1}),)
    assert to_responses([m]) == [item]


@prop
@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.integers(1, 60))
def test_a_packed_view_never_splits_a_call_from_its_output(shape: list[int], budget: int) -> None:
    batch: list[dict[str, Any]] = []
    for n, k in enumerate(shape):
        batch.append({"role": "user", "content": f"question {n}"})
        calls = [f"c{n}_{j}" for j in range(k)]
        for c in calls:  # parallel calls: one item each, then the outputs
            batch.append({"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"})
        for c in reversed(calls):
            batch.append({"type": "function_call_output", "call_id": c, "output": "ok " * n})
        batch.append({"type": "reasoning", "id": f"rs{n}", "summary": []})
    kept = Packer(budget=budget, pin=()).pack(from_responses(batch)).kept
    sent = to_responses(kept)
    made = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    answered = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
    assert made == answered


def test_item_kinds_map_to_blocks() -> None:
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}
    batch = [
        {"role": "developer", "content": "Be brief."},
        {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "t"}]},
        {"type": "computer_call", "call_id": "cc", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "cc", "output": screenshot},
        {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png"}]},
        {"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]},
    ]
    dev, reasoning, computer, shot, image, file = from_responses(batch)
    assert dev.role == "system" and dev.content == "Be brief."
    assert to_openai([dev]) == [{"role": "system", "content": "Be brief."}]
    assert reasoning.role == "assistant"
    assert reasoning.content == (OpaqueBlock(META, batch[1]),)
    assert computer.tool_use_ids() == ["cc"] and shot.tool_result_ids() == ["cc"]
    assert shot.image_count() == 1  # counted as an image, not as base64 text
    assert image.content == (ImageBlock("https://x/a.png"),)
    assert file.content == (OpaqueBlock(META, batch[5]["content"][0]),)
    assert to_responses([dev, reasoning, computer, shot, image, file]) == batch


def test_messages_of_other_origins_render_as_items() -> None:
    messages = from_anthropic(
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                    {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
                    {"type": "text", "text": "thanks"},
                ],
            },
        ]
    )
    assert to_responses(messages) == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "t1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call", "call_id": "t2", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "t1", "output": "one"},
        {"type": "function_call_output", "call_id": "t2", "output": "two"},
        {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
    ]
    tool = Message("r", "tool", content=[ToolResultBlock("t1", [TextBlock("a"), ImageBlock("u")])])
    assert to_responses([tool]) == [
        {
            "type": "function_call_output",
            "call_id": "t1",
            "output": [
                {"type": "input_text", "text": "a"},
                {"type": "input_image", "image_url": "u"},
            ],
        }
    ]


def test_without_metadata_an_output_stays_an_output() -> None:
    file_part = {"type": "input_file", "file_id": "file-1"}
    shot = {"type": "shell_call_output", "call_id": "sh", "output": []}
    batch = [
        {"type": "function_call_output", "call_id": "c", "output": [file_part]},
        shot,
    ]
    bare = [m.replace(metadata={}) for m in from_responses(batch)]
    assert to_responses(bare) == batch


def test_a_changed_message_renders_from_its_blocks() -> None:
    (m,) = from_responses([SDK_TURN[1]])
    changed = m.replace(content=[TextBlock("plain now")])
    assert to_responses([changed]) == [
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "plain now", "annotations": []}],
        }
    ]


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "field"),
    [
        ([{"role": "critic", "content": "x"}], "items[0].role"),
        ([{"type": "message", "content": "x"}], "items[0].role"),
        ([{"role": "user"}], "items[0].content"),
        ([{"role": "user", "content": 3}], "items[0].content"),
        ([{"role": "user", "content": ["x"]}], "items[0].content[0]"),
        ([{"role": "user", "content": [{"text": "x"}]}], "items[0].content[0].type"),
        ([{"role": "user", "content": [{"type": "input_text"}]}], "items[0].content[0].text"),
        ([{"role": "assistant", "content": [{"type": "refusal"}]}], "items[0].content[0].refusal"),
        ([{"role": "user", "content": "ok"}, {"type": 3}], "items[1].type"),
        ([{"content": "no role"}], "items[0].type"),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "items[0].call_id"),
        ([{"type": "function_call", "call_id": "c", "arguments": "{}"}], "items[0].name"),
        ([{"type": "function_call", "call_id": "c", "name": "f"}], "items[0].arguments"),
        ([{"type": "function_call_output", "call_id": "c", "output": 5}], "items[0].output"),
        ([{"type": "function_call_output", "call_id": "", "output": ""}], "items[0].call_id"),
        ([{"type": "computer_call", "action": {}}], "items[0].call_id"),
        ([{"role": "user", "content": "x", "n": math.nan}], "items[0]['n']"),
        ([{"role": "user", "content": "\ud800"}], "items[0]['content']"),
        (["a string"], "items[0]"),
    ],
)
def test_bad_items_name_the_field(batch: list[Any], field: str) -> None:
    with pytest.raises(InvalidMessage) as err:
        from_responses(batch)
    assert err.value.field == field


def test_not_a_list_and_not_messages() -> None:
    with pytest.raises(InvalidMessage, match="wrap it in a list"):
        from_responses({"role": "user", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(NotAMessage):
        to_responses([{"role": "user"}])  # type: ignore[list-item]


def test_sdk_objects_are_read_through_model_dump() -> None:
    from openai.types.responses import ResponseFunctionToolCall

    call = ResponseFunctionToolCall(
        type="function_call", call_id="c", name="f", arguments='{"a":1}', id="fc_1"
    )
    (m,) = from_responses([call])
    assert m.tool_use_ids() == ["c"]
    assert to_responses([m]) == [call.model_dump(exclude_none=True)]


junk = st.recursive(
    scalars | st.sampled_from([math.nan, "\udfff", 10**30]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "role", "content", "call_id", "name", "arguments", "output"])
            | texts,
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)
near_items = st.one_of(message_items(), call_items(), output_items(), other_items).flatmap(
    lambda item: st.fixed_dictionaries(
        {k: st.just(v) | junk for k, v in item.items()}  # each field perhaps replaced
    )
)


@prop
@given(st.lists(junk | near_items, max_size=4))
def test_fuzz_converts_exactly_or_raises_a_convomem_error(batch: list[Any]) -> None:
    try:
        messages = from_responses(batch)
    except ConvomemError:
        return
    assert as_json(to_responses(messages)) == as_json(batch)


@prop
@given(items, st.lists(junk, min_size=1, max_size=3))
def test_hand_written_metadata_never_breaks_rendering(
    batch: list[dict[str, Any]], metas: list[Any]
) -> None:
    messages = from_responses(batch)
    for i, meta in enumerate(metas):
        if i < len(messages):
            tampered = {META: meta if not isinstance(meta, dict) else {"type": "easy", **meta}}
            try:
                messages[i] = messages[i].replace(metadata=tampered)
            except ConvomemError:
                continue
    try:
        out = to_responses(messages)
    except ConvomemError:
        return
    assert all(isinstance(item, dict) for item in out)


@prop
@given(histories())
def test_any_history_renders_one_item_per_call_and_result(history: list[Message]) -> None:
    out = to_responses(history)
    calls = [b for m in history for b in m.blocks if isinstance(b, ToolUseBlock)]
    results = [b for m in history for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert [i["call_id"] for i in out if i.get("type") == "function_call"] == [c.id for c in calls]
    assert [i["call_id"] for i in out if i.get("type") == "function_call_output"] == [
        r.tool_use_id for r in results
    ]
    assert json.loads(json.dumps(out)) == out


@prop
@given(items)
def test_without_metadata_every_call_and_output_survives(batch: list[dict[str, Any]]) -> None:
    """Metadata lost (a message copied by hand): the items differ in details, but every
    call and every output is still there, with its call_id, in order."""
    bare = [m.replace(metadata={}) for m in from_responses(batch)]
    out = to_responses(bare)
    assert [i.get("call_id") for i in out if "call_id" in i] == [
        i.get("call_id") for i in batch if "call_id" in i
    ]
