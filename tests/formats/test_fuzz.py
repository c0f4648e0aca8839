"""Fuzz the converters: any JSON-like input converts or raises a ConvomemError, nothing else.

For everything that converts, writing it back gives the input again, modulo the
normalizations each format documents (the oracles below spell them out).

Examples per target: ``CONVOMEM_FUZZ_EXAMPLES`` (default 200); a long run is
``CONVOMEM_FUZZ_EXAMPLES=20000 pytest tests/formats/test_fuzz.py``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from convomem.errors import ConvomemError
from convomem.formats import from_anthropic, from_openai, to_anthropic, to_openai
from convomem.model import Message

EXAMPLES = int(os.environ.get("CONVOMEM_FUZZ_EXAMPLES", "200"))
fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- JSON-like values, hostile ones included ---------------------------------------------

clean_texts = st.sampled_from(["", "x", "ok", " ", "é😀", "{}", "null"]) | st.text(max_size=5)
hostile_texts = st.sampled_from(["\ud800", "a\udfffb"])
# Mostly clean, now and then a lone surrogate: most inputs convert, every path is tried.
texts = st.integers(0, 19).flatmap(lambda n: hostile_texts if n == 0 else clean_texts)
clean_scalars = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.5, -0.0]) | clean_texts
)
scalars = clean_scalars | st.sampled_from([math.nan, math.inf, 10**30]) | texts
json_values = st.recursive(
    clean_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(clean_texts, inner, max_size=3),
    max_leaves=6,
)


def deep(n: int) -> Any:
    value: Any = "x"
    for _ in range(n):
        value = [value]
    return value


junk = st.recursive(
    scalars | st.sampled_from([deep(150), deep(1200)]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)


def maybe(draw: st.DrawFn, value: Any) -> Any:
    """``value``, or now and then something else in its place."""
    return draw(junk) if draw(st.integers(0, 24)) == 0 else value


def some(draw: st.DrawFn, d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with each key perhaps dropped or its value replaced, and perhaps a new key."""
    out = {k: maybe(draw, v) for k, v in d.items() if draw(st.integers(0, 39))}
    if draw(st.integers(0, 19)) == 0:
        out[draw(st.sampled_from(["x_extra", "annotations", "cache_control", "index"]))] = draw(
            junk
        )
    return out


ids = st.sampled_from(["c1", "c2", "call_9", "toolu_1"])
arguments = st.sampled_from(
    ["", " ", "{}", '{"a": 1}', '{"a":1}', "not json", "[1]", '{"a": NaN}', "[" * 200 + "]" * 200]
) | st.builds(json.dumps, st.dictionaries(texts, scalars, max_size=2))


# -- OpenAI ------------------------------------------------------------------------------


@st.composite
def openai_part(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "image_url", "refusal", "input_audio", "file", "other"]))
    part: dict[str, Any] = {
        "text": {"type": "text", "text": draw(texts)},
        "image_url": {
            "type": "image_url",
            "image_url": draw(
                st.sampled_from(
                    [
                        {"url": "https://x.test/a.png"},
                        {"url": "https://x.test/b.png", "detail": "low"},
                        "https://x.test/c.png",
                        {"url": ""},
                    ]
                )
            ),
        },
        "refusal": {"type": "refusal", "refusal": draw(texts)},
        "input_audio": {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
        "file": {"type": "file", "file": {"file_id": "file-1"}},
        "other": {"type": draw(texts | st.none())},
    }[kind]
    return some(draw, part)


@st.composite
def openai_message(draw: st.DrawFn) -> Any:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    d: dict[str, Any] = {"role": role}
    form = draw(st.sampled_from(["absent", "null", "text", "parts"]))
    if form != "absent":
        d["content"] = {
            "null": None,
            "text": draw(texts),
            "parts": draw(st.lists(openai_part(), max_size=3)),
        }[form]
    if role == "tool":
        d["tool_call_id"] = draw(ids)
    if role == "assistant" and draw(st.booleans()):
        d["tool_calls"] = [
            some(
                draw,
                {
                    "id": draw(ids),
                    "type": "function",
                    "function": some(draw, {"name": "f", "arguments": draw(arguments)}),
                },
            )
            for _ in range(draw(st.integers(0, 2)))
        ]
    if role == "assistant" and draw(st.booleans()):
        d["refusal"] = draw(texts | st.none())
    if role == "assistant" and draw(st.integers(0, 3)) == 0:
        d["audio"] = draw(st.sampled_from([None, {"id": "audio_1"}]))
    if draw(st.integers(0, 3)) == 0:
        d["name"] = draw(texts | st.none())
    if draw(st.integers(0, 3)) == 0:
        d["id"] = draw(st.sampled_from(["m1", "m2"]))
    return some(draw, d)


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, anything JSON-like otherwise."""
    return st.integers(0, 9).flatmap(lambda n: junk if n == 0 else good)


openai_inputs = mostly(st.lists(openai_message(), max_size=5))


def openai_expected(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``to_openai(from_openai(data))`` gives, by the documented normalizations.

    Built without copying deeply: what a converter drops may nest deeper than the stack.
    """
    out = []
    for message in data:
        d = {k: v for k, v in message.items() if k != "id"}  # 1. the id is not written back
        calls = d.get("tool_calls") if d.get("role") != "tool" else None
        if calls:  # 2. a tool call is written in its canonical shape
            d["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": c["function"].get("arguments", ""),
                    },
                }
                for c in calls
            ]
        if isinstance(d.get("content"), list):
            d["content"] = [
                {**part, "image_url": {"url": part["image_url"]}}  # 3. a URL string: {"url"}
                if part.get("type") == "image_url"
                and len(part) == 2
                and isinstance(part.get("image_url"), str)
                else part
                for part in d["content"]
            ]
        out.append(d)
    return out


@fuzz
@given(openai_inputs)
def test_from_openai_converts_or_raises_a_convomem_error(data: Any) -> None:
    try:
        messages = from_openai(data)
    except ConvomemError:
        event("refused")
        return
    event("converted")
    assert to_openai(messages) == openai_expected(data)
    again = from_openai(data)
    assert [m.id for m in again] == [m.id for m in messages] and again == messages
    stored = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]
    assert stored == messages
    try:  # the other provider: converted or refused with a typed error, never a crash
        system, out = to_anthropic(messages)
    except ConvomemError:
        return
    assert all(m["content"] not in ("", []) for m in out)
    json.dumps([system, out])


# -- Anthropic ---------------------------------------------------------------------------

anthropic_image_sources = st.sampled_from(
    [
        {"type": "base64", "media_type": "image/png", "data": "iVBO"},
        {"type": "url", "url": "https://x.test/a.png"},
        {"type": "file", "file_id": "file_1"},
        {"type": "s3", "bucket": "b"},
        {"type": "base64", "data": "iVBO"},
    ]
)
anthropic_opaque = st.sampled_from(
    [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "abc"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}},
        {"type": "search_result", "source": "https://s", "title": "t", "content": []},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
    ]
)


@st.composite
def anthropic_part(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "image", "opaque"]))
    if kind == "text":
        part: dict[str, Any] = {"type": "text", "text": draw(texts)}
    elif kind == "image":
        part = {"type": "image", "source": draw(anthropic_image_sources)}
    else:
        part = draw(anthropic_opaque)
    return some(draw, part)


@st.composite
def anthropic_block(draw: st.DrawFn, role: str) -> Any:
    own = "tool_use" if role == "assistant" else "tool_result"
    kind = draw(
        st.sampled_from(["text", "image", "opaque", own, own, own, "tool_use", "tool_result"])
    )
    if kind in ("text", "image", "opaque"):
        return draw(anthropic_part())
    if kind == "tool_use":
        return some(
            draw,
            {"type": "tool_use", "id": draw(ids), "name": "f", "input": draw(json_values)},
        )
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": draw(ids)}
    content = draw(st.sampled_from(["absent", "null", "text", "parts"]))
    if content != "absent":
        block["content"] = {
            "null": None,
            "text": draw(texts),
            "parts": draw(st.lists(anthropic_part(), max_size=3)),
        }[content]
    if draw(st.booleans()):
        block["is_error"] = draw(st.booleans())
    return some(draw, block)


@st.composite
def anthropic_message(draw: st.DrawFn) -> Any:
    role = draw(st.sampled_from(["user", "assistant"]))
    content = draw(texts | st.lists(anthropic_block(role), max_size=3))
    d: dict[str, Any] = {"role": role, "content": content}
    if draw(st.integers(0, 4)) == 0:
        d["id"] = draw(st.sampled_from(["msg_1", "msg_2"]))
    return some(draw, d)


anthropic_systems = (
    st.none()
    | texts
    | st.lists(
        st.builds(
            lambda t, cc: {"type": "text", "text": t, **cc},
            texts,
            st.sampled_from([{}, {"cache_control": {"type": "ephemeral"}}]),
        ),
        max_size=2,
    )
    | st.integers(0, 9).flatmap(lambda n: junk if n == 0 else st.none())
)


def _empty_text(block: Any) -> bool:
    return block.get("type") == "text" and block.get("text") == ""


def _image_source(source: dict[str, Any]) -> dict[str, Any]:
    keys = {"base64": ("media_type", "data"), "url": ("url",), "file": ("file_id",)}
    return {"type": source["type"], **{k: source[k] for k in keys[source["type"]]}}


def _block_expected(block: dict[str, Any]) -> dict[str, Any]:
    out = dict(block)
    kind = block["type"]
    if kind == "image" and block["source"].get("type") in ("base64", "url", "file"):
        out["source"] = _image_source(block["source"])  # 5. only the source's own keys
    elif kind == "tool_use":
        out.setdefault("input", {})  # 4. input defaults to {}
    elif kind == "tool_result":
        if "content" in block and block["content"] is None:
            out["content"] = ""  # 4. null content is written as ""
        elif isinstance(block.get("content"), list):
            out["content"] = [_block_expected(p) for p in block["content"] if not _empty_text(p)]
    return out


def anthropic_expected(data: list[dict[str, Any]], system: Any) -> tuple[Any, list[Any]]:
    """What ``to_anthropic(from_anthropic(data, system))`` gives, by the documented rules."""
    out: list[dict[str, Any]] = []
    for d in data:
        content = d.get("content", "")  # 1. other message keys (id, model...) are not sent
        if isinstance(content, list):  # 2. no empty text block
            content = [_block_expected(b) for b in content if not _empty_text(b)]
        if not content:  # 2. no empty message
            continue
        if isinstance(content, list) and any(b["type"] == "tool_result" for b in content):
            if out and out[-1]["role"] == "user":  # 3. results join the user turn before
                before = out.pop()["content"]
                if isinstance(before, str):
                    before = [{"type": "text", "text": before}] if before else []
                content = before + content
            content = [b for b in content if b["type"] == "tool_result"] + [
                b for b in content if b["type"] != "tool_result"
            ]  # 3. results first
        out.append({"role": d["role"], "content": content})
    if isinstance(system, list):  # 6. a block list keeps its non-empty blocks, or is None
        system = [b for b in system if not _empty_text(b)] or None
    elif system == "":  # 6. so is an empty system string (the API rejects it)
        system = None
    return system, out


@fuzz
@given(mostly(st.lists(anthropic_message(), max_size=5)), anthropic_systems)
def test_from_anthropic_converts_or_raises_a_convomem_error(data: Any, system: Any) -> None:
    try:
        messages = from_anthropic(data, system=system)
    except ConvomemError:
        event("refused")
        return
    event("converted")
    assert to_anthropic(messages) == anthropic_expected(data, system)
    again = from_anthropic(data, system=system)
    assert [m.id for m in again] == [m.id for m in messages] and again == messages
    stored = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]
    assert to_anthropic(stored) == to_anthropic(messages)
    try:
        out = to_openai(messages)
    except ConvomemError:
        return
    json.dumps(out)


# -- convomem's own format ---------------------------------------------------------------


@st.composite
def native_block(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "image", "tool_use", "tool_result", "opaque", "other"]))
    block: dict[str, Any] = {
        "text": {"type": "text", "text": draw(texts)},
        "image": {"type": "image", "source": "https://x.test/a.png", "media_type": "image/png"},
        "tool_use": {
            "type": "tool_use",
            "id": draw(ids),
            "name": "f",
            "input": draw(st.dictionaries(clean_texts, json_values, max_size=3)),
        },
        "tool_result": {
            "type": "tool_result",
            "tool_use_id": draw(ids),
            "content": draw(texts | st.lists(st.just({"type": "text", "text": "r"}), max_size=2)),
            "is_error": draw(st.booleans()),
        },
        "opaque": {
            "type": "opaque",
            "provider": "acme",
            "data": draw(st.dictionaries(clean_texts, json_values, max_size=3)),
        },
        "other": {"type": draw(texts)},
    }[kind]
    return some(draw, block)


@st.composite
def native_message(draw: st.DrawFn) -> Any:
    d: dict[str, Any] = {
        "id": draw(st.sampled_from(["m1", "~oa_1", "msg_01"])),
        "role": draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        "content": draw(texts | st.lists(native_block(), max_size=3)),
        "tokens": draw(st.none() | st.integers(0, 50)),
        "name": draw(st.none() | texts),
        "metadata": draw(st.none() | st.dictionaries(clean_texts, json_values, max_size=3)),
        "created_at": draw(st.none() | st.integers(0, 10) | st.floats(-1e9, 1e9)),
        "priority": draw(st.sampled_from([0, 1, 2])),
    }
    return some(draw, d)


def native_expected(data: dict[str, Any], m: Message) -> dict[str, Any]:
    """What ``Message.from_dict(data).to_dict()`` gives: defaults left out, times as floats."""
    given = data.get("id")
    out: dict[str, Any] = {"id": m.id if given is None else given, "role": data["role"]}
    if data.get("tokens") is not None:
        out["tokens"] = data["tokens"]
    content = data.get("content", "")
    if isinstance(content, list):
        content = [
            {"type": "tool_use", "input": {}, **b}
            if b["type"] == "tool_use"
            else {"content": "", **{k: v for k, v in b.items() if k != "is_error"}}
            | ({"is_error": True} if b.get("is_error") else {})
            if b["type"] == "tool_result"
            else b
            for b in content
        ]
    out["content"] = content
    for key, default in (("name", None), ("metadata", None), ("created_at", None), ("priority", 0)):
        if data.get(key, default) not in (default, {}):
            out[key] = data[key]
    if "created_at" in out:
        out["created_at"] = float(out["created_at"])
    return out


@fuzz
@given(mostly(native_message()))
def test_message_from_dict_converts_or_raises_a_convomem_error(data: Any) -> None:
    try:
        m = Message.from_dict(data)
    except ConvomemError:
        event("refused")
        return
    event("converted")
    d = m.to_dict()
    assert json.loads(json.dumps(d)) == d == native_expected(data, m)
    assert Message.from_dict(d) == m
