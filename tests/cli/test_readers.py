"""The CLI's conversation reader: formats, encodings, detection, and hostile bytes."""

from __future__ import annotations

import codecs
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.cli import main
from convomem.cli.readers import detect_format, read_conversation
from convomem.errors import InputError
from convomem.formats.anthropic import to_anthropic
from convomem.formats.openai import from_openai, to_openai
from convomem.model import Message

FUZZ_EXAMPLES = int(os.environ.get("CONVOMEM_FUZZ_EXAMPLES", "60"))
"""Examples per fuzz property; raise it for a long run (CONVOMEM_FUZZ_EXAMPLES=20000)."""


def read_bytes(data: bytes, **kw: Any) -> list[Message]:
    return read_conversation("-", stdin=io.BytesIO(data), **kw)  # type: ignore[arg-type]


# -- OpenAI conversations with tool calls, as dicts -------------------------------------


@st.composite
def openai_dicts(draw: st.DrawFn, max_turns: int = 6) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(st.text(min_size=1, max_size=12))})
    calls = 0
    for _ in range(draw(st.integers(1, max_turns))):
        out.append({"role": "user", "content": draw(st.text(min_size=1, max_size=12))})
        if draw(st.booleans()):
            ids = []
            for _ in range(draw(st.integers(1, 2))):
                calls += 1
                ids.append(f"call_{calls}")
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": json.dumps({"q": c})},
                        }
                        for c in ids
                    ],
                }
            )
            for c in ids:
                out.append({"role": "tool", "tool_call_id": c, "content": draw(st.text())})
        out.append({"role": "assistant", "content": draw(st.text(min_size=1, max_size=12))})
    return out


def has_calls(dicts: list[dict[str, Any]]) -> bool:
    return any("tool_calls" in d for d in dicts)


@settings(max_examples=40)
@given(openai_dicts())
def test_detection_tells_openai_from_anthropic(dicts: list[dict[str, Any]]) -> None:
    messages = from_openai(dicts)
    assert detect_format(to_openai(messages)) == "openai"
    system, turns = to_anthropic(messages)
    if system is not None:
        assert detect_format(turns, system) == "anthropic"
    if has_calls(dicts):  # tool_use / tool_result blocks are Anthropic's alone
        assert detect_format(turns) == "anthropic"


@settings(max_examples=40)
@given(openai_dicts(), st.sampled_from(["list", "wrapped", "jsonl", "pretty"]), st.booleans())
def test_openai_files_read_back_exactly(dicts: list[dict[str, Any]], shape: str, bom: bool) -> None:
    if shape == "list":
        text = json.dumps(dicts)
    elif shape == "wrapped":
        text = json.dumps({"messages": dicts})
    elif shape == "jsonl":
        text = "\r\n".join(json.dumps(d) for d in dicts) + "\n"
    else:
        text = json.dumps(dicts, indent=2, ensure_ascii=False)
    data = (codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8", "surrogatepass")
    try:
        got = read_bytes(data)
    except InputError as exc:  # lone surrogates from st.text() cannot be UTF-8
        assert "UTF-8" in str(exc) or "surrogate" in str(exc)
        return
    assert got == from_openai(dicts)


@settings(max_examples=40)
@given(openai_dicts(), st.sampled_from(["request", "list", "jsonl"]))
def test_anthropic_files_are_detected_and_read(dicts: list[dict[str, Any]], shape: str) -> None:
    messages = from_openai(dicts)
    system, turns = to_anthropic(messages)
    if shape == "request":
        doc: Any = {"model": "claude", "max_tokens": 100, "messages": turns}
        if system is not None:
            doc["system"] = system
        text = json.dumps(doc)
    elif shape == "list":
        text = json.dumps(turns)
    else:
        text = "\n".join(json.dumps(t) for t in turns)
    data = text.encode("utf-8", "surrogatepass")
    try:
        got = read_bytes(data)
    except InputError as exc:
        assert "UTF-8" in str(exc) or "surrogate" in str(exc)
        return
    forced = read_bytes(data, input_format="anthropic")
    assert to_openai(got) == to_openai(forced)  # plain text reads the same either way
    if (shape == "request" and system is not None) or has_calls(dicts):
        assert got == forced  # detected: even the derived ids are Anthropic's
    expected = messages if shape == "request" else [m for m in messages if m.role != "system"]
    assert to_openai(got) == to_openai(expected)


# -- formats, encodings and errors, by example -------------------------------------------

ONE = [{"role": "user", "content": "hi"}]


def test_utf8_bom_is_accepted_from_files_and_stdin(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(codecs.BOM_UTF8 + json.dumps(ONE).encode())
    assert read_conversation(str(path)) == from_openai(ONE)
    assert read_bytes(codecs.BOM_UTF8 + json.dumps(ONE).encode()) == from_openai(ONE)
    text_stdin = io.StringIO("\ufeff" + json.dumps(ONE))
    assert read_conversation("-", stdin=text_stdin) == from_openai(ONE)


def test_a_single_line_object_is_one_line_of_jsonl() -> None:
    assert read_bytes(json.dumps(ONE[0]).encode()) == from_openai(ONE)


def test_a_typed_input_format_is_used_even_on_openai_looking_files() -> None:
    with pytest.raises(InputError, match=r"messages\[0\]\.role='system'"):
        read_bytes(b'[{"role": "system", "content": "x"}]', input_format="anthropic")


def test_anthropic_system_blocks_are_read() -> None:
    doc = {
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    got = read_bytes(json.dumps(doc).encode())
    assert [m.role for m in got] == ["system", "user"]
    assert got[0].text() == "Be brief."


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "empty file"),
        (b"  \n ", "empty file"),
        (b"[" * 100_000, "nested too deeply"),
        (b'[{"role": "user", "content": "x", "n": ' + b"9" * 5000 + b"}]", "more than 4300 digits"),
        (b'{"role": "user", "content": "x", "n": ' + b"9" * 5000 + b"}\n", "line 1: a number"),
        (b'{\n  "role": "user",\n  "content": "hi"\n}\n', "expected a list of messages"),
        (b'{\n  "role": "user",\n  "content": "hi",\n}\n', "line 4 column 1: invalid JSON"),
        (b'{"foo": 1}', "expected a list of messages"),
        (b'{"messages": 3}', "without a 'messages' list"),
        (b"42", "line 1: messages[0]=42: must be an object"),
        (b'"text"', "line 1: messages[0]='text': must be an object"),
        (b"[42]", "messages[0]=42: must be an object"),
        (b"\xff\xfe[\x00]\x00", "UTF-16/UTF-32"),
        (b'[{"role": "user", "content": "caf\xe9"}]', "not UTF-8 text (byte 33)"),
        (b'[{"role": "user", "content": "x"}, {"role": "bot"}]', "messages[1].role='bot'"),
        (b'{"role": "user"}\n\n{"role": "robot"}\n', "line 3: messages[1].role='robot'"),
        (b'{"role": "user", "content": "x"}\n{"role": oops}\n', "line 2 column 10: invalid JSON"),
        (b'[{"role": "tool", "content": "x"}]', "messages[0].tool_call_id=None"),
        (b"[1, 2", "invalid JSON"),
    ],
)
def test_bad_files_raise_one_line_input_errors(data: bytes, needle: str) -> None:
    with pytest.raises(InputError) as info:
        read_bytes(data)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message and len(message) < 400
    assert message.startswith("<stdin>: ")


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.json: cannot read"):
        read_conversation(str(tmp_path / "nope.json"))


def test_auto_detection_is_named_when_the_guess_fails() -> None:
    bad = [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]
    with pytest.raises(InputError, match="read as anthropic; see --input-format"):
        read_bytes(json.dumps(bad).encode())


def test_lone_surrogates_either_read_or_fail_in_one_line() -> None:
    for data in (
        b'[{"id": "m1", "role": "user", "content": "a\\ud800b"}]',
        b'[{"role": "user", "content": "a\\ud800b"}]',
    ):
        try:
            (m,) = read_bytes(data)
        except InputError as exc:
            assert "surrogate" in str(exc) and "\n" not in str(exc)
        else:
            assert m.text() == "a\ud800b"


# -- fuzz: any bytes read or fail with an InputError ------------------------------------

_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["user", "assistant", "system", "tool", "text", "tool_use", "image"])
)
_keys = st.sampled_from(
    ["role", "content", "type", "text", "id", "tool_calls", "tool_call_id", "function",
     "name", "arguments", "input", "tool_use_id", "source", "messages", "system", "url",
     "image_url", "media_type", "data", "is_error", "x"]
)  # fmt: skip
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=25,
)
_documents = st.one_of(
    _json.map(json.dumps),
    st.lists(_json, max_size=4).map(lambda rows: "\n".join(json.dumps(r) for r in rows)),
    openai_dicts().map(json.dumps),
    openai_dicts().map(lambda d: json.dumps(list(to_anthropic(from_openai(d))[1]))),
)


@st.composite
def hostile_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=200))
    data = draw(_documents).encode("utf-8", "surrogatepass")
    if kind == 2 and data:  # damage it: cut, flip a byte, or splice noise in
        at = draw(st.integers(0, len(data) - 1))
        noise = draw(st.binary(max_size=4))
        data = data[:at] + noise + data[at + draw(st.integers(0, 3)) :]
    if kind == 3:
        data = draw(st.sampled_from([codecs.BOM_UTF8, b"", b"[", b"{", b"\n"])) + data
    return data


@settings(max_examples=FUZZ_EXAMPLES)
@given(hostile_bytes(), st.sampled_from(["auto", "openai", "anthropic"]))
def test_any_bytes_read_or_raise_an_input_error(data: bytes, fmt: str) -> None:
    try:
        messages = read_bytes(data, input_format=fmt)  # type: ignore[arg-type]
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(messages, list)
    assert all(isinstance(m, Message) for m in messages)


@settings(max_examples=max(1, FUZZ_EXAMPLES // 3))
@given(hostile_bytes(), st.sampled_from(["inspect", "estimate", "pack"]))
def test_any_bytes_through_the_cli_exit_0_or_one_line_and_2(data: bytes, command: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = [command, "-", *(["--budget", "50", "--pin", "none"] if command == "pack" else [])]
    old_in, old_err = sys.stdin, sys.stderr
    sys.stdin, sys.stderr = io.TextIOWrapper(io.BytesIO(data)), err
    try:
        code = main(argv, out=out)
    finally:
        sys.stdin, sys.stderr = old_in, old_err
    if code == 2:
        assert out.getvalue() == "" and len(err.getvalue().splitlines()) == 1
    else:
        assert code in (0, 3) and out.getvalue()  # 3: pack's result is over its budget
