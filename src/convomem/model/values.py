"""JSON values made immutable: tool inputs, opaque blocks and metadata.

``freeze`` validates a JSON value a caller passed in and returns a private, immutable
copy: objects become ``FrozenDict`` and arrays ``FrozenList``. They subclass ``dict`` and
``list``, so reading them, ``json.dumps`` and ``==`` against plain dicts and lists work as
usual, while every mutating method raises ``TypeError``; mutating what the caller passed
in afterwards changes nothing. ``thaw`` gives back plain, mutable dicts and lists.

``freeze`` also returns a typed *key* that tells apart what Python's ``==`` does not:
``1``, ``1.0`` and ``True``; ``0.0`` and ``-0.0``; key order. Two values have equal keys
exactly when ``json.dumps`` writes the same text for them, so a token count cached under
one key is right for every value with that key.

A JSON value is None, a bool, an int, a finite float, a str that is valid Unicode (no
lone surrogate), a list or tuple of JSON values, or a mapping with str keys, nested at
most ``MAX_DEPTH`` containers deep. Subclasses (a ``StrEnum``, an ``IntEnum``) are stored
as their plain base value. A tuple is an array: it comes back as a list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn

from ..errors import InvalidMessage

MAX_DEPTH: Final = 100
"""How many containers deep a tool input or metadata value may nest.

Deeper values are rejected at construction with ``InvalidMessage`` rather than failing
later (a ``RecursionError`` while counting, serializing or storing).
"""


class _Tag:
    """A key marker no JSON value's key can equal (compared by identity)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_TRUE: Final = _Tag("true")
_FALSE: Final = _Tag("false")
_FLOAT: Final = _Tag("float")
_OBJECT: Final = _Tag("object")
# Keys: str, int and None are themselves; a bool is a tag; a float is (_FLOAT, repr);
# an object is (_OBJECT, ((k1, key1), (k2, key2), ...)); an array is the tuple of its
# items' keys (never starting with _FLOAT or _OBJECT themselves, so never equal to those).


def _immutable(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable (a message's values cannot change)")


class FrozenDict(dict[str, Any]):
    """An immutable JSON object; made by ``freeze``, never directly.

    Hashable, with a hash consistent with ``==`` (which, as for dicts, ignores key order
    and equates ``1`` with ``True``; the typed key of ``freeze`` does not).
    """

    __slots__ = ("_height", "_key")

    _key: tuple[Any, ...]
    _height: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenDict is made by convomem.model.values.freeze")

    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset((k, hash(v)) for k, v in self.items()))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_refreeze, (thaw(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """An immutable JSON array; made by ``freeze``, never directly; hashable."""

    __slots__ = ("_height", "_key")

    _key: tuple[Any, ...]
    _height: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenList is made by convomem.model.values.freeze")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_refreeze, (thaw(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"


def require_str(field_name: str, value: Any, *, allow_empty: bool = True) -> str:
    """``value`` if it is a valid Unicode string (non-empty unless allowed); else
    ``InvalidMessage`` naming ``field_name``."""
    if not isinstance(value, str):
        raise InvalidMessage(field_name, value, f"must be a string, not {type(value).__name__}")
    if not value:
        if not allow_empty:
            raise InvalidMessage(field_name, value, "must not be empty")
    elif not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidMessage(
                field_name, value, f"is not valid Unicode (a lone surrogate at index {exc.start})"
            ) from None
    return value


def _refreeze(value: Any) -> Any:
    return freeze(value, "value")[0]


class _Bad(Exception):
    """A non-JSON value deep inside; ``path`` grows as the recursion unwinds."""

    def __init__(self, value: Any, problem: str) -> None:
        super().__init__(problem)
        self.value = value
        self.problem = problem
        self.path: list[str | int] = []


def _check_unicode(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Bad(text, f"is not valid Unicode (a lone surrogate at index {exc.start})") from None


def _walk(value: Any, depth: int) -> tuple[Any, Any, int]:
    """``(frozen, key, height)`` of ``value``, which sits inside ``depth`` containers."""
    cls = value.__class__
    if cls is str:
        if not value.isascii():
            _check_unicode(value)
        return value, value, 0
    if cls is int or value is None:
        return value, value, 0
    if cls is bool:
        return value, _TRUE if value else _FALSE, 0
    if cls is float:
        if value - value != 0.0:  # nan and +-inf
            raise _Bad(value, "must be a finite number (JSON has no NaN or Infinity)")
        return value, (_FLOAT, float.__repr__(value)), 0
    if cls is FrozenDict or cls is FrozenList:  # already checked: reuse it as it is
        if depth + value._height > MAX_DEPTH:
            raise _Bad(value, f"nests deeper than {MAX_DEPTH} levels")
        return value, value._key, value._height
    if cls is dict:
        return _walk_object(value, depth)
    if cls is list or cls is tuple:
        return _walk_array(value, depth)
    if isinstance(value, Mapping):
        return _walk_object(value, depth)
    # Subclasses of the plain types, stored as their base value.
    if isinstance(value, bool):
        return _walk(bool(value), depth)
    if isinstance(value, str):
        return _walk(str.__str__(value), depth)
    if isinstance(value, int):
        return _walk(int.__index__(value), depth)
    if isinstance(value, float):
        return _walk(float.__float__(value), depth)
    if isinstance(value, list | tuple):
        return _walk_array(value, depth)
    raise _Bad(value, f"is not a JSON value ({type(value).__name__})")


def _walk_object(value: Mapping[Any, Any], depth: int) -> tuple[Any, Any, int]:
    if depth >= MAX_DEPTH:
        raise _Bad("{...}", f"nests deeper than {MAX_DEPTH} levels")
    if value.__class__ is not dict:
        value = dict(value.items())  # one snapshot of a custom mapping
    for k, v in value.items():
        if k.__class__ is not str or not k.isascii():
            break
        cls = v.__class__
        if not ((cls is str and v.isascii()) or cls is int or v is None):
            break
    else:  # flat, plain ASCII keys and leaves (most tool inputs): copy in C
        out = dict.__new__(FrozenDict)
        dict.update(out, value)
        out._key = (_OBJECT, tuple(value.items()))
        out._height = 1
        return out, out._key, 1
    items: dict[str, Any] = {}
    pairs: list[tuple[str, Any]] = []
    height = 0
    for k, v in value.items():
        if k.__class__ is not str or not k.isascii():
            if not isinstance(k, str):
                raise _Bad(k, f"object keys must be strings, not {type(k).__name__}")
            k = str.__str__(k)
            _check_unicode(k)
        cls = v.__class__
        if (cls is str and v.isascii()) or cls is int or v is None:  # the common leaves
            items[k] = v
            pairs.append((k, v))
            continue
        try:
            frozen, sub, h = _walk(v, depth + 1)
        except _Bad as bad:
            bad.path.append(k)
            raise
        items[k] = frozen
        pairs.append((k, sub))
        if h > height:
            height = h
    out = dict.__new__(FrozenDict)
    dict.update(out, items)
    out._key = (_OBJECT, tuple(pairs))
    out._height = height + 1
    return out, out._key, out._height


def _walk_array(value: list[Any] | tuple[Any, ...], depth: int) -> tuple[Any, Any, int]:
    if depth >= MAX_DEPTH:
        raise _Bad("[...]", f"nests deeper than {MAX_DEPTH} levels")
    for v in value:
        cls = v.__class__
        if not ((cls is str and v.isascii()) or cls is int or v is None):
            break
    else:  # plain ASCII leaves only: copy in C
        out = list.__new__(FrozenList)
        list.extend(out, value)
        out._key = tuple(value)
        out._height = 1
        return out, out._key, 1
    items: list[Any] = []
    key: list[Any] = []
    height = 0
    for i, v in enumerate(value):
        cls = v.__class__
        if (cls is str and v.isascii()) or cls is int or v is None:  # the common leaves
            items.append(v)
            key.append(v)
            continue
        try:
            frozen, sub, h = _walk(v, depth + 1)
        except _Bad as bad:
            bad.path.append(i)
            raise
        items.append(frozen)
        key.append(sub)
        if h > height:
            height = h
    out = list.__new__(FrozenList)
    list.extend(out, items)
    out._key = tuple(key)
    out._height = height + 1
    return out, out._key, out._height


def too_deep(field: str) -> InvalidMessage:
    """The error for input nested so deep that even showing it fails (``RecursionError``).

    Entry points that take arbitrary input (``Message``, the format converters) turn a
    ``RecursionError`` into this, so nothing but a ``ConvomemError`` escapes them.
    """
    return InvalidMessage(field, "<nested too deep to show>", "nests too deep")


def freeze(value: Any, field: str) -> tuple[Any, Any]:
    """``(frozen copy, typed key)`` of the JSON value ``value``.

    A value that is not JSON raises ``InvalidMessage`` naming ``field`` and the path to
    the offending part (``ToolUseBlock.input['ids'][2]``).
    """
    try:
        if value.__class__ is dict:  # the usual case, one call shorter
            frozen, key, _ = _walk_object(value, 0)
        else:  # one frame per level: MAX_DEPTH bounds the stack
            frozen, key, _ = _walk(value, 0)
    except _Bad as bad:
        path = "".join(f"[{p!r}]" for p in reversed(bad.path))
        raise InvalidMessage(field + path, bad.value, bad.problem) from None
    return frozen, key


def frozen_key(value: FrozenDict | FrozenList) -> tuple[Any, ...]:
    """The typed key of a value ``freeze`` made."""
    return value._key


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a frozen JSON value (dicts and lists)."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


EMPTY: Final[FrozenDict] = freeze({}, "value")[0]
"""The frozen empty object, shared by every message without metadata."""
