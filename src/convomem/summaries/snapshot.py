"""What a RunningSummary holds, as a value persistence reads and writes.

``SummarySnapshot`` is the content of a summary (its segments, the facts ledger, the
covered ids): ``RunningSummary.snapshot()`` gives it and ``restore()`` takes it, and
``state`` turns it into JSON data and back, so persistence never touches the summary's
own attributes. ``Coverage`` holds the covered ids, in fold order, as they are saved:
runs of consecutive numbered ids (``m1``, ``m2``, ... as ``[prefix, first, last]``); a
loaded encoding is decoded on first use, and a save extends the last encoding with the
ids folded since, so it costs O(new ids).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, KeysView
from dataclasses import dataclass
from typing import Any

from .ledger import FactLedger
from .summary import Summary

__all__ = ["Coverage", "SummarySnapshot", "decode_ids", "encode_ids"]

_NUMBERED = re.compile(r"(.*?)(0|[1-9][0-9]{0,14})")
_HEX = re.compile(r"(.*?)(0|[1-9a-f][0-9a-f]{0,14})")


@dataclass(frozen=True, slots=True)
class SummarySnapshot:
    """The content of a ``RunningSummary`` at one moment.

    ``segments``: each segment with its number, oldest first; ``seq``: the last number
    given. A summary that ``restore`` s the snapshot takes its ``ledger`` and
    ``coverage`` over (``RunningSummary.snapshot()`` gives copies of its own).
    """

    segments: tuple[tuple[Summary, int], ...]
    seq: int
    ledger: FactLedger
    coverage: Coverage


class Coverage:
    """The ids of every message folded in, in fold order (see the module docstring)."""

    __slots__ = ("_ids", "_raw", "_runs")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._ids: dict[str, None] = dict.fromkeys(ids)
        self._raw: list[Any] | None = None  # a loaded encoding, not decoded yet
        # (the ids dict, how many were encoded, that encoding, its last id parsed)
        self._runs: tuple[dict[str, None], int, list[Any], _Parsed | None] | None = None

    @classmethod
    def loaded(cls, raw: list[Any], *, lazy: bool = False) -> Coverage:
        """The coverage ``encode_ids`` output stands for (checked for form by the
        caller); ``lazy``: decoded on first use."""
        out = cls()
        runs = [x if isinstance(x, str) else list(x) for x in raw]
        if lazy:
            out._raw = runs
        else:
            out._decode(runs)
        return out

    def copy(self) -> Coverage:
        """An independent copy (O(ids))."""
        out = Coverage()
        if self._raw is not None:
            out._raw = [x if isinstance(x, str) else list(x) for x in self._raw]
        else:
            out._ids = self._ids.copy()
        return out

    def _decode(self, runs: list[Any]) -> None:
        ids = self._ids = dict.fromkeys(decode_ids(runs))
        last = _parse(next(reversed(ids))) if ids else None
        self._runs = (ids, len(ids), runs, last)

    @property
    def ids(self) -> dict[str, None]:
        """The ids (a dict as an ordered set), decoded now if they were loaded lazily."""
        if self._raw is not None:
            raw, self._raw = self._raw, None
            self._decode(raw)
        return self._ids

    def keys(self) -> KeysView[str]:
        """The ids, in fold order (a live read-only view)."""
        return self.ids.keys()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.ids

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, message_ids: Iterable[str]) -> None:
        """Cover these ids too (appended in fold order)."""
        ids = self.ids
        for mid in message_ids:
            ids[mid] = None

    def encode(self) -> list[str | list[Any]]:
        """``encode_ids`` of the ids, a fresh list; O(ids added since the last call)."""
        if self._raw is not None:  # not decoded since the load: the loaded encoding
            return [x if isinstance(x, str) else list(x) for x in self._raw]
        ids = self._ids
        cache = self._runs
        out: list[str | list[Any]]
        if cache is not None and cache[0] is ids and cache[1] <= len(ids):
            _, n, out, last = cache
            last = _extend(out, last, itertools.islice(ids, n, None))
        else:
            out = []
            last = _extend(out, None, ids)
        self._runs = (ids, len(ids), out, last)
        res = out.copy()
        if res and type(res[-1]) is list:  # the tail run may grow later: hand out a copy
            res[-1] = list(res[-1])
        return res


# -- the encoding --------------------------------------------------------------------------


_Parsed = tuple[tuple[str, int] | None, tuple[str, int] | None]


def _parse(id_: str) -> _Parsed:
    """The decimal and the hexadecimal numbered forms of an id (None: not numbered)."""
    d = _NUMBERED.fullmatch(id_)
    h = _HEX.fullmatch(id_)
    return (
        (d.group(1), int(d.group(2))) if d else None,
        (h.group(1), int(h.group(2), 16)) if h else None,
    )


def _extend(out: list[str | list[Any]], last: _Parsed | None, ids: Iterable[str]) -> _Parsed | None:
    """Append ``ids`` to the encoding ``out`` whose last id parsed as ``last``; return
    the parsed form of the new last id. A run's tail may be extended in place."""
    for id_ in ids:
        here = _parse(id_)
        dec, hexa = here
        tail = out[-1] if out else None
        if type(tail) is list:
            if len(tail) == 3 and dec is not None and dec == (tail[0], tail[2] + 1):
                tail[2] = dec[1]
            elif (
                (len(tail) == 4 or tail[2] < 10)  # single digits read the same in hex
                and hexa is not None
                and hexa == (tail[0], tail[2] + 1)
            ):
                tail[2] = hexa[1]
                if len(tail) == 3:
                    tail.append(16)
            else:
                out.append(id_)
        elif (
            last is not None
            and dec is not None
            and last[0] is not None
            and (dec == (last[0][0], last[0][1] + 1))
        ):
            out[-1] = [dec[0], last[0][1], dec[1]]
        elif (
            last is not None
            and hexa is not None
            and last[1] is not None
            and (hexa == (last[1][0], last[1][1] + 1))
        ):
            out[-1] = [hexa[0], last[1][1], hexa[1], 16]
        else:
            out.append(id_)
        last = here
    return last


def encode_ids(ids: Iterable[str]) -> list[str | list[Any]]:
    """Ids in order; runs of ``prefix<n>, prefix<n+1>, ...`` as ``[prefix, first, last]``
    (decimal ``n``) or ``[prefix, first, last, 16]`` (lowercase hexadecimal ``n``, as in
    generated ids ``msg_<hex>_<hex counter>``)."""
    out: list[str | list[Any]] = []
    _extend(out, None, ids)
    return out


def decode_ids(data: list[str | list[Any]]) -> list[str]:
    """The ids ``encode_ids`` encoded, in order (runs expanded at C speed: a resume
    decodes 100,000 covered ids)."""
    out: list[str] = []
    for item in data:
        if isinstance(item, str):
            out.append(item)
            continue
        prefix, first, last = item[0], item[1], item[2]
        numbers = range(first, last + 1)
        digits = (
            map(format, numbers, itertools.repeat("x")) if len(item) == 4 else map(str, numbers)
        )
        out.extend(map(prefix.__add__, digits))
    return out
