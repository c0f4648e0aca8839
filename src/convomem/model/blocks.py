"""Content blocks: the parts a message is made of (text, images, tool calls, results).

Blocks are immutable in fact: a tool call's ``input`` and an opaque block's ``data`` are
validated JSON values, copied and frozen on construction (``convomem.model.values``), and
blocks compare equal exactly when they would be sent (and counted) the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from ..errors import InvalidMessage
from .opaque import OpaqueBlock as OpaqueBlock  # re-exported: a block like the others
from .values import EMPTY, freeze, thaw
from .values import require_str as _require_str


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
        arguments: Any = self.input
        if arguments.__class__ is not dict:
            if isinstance(arguments, str):
                _require_str("ToolUseBlock.input", arguments)
                _set(self, "_key", arguments)
                arguments = None
            elif not isinstance(arguments, Mapping):
                raise InvalidMessage(
                    "ToolUseBlock.input", arguments, "must be a mapping of arguments or a string"
                )
        for name, value in (("ToolUseBlock.id", self.id), ("ToolUseBlock.name", self.name)):
            if value.__class__ is not str or not value or not value.isascii():
                _require_str(name, value, allow_empty=False)
        if arguments is not None:
            frozen, key = freeze(arguments, "ToolUseBlock.input")
            _set(self, "input", frozen)
            _set(self, "_key", key)

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


_set = object.__setattr__  # a frozen dataclass sets its own fields through this

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


_DICT_KEYS: Final = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "source", "media_type"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "opaque": frozenset({"type", "provider", "data"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
}


def _block_from_dict(data: Any, where: str) -> Block:
    if not isinstance(data, Mapping):
        raise InvalidMessage(where, data, "a block must be a mapping with a 'type'")
    kind = data.get("type")
    known = _DICT_KEYS.get(kind) if isinstance(kind, str) else None
    if known is not None:
        for key in data:
            if key not in known:
                raise InvalidMessage(f"{where}.{key}", data[key], f"unknown {kind} block field")
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


_Content: TypeAlias = tuple[str | tuple[Block, ...], tuple[Any, ...]]


def _content_row(content: Any) -> _Content:
    """Validate content; return it with its part of the equality row.

    The row part is flat: a string is itself; each block is its class followed by its
    fields (a fixed number per class, so two rows are equal exactly when the contents
    are). A subclass of a block class is its class followed by the block itself.
    """
    cls = content.__class__
    if cls is str:
        if not content.isascii():
            _require_str("content", content)
        return content, (content,)
    if cls is not tuple and cls is not list:
        if isinstance(content, str):
            content = _require_str("content", str.__str__(content))
            return content, (content,)
        if isinstance(content, BLOCK_TYPES):
            raise InvalidMessage("content", content, "must be a string or a list of blocks")
        if not isinstance(content, Iterable) or isinstance(content, bytes | Mapping):
            raise InvalidMessage("content", content, "must be a string or a list of blocks")
    blocks = tuple(content)
    row: list[Any] = []
    for i, block in enumerate(blocks):
        k = block.__class__
        if k is TextBlock:
            row += (k, block.text)
        elif k is ToolResultBlock:
            row += (k, block.tool_use_id, block.content, block.is_error)
        elif k is ToolUseBlock:
            row += (k, block.id, block.name, block._key)
        elif k is ImageBlock:
            row += (k, block.source, block.media_type)
        elif k is OpaqueBlock:
            row += (k, block.provider, block._key)
        elif isinstance(block, BLOCK_TYPES):
            row += (k, block)
        else:
            raise InvalidMessage(
                f"content[{i}]",
                block,
                "must be a TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock or OpaqueBlock",
            )
    return blocks, tuple(row)
