"""Reading the Anthropic Messages format: dicts (or SDK objects) to convomem blocks.

The parsing half of ``convomem.formats.anthropic``; see that module for the mapping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidMessage
from ..model import (
    Block,
    ImageBlock,
    Message,
    OpaqueBlock,
    ResultPart,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ._common import at_block, at_field, plain, stable_id

META: Final = "anthropic"
"""The ``Message.metadata`` key holding what the Messages format has and convomem has not."""

_BLOCK_KEYS: Final = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "source"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
}


def image_from_anthropic(block: Mapping[str, Any], where: str) -> ImageBlock | None:
    source = plain(block.get("source"))
    if not isinstance(source, Mapping):
        raise InvalidMessage(where + ".source", source, "must be an object")
    kind = source.get("type")
    if kind == "base64":
        media_type, data = source.get("media_type"), source.get("data")
        if not isinstance(media_type, str) or not media_type:
            raise InvalidMessage(where + ".source.media_type", media_type, "is required")
        if not isinstance(data, str) or not data:
            raise InvalidMessage(where + ".source.data", data, "must be a base64 string")
        return ImageBlock(f"data:{media_type};base64,{data}", media_type)
    if kind == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url:
            raise InvalidMessage(where + ".source.url", url, "must be a non-empty string")
        return ImageBlock(url)
    if kind == "file":
        file_id = source.get("file_id")
        if not isinstance(file_id, str) or not file_id:
            raise InvalidMessage(where + ".source.file_id", file_id, "must be a non-empty string")
        return ImageBlock(file_id)
    return None  # a source type convomem does not know: the block is kept opaque


def _extra_keys(block: Mapping[str, Any], kind: str) -> dict[str, Any]:
    more = {k: v for k, v in block.items() if k not in _BLOCK_KEYS[kind]}
    if kind == "tool_result":
        if block.get("is_error") is False:
            more["is_error"] = False  # an explicit false is kept as given
        if "content" not in block:
            more["content"] = None  # marks a result that had no content key
    return more


def _opaque(block: Mapping[str, Any], where: str) -> OpaqueBlock:
    kind = block.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidMessage(where + ".type", kind, "a content block needs a type")
    return OpaqueBlock(META, block)


def _part_from_anthropic(
    raw: Any, where: str, pos: tuple[int, int], extras: list[list[Any]]
) -> ResultPart:
    """A block inside a tool result: text, image, or opaque (search_result, document)."""
    try:
        return _part(raw, where, pos, extras)
    except InvalidMessage as exc:
        raise at_block(where, exc) from None


def _part(raw: Any, where: str, pos: tuple[int, int], extras: list[list[Any]]) -> ResultPart:
    part = plain(raw)
    if not isinstance(part, Mapping):
        raise InvalidMessage(where, part, "a content block must be an object")
    kind = part.get("type")
    converted: ResultPart | None = None
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise InvalidMessage(where + ".text", part.get("text"), "must be a string")
        converted = TextBlock(part["text"])
    elif kind == "image":
        converted = image_from_anthropic(part, where)
    if converted is None:
        return _opaque(part, where)
    more = _extra_keys(part, str(kind))
    if more:
        extras.append([*pos, kind, more])
    return converted


def _block_from_anthropic(
    block: Mapping[str, Any], where: str, role: str, j: int, extras: list[list[Any]]
) -> Block:
    try:
        return _block(block, where, role, j, extras)
    except InvalidMessage as exc:
        raise at_block(where, exc) from None


def _block(
    block: Mapping[str, Any], where: str, role: str, j: int, extras: list[list[Any]]
) -> Block:
    kind = block.get("type")
    converted: Block | None = None
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise InvalidMessage(where + ".text", text, "must be a string")
        converted = TextBlock(text)
    elif kind == "image":
        converted = image_from_anthropic(block, where)
    elif kind == "tool_use":
        if role != "assistant":
            raise InvalidMessage(where + ".type", kind, "only assistant messages call tools")
        call_id, name, args = block.get("id"), block.get("name"), block.get("input", {})
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(where + ".id", call_id, "must be a non-empty string")
        if not isinstance(name, str) or not name:
            raise InvalidMessage(where + ".name", name, "must be a non-empty string")
        if not isinstance(args, Mapping):
            raise InvalidMessage(where + ".input", args, "must be an object")
        converted = ToolUseBlock(call_id, name, args)
    elif kind == "tool_result":
        converted = _result_from_anthropic(block, where, role, j, extras)
    if converted is None:
        return _opaque(block, where)
    more = _extra_keys(block, str(kind))
    if more:
        extras.append([j, kind, more])
    return converted


def _result_from_anthropic(
    block: Mapping[str, Any], where: str, role: str, j: int, extras: list[list[Any]]
) -> ToolResultBlock:
    if role != "user":
        raise InvalidMessage(where + ".type", "tool_result", "tool results belong in user messages")
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(where + ".tool_use_id", call_id, "must be a non-empty string")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise InvalidMessage(where + ".is_error", is_error, "must be a bool")
    raw = block.get("content")
    content: str | tuple[ResultPart, ...]
    if raw is None:
        content = ""
    elif isinstance(raw, str):
        content = raw
    elif isinstance(raw, list | tuple):
        content = tuple(
            _part_from_anthropic(p, f"{where}.content[{k}]", (j, k), extras)
            for k, p in enumerate(raw)
        )
    else:
        raise InvalidMessage(where + ".content", raw, "must be a string or a list of blocks")
    return ToolResultBlock(call_id, content, is_error)


def _blocks_from_anthropic(
    raw_content: Sequence[Any], where: str, role: str
) -> tuple[list[Block], list[list[Any]]]:
    """The blocks of ``raw_content`` (found at ``where``) and their extra keys."""
    blocks: list[Block] = []
    extras: list[list[Any]] = []
    for j, raw in enumerate(raw_content):
        block = plain(raw)
        at = f"{where}[{j}]"
        if not isinstance(block, Mapping):
            raise InvalidMessage(at, block, "a content block must be an object")
        blocks.append(_block_from_anthropic(block, at, role, j, extras))
    return blocks, extras


def message_from_anthropic(data: Mapping[str, Any], i: int, seen: dict[str, int]) -> Message:
    where = f"messages[{i}]"
    role = data.get("role")
    if not isinstance(role, str) or role not in ("user", "assistant"):
        raise InvalidMessage(where + ".role", role, "must be 'user' or 'assistant'")
    raw_content = data.get("content", "")
    meta: dict[str, Any] = {}
    content: str | list[Block]
    if isinstance(raw_content, str):
        content = raw_content
    elif isinstance(raw_content, list | tuple):
        content, extras = _blocks_from_anthropic(raw_content, where + ".content", role)
        if extras:
            meta["extras"] = extras
    else:
        raise InvalidMessage(where + ".content", raw_content, "must be a string or a list")
    others = {k: v for k, v in data.items() if k not in ("role", "content", "id")}
    if others:
        meta["message"] = others
    msg_id = data.get("id")
    if msg_id is None:
        msg_id = stable_id(data, seen, "an", where)
    has_results = not isinstance(content, str) and any(
        isinstance(b, ToolResultBlock) for b in content
    )
    try:
        return Message(
            msg_id,
            "tool" if has_results else role,
            content=content,
            metadata={META: meta} if meta else None,
        )
    except InvalidMessage as exc:
        raise at_field(where, exc) from None


def system_from_anthropic(system: Any, seen: dict[str, int]) -> Message:
    if isinstance(system, str):
        data: Any = {"system": system}
        return Message(stable_id(data, seen, "an", "system"), "system", content=system)
    if not isinstance(system, list | tuple):
        raise InvalidMessage("system", system, "must be a string or a list of text blocks")
    blocks = [plain(b) for b in system]
    for k, block in enumerate(blocks):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise InvalidMessage(f"system[{k}]", block, "must be a text block")
    converted, extras = _blocks_from_anthropic(blocks, "system", "system")
    msg_id = stable_id({"system": blocks}, seen, "an", "system")
    try:
        return Message(
            msg_id,
            "system",
            content=converted,
            metadata={META: {"extras": extras}} if extras else None,
        )
    except InvalidMessage as exc:
        raise at_field("system", exc) from None
