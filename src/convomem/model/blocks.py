"""Content blocks: the parts a message is made of (text, images, tool calls, results)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, cast

from ..errors import InvalidMessage


def _require_str(field_name: str, value: Any, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidMessage(field_name, value, f"must be a string, not {type(value).__name__}")
    if not allow_empty and not value:
        raise InvalidMessage(field_name, value, "must not be empty")
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


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call made by the assistant; ``input`` is the parsed arguments.

    ``input`` may also be a string when a model produced arguments that are not a JSON
    object: they are kept verbatim rather than lost.
    """

    id: str
    name: str
    input: Mapping[str, Any] | str = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_str("ToolUseBlock.id", self.id, allow_empty=False)
        _require_str("ToolUseBlock.name", self.name, allow_empty=False)
        if not isinstance(self.input, Mapping | str):
            raise InvalidMessage(
                "ToolUseBlock.input", self.input, "must be a mapping of arguments or a string"
            )

    def arguments(self) -> str:
        """The arguments as the JSON text a provider sends."""
        if isinstance(self.input, str):
            return self.input
        return json.dumps(self.input, ensure_ascii=False, default=str)


ResultPart: TypeAlias = TextBlock | ImageBlock


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
                if not isinstance(part, TextBlock | ImageBlock):
                    raise InvalidMessage(
                        f"ToolResultBlock.content[{i}]",
                        part,
                        "must be a TextBlock or ImageBlock",
                    )
            object.__setattr__(self, "content", parts)
        elif not isinstance(self.content, str):
            raise InvalidMessage(
                "ToolResultBlock.content", self.content, "must be a string or a list of blocks"
            )
        if not isinstance(self.is_error, bool):
            raise InvalidMessage("ToolResultBlock.is_error", self.is_error, "must be a bool")

    def text(self) -> str:
        """The result's text (images omitted)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextBlock))


Block: TypeAlias = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock
BLOCK_TYPES: Final = (TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock)


def _block_key(block: Block) -> tuple[Any, ...]:
    if isinstance(block, TextBlock):
        return ("text", block.text)
    if isinstance(block, ImageBlock):
        return ("image", block.source, block.media_type)
    if isinstance(block, ToolUseBlock):
        return ("tool_use", block.id, block.name, block.arguments())
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
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": block.input if isinstance(block.input, str) else dict(block.input),
        }
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
            return ToolUseBlock(data["id"], data["name"], data.get("input", {}))
        if kind == "tool_result":
            content = data.get("content", "")
            if isinstance(content, list):
                parts = [
                    _block_from_dict(p, f"{where}.content[{i}]") for i, p in enumerate(content)
                ]
                for i, p in enumerate(parts):
                    if not isinstance(p, TextBlock | ImageBlock):
                        raise InvalidMessage(
                            f"{where}.content[{i}]", p, "must be a text or image block"
                        )
                content = tuple(cast(Sequence[ResultPart], parts))
            return ToolResultBlock(data["tool_use_id"], content, data.get("is_error", False))
    except KeyError as exc:
        raise InvalidMessage(f"{where}.{exc.args[0]}", None, "is required") from None
    raise InvalidMessage(f"{where}.type", kind, "unknown block type")
