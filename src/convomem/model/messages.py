"""The data model: an immutable chat message made of content blocks."""

from __future__ import annotations

import itertools
import math
import operator
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias, get_args

from ..errors import InvalidMessage
from .blocks import (
    Block,
    ImageBlock,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    _block_from_dict,
    _block_key,
    _block_to_dict,
    _content_row,
)
from .values import EMPTY, FrozenDict, freeze, frozen_key, thaw, too_deep
from .values import require_str as _require_str

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: Final[frozenset[str]] = frozenset(get_args(Role))

# Generated ids: a random per-process prefix plus a counter is unique and much cheaper
# than a uuid per message.
_ID_PREFIX: Final = "msg_" + os.urandom(6).hex() + "_"
_id_counter = itertools.count(1)


def new_id() -> str:
    """A fresh message id, unique across processes."""
    return f"{_ID_PREFIX}{next(_id_counter):x}"


DERIVED_ID_PREFIX: Final = "~"
"""The reserved first character of ids a format converter derives from content.

``from_openai`` / ``from_anthropic`` / ``from_langchain`` give a message without an id
one derived from its content and occurrence (``~oa_<hash>``), so converting the same
list twice gives the same ids. Two equal messages converted one call at a time get the
same derived id, though; a session recognizes such ids with ``is_derived_id`` and gives
a repeat a fresh one instead of rejecting it. Ids of your own should not start with it.
"""


def is_derived_id(message_id: str) -> bool:
    """True if ``message_id`` was derived by a format converter (not given by a caller)."""
    return isinstance(message_id, str) and message_id.startswith(DERIVED_ID_PREFIX)


class Message:
    """One chat message: immutable, with a stable ``id``.

    ``Message("u1", "user", 30)`` is ``Message(id="u1", role="user", tokens=30)``; the id
    may be omitted when fields are given by keyword, and one is generated. ``tokens`` is
    a known token count that is trusted and never recomputed.

    Immutable in fact: ``metadata`` (like a tool call's ``input``) must be a JSON object;
    it is copied and frozen on construction (a ``FrozenDict``), so mutating the dict you
    passed in changes neither the message nor a count cached for it. ``to_dict`` gives
    plain dicts and lists back. Two messages are equal when every field is and their
    JSON values would be written the same (``1``, ``1.0`` and ``True`` differ).
    Every string must be valid Unicode (no lone surrogate). A bad field raises
    ``InvalidMessage`` naming it.
    """

    __slots__ = (
        "_counts",
        "_key",
        "_row",
        "content",
        "created_at",
        "id",
        "metadata",
        "name",
        "priority",
        "role",
        "tokens",
    )

    id: str
    role: Role
    tokens: int | None
    content: str | tuple[Block, ...]
    name: str | None
    metadata: Mapping[str, Any]
    created_at: float | None
    priority: int
    _key: tuple[Any, ...] | None
    _counts: dict[int, int] | None
    _row: tuple[Any, ...]  # every field, flat and typed: equality in one C-level compare

    def __init__(
        self,
        id: str | None = None,
        role: str | None = None,
        tokens: int | None = None,
        *,
        content: str | Iterable[Block] = "",
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: float | None = None,
        priority: int = 0,
    ) -> None:
        # Exact-type fast paths first: the ABC and union isinstance checks cost more
        # than the rest of the constructor.
        if id is None:
            id = new_id()
        elif id.__class__ is not str or not id or not id.isascii():
            if not isinstance(id, str) or not id:
                raise InvalidMessage("id", id, "must be a non-empty string")
            id = _require_str("id", str.__str__(id))
        if role.__class__ is not str or role not in ROLES:
            if not isinstance(role, str) or str.__str__(role) not in ROLES:
                raise InvalidMessage("role", role, f"must be one of {sorted(ROLES)}")
            role = str.__str__(role)
        if (
            tokens is not None
            and not (tokens.__class__ is int and tokens >= 0)
            and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0)
        ):
            raise InvalidMessage("tokens", tokens, "must be a non-negative integer or None")
        body, tail = _content_row(content)
        if name is not None:
            _require_str("name", name)
        if metadata is None:
            metadata, meta_key = EMPTY, _EMPTY_KEY
        elif metadata.__class__ is FrozenDict:
            meta_key = frozen_key(metadata)
        elif metadata.__class__ is dict or isinstance(metadata, Mapping):
            metadata, meta_key = freeze(metadata, "metadata")
        else:
            raise InvalidMessage("metadata", metadata, "must be a mapping")
        if created_at is not None:
            if not (created_at.__class__ is float and math.isfinite(created_at)) and (
                isinstance(created_at, bool)
                or not isinstance(created_at, int | float)
                or not math.isfinite(created_at)
            ):
                raise InvalidMessage("created_at", created_at, "must be epoch seconds (a number)")
            created_at = float(created_at)
        if not (priority.__class__ is int and 0 <= priority <= 2) and (
            isinstance(priority, bool) or not isinstance(priority, int) or priority not in (0, 1, 2)
        ):
            raise InvalidMessage("priority", priority, "must be 0, 1 or 2")
        # The slots' own setters: cheaper than object.__setattr__ (no name lookup).
        _set_id(self, id)
        _set_role(self, role)
        _set_tokens(self, tokens)
        _set_content(self, body)
        _set_name(self, name)
        _set_metadata(self, metadata)
        _set_created_at(self, created_at)
        _set_priority(self, priority)
        _set_row(self, (id, role, tokens, name, created_at, priority, meta_key, *tail))
        _set_key(self, None)
        _set_counts(self, None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Message is immutable; use message.replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Message is immutable")

    def replace(self, **changes: Any) -> Message:
        """A copy with some fields changed (the id is kept unless given)."""
        fields: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "tokens": self.tokens,
            "content": self.content,
            "name": self.name,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "priority": self.priority,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise InvalidMessage(sorted(unknown)[0], changes[sorted(unknown)[0]], "unknown field")
        if "content" in changes and "tokens" not in changes:
            fields["tokens"] = None  # a known count belongs to the old content
        fields.update(changes)
        return Message(fields.pop("id"), fields.pop("role"), fields.pop("tokens"), **fields)

    # -- content helpers -------------------------------------------------------------

    @property
    def blocks(self) -> tuple[Block, ...]:
        """The content as blocks (a string becomes one TextBlock)."""
        if isinstance(self.content, str):
            return (TextBlock(self.content),) if self.content else ()
        return self.content

    def text(self) -> str:
        """The readable text: text blocks, tool-result text and the text opaque blocks
        carry (a refusal, thinking), joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for b in self.content:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, ToolResultBlock):
                parts.append(b.text())
            elif isinstance(b, OpaqueBlock) and (text := b.text()):
                parts.append(text)
        return "\n".join(parts)

    def calls_text(self) -> str:
        """The message's tool calls as text, ``calls name(arguments)`` each, joined by
        ``"; "`` (``""`` without calls): what a call that has no text says, for recall to
        index and the timeline to preview."""
        if isinstance(self.content, str):
            return ""
        calls = [b for b in self.content if isinstance(b, ToolUseBlock)]
        return "; ".join(f"calls {b.name}({b.arguments()})" for b in calls)

    def has_tool_use(self) -> bool:
        """True if the message calls at least one tool."""
        return not isinstance(self.content, str) and any(
            isinstance(b, ToolUseBlock) for b in self.content
        )

    def has_tool_result(self) -> bool:
        """True if the message carries at least one tool result."""
        return not isinstance(self.content, str) and any(
            isinstance(b, ToolResultBlock) for b in self.content
        )

    def tool_use_ids(self) -> list[str]:
        """Ids of the tool calls this message makes, in order."""
        if isinstance(self.content, str):
            return []
        return [b.id for b in self.content if isinstance(b, ToolUseBlock)]

    def tool_result_ids(self) -> list[str]:
        """Ids of the tool calls this message answers, in order."""
        if isinstance(self.content, str):
            return []
        return [b.tool_use_id for b in self.content if isinstance(b, ToolResultBlock)]

    def countable_text(self) -> str:
        """Everything a tokenizer should count: name, text, tool names, arguments, results
        and the countable text of opaque blocks (``OpaqueBlock.countable_text``)."""
        if isinstance(self.content, str):
            return self.content if self.name is None else f"{self.name}\n{self.content}"
        parts = [] if self.name is None else [self.name]
        for b in self.content:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, ToolUseBlock):
                parts.append(b.name)
                parts.append(b.arguments())
            elif isinstance(b, ToolResultBlock):
                parts.append(b.countable_text())
            elif isinstance(b, OpaqueBlock) and (text := b.countable_text()):
                parts.append(text)
        return "\n".join(parts)

    def image_count(self) -> int:
        """How many images the message carries (tool results included)."""
        if isinstance(self.content, str):
            return 0
        n = 0
        for b in self.content:
            if isinstance(b, ImageBlock):
                n += 1
            elif isinstance(b, ToolResultBlock) and not isinstance(b.content, str):
                n += sum(1 for p in b.content if isinstance(p, ImageBlock))
        return n

    def flat_cost_blocks(self) -> int:
        """How many blocks have no text to count and cost a flat estimate (tool results
        included): opaque audio, files, redacted thinking (``OpaqueBlock.flat_cost``).

        A tokenizer charges each like an image, on top of ``countable_text``.
        """
        if isinstance(self.content, str):
            return 0
        n = 0
        for b in self.content:
            if isinstance(b, OpaqueBlock):
                n += b.flat_cost
            elif isinstance(b, ToolResultBlock) and not isinstance(b.content, str):
                n += sum(1 for p in b.content if isinstance(p, OpaqueBlock) and p.flat_cost)
        return n

    @property
    def content_key(self) -> tuple[Any, ...]:
        """A hashable key equal for two messages exactly when they count the same."""
        key = self._key
        if key is None:
            body = (
                self.content
                if isinstance(self.content, str)
                else tuple(_block_key(b) for b in self.content)
            )
            key = (self.role, self.name, body)
            _set_key(self, key)
        return key

    # -- dunder ----------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Message and not isinstance(other, Message):
            return NotImplemented
        # Every field, metadata included, in the flat typed row: one C-level compare.
        return self._row == other._row

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        extra = ""
        if self.content:
            text = self.text()
            preview = text if len(text) <= 40 else text[:37] + "..."
            extra += f", content={preview!r}"
            if self.has_tool_use():
                extra += f", tool_use_ids={self.tool_use_ids()!r}"
            if self.has_tool_result():
                extra += f", tool_result_ids={self.tool_result_ids()!r}"
        if self.priority:
            extra += f", priority={self.priority}"
        return f"Message(id={self.id!r}, role={self.role!r}, tokens={self.tokens!r}{extra})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.to_dict(),))

    # -- native JSON form ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (convomem's own format, lossless)."""
        out: dict[str, Any] = {"id": self.id, "role": self.role}
        if self.tokens is not None:
            out["tokens"] = self.tokens
        if isinstance(self.content, str):
            out["content"] = self.content
        else:
            out["content"] = [_block_to_dict(b) for b in self.content]
        if self.name is not None:
            out["name"] = self.name
        if self.metadata:
            out["metadata"] = thaw(self.metadata)
        if self.created_at is not None:
            out["created_at"] = self.created_at
        if self.priority:
            out["priority"] = self.priority
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """The inverse of ``to_dict``; unknown keys are an error naming the key."""
        try:
            return cls._from_dict(data)
        except RecursionError:
            raise too_deep("message") from None

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> Message:
        if not isinstance(data, Mapping):
            raise InvalidMessage("message", data, "must be a mapping")
        known = {"id", "role", "tokens", "content", "name", "metadata", "created_at", "priority"}
        for key in data:
            if not isinstance(key, str) or key not in known:
                raise InvalidMessage(str(key), data[key], "unknown message field")
        content = data.get("content", "")
        if isinstance(content, list):
            content = [_block_from_dict(b, f"content[{i}]") for i, b in enumerate(content)]
        return cls(
            data.get("id"),
            data.get("role"),
            data.get("tokens"),
            content=content,
            name=data.get("name"),
            metadata=data.get("metadata"),
            created_at=data.get("created_at"),
            priority=data.get("priority", 0),
        )


_EMPTY_KEY: Final = frozen_key(EMPTY)


def _setter(name: str) -> Callable[[Message, Any], None]:
    """The setter of one of Message's slots (it bypasses the immutability guard)."""
    setter: Callable[[Message, Any], None] = Message.__dict__[name].__set__
    return setter


_set_id = _setter("id")
_set_role = _setter("role")
_set_tokens = _setter("tokens")
_set_content = _setter("content")
_set_name = _setter("name")
_set_metadata = _setter("metadata")
_set_created_at = _setter("created_at")
_set_priority = _setter("priority")
_set_row = _setter("_row")
_set_key = _setter("_key")
_set_counts = _setter("_counts")

counts_memo: Callable[[Message], dict[int, int] | None] = operator.attrgetter("_counts")
"""A message's token counts by tokenizer (None before its first count), outside its
value: the memo ``tokens.BaseTokenizer`` keeps on it (set by ``set_counts_memo``)."""
set_counts_memo: Callable[[Message, dict[int, int]], None] = _set_counts


def _rebuild(data: dict[str, Any]) -> Message:
    return Message.from_dict(data)
