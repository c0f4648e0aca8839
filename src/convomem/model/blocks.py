"""Content blocks: the parts a message is made of (text, images, tool calls, results).

Blocks are immutable in fact: a tool call's ``input`` and an opaque block's ``data`` are
validated JSON values, copied and frozen on construction (``convomem.model.values``), and
blocks compare equal exactly when they would be sent (and counted) the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from ..errors import InvalidMessage
from .values import EMPTY, freeze, thaw


def _require_str(field_name: str, value: Any, *, allow_empty: bool = True) -> str:
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


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain text."""

    text: str

    def __post_init__(self) -> None:
        _require_str("TextBlock.text", self.text)


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image, by URL, data URL or provider file id."""

    source: str
    media_type: str | None = None

    def __post_init__(self) -> None:
        _require_str("ImageBlock.source", self.source, allow_empty=False)
        if self.media_type is not None:
            _require_str("ImageBlock.media_type", self.media_type)


@dataclass(frozen=True, slots=True, eq=False)
class ToolUseBlock:
    """A tool call made by the assistant; ``input`` is the parsed arguments.

    ``input`` is a JSON object, frozen on construction (a ``FrozenDict``: read it like a
    dict; ``values.thaw`` gives a mutable copy). It may also be a string when a model
    produced arguments that are not a JSON object: they are kept verbatim, not lost.
    Two calls are equal when their ids, names and argument texts are.
    """

    id: str
    name: str
    input: Mapping[str, Any] | str = EMPTY
    _key: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _require_str("ToolUseBlock.id", self.id, allow_empty=False)
        _require_str("ToolUseBlock.name", self.name, allow_empty=False)
        if isinstance(self.input, str):
            _require_str("ToolUseBlock.input", self.input)
            object.__setattr__(self, "_key", self.input)
            return
        if not isinstance(self.input, Mapping):
            raise InvalidMessage(
                "ToolUseBlock.input", self.input, "must be a mapping of arguments or a string"
            )
        frozen, key = freeze(self.input, "ToolUseBlock.input")
        object.__setattr__(self, "input", frozen)
        object.__setattr__(self, "_key", key)

    def arguments(self) -> str:
        """The arguments as the JSON text a provider sends."""
        if isinstance(self.input, str):
            return self.input
        return json.dumps(self.input, ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolUseBlock):
            return NotImplemented
        return (self.id, self.name, self._key) == (other.id, other.name, other._key)

    def __hash__(self) -> int:
        return hash((self.id, self.name, self._key))


OPAQUE_FLAT: Final = frozenset(
    {
        ("openai", "input_audio"),
        ("openai", "file"),
        ("openai", "image_url"),  # an image part with keys of its own (cache_control)
        ("openai", "audio"),  # an assistant message's audio reference
        ("anthropic", "redacted_thinking"),
        ("anthropic", "image"),  # an image whose source convomem cannot read
        ("anthropic", "document"),  # unless its source is text (see OpaqueBlock)
    }
)
"""``(provider, type)`` of opaque blocks with no text: each costs a flat estimate."""


@dataclass(frozen=True, slots=True, eq=False)
class OpaqueBlock:
    """A provider block convomem does not interpret, kept exactly as the provider sent it.

    ``data`` is the provider's dict (frozen), ``provider`` the format it came from
    (``"openai"``, ``"anthropic"``). It goes back unchanged to its own provider; the other
    provider gets an equivalent where one is faithful, else nothing (see each format).
    An OpenAI block without ``type`` holds a message-level field (``{"refusal": ...}``,
    ``{"audio": {"id": ...}}``) and is written back into the message itself.

    What a tokenizer counts (``countable_text``): the refusal text (OpenAI ``refusal``),
    the thinking text (Anthropic ``thinking``), a text ``document``'s title, context and
    text, a ``search_result``'s source, title and text. Blocks with no text (OpenAI
    ``input_audio``, ``file``, ``audio``; Anthropic ``redacted_thinking``, an unreadable
    ``image``, a binary ``document``) have ``flat_cost`` True: a tokenizer charges each a
    flat estimate, as it does an image. A type convomem does not know is counted by its
    JSON text, an over-estimate rather than a budget overflow.
    """

    provider: str
    data: Mapping[str, Any]
    _key: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _require_str("OpaqueBlock.provider", self.provider, allow_empty=False)
        if not isinstance(self.data, Mapping):
            raise InvalidMessage("OpaqueBlock.data", self.data, "must be a JSON object")
        frozen, key = freeze(self.data, "OpaqueBlock.data")
        object.__setattr__(self, "data", frozen)
        object.__setattr__(self, "_key", key)

    @property
    def kind(self) -> str | None:
        """The provider's block type; for a message-level OpenAI field, its key."""
        kind = self.data.get("type")
        if isinstance(kind, str):
            return kind
        if self.provider == "openai" and len(self.data) == 1:
            return next(iter(self.data))
        return None

    def text(self) -> str:
        """The readable text the block carries, or ``""`` when it has none."""
        return _opaque_text(self.provider, self.kind, self.data)

    @property
    def flat_cost(self) -> bool:
        """True when the block has no text and costs a flat estimate."""
        if (self.provider, self.kind) not in OPAQUE_FLAT:
            return False
        if self.kind == "document":
            return not self.text()
        return True

    def countable_text(self) -> str:
        """What a tokenizer counts for this block (``""`` when it is a flat cost)."""
        text = self.text()
        if text or self.flat_cost:
            return text
        if (self.provider, self.kind) in _TEXT_KINDS:
            return ""  # a known text kind whose text is empty
        return json.dumps(self.data, ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpaqueBlock):
            return NotImplemented
        return self.provider == other.provider and self._key == other._key

    def __hash__(self) -> int:
        return hash((self.provider, self._key))


_TEXT_KINDS: Final = frozenset(
    {
        ("openai", "refusal"),
        ("anthropic", "thinking"),
        ("anthropic", "search_result"),
    }
)


def _texts(content: Any) -> list[str]:
    """The text of a string or of a list of text blocks."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, Mapping) and _is_text_block(b)]
    return []


def _is_text_block(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def _opaque_text(provider: str, kind: str | None, data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    if provider == "openai" and kind == "refusal":
        lines = _texts(data.get("refusal"))
    elif provider == "anthropic" and kind == "thinking":
        lines = _texts(data.get("thinking"))
    elif provider == "anthropic" and kind in ("document", "search_result"):
        source = data.get("source")
        if kind == "search_result" and isinstance(source, str):
            lines.append(source)
        for key in ("title", "context"):
            if isinstance(data.get(key), str):
                lines.append(data[key])
        if kind == "search_result":
            lines += _texts(data.get("content"))
        elif isinstance(source, Mapping) and source.get("type") == "text":
            lines += _texts(source.get("data"))
        elif isinstance(source, Mapping) and source.get("type") == "content":
            lines += _texts(source.get("content"))
        else:
            return ""  # a binary document: its title alone is not its text
    return "\n".join(lines)


ResultPart: TypeAlias = TextBlock | ImageBlock | OpaqueBlock


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result of the tool call ``tool_use_id``."""

    tool_use_id: str
    content: str | tuple[ResultPart, ...] = ""
    is_error: bool = False

    def __post_init__(self) -> None:
        _require_str("ToolResultBlock.tool_use_id", self.tool_use_id, allow_empty=False)
        if isinstance(self.content, list | tuple):
            parts = tuple(self.content)
            for i, part in enumerate(parts):
                if not isinstance(part, TextBlock | ImageBlock | OpaqueBlock):
                    raise InvalidMessage(
                        f"ToolResultBlock.content[{i}]",
                        part,
                        "must be a TextBlock, ImageBlock or OpaqueBlock",
                    )
            object.__setattr__(self, "content", parts)
        elif isinstance(self.content, str):
            _require_str("ToolResultBlock.content", self.content)
        else:
            raise InvalidMessage(
                "ToolResultBlock.content", self.content, "must be a string or a list of blocks"
            )
        if not isinstance(self.is_error, bool):
            raise InvalidMessage("ToolResultBlock.is_error", self.is_error, "must be a bool")

    def text(self) -> str:
        """The result's readable text (images and text-less blocks omitted)."""
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for p in self.content:
            if isinstance(p, TextBlock):
                parts.append(p.text)
            elif isinstance(p, OpaqueBlock) and (text := p.text()):
                parts.append(text)
        return "\n".join(parts)

    def countable_text(self) -> str:
        """What a tokenizer counts: the text, and what opaque parts carry."""
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for p in self.content:
            if isinstance(p, TextBlock):
                parts.append(p.text)
            elif isinstance(p, OpaqueBlock) and (text := p.countable_text()):
                parts.append(text)
        return "\n".join(parts)


Block: TypeAlias = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | OpaqueBlock
BLOCK_TYPES: Final = (TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, OpaqueBlock)


def _block_key(block: Block) -> tuple[Any, ...]:
    if isinstance(block, TextBlock):
        return ("text", block.text)
    if isinstance(block, ImageBlock):
        return ("image", block.source, block.media_type)
    if isinstance(block, ToolUseBlock):
        return ("tool_use", block.id, block.name, block._key)
    if isinstance(block, OpaqueBlock):
        return ("opaque", block.provider, block._key)
    parts = (
        block.content
        if isinstance(block.content, str)
        else tuple(_block_key(p) for p in block.content)
    )
    return ("tool_result", block.tool_use_id, parts, block.is_error)


def _block_to_dict(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        d: dict[str, Any] = {"type": "image", "source": block.source}
        if block.media_type is not None:
            d["media_type"] = block.media_type
        return d
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": thaw(block.input)}
    if isinstance(block, OpaqueBlock):
        return {"type": "opaque", "provider": block.provider, "data": thaw(block.data)}
    content: Any = (
        block.content
        if isinstance(block.content, str)
        else [_block_to_dict(p) for p in block.content]
    )
    out = {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": content}
    if block.is_error:
        out["is_error"] = True
    return out


def _block_from_dict(data: Any, where: str) -> Block:
    if not isinstance(data, Mapping):
        raise InvalidMessage(where, data, "a block must be a mapping with a 'type'")
    kind = data.get("type")
    try:
        if kind == "text":
            return TextBlock(data["text"])
        if kind == "image":
            return ImageBlock(data["source"], data.get("media_type"))
        if kind == "tool_use":
            return ToolUseBlock(data["id"], data["name"], data.get("input", EMPTY))
        if kind == "opaque":
            return OpaqueBlock(data["provider"], data["data"])
        if kind == "tool_result":
            content = data.get("content", "")
            if isinstance(content, list):
                parts: list[ResultPart] = []
                for i, raw in enumerate(content):
                    part = _block_from_dict(raw, f"{where}.content[{i}]")
                    if not isinstance(part, TextBlock | ImageBlock | OpaqueBlock):
                        raise InvalidMessage(
                            f"{where}.content[{i}]", part, "must be a text, image or opaque block"
                        )
                    parts.append(part)
                content = tuple(parts)
            return ToolResultBlock(data["tool_use_id"], content, data.get("is_error", False))
    except KeyError as exc:
        raise InvalidMessage(f"{where}.{exc.args[0]}", None, "is required") from None
    except InvalidMessage as exc:
        if exc.field.split(".")[0].split("[")[0] in _CLASS_NAMES:  # a block's own field
            field = f"{where}.{exc.field.partition('.')[2]}"
            raise InvalidMessage(field, exc.value, exc.problem) from None
        raise
    raise InvalidMessage(f"{where}.type", kind, "unknown block type")


_CLASS_NAMES: Final = frozenset(cls.__name__ for cls in BLOCK_TYPES)
