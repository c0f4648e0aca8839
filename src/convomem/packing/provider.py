"""Provider dicts in, provider dicts out: the Packer's memory of the last list it converted.

An agent keeps its history as OpenAI or Anthropic dicts and appends one per turn. A
``DictInput`` remembers the dicts it converted as *private snapshots* and proves, with
one C-level comparison of the new list against them (``items[:k] == snapshots``), that
the prefix is unchanged; only the dicts after it are converted, and the converted
``Message`` list is extended in place, so the Packer's table can trust its prefix too.

Why snapshots, not the caller's objects: a list comparison short-cuts on identity, so
comparing against the caller's own dicts would miss a dict mutated in place (a tool's
arguments reused and edited, a redacted message), and a stale message would be sent
with a stale count. The snapshots are deep copies (strings are immutable and shared,
so they cost one dict or list per container), and numbers are wrapped so that ``1``,
``1.0`` and ``True`` (equal in Python, different in JSON and in token counts) never
compare equal. Objects that are not plain JSON compare through their ``model_dump()``
(SDK models) or never (anything else: such a dict is converted again every call).

The comparison reads every dict each call (C-level, but about 20x the cost of an
identity check). ``assume_unchanged=True`` trusts, as git's ``--assume-unchanged``
does, that dicts already passed are never edited in place: the prefix is then proved
by object identity only (a rebuilt dict, even an equal one, counts as a change), and an
in-place edit is not seen; what was converted is sent, counted as sent, so a count is
never stale even then.

Ids are those a cold conversion gives (content digest plus occurrence number): the
occurrence counter is kept across calls and cut back to the first changed dict.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import compress, count
from operator import is_, is_not, ne
from typing import Any, Final, Literal, NamedTuple, TypeAlias

from ..errors import InvalidMessage
from ..model import DERIVED_ID_PREFIX, Message
from .result import PackResult

Kind: TypeAlias = Literal["openai", "anthropic"]


class PackedOpenAI(NamedTuple):
    """``Packer.pack_openai(..., result=True)``: the dicts to send and the decision.

    Unpacks as ``messages, result = ...``; ``fits`` is ``result.fits``.
    """

    messages: list[dict[str, Any]]
    result: PackResult

    @property
    def fits(self) -> bool:
        return self.result.fits


class PackedAnthropic(NamedTuple):
    """``Packer.pack_anthropic(..., result=True)``: the request to send and the decision.

    Unpacks as ``system, messages, result = ...``; ``fits`` is ``result.fits``.
    """

    system: Any
    messages: list[dict[str, Any]]
    result: PackResult

    @property
    def fits(self) -> bool:
        return self.result.fits


# ----------------------------------------------------------------------------- snapshots


class _Num:
    """A number in a snapshot: equal only to a number of the same type and value (and,
    for floats, the same sign of zero; NaN equals NaN)."""

    __slots__ = ("cls", "nan", "v", "zero_sign")

    def __init__(self, v: Any) -> None:
        self.v = v
        self.cls = v.__class__
        is_float = isinstance(v, float)
        self.nan = is_float and v != v
        self.zero_sign = math.copysign(1.0, v) if is_float and v == 0 else None

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.cls:
            return False
        if other == self.v:
            sign = self.zero_sign
            return sign is None or math.copysign(1.0, other) == sign  # type: ignore[arg-type]
        return self.nan and other != other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class _Dumped:
    """An SDK object in a snapshot: equal to an object whose ``model_dump()`` is equal."""

    __slots__ = ("snap",)

    def __init__(self, v: Any) -> None:
        self.snap = snapshot(v.model_dump(exclude_none=True))

    def __eq__(self, other: object) -> bool:
        dump = getattr(other, "model_dump", None)
        return callable(dump) and bool(dump(exclude_none=True) == self.snap)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class _Never:
    """Something a snapshot cannot vouch for: never equal (the dict is converted again)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


_NEVER: Final = _Never()


def snapshot(v: Any) -> Any:
    """A private copy of ``v`` that compares equal only to a JSON-identical value."""
    c = v.__class__
    if c is str or v is None:
        return v
    if c is dict:
        out = {}
        for k, x in v.items():
            if k.__class__ is not str:
                return _NEVER
            out[k] = snapshot(x)
        return out
    if c is list:
        return [snapshot(x) for x in v]
    if c is int or c is float or c is bool:
        return _Num(v)
    if c is tuple:
        return tuple(snapshot(x) for x in v)
    if callable(getattr(v, "model_dump", None)):
        return _Dumped(v)
    return _NEVER


# ----------------------------------------------------------------------------- converting

Convert: TypeAlias = Callable[..., list[Message]]
_INDEX = re.compile(r"^messages\[(\d+)\]")


def _shifted(exc: InvalidMessage, by: int) -> InvalidMessage:
    """``exc`` with its ``messages[i]`` position moved by ``by`` (it saw a tail)."""
    field = _INDEX.sub(lambda m: f"messages[{int(m[1]) + by}]", exc.field, count=1)
    return InvalidMessage(field, exc.value, exc.problem)


def as_items(messages: object) -> list[Any]:
    """The caller's list of dicts, as a list (a string or a single dict is an error)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidMessage("messages", messages, "must be a list of message dicts")
    return list(messages)


class DictInput:
    """One format's memory: snapshots of the dicts converted last, and their messages.

    ``convert(items, system)`` returns ``(messages, unchanged)``: the converted list (a
    new list each call) and how many of its leading messages are the very objects the
    previous call returned.
    """

    def __init__(self, kind: Kind, assume_unchanged: bool = False) -> None:
        self.kind = kind
        self.assume_unchanged = assume_unchanged
        self.tag = "oa" if kind == "openai" else "an"
        self.prefix = f"{DERIVED_ID_PREFIX}{self.tag}_"
        self.snaps: list[Any] = []  # private snapshots of the dicts (or the dicts themselves)
        self.body: list[Message] = []  # their messages
        self.keys: list[str | None] = []  # the occurrence key of each derived id
        self.keys_known = True  # every derived id's key could be told
        self.seen: dict[str, int] = {}  # stable_id's occurrence counter after ``snaps``
        self.seen_ok = True
        self.system_snap: Any = _NEVER
        self.head: list[Message] = []  # the system message (Anthropic ``system``)
        self.messages: list[Message] = []  # head + body
        self.live_version = -1  # the Packer's table version this input last produced

    def _key(self, mid: str, seen: dict[str, int], before: int) -> str | None:
        """The occurrence key ``stable_id`` counted ``mid`` under, or None.

        A first occurrence inserted a key (the newest); a repeat is ``<first id>_<n>``.
        """
        if len(seen) > before:
            return next(reversed(seen))
        first = mid.rpartition("_")[0]
        key = first[len(self.prefix) :] if first.startswith(self.prefix) else ""
        return key if key in seen else None

    def _seen_at(self, j: int, items: list[Any], stable_id: Callable[..., str]) -> None:
        """Make ``seen`` the occurrence counter after the first ``j`` dicts."""
        if j == len(self.keys) and self.seen_ok:
            return
        if self.keys_known:
            self.seen = dict(Counter(k for k in self.keys[:j] if k is not None))
        else:  # ids in a form we cannot read back: count the prefix's ids again
            seen: dict[str, int] = {}
            keys: list[str | None] = []
            for d in items[:j]:
                key = None
                if d.get("id") is None:
                    before = len(seen)
                    key = self._key(stable_id(d, seen, self.tag), seen, before)
                keys.append(key)
            self.seen = seen
            self.keys[:j] = keys
            given = [d.get("id") is not None for d in items[:j]]
            self.keys_known = all(key is not None or g for key, g in zip(keys, given, strict=True))
        self.seen_ok = True

    def convert(self, items: list[Any], system: Any = None) -> tuple[list[Message], int]:
        from_fmt, stable_id = self._converters()
        k = len(self.snaps)
        if self.assume_unchanged:  # the very same objects (C-level identity checks)
            if len(items) >= k and all(map(is_, items, self.snaps)):
                j = k
            else:
                j = next(compress(count(), map(is_not, items, self.snaps)), min(k, len(items)))
        elif len(items) >= k and items[:k] == self.snaps:
            j = k
        else:  # the first dict that differs (C-level), or the end of the shorter list
            j = next(compress(count(), map(ne, items, self.snaps)), min(k, len(items)))
        new = items[j:]
        if not all(isinstance(d, Mapping) for d in new):
            return self._cold(items, system, from_fmt)
        head_same = self.kind == "openai" or system == self.system_snap
        head = self.head if head_same else from_fmt([], system=system) if system is not None else []
        self._seen_at(j, items, stable_id)
        seen = self.seen
        keys: list[str | None] = []
        prepared: list[Mapping[str, Any]] = []
        self.seen_ok = False  # until this call succeeds
        for d in new:
            if d.get("id") is None:
                before = len(seen)
                mid = stable_id(d, seen, self.tag)
                keys.append(self._key(mid, seen, before))
                prepared.append({**d, "id": mid})  # the id a cold conversion gives
            else:
                keys.append(None)
                prepared.append(d)
        try:
            converted = from_fmt(prepared)
        except InvalidMessage as exc:
            raise _shifted(exc, j) from None
        self.seen_ok = True
        if any(key is None and d.get("id") is None for key, d in zip(keys, new, strict=True)):
            self.keys_known = False
        del self.snaps[j:], self.body[j:], self.keys[j:]
        self.snaps += new if self.assume_unchanged else [snapshot(d) for d in new]
        self.body += converted
        self.keys += keys
        # A new list each call (one C-level copy): a PackResult keeps the list it describes.
        if head_same and j == k:
            unchanged = len(self.messages)
            self.messages = [*self.messages, *converted]
        else:
            unchanged = len(head) + j if head_same else 0
            self.messages = head + self.body
        if not head_same:
            self.system_snap = snapshot(system)
            self.head = head
        return self.messages, unchanged

    def _converters(self) -> tuple[Convert, Callable[..., str]]:
        from ..formats._common import stable_id

        if self.kind == "openai":
            from ..formats.openai import from_openai

            return from_openai, stable_id
        from ..formats.anthropic import from_anthropic

        return from_anthropic, stable_id

    def _cold(self, items: list[Any], system: Any, from_fmt: Convert) -> tuple[list[Message], int]:
        """Convert everything afresh (some items are not dicts); nothing is remembered."""
        anthropic = self.kind == "anthropic"
        converted = from_fmt(items, system=system) if anthropic else from_fmt(items)
        self.__init__(self.kind, self.assume_unchanged)  # type: ignore[misc]
        return converted, 0
