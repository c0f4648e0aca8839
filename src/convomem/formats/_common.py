"""Helpers shared by the format converters."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidMessage
from ..model import DERIVED_ID_PREFIX, ToolUseBlock
from ..model.values import thaw, too_deep


def plain(value: Any) -> Any:
    """A mapping from a dict or an SDK model object (anything with ``model_dump()``).

    The OpenAI and Anthropic SDKs return pydantic models (``response.choices[0].message``,
    ``response.content`` items); they are read through ``model_dump(exclude_none=True)``,
    so no SDK import is needed and unset optional fields are left out.
    """
    if not isinstance(value, Mapping) and hasattr(value, "model_dump"):
        try:
            dumped = value.model_dump(exclude_none=True)
        except Exception:  # a foreign object's model_dump: report it as bad input
            return value
        if isinstance(dumped, Mapping):
            return dumped
    return value


def message_list(messages: Any, what: str) -> Iterable[Any]:
    """``messages`` if it can be a list of messages; else ``InvalidMessage`` naming it."""
    if isinstance(messages, str | bytes | bytearray | Mapping) or not isinstance(
        messages, Iterable
    ):
        hint = " (a single message? wrap it in a list)" if isinstance(messages, Mapping) else ""
        try:
            raise InvalidMessage("messages", messages, f"must be a list of {what}{hint}")
        except RecursionError:
            raise too_deep("messages") from None
    return messages


def tool_arguments(block: ToolUseBlock, field: str, target: str) -> dict[str, Any]:
    """A tool call's arguments as a plain dict, for formats that need a JSON object.

    Arguments kept verbatim as a string (a model's malformed JSON) are parsed; when they
    are not a JSON object, ``InvalidMessage`` names ``field`` and the ``target`` format.
    """
    if not isinstance(block.input, str):
        return dict(thaw(block.input))
    if not block.input.strip():
        return {}
    try:
        parsed = json.loads(block.input)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidMessage(field, block.input, f"{target} needs tool arguments as a JSON object")
    return parsed


def _surrogate_at(value: Any, path: str, depth: int = 0) -> tuple[str, str] | None:
    """Where in ``value`` a string with a lone surrogate is, and that string."""
    if depth > 200:
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path, value
        return None
    found: tuple[str, str] | None = None
    if isinstance(value, Mapping):
        for k, v in value.items():
            at = f"{path}.{k}" if isinstance(k, str) and k.isidentifier() else f"{path}[{k!r}]"
            found = _surrogate_at(k, at, depth + 1) or _surrogate_at(v, at, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _surrogate_at(v, f"{path}[{i}]", depth + 1)
            if found is not None:
                return found
    return found


def stable_id(data: Any, seen: dict[str, int], prefix: str = "oa", where: str = "message") -> str:
    """A deterministic id for ``data``: its content hash, plus its occurrence number.

    The same list of dicts always gets the same ids, and identical dicts in one list get
    distinct ones. ``seen`` is the per-conversion occurrence counter; the format
    converters share this helper, each with its own ``prefix``. Every id it makes starts
    with ``DERIVED_ID_PREFIX``, so ``is_derived_id`` tells it from an id a caller gave.
    Input that cannot be hashed (too deep, circular, a lone surrogate) raises
    ``InvalidMessage`` naming ``where``.
    """
    try:
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    except UnicodeEncodeError:
        at, text = _surrogate_at(data, where) or (where, "")
        raise InvalidMessage(at, text, "is not valid Unicode (a lone surrogate)") from None
    except RecursionError:
        raise InvalidMessage(where, "...", "nests too deep") from None
    except (TypeError, ValueError) as exc:  # a circular reference, unsortable keys
        raise InvalidMessage(where, data, f"is not a JSON value ({exc})") from None
    n = seen.get(digest, 0)
    seen[digest] = n + 1
    base = f"{DERIVED_ID_PREFIX}{prefix}_{digest}"
    return base if n == 0 else f"{base}_{n}"


_BLOCK_NAMES = frozenset(
    {"TextBlock", "ImageBlock", "ToolUseBlock", "ToolResultBlock", "OpaqueBlock"}
)


def at_block(
    where: str, exc: InvalidMessage, names: Mapping[str, str] | None = None
) -> InvalidMessage:
    """``exc`` from a block constructor placed at ``where``, the block's place in the input.

    ``TextBlock.text`` becomes ``<where>.text``, ``OpaqueBlock.data['k']`` becomes
    ``<where>['k']``; ``names`` renames fields (``tool_use_id`` -> ``tool_call_id``). An
    error already placed (not a block's own field) is returned unchanged.
    """
    cls, dot, rest = exc.field.partition(".")
    if cls not in _BLOCK_NAMES or not dot:
        return exc
    attr, bracket, path = rest.partition("[")
    if cls == "OpaqueBlock" and attr == "data":
        field = f"{where}{bracket}{path}"
    else:
        field = f"{where}.{(names or {}).get(attr, attr)}{bracket}{path}"
    return InvalidMessage(field, exc.value, exc.problem)


def at_field(where: str, exc: InvalidMessage) -> InvalidMessage:
    """``exc`` with its field placed at ``where`` (``messages[3].name``)."""
    return InvalidMessage(f"{where}.{exc.field}", exc.value, exc.problem)
