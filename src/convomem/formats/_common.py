"""Helpers shared by the format converters."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..errors import InvalidMessage
from ..model import DERIVED_ID_PREFIX, ToolUseBlock


def tool_arguments(block: ToolUseBlock, field: str, target: str) -> dict[str, Any]:
    """A tool call's arguments as a dict, for formats that need a JSON object.

    Arguments kept verbatim as a string (a model's malformed JSON) are parsed; when they
    are not a JSON object, ``InvalidMessage`` names ``field`` and the ``target`` format.
    """
    if not isinstance(block.input, str):
        return dict(block.input)
    if not block.input.strip():
        return {}
    try:
        parsed = json.loads(block.input)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidMessage(field, block.input, f"{target} needs tool arguments as a JSON object")
    return parsed


def stable_id(data: Any, seen: dict[str, int], prefix: str = "oa") -> str:
    """A deterministic id for ``data``: its content hash, plus its occurrence number.

    The same list of dicts always gets the same ids, and identical dicts in one list get
    distinct ones. ``seen`` is the per-conversion occurrence counter; the format
    converters share this helper, each with its own ``prefix``. Every id it makes starts
    with ``DERIVED_ID_PREFIX``, so ``is_derived_id`` tells it from an id a caller gave.
    """
    digest = hashlib.blake2b(
        json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode(), digest_size=8
    ).hexdigest()
    n = seen.get(digest, 0)
    seen[digest] = n + 1
    base = f"{DERIVED_ID_PREFIX}{prefix}_{digest}"
    return base if n == 0 else f"{base}_{n}"


def at_field(where: str, exc: InvalidMessage) -> InvalidMessage:
    """``exc`` with its field placed at ``where`` (``messages[3].name``)."""
    return InvalidMessage(f"{where}.{exc.field}", exc.value, exc.problem)
