"""What every durable backend shares below its I/O: checking input, encoding and decoding
stored rows, and cursors.

A backend validates a call with these before it touches its database, so bad input is
rejected with the same ``ConvomemError`` naming the field and the value on every backend,
and nothing is written. Rows are read back through ``decode_rows``, which never hides a
valid row behind a corrupt one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from .. import _check
from ..errors import ConfigError, CorruptRecord, InvalidMessage, bounded_repr
from ..model import Message
from .base import check_items
from .database import LogEntry

__all__ = [
    "ID_RULE",
    "EncodedMessage",
    "check_counts",
    "check_expected",
    "check_id",
    "check_json_object",
    "check_name",
    "check_page_limit",
    "decode_counts",
    "decode_cursor",
    "decode_rows",
    "dumps",
    "encode_cursor",
    "encode_messages",
    "json_problem",
]

MAX_NAME: Final = 256
"""Longest session id, user id, tenant or tokenizer name (in characters)."""
_BAD_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]|[\ud800-\udfff]")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
MAX_POSITION: Final = 2**63 - 1
"""The largest position a cursor may hold (a signed 64-bit integer: SQL's BIGINT)."""
_CURSOR: Final = re.compile(r"([a-z]):(0|[1-9][0-9]{0,18})")


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 as it is (no ``\\u`` escapes), never NaN or infinity."""
    return _ENCODER.encode(value)


def check_name(field: str, value: object, *, optional: bool = False) -> str | None:
    """A session id, user id or tenant: a non-empty string of at most 256 characters,
    without control characters or lone surrogates (None too when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        what = "a non-empty string" + (" or None" if optional else "")
        raise ConfigError(f"{field}={value!r}: must be {what}")
    if len(value) > MAX_NAME:
        raise ConfigError(f"{field}={value[:40]!r}...: longer than {MAX_NAME} characters")
    if _BAD_CHARS.search(value):
        raise ConfigError(f"{field}={value!r}: contains a control character or lone surrogate")
    return str(value)


ID_RULE: Final = (
    "1-256 characters, none of them a control character, a lone surrogate, '/' or '\\', "
    "and not '.' or '..'"
)
"""The one rule of the service's session ids, user ids and tenants (``check_id``)."""
_ID_BAD: Final = re.compile(r"[\x00-\x1f\x7f/\\]|[\ud800-\udfff]")


def check_id(field: str, value: object) -> str:
    """A session id, user id or tenant the service accepts (``ID_RULE``): every id it
    accepts is one path segment of a URL, so every route reaches it (a ``/`` would split
    the path, ``.`` and ``..`` are resolved away by clients). ``ConfigError`` naming the
    field, the value and the rule."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_NAME
        or value in (".", "..")
        or _ID_BAD.search(value)
    ):
        raise ConfigError(f"{field}={bounded_repr(value)}: an id must be {ID_RULE}")
    return value


def check_expected(field: str, value: object) -> int | None:
    """An ``expected_seq`` / ``expected_version``: None or a non-negative integer."""
    return None if value is None else _check.non_negative_int(field, value)


def check_page_limit(limit: object) -> int:
    """A page size: a positive integer."""
    return _check.positive_int("limit", limit)


def json_problem(field: str, value: Any, depth: int = 0) -> str | None:
    """Where ``value`` stops being a JSON value that reads back equal (a lone surrogate,
    NaN or an infinity, a tuple, a non-string key...), or None."""
    if depth > 100:
        return f"{field}: nested more than 100 levels deep"
    if value is None or isinstance(value, bool) or type(value) is int:
        return None
    shown = f"{field}={bounded_repr(value)}"
    if isinstance(value, str):
        return f"{shown}: contains a lone surrogate" if _SURROGATE.search(value) else None
    if type(value) is float:
        return None if math.isfinite(value) else f"{shown}: must be a finite number"
    if type(value) is dict:
        for k, v in value.items():
            if not isinstance(k, str) or _SURROGATE.search(k):
                return f"{field}: key {bounded_repr(k)} must be a string (without lone surrogates)"
            problem = json_problem(f"{field}[{bounded_repr(k)}]", v, depth + 1)
            if problem:
                return problem
        return None
    if type(value) is list:
        for i, v in enumerate(value):
            problem = json_problem(f"{field}[{i}]", v, depth + 1)
            if problem:
                return problem
        return None
    kind = type(value).__name__
    return f"{shown}: {kind} is not JSON (use dict, list, str, int, float, bool, None)"


def check_json_object(field: str, value: object) -> str:
    """``value`` as JSON text, if it is a JSON object that reads back equal (string keys,
    lists not tuples, finite numbers); ``ConfigError`` naming the first bad part."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{field}={value!r}: must be a JSON object (a dict)")
    plain = dict(value)
    problem = json_problem(field, plain)
    if problem:
        raise ConfigError(problem)
    return dumps(plain)


def check_counts(counts: object) -> dict[str, dict[str, int]]:
    """``{message_id: {tokenizer_name: count}}`` with non-negative integer counts."""
    if not isinstance(counts, Mapping):
        raise ConfigError(f"counts={counts!r}: must map message ids to {{tokenizer: count}}")
    out: dict[str, dict[str, int]] = {}
    for mid, per in counts.items():
        if not isinstance(mid, str) or not mid:
            raise ConfigError(f"counts[{mid!r}]: a message id must be a non-empty string")
        if not isinstance(per, Mapping):
            raise ConfigError(f"counts[{mid!r}]={per!r}: must map tokenizer names to counts")
        row: dict[str, int] = {}
        for name, n in per.items():
            check_name(f"counts[{mid!r}] tokenizer name", name)
            row[name] = _check.non_negative_int(f"counts[{mid!r}][{name!r}]", n)
        out[mid] = row
    return out


class EncodedMessage(NamedTuple):
    """A message ready to store: its id and its ``to_dict()`` JSON."""

    id: str
    data: str
    message: Message


def encode_messages(items: object) -> list[EncodedMessage]:
    """Check an append's messages (a sequence of ``Message``, each id once) and encode
    them; raises ``InvalidMessage`` naming the position before anything is written."""
    messages = check_items(items)
    seen: dict[str, int] = {}
    out: list[EncodedMessage] = []
    for i, m in enumerate(messages):
        if m.id in seen:
            raise InvalidMessage(
                f"items[{i}].id", m.id, f"appears twice in the batch (also items[{seen[m.id]}])"
            )
        seen[m.id] = i
        try:
            data = dumps(m.to_dict())
        except (TypeError, ValueError) as exc:  # a Message is always JSON; kept as a guard
            raise InvalidMessage(f"items[{i}]", m, f"cannot be stored as JSON: {exc}") from None
        out.append(EncodedMessage(m.id, data, m))
    return out


def decode_counts(raw: str | bytes | None) -> dict[str, int]:
    """A stored counts column; ``{}`` for none, and for one that cannot be read (counts
    are a cache: a lost count is counted again, never a reason to hide a message)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:  # UnicodeDecodeError included
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: n for k, n in value.items() if type(n) is int and n >= 0}


def _text(value: object, what: str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise ValueError(f"the stored {what} is a {type(value).__name__}, not text")
    return value


def _decode(message_id: object, data: object) -> Message:
    mid = _text(message_id, "message id")
    message = Message.from_dict(json.loads(_text(data, "message")))
    if message.id != mid:
        raise ValueError(f"the stored message has id {message.id!r}, its row {mid!r}")
    return message


def decode_rows(
    session_id: str,
    rows: Iterable[tuple[int, Any, Any, Any]],
    *,
    cursor: str | None = None,
) -> list[LogEntry]:
    """Decode ``(seq, message_id, data, counts)`` rows (text or UTF-8 bytes) in order.

    Every row is decoded, so one corrupt row never hides the others: if any fails,
    ``CorruptRecord`` names the session and the first bad seq and carries every valid
    message (``.messages``), every bad seq (``.seqs``) and ``cursor`` (where a page
    resumes past these rows).
    """
    entries: list[LogEntry] = []
    bad: list[int] = []
    problem = ""
    for seq, message_id, data, counts in rows:
        try:
            entries.append(LogEntry(seq, _decode(message_id, data), decode_counts(counts)))
        except Exception as exc:  # whatever the row holds, it is this row's failure
            if not bad:
                problem = f"{type(exc).__name__}: {exc}"[:300]
            bad.append(seq)
    if bad:
        raise CorruptRecord(
            session_id, bad, problem, messages=[e.message for e in entries], cursor=cursor
        )
    return entries


def encode_cursor(kind: str, position: int) -> str:
    """An opaque cursor: ``kind`` (one letter) and a position (a seq or a row key)."""
    return f"{kind}:{position}"


def decode_cursor(cursor: object, kind: str, what: str) -> int | None:
    """The position in a cursor of ``kind`` (None for no cursor); ``ConfigError`` for
    anything else, a cursor of another kind (another direction) included."""
    if cursor is None:
        return None
    if not isinstance(cursor, str):
        raise ConfigError(f"cursor={cursor!r}: must be a string from {what}, or None")
    match = _CURSOR.fullmatch(cursor)
    if match is None or match.group(1) != kind:
        raise ConfigError(f"cursor={cursor!r}: not a cursor {what} returned")
    position = int(match.group(2))
    if position > MAX_POSITION:  # no backend stores a seq or a row number this large
        raise ConfigError(f"cursor={cursor!r}: out of range (not a cursor {what} returned)")
    return position
