"""Oversized tool results, reduced: a copy that keeps the head and the tail.

One function serves every view (``History``, the ``Packer``'s table, a session's view):
``reduce_results(message, limit, count)`` returns a copy of ``message`` (same id, role
and result ids) in which every tool result whose text is over ``limit`` tokens keeps its
beginning and its end, with a marker saying how much was left out and where the whole
result is (the log, or the caller's list, keeps the original: a view only sends the
copy). The copy's metadata carries ``REDUCED_KEY`` (the original's count and the limit).

JSON is reduced on element boundaries, never inside a token of the JSON: a list keeps
its first and last items and a string element saying how many were left out between
them; an object keeps its keys and reduces its largest values (dropping its last keys
only when that is not enough, with a ``"…"`` key saying how many); a string keeps its
head and tail around ``[… N characters left out …]``. Plain text keeps whole lines (or
words, for a long line). The result is valid JSON when the original was.

Messages with priority 2 are never reduced. A result that cannot get shorter (a short
text with a large given count) is left as it is. The size is measured with ``count``
(a tokenizer's text count) or, for a message with a given ``tokens`` count, that count
scaled by length (``given`` counts are trusted: the copy gets one scaled the same way).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, Final

from .. import _check
from ..errors import ConfigError
from .blocks import Block, ResultPart, TextBlock, ToolResultBlock
from .messages import Message

REDUCED_KEY: Final = "convomem_reduced"
"""Metadata key of a reduced copy: ``{"tokens": <the original's count>, "limit": <the
per-result limit in tokens>}``."""

RESULT_SHARE: Final = 0.5
"""The default per-result limit: half of what a view may send."""

_ROUNDS: Final = 6  # re-cuts when the first estimate of tokens per character was off
_MIN_ROOM: Final = 24  # characters: less than this is not worth a head and a tail
_ELLIPSIS: Final = "…"


def result_limit(value: object, budget: int, name: str = "result_limit") -> int | None:
    """The per-result limit in tokens of an option: a share of ``budget`` (a float in
    (0, 1]), a token count (an int of at least 1), or None (never reduce)."""
    if value is None:
        return None
    if isinstance(value, float):
        share = _check.number(name, value, minimum=0.0, maximum=1.0, low_open=True)
        return max(1, int(budget * share))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{name}={value!r}: must be a share of the budget (a float in (0, 1]), "
            "a number of tokens (an int), or None"
        )
    return _check.positive_int(name, value)


def reduce_results(
    message: Message, limit: int, count: Callable[[str], int], tokens: int | None = None
) -> Message:
    """``message`` with each tool result over ``limit`` tokens reduced (see the module
    docstring); ``message`` itself when there is nothing to reduce. ``tokens`` is the
    message's count when the caller has it (recorded in the copy's metadata)."""
    if message.priority == 2 or type(message.content) is str or not message.has_tool_result():
        return message
    measure = _measure(message, count)
    blocks: list[Block] = []
    saved = 0
    for b in message.blocks:
        if isinstance(b, ToolResultBlock):
            new, cut = _reduce_block(b, limit, measure, message.id)
            saved += cut
            b = new
        blocks.append(b)
    if not saved:
        return message
    given = message.tokens
    own = tokens if tokens is not None else given
    if own is None:
        own = count(message.countable_text())
    meta = {**message.metadata, REDUCED_KEY: {"tokens": own, "limit": limit}}
    # A given count is trusted: the copy gets one, scaled the same way as the cut.
    copy_tokens = None if given is None else max(0, given - saved)
    return message.replace(content=blocks, tokens=copy_tokens, metadata=meta)


def _measure(message: Message, count: Callable[[str], int]) -> Callable[[str], int]:
    """Tokens of a piece of ``message``'s text: counted, or its given count scaled."""
    given = message.tokens
    if given is None:
        return count
    size = max(1, len(message.countable_text()))

    def scaled(text: str) -> int:
        return math.ceil(given * len(text) / size)

    return scaled


def _reduce_block(
    block: ToolResultBlock, limit: int, measure: Callable[[str], int], mid: str
) -> tuple[ToolResultBlock, int]:
    """The block reduced to ``limit`` tokens, and the tokens that saves (0: unchanged)."""
    if isinstance(block.content, str):
        text, cut = _reduce_text(block.content, limit, measure, mid)
        if not cut:
            return block, 0
        return ToolResultBlock(block.tool_use_id, text, block.is_error), cut
    texts = [p.text for p in block.content if isinstance(p, TextBlock)]
    total = sum(len(t) for t in texts)
    if not total:
        return block, 0
    parts: list[ResultPart] = []
    saved = 0
    for p in block.content:
        if isinstance(p, TextBlock) and p.text:
            share = max(1, limit * len(p.text) // total)
            text, cut = _reduce_text(p.text, share, measure, mid)
            if cut:
                saved += cut
                p = TextBlock(text)
        parts.append(p)
    if not saved:
        return block, 0
    return ToolResultBlock(block.tool_use_id, tuple(parts), block.is_error), saved


def _reduce_text(text: str, limit: int, measure: Callable[[str], int], mid: str) -> tuple[str, int]:
    """``text`` cut to at most ``limit`` tokens (head and tail kept), and the tokens that
    saves; ``(text, 0)`` when it fits or cannot get shorter."""
    if len(text) < _MIN_ROOM:
        return text, 0
    full = measure(text)
    if full <= limit:
        return text, 0
    value, indent = _json_value(text)
    room = int(len(text) * limit / full)  # characters, at the text's tokens per character
    best: tuple[str, int] | None = None
    for _ in range(_ROUNDS):
        room = max(0, room)
        cut = _cut(text, value, indent, room, full, mid)
        got = measure(cut)
        if got <= limit:
            best = (cut, got)
            break
        room = int(room * limit / got * 0.95) - 1
        if room <= 0:
            cut = _cut(text, value, indent, 0, full, mid)
            got = measure(cut)
            best = (cut, got) if got <= limit else None
            break
    if best is None or best[1] >= full:
        return text, 0
    return best[0], full - best[1]


def _json_value(text: str) -> tuple[Any, int | None]:
    """``(value, indent)`` when ``text`` is a JSON list or object, else ``(None, None)``."""
    head = text.lstrip()[:1]
    if head not in ("[", "{"):
        return None, None
    try:
        value = json.loads(text)
    except ValueError:
        return None, None
    indent = 2 if "\n" in text.strip() else None
    return value, indent


def _cut(text: str, value: Any, indent: int | None, room: int, full: int, mid: str) -> str:
    """``text`` in about ``room`` characters (JSON when it is JSON)."""
    note = [f"; the full result is message {mid!r}"]
    if value is not None:
        fitted = _fit(value, max(room, 2), note)
        return json.dumps(fitted, ensure_ascii=False, indent=indent)
    return _cut_lines(text, room, full, note[0])


# -- plain text --------------------------------------------------------------------------


def _cut_lines(text: str, room: int, full: int, note: str) -> str:
    """Whole lines from the head and the tail (or words, for a long line) in ``room``."""
    lines = text.split("\n")
    if len(lines) >= 3:
        head_room = room * 3 // 5
        head: list[str] = []
        used = 0
        for line in lines:
            if used + len(line) + 1 > head_room:
                break
            head.append(line)
            used += len(line) + 1
        tail: list[str] = []
        for line in reversed(lines[len(head) :]):
            if used + len(line) + 1 > room:
                break
            tail.append(line)
            used += len(line) + 1
        tail.reverse()
        gone = len(lines) - len(head) - len(tail)
        if head or tail:
            left = full * (len(text) - used) // max(1, len(text))
            marker = (
                f"[{_ELLIPSIS} {gone:,} lines left out (about {left:,} tokens){note} {_ELLIPSIS}]"
            )
            return "\n".join([*head, marker, *tail])
    head_text, tail_text = _ends(text, room)
    gone = len(text) - len(head_text) - len(tail_text)
    left = full * gone // max(1, len(text))
    marker = f"[{_ELLIPSIS} {gone:,} characters left out (about {left:,} tokens){note} {_ELLIPSIS}]"
    return f"{head_text} {marker} {tail_text}".strip()


def _ends(text: str, room: int) -> tuple[str, str]:
    """About 3/5 of ``room`` from the start and 2/5 from the end, cut at spaces."""
    if room <= 0:
        return "", ""
    h = room * 3 // 5
    t = room - h
    head = text[:h]
    space = head.rfind(" ")
    if space > h // 2:
        head = head[:space]
    tail = text[len(text) - t :] if t else ""
    space = tail.find(" ")
    if 0 <= space < t // 2:
        tail = tail[space + 1 :]
    return head.rstrip(), tail.lstrip()


# -- JSON --------------------------------------------------------------------------------


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _fit(value: Any, room: int, note: list[str]) -> Any:
    """``value`` in about ``room`` characters of compact JSON, cut on element boundaries.

    ``note`` holds the text the first marker made ends with (then it is emptied)."""
    if _size(value) <= room:
        return value
    if isinstance(value, list):
        return _fit_list(value, room, note)
    if isinstance(value, dict):
        return _fit_dict(value, room, note)
    if isinstance(value, str):
        end = f" {_ELLIPSIS}]"
        start = f"[{_ELLIPSIS} {len(value):,} characters left out{note[0]}"
        head, tail = _ends(value, max(0, room - len(start) - len(end) - 4))
        gone = len(value) - len(head) - len(tail)
        return f"{head} [{_ELLIPSIS} {gone:,} characters left out{_take(note)}{end} {tail}"
    return value  # a number, a boolean, null: whole or not at all


def _take(note: list[str]) -> str:
    text = note[0]
    note[0] = ""
    return text


def _alternate(n: int) -> Iterator[int]:
    """0, n-1, 1, n-2, ...: the head and the tail, in turn."""
    lo, hi = 0, n - 1
    while lo <= hi:
        yield lo
        lo += 1
        if lo <= hi:
            yield hi
            hi -= 1


def _fit_list(items: list[Any], room: int, note: list[str]) -> list[Any]:
    n = len(items)
    mark = f"[{_ELLIPSIS} {n:,} of {n:,} items left out{note[0]} {_ELLIPSIS}]"
    used = 2 + _size(mark)
    keep: set[int] = set()
    for i in _alternate(n):
        extra = _size(items[i]) + 2
        if used + extra > room:
            break
        keep.add(i)
        used += extra
    if not keep and n:  # not even the first item fits whole: it is cut itself
        first = _fit(items[0], max(2, room - used - 2), note)
        gone = n - 1
        tail = (
            [f"[{_ELLIPSIS} {gone:,} more items left out{_take(note)} {_ELLIPSIS}]"] if gone else []
        )
        return [first, *tail]
    gone = n - len(keep)
    marker = f"[{_ELLIPSIS} {gone:,} of {n:,} items left out{_take(note)} {_ELLIPSIS}]"
    h = 0
    while h in keep:
        h += 1
    return [*items[:h], marker, *(items[i] for i in sorted(keep) if i > h)]


def _fit_dict(obj: dict[str, Any], room: int, note: list[str]) -> dict[str, Any]:
    out = dict(obj)
    sizes = {k: _size(v) for k, v in out.items()}
    total = _size(out)
    cuttable = sorted(
        (k for k, v in out.items() if isinstance(v, list | dict | str) and sizes[k] > _MIN_ROOM),
        key=sizes.__getitem__,
        reverse=True,
    )
    big = sum(sizes[k] for k in cuttable)
    share = room - (total - big)  # what the values that can be cut may take
    for _ in range(2):  # the values share the room by size; again if the markers overflow
        if total <= room or not big or share < _MIN_ROOM * len(cuttable):
            break
        for k in cuttable:
            target = max(_MIN_ROOM, sizes[k] * share // big)
            out[k] = _fit(obj[k], target, note)
        total = _size(out)
        share -= total - room
    if total <= room:
        return out
    kept: dict[str, Any] = {}  # still too big: the first keys that fit, and how many went
    used = 2 + 64
    for k in out:
        extra = len(json.dumps(k, ensure_ascii=False)) + 4 + _size(out[k])
        if used + extra > room:
            break
        kept[k] = out[k]
        used += extra
    gone = len(out) - len(kept)
    kept[_ELLIPSIS] = f"{gone:,} of {len(out):,} keys left out{_take(note)}"
    return kept
