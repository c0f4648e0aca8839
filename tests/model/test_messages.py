"""The message model: construction, validation, helpers, immutability, serialization."""

from __future__ import annotations

import copy
import json
import math
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConvomemError, InvalidMessage
from convomem.model import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    new_id,
)

# -- strategies -------------------------------------------------------------------------

ids = st.text(min_size=1, max_size=12)
texts = st.text(max_size=30)
json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
text_blocks = st.builds(TextBlock, texts)
image_blocks = st.builds(
    ImageBlock, st.text(min_size=1, max_size=20), st.none() | st.sampled_from(["image/png"])
)
tool_use_blocks = st.builds(
    ToolUseBlock,
    ids,
    ids,
    st.dictionaries(st.text(max_size=6), json_values, max_size=3) | st.text(max_size=10),
)
tool_result_blocks = st.builds(
    ToolResultBlock,
    ids,
    texts | st.lists(text_blocks | image_blocks, max_size=3).map(tuple),
    st.booleans(),
)
blocks = text_blocks | image_blocks | tool_use_blocks | tool_result_blocks


@st.composite
def messages(draw: st.DrawFn) -> Message:
    content: Any = draw(texts | st.lists(blocks, max_size=4))
    return Message(
        draw(ids),
        draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        draw(st.none() | st.integers(0, 10_000)),
        content=content,
        name=draw(st.none() | st.text(max_size=8)),
        metadata=draw(st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3)),
        created_at=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False, width=64)),
        priority=draw(st.sampled_from([0, 1, 2])),
    )


# -- construction -----------------------------------------------------------------------


def test_seed_positional_form() -> None:
    m = Message("u1", "user", 30)
    assert (m.id, m.role, m.tokens) == ("u1", "user", 30)
    assert m == Message(id="u1", role="user", tokens=30)
    assert m.content == ""
    assert m.name is None
    assert m.metadata == {}
    assert m.created_at is None
    assert m.priority == 0


def test_keyword_form_generates_unique_ids() -> None:
    made = [Message(role="user", content=[TextBlock("hi")]) for _ in range(1000)]
    assert len({m.id for m in made}) == 1000
    assert all(isinstance(m.id, str) and m.id for m in made)
    assert made[0].content == (TextBlock("hi"),)
    assert made[0].tokens is None
    assert new_id() != new_id()


def test_content_list_stored_as_tuple() -> None:
    blocks = [TextBlock("a"), ToolUseBlock("c1", "f", {"x": 1})]
    m = Message("a1", "assistant", content=blocks)
    assert isinstance(m.content, tuple)
    blocks.append(TextBlock("later"))  # the caller's list is not aliased
    assert len(m.content) == 2
    gen = Message("a2", "assistant", content=(b for b in [TextBlock("g")]))
    assert gen.content == (TextBlock("g"),)


def test_created_at_accepts_ints_as_float() -> None:
    m = Message("x", "user", created_at=1700000000)
    assert m.created_at == 1700000000.0
    assert isinstance(m.created_at, float)


def test_every_role_accepted() -> None:
    for role in ("system", "user", "assistant", "tool"):
        assert Message("x", role).role == role


# -- validation: each error names the field and the value -------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field", "value"),
    [
        ({"id": "x", "role": "bot"}, "role", "bot"),
        ({"id": "x", "role": "User"}, "role", "User"),
        ({"id": "x", "role": None}, "role", None),
        ({"id": "", "role": "user"}, "id", ""),
        ({"id": 7, "role": "user"}, "id", 7),
        ({"id": b"u1", "role": "user"}, "id", b"u1"),
        ({"id": "x", "role": "user", "tokens": -1}, "tokens", -1),
        ({"id": "x", "role": "user", "tokens": 1.5}, "tokens", 1.5),
        ({"id": "x", "role": "user", "tokens": 3.0}, "tokens", 3.0),
        ({"id": "x", "role": "user", "tokens": True}, "tokens", True),
        ({"id": "x", "role": "user", "tokens": "30"}, "tokens", "30"),
        ({"id": "x", "role": "user", "created_at": "yesterday"}, "created_at", "yesterday"),
        ({"id": "x", "role": "user", "created_at": True}, "created_at", True),
        ({"id": "x", "role": "user", "created_at": math.nan}, "created_at", math.nan),
        ({"id": "x", "role": "user", "created_at": math.inf}, "created_at", math.inf),
        ({"id": "x", "role": "user", "priority": 3}, "priority", 3),
        ({"id": "x", "role": "user", "priority": -1}, "priority", -1),
        ({"id": "x", "role": "user", "priority": True}, "priority", True),
        ({"id": "x", "role": "user", "priority": 1.0}, "priority", 1.0),
        ({"id": "x", "role": "user", "priority": "high"}, "priority", "high"),
        ({"id": "x", "role": "user", "name": 5}, "name", 5),
        ({"id": "x", "role": "user", "metadata": [1]}, "metadata", [1]),
        ({"id": "x", "role": "user", "content": 42}, "content", 42),
        ({"id": "x", "role": "user", "content": None}, "content", None),
        ({"id": "x", "role": "user", "content": b"raw"}, "content", b"raw"),
        ({"id": "x", "role": "user", "content": {"text": "hi"}}, "content", {"text": "hi"}),
        ({"id": "x", "role": "user", "content": TextBlock("a")}, "content", TextBlock("a")),
        ({"id": "x", "role": "user", "content": ["plain"]}, "content[0]", "plain"),
        (
            {"id": "x", "role": "user", "content": [TextBlock("a"), {"type": "text"}]},
            "content[1]",
            {"type": "text"},
        ),
    ],
)
def test_invalid_fields_name_field_and_value(
    kwargs: dict[str, Any], field: str, value: Any
) -> None:
    with pytest.raises(InvalidMessage) as info:
        Message(**kwargs)
    err = info.value
    assert isinstance(err, ConvomemError)
    assert isinstance(err, ValueError)
    assert err.field == field
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(err.value)
    else:
        assert err.value == value
        assert type(err.value) is type(value)
    assert str(err).startswith(f"{field}={value!r}")


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: TextBlock(3), "TextBlock.text"),  # type: ignore[arg-type]
        (lambda: ImageBlock(""), "ImageBlock.source"),
        (lambda: ImageBlock("u", 5), "ImageBlock.media_type"),  # type: ignore[arg-type]
        (lambda: ToolUseBlock("", "f"), "ToolUseBlock.id"),
        (lambda: ToolUseBlock("c", ""), "ToolUseBlock.name"),
        (lambda: ToolUseBlock("c", "f", [1, 2]), "ToolUseBlock.input"),  # type: ignore[arg-type]
        (lambda: ToolResultBlock(""), "ToolResultBlock.tool_use_id"),
        (lambda: ToolResultBlock("c", 5), "ToolResultBlock.content"),  # type: ignore[arg-type]
        (lambda: ToolResultBlock("c", [ToolUseBlock("c", "f")]), "ToolResultBlock.content[0]"),  # type: ignore[list-item]
        (lambda: ToolResultBlock("c", "r", is_error=1), "ToolResultBlock.is_error"),  # type: ignore[arg-type]
    ],
)
def test_invalid_blocks_name_the_field(make: Any, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        make()
    assert info.value.field == field


# -- helpers ----------------------------------------------------------------------------


def _tool_exchange() -> tuple[Message, Message]:
    call = Message(
        "a1",
        "assistant",
        content=[
            TextBlock("Let me check."),
            ToolUseBlock("c1", "lookup", {"id": 1}),
            ToolUseBlock("c2", "track", {"id": 1}),
        ],
    )
    results = Message(
        "t1",
        "tool",
        content=[
            ToolResultBlock("c2", "in transit"),
            ToolResultBlock(
                "c1", (TextBlock("order"), ImageBlock("http://x/y.png"), TextBlock("ok"))
            ),
        ],
    )
    return call, results


def test_text_helpers() -> None:
    call, results = _tool_exchange()
    assert Message("u", "user", content="hello").text() == "hello"
    assert Message("u", "user").text() == ""
    assert call.text() == "Let me check."
    assert results.text() == "in transit\norder\nok"
    assert Message(
        "m", "user", content=[TextBlock("a"), ImageBlock("u"), TextBlock("b")]
    ).text() == ("a\nb")


def test_tool_helpers() -> None:
    call, results = _tool_exchange()
    plain = Message("u", "user", content="hello")
    assert call.has_tool_use() and not call.has_tool_result()
    assert results.has_tool_result() and not results.has_tool_use()
    assert not plain.has_tool_use() and not plain.has_tool_result()
    assert call.tool_use_ids() == ["c1", "c2"]
    assert results.tool_result_ids() == ["c2", "c1"]
    assert plain.tool_use_ids() == [] and plain.tool_result_ids() == []
    assert call.tool_result_ids() == [] and results.tool_use_ids() == []
    assert call.calls_text() == 'calls lookup({"id": 1}); calls track({"id": 1})'
    assert results.calls_text() == "" and plain.calls_text() == ""
    raw = Message("a2", "assistant", content=[ToolUseBlock("c3", "book", "not json")])
    assert raw.calls_text() == "calls book(not json)"
    only_text = Message("u", "user", content=[TextBlock("x")])
    assert not only_text.has_tool_use() and only_text.tool_use_ids() == []


def test_blocks_property() -> None:
    assert Message("u", "user", content="hi").blocks == (TextBlock("hi"),)
    assert Message("u", "user").blocks == ()
    call, _ = _tool_exchange()
    assert call.blocks is call.content


def test_countable_text_covers_tools_and_name() -> None:
    call, results = _tool_exchange()
    assert call.countable_text() == 'Let me check.\nlookup\n{"id": 1}\ntrack\n{"id": 1}'
    assert results.countable_text() == "in transit\norder\nok"
    assert Message("u", "user", content="hi", name="maya").countable_text() == "maya\nhi"
    named = Message("u", "user", content=[TextBlock("hi")], name="maya")
    assert named.countable_text() == "maya\nhi"
    assert results.image_count() == 1
    assert Message("m", "user", content=[ImageBlock("a"), ImageBlock("b")]).image_count() == 2
    assert Message("m", "user", content="x").image_count() == 0


def test_tool_use_arguments() -> None:
    assert ToolUseBlock("c", "f", {"q": "café"}).arguments() == '{"q": "café"}'
    assert ToolUseBlock("c", "f", "not json{").arguments() == "not json{"
    assert ToolUseBlock("c", "f").arguments() == "{}"


def test_content_key_equal_exactly_when_counting_the_same() -> None:
    a = Message("a", "user", content="hi")
    b = Message("b", "user", content="hi", metadata={"x": 1}, created_at=5.0)
    assert a.content_key == b.content_key  # id, metadata, time do not change the count
    assert a.content_key != Message("a", "assistant", content="hi").content_key
    assert a.content_key != Message("a", "user", content="hi", name="n").content_key
    assert a.content_key != Message("a", "user", content="hi!").content_key
    r1 = Message("t", "tool", content=[ToolResultBlock("c", "x")])
    r2 = Message("t", "tool", content=[ToolResultBlock("c", "x", is_error=True)])
    assert r1.content_key != r2.content_key
    u1 = Message("x", "assistant", content=[ToolUseBlock("c", "f", {"a": 1})])
    u2 = Message("x", "assistant", content=[ToolUseBlock("c", "f", {"a": True})])
    assert u1.content_key != u2.content_key
    hash(u1.content_key)
    assert a.content_key is a.content_key  # computed once


# -- immutability and replace -----------------------------------------------------------


def test_message_is_immutable() -> None:
    m = Message("u1", "user", 30, content="hi")
    for attr, value in [("id", "u2"), ("role", "assistant"), ("tokens", 1), ("content", "x")]:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(m, attr, value)
    with pytest.raises(AttributeError):
        m.brand_new = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        del m.id
    assert (m.id, m.role, m.tokens, m.content) == ("u1", "user", 30, "hi")


def test_blocks_are_immutable() -> None:
    block = TextBlock("a")
    with pytest.raises(AttributeError):
        block.text = "b"  # type: ignore[misc]


def test_metadata_is_copied() -> None:
    meta = {"k": 1}
    m = Message("u", "user", metadata=meta)
    meta["k"] = 2
    assert m.metadata == {"k": 1}


def test_replace() -> None:
    m = Message("u1", "user", 30, content="hi", name="maya", priority=1, created_at=3.0)
    r = m.replace(role="assistant")
    assert r is not m
    assert (r.id, r.role, r.tokens, r.content, r.name, r.priority, r.created_at) == (
        "u1",
        "assistant",
        30,
        "hi",
        "maya",
        1,
        3.0,
    )
    assert m.role == "user"
    changed = m.replace(content="a much longer text")
    assert changed.tokens is None  # the known count belonged to the old content
    assert m.replace(content="x", tokens=2).tokens == 2
    assert m.replace(id="u9").id == "u9"
    with pytest.raises(InvalidMessage) as info:
        m.replace(colour="red")
    assert info.value.field == "colour"
    with pytest.raises(InvalidMessage) as info:
        m.replace(role="robot")
    assert (info.value.field, info.value.value) == ("role", "robot")


def test_equality_and_hash() -> None:
    a = Message("u1", "user", 3, content="hi")
    assert a == Message("u1", "user", 3, content="hi")
    assert a != Message("u1", "user", 4, content="hi")
    assert a != Message("u1", "user", 3, content="hi", metadata={"k": 1})
    assert hash(a) == hash(Message("u1", "user", 3, content="hi"))
    assert a.__eq__("u1") is NotImplemented
    assert {a, Message("u1", "user", 3, content="hi")} == {a}


def test_repr_is_informative() -> None:
    call, results = _tool_exchange()
    assert repr(Message("u1", "user", 30)) == "Message(id='u1', role='user', tokens=30)"
    assert "tool_use_ids=['c1', 'c2']" in repr(call)
    assert "tool_result_ids=['c2', 'c1']" in repr(results)
    long = Message("u", "user", content="x" * 100, priority=2)
    assert "..." in repr(long) and "priority=2" in repr(long)
    assert len(repr(long)) < 120


# -- serialization ----------------------------------------------------------------------


def test_to_dict_shape() -> None:
    call, results = _tool_exchange()
    assert Message("u1", "user", 30).to_dict() == {
        "id": "u1",
        "role": "user",
        "tokens": 30,
        "content": "",
    }
    assert call.to_dict()["content"] == [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"id": 1}},
        {"type": "tool_use", "id": "c2", "name": "track", "input": {"id": 1}},
    ]
    assert results.to_dict()["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": [
            {"type": "text", "text": "order"},
            {"type": "image", "source": "http://x/y.png"},
            {"type": "text", "text": "ok"},
        ],
    }
    err = Message("t", "tool", content=[ToolResultBlock("c", "boom", is_error=True)])
    assert err.to_dict()["content"][0]["is_error"] is True
    full = Message(
        "s", "system", content="x", name="n", metadata={"a": 1}, created_at=2.5, priority=2
    ).to_dict()
    assert full == {
        "id": "s",
        "role": "system",
        "content": "x",
        "name": "n",
        "metadata": {"a": 1},
        "created_at": 2.5,
        "priority": 2,
    }
    json.dumps(call.to_dict())  # JSON-ready


def test_from_dict_round_trip_examples() -> None:
    for m in (*_tool_exchange(), Message("u1", "user", 30), Message(role="user", content="x")):
        assert Message.from_dict(m.to_dict()) == m
        assert Message.from_dict(json.loads(json.dumps(m.to_dict()))) == m


@settings(max_examples=150, deadline=None)
@given(messages())
def test_to_dict_from_dict_round_trip(m: Message) -> None:
    d = m.to_dict()
    back = Message.from_dict(d)
    assert back == m
    assert back.content_key == m.content_key
    assert back.to_dict() == d


@settings(max_examples=50, deadline=None)
@given(messages())
def test_pickle_and_copy_round_trip(m: Message) -> None:
    assert pickle.loads(pickle.dumps(m)) == m
    assert copy.deepcopy(m) == m
    assert copy.copy(m) == m


@pytest.mark.parametrize(
    ("data", "field", "value"),
    [
        ({"id": "x", "role": "user", "colour": "red"}, "colour", "red"),
        ({"id": "x", "role": "user", "content": [{"type": "video"}]}, "content[0].type", "video"),
        ({"id": "x", "role": "user", "content": ["hi"]}, "content[0]", "hi"),
        ({"id": "x", "role": "user", "content": [{"type": "text"}]}, "content[0].text", None),
        (
            {"id": "x", "role": "tool", "content": [{"type": "tool_result", "content": "r"}]},
            "content[0].tool_use_id",
            None,
        ),
        (
            {
                "id": "x",
                "role": "tool",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c",
                        "content": [{"type": "tool_use", "id": "c", "name": "f"}],
                    }
                ],
            },
            "content[0].content[0]",
            ToolUseBlock("c", "f"),
        ),
        (
            {
                "id": "x",
                "role": "tool",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c", "content": "", "is_error": "no"}
                ],
            },
            "content[0].is_error",
            "no",
        ),
        ({"id": "x", "role": "wizard"}, "role", "wizard"),
        ({"role": "user", "tokens": -3}, "tokens", -3),
    ],
)
def test_from_dict_errors(data: dict[str, Any], field: str, value: Any) -> None:
    with pytest.raises(InvalidMessage) as info:
        Message.from_dict(data)
    assert info.value.field == field
    assert info.value.value == value


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(InvalidMessage) as info:
        Message.from_dict(["id", "x"])  # type: ignore[arg-type]
    assert info.value.field == "message"


def test_from_dict_without_id_generates_one() -> None:
    a = Message.from_dict({"role": "user", "content": "hi"})
    b = Message.from_dict({"role": "user", "content": "hi"})
    assert a.id != b.id


# -- issue 8 regressions: immutable in fact, JSON only, typed errors --------------------


def test_mutating_passed_arguments_changes_neither_message_nor_count() -> None:
    # Issue 8 #6: tool arguments reused between turns; counts cached by identity went stale.
    from convomem.tokens import ApproxTokenizer

    args: dict[str, Any] = {"ids": [1, 2], "q": "x"}
    meta: dict[str, Any] = {"trace": {"step": 1}}
    m = Message("a", "assistant", content=[ToolUseBlock("c", "f", args)], metadata=meta)
    tok = ApproxTokenizer()
    before = tok.count_message(m)
    args["q"] = "y" * 4000
    args["ids"].append(3)
    meta["trace"]["step"] = 2
    meta["new"] = True
    assert m.content[0].input == {"ids": [1, 2], "q": "x"}  # type: ignore[union-attr]
    assert m.metadata == {"trace": {"step": 1}}
    assert tok.count_message(m) == before
    rebuilt = Message("a", "assistant", content=[ToolUseBlock("c", "f", args)])
    assert tok.count_message(rebuilt) > before + 900  # the new arguments are counted


def test_frozen_fields_refuse_mutation() -> None:
    m = Message(
        "a", "assistant", content=[ToolUseBlock("c", "f", {"l": [1]})], metadata={"k": {"v": 1}}
    )
    with pytest.raises(TypeError):
        m.metadata["k"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        m.metadata["k"]["v"] = 2
    with pytest.raises(TypeError):
        m.content[0].input["l"].append(2)  # type: ignore[union-attr]
    d = m.to_dict()
    d["metadata"]["k"]["v"] = 99  # to_dict hands out plain, independent copies
    d["content"][0]["input"]["l"].append(2)
    assert type(d["metadata"]) is dict and type(d["content"][0]["input"]["l"]) is list
    assert m.metadata == {"k": {"v": 1}} and m.to_dict()["content"][0]["input"] == {"l": [1]}


@pytest.mark.parametrize(
    ("a", "b"),
    [({"v": 1}, {"v": True}), ({"v": 1}, {"v": 1.0}), ({"v": 0.0}, {"v": -0.0})],
)
def test_equality_and_content_key_tell_json_values_apart(a: Any, b: Any) -> None:
    # The reproducer: 26 tokens reported, 29 real, once {"v": True} reused {"v": 1}'s count.
    # Issue 8 #6: {"v": 1} == {"v": True} made a rebuilt list reuse the wrong count.
    from convomem.tokens import ApproxTokenizer

    ma = Message("x", "assistant", content=[ToolUseBlock("c", "f", a)])
    mb = Message("x", "assistant", content=[ToolUseBlock("c", "f", b)])
    assert ma != mb and ma.content_key != mb.content_key
    assert ToolUseBlock("c", "f", a) != ToolUseBlock("c", "f", b)
    assert Message("x", "user", metadata=a) != Message("x", "user", metadata=b)
    tok = ApproxTokenizer()
    tok.count_message(ma)
    assert tok.count_message(mb) == ApproxTokenizer().count_message(mb)  # no stale reuse
    assert tok.tokenizations == 2
    assert Message("x", "user", metadata={"a": 1, "b": 2}) == Message(
        "x", "user", metadata={"a": 1, "b": 2}
    )


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=3), st.data())
def test_equal_messages_serialize_the_same(meta: dict[str, Any], data: st.DataObject) -> None:
    other = data.draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3))
    a = Message("x", "user", metadata=meta, content=[ToolUseBlock("c", "f", meta)])
    b = Message("x", "user", metadata=other, content=[ToolUseBlock("c", "f", other)])
    same_text = json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    assert (a == b) == same_text
    assert (a.content_key == b.content_key) == (json.dumps(meta) == json.dumps(other))


@pytest.mark.parametrize(
    ("make", "field"),
    [
        # Issue 8 #7: a tool input that is not JSON poisoned every later context().
        (lambda: ToolUseBlock("c", "f", {(1, 2): "x"}), "ToolUseBlock.input"),
        (lambda: ToolUseBlock("c", "f", {"s": {1, 2}}), "ToolUseBlock.input['s']"),
        (lambda: ToolUseBlock("c", "f", {"n": math.nan}), "ToolUseBlock.input['n']"),
        (lambda: ToolUseBlock("c", "f", {"o": object()}), "ToolUseBlock.input['o']"),
        (lambda: Message("m", "user", metadata={"when": object()}), "metadata['when']"),
        (lambda: Message("m", "user", metadata={1: "x"}), "metadata"),
        (lambda: Message("m", "user", metadata={"x": [math.inf]}), "metadata['x'][0]"),
    ],
)
def test_non_json_inputs_are_rejected_at_construction(make: Any, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        make()
    assert info.value.field == field


def _deep(n: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(n):
        value = {"a": value}
    return value


def test_deep_values_are_rejected_not_a_recursion_error_later() -> None:
    # Issue 8 #9: a 3,000-deep tool input raised RecursionError during counting.
    with pytest.raises(InvalidMessage, match="deeper than 100"):
        ToolUseBlock("c", "f", _deep(3000))
    with pytest.raises(InvalidMessage, match="deeper than 100"):
        Message("m", "user", metadata=_deep(3000))
    ok = Message("m", "assistant", content=[ToolUseBlock("c", "f", _deep(99))])
    assert ok.countable_text().count("{") == 100
    assert Message.from_dict(json.loads(json.dumps(ok.to_dict()))) == ok


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        # Issue 8 #9: an unhashable role gave a bare TypeError.
        ({"id": "m", "role": ["user"]}, "role"),
        ({"id": "m", "role": {"user": 1}}, "role"),
        ({"id": ["m"], "role": "user"}, "id"),
        ({"id": "m\ud800", "role": "user"}, "id"),
        ({"id": "m", "role": "user", "content": "bad \udfff text"}, "content"),
        ({"id": "m", "role": "user", "name": "\ud83d"}, "name"),
        ({"id": "m", "role": "user", "priority": [1]}, "priority"),
        ({"id": "m", "role": "user", "tokens": [1]}, "tokens"),
        ({"id": "m", "role": "user", "created_at": [1]}, "created_at"),
        ({"id": "m", "role": "user", "content": [{"x"}]}, "content[0]"),
        ({"id": "m", "role": "user", "content": [TextBlock("a"), ["b"]]}, "content[1]"),
    ],
)
def test_bad_fields_raise_invalid_message_never_a_bare_error(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidMessage) as info:
        Message(**kwargs)
    assert info.value.field == field
    str(info.value)  # the message renders


def test_surrogates_in_blocks_are_rejected() -> None:
    for make, field in [
        (lambda: TextBlock("a\ud800"), "TextBlock.text"),
        (lambda: ImageBlock("http://x/\ud800"), "ImageBlock.source"),
        (lambda: ToolUseBlock("c\ud800", "f"), "ToolUseBlock.id"),
        (lambda: ToolUseBlock("c", "f", "{\ud800"), "ToolUseBlock.input"),
        (lambda: ToolResultBlock("c", "r\ud800"), "ToolResultBlock.content"),
    ]:
        with pytest.raises(InvalidMessage) as info:
            make()
        assert info.value.field == field
    assert TextBlock("emoji 😀 and é").text == "emoji 😀 and é"


def test_str_subclasses_are_stored_as_plain_strings() -> None:
    import enum

    class Role(enum.StrEnum):
        USER = "user"

    m = Message("m", Role.USER)
    assert type(m.role) is str and m == Message("m", "user")
    assert json.dumps(m.to_dict()) == json.dumps(Message("m", "user").to_dict())
