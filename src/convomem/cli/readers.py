"""Reading a conversation file for the command line.

A file is JSON (a list of messages, ``{"messages": [...]}``, or an Anthropic request
``{"system": ..., "messages": [...]}``) or JSONL (one message per line), in UTF-8 with
or without a byte-order mark, from a path or stdin (``-``). The message format is
OpenAI Chat Completions or Anthropic Messages, detected from the content unless given.

Whatever the bytes, ``read_conversation`` returns messages or raises ``InputError``
with one line that names the file and, where there is one, the position (line,
``messages[i].field``) and the value. It never lets a ``RecursionError`` (deep nesting),
a ``ValueError`` (a number longer than Python converts) or a ``UnicodeError`` escape.
"""

from __future__ import annotations

import codecs
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO, Final, Literal, TextIO

from ..errors import ConvomemError, InputError, InvalidMessage
from ..model import Message

InputFormat = Literal["auto", "openai", "anthropic"]
INPUT_FORMATS: Final[tuple[InputFormat, ...]] = ("auto", "openai", "anthropic")

_ANTHROPIC_BLOCKS: Final = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
_OPENAI_BLOCKS: Final = frozenset(
    {"image_url", "input_audio", "file", "refusal", "audio", "input_text", "output_text"}
)
_OPENAI_ROLES: Final = frozenset({"system", "developer", "tool", "function"})
_OPENAI_KEYS: Final = frozenset({"tool_calls", "tool_call_id", "function_call"})
_UTF16_32_BOMS: Final = (
    codecs.BOM_UTF32_LE,
    codecs.BOM_UTF32_BE,
    codecs.BOM_UTF16_LE,
    codecs.BOM_UTF16_BE,
)


def read_conversation(
    path: str,
    *,
    input_format: InputFormat = "auto",
    stdin: TextIO | BinaryIO | None = None,
) -> list[Message]:
    """Read the conversation in ``path`` (``-``: ``stdin``, default ``sys.stdin``)."""
    if input_format not in INPUT_FORMATS:
        raise InputError(f"input_format={input_format!r}: must be one of {list(INPUT_FORMATS)}")
    label = "<stdin>" if path == "-" else path
    text = _read_text(path, label, stdin)
    data, lines = _parse(text, label)
    system, records = _records(data, label, multiline="\n" in text.strip())
    fmt = detect_format(records, system) if input_format == "auto" else input_format
    try:
        return _convert(records, system, fmt)
    except InvalidMessage as exc:
        where = exc.field
        if lines is not None and where.startswith("messages["):
            i = int(where[len("messages[") : where.index("]")])
            where = f"line {lines[i]}: {where}"
        guessed = input_format == "auto" and any(k in exc.field for k in (".content", ".role"))
        hint = f" (read as {fmt}; see --input-format)" if guessed else ""
        raise InputError(f"{label}: {where}={_short(exc.value)}: {exc.problem}{hint}") from None
    except RecursionError:
        raise InputError(f"{label}: content nested too deeply to convert") from None
    except UnicodeError as exc:
        raise InputError(f"{label}: not valid Unicode text ({_unicode_problem(exc)})") from None
    except ConvomemError as exc:
        raise InputError(f"{label}: {exc}") from None


def detect_format(records: list[Any], system: Any = None) -> Literal["openai", "anthropic"]:
    """``"anthropic"`` when the messages have Anthropic's shape, else ``"openai"``.

    Anthropic: a top-level ``system`` field, or content blocks of Anthropic-only types
    (``tool_use``, ``tool_result``, ``thinking``..., an ``image`` with a ``source``) and
    nothing OpenAI-only (system/tool roles, ``tool_calls``, ``image_url`` parts...).
    Plain text conversations read the same either way; they are read as OpenAI.
    """
    if system is not None:
        return "anthropic"
    anthropic = False
    for rec in records:
        if not isinstance(rec, Mapping):
            continue
        role = rec.get("role")
        if (isinstance(role, str) and role in _OPENAI_ROLES) or any(k in rec for k in _OPENAI_KEYS):
            return "openai"
        content = rec.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if not isinstance(kind, str):
                continue
            if kind in _OPENAI_BLOCKS:
                return "openai"
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                anthropic = True
    return "anthropic" if anthropic else "openai"


# -- bytes to text to JSON -----------------------------------------------------------


def _read_text(path: str, label: str, stdin: TextIO | BinaryIO | None) -> str:
    try:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin
            raw: str | bytes = getattr(stream, "buffer", stream).read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except OSError as exc:
        raise InputError(f"{label}: cannot read: {exc.strerror or exc}") from None
    if isinstance(raw, str):
        return raw.removeprefix("\ufeff")
    if raw.startswith(_UTF16_32_BOMS):
        raise InputError(f"{label}: UTF-16/UTF-32 text; convert it to UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte {exc.start})") from None


def _loads(text: str, label: str, line: int | None = None) -> Any:
    at = "" if line is None else f"line {line}: "
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        row = exc.lineno if line is None else line
        raise InputError(
            f"{label}: line {row} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except RecursionError:
        raise InputError(f"{label}: {at}JSON nested too deeply") from None
    except ValueError as exc:  # int-string limit: a number with thousands of digits
        limit = sys.get_int_max_str_digits()
        raise InputError(
            f"{label}: {at}a number has more than {limit} digits ({_first_line(exc)})"
        ) from None


def _parse(text: str, label: str) -> tuple[Any, list[int] | None]:
    """The parsed JSON document, or the JSONL records and their line numbers."""
    stripped = text.strip()
    if not stripped:
        raise InputError(f"{label}: empty file; expected a JSON list of messages or JSONL")
    if stripped[0] == "[":
        return _loads(stripped, label), None
    if stripped[0] == "{":
        try:
            return json.loads(stripped), None
        except json.JSONDecodeError as exc:
            first = stripped.split("\n", 1)[0]
            if exc.msg != "Extra data" and not _parses(first):
                raise InputError(
                    f"{label}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
                ) from None
        except (ValueError, RecursionError):
            pass  # read line by line below, so the error names its line
    records: list[Any] = []
    lines: list[int] = []
    for n, line in enumerate(_lines(text), 1):
        if line.strip():
            records.append(_loads(line, label, n))
            lines.append(n)
    return records, lines


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _lines(text: str) -> Iterator[str]:
    # JSON only knows \n and \r as line ends (str.splitlines also splits at \x1c, \u2028...)
    return iter(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def _records(data: Any, label: str, *, multiline: bool) -> tuple[Any, list[Any]]:
    """``(system, message records)`` of a parsed document."""
    if isinstance(data, list):
        return None, data
    if isinstance(data, dict):
        messages = data.get("messages")
        if isinstance(messages, list):
            return data.get("system"), messages
        if "role" in data and not multiline:
            return None, [data]  # one line of JSONL
        if "role" in data:
            raise InputError(
                f"{label}: expected a list of messages, got a single message object "
                "(wrap it in [...], or put one message per line)"
            )
    if isinstance(data, dict):
        got = "an object without a 'messages' list"
    else:
        got = {str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
    raise InputError(
        f"{label}: expected a list of messages, {{'messages': [...]}} or JSONL; got {got}"
    )


def _convert(records: list[Any], system: Any, fmt: str) -> list[Message]:
    if fmt == "anthropic":
        from ..formats.anthropic import from_anthropic

        return from_anthropic(records, system=system)
    from ..formats.openai import from_openai

    return from_openai(records)


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(exc: BaseException, limit: int = 120) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unicode_problem(exc: UnicodeError) -> str:
    if isinstance(exc, UnicodeEncodeError):
        bad = exc.object[exc.start : exc.end]
        return f"lone surrogate {bad.encode('unicode_escape').decode('ascii')}"
    return _first_line(exc)
