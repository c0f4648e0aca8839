"""Anthropic Messages API <-> convomem messages.

The Messages API has no system role: ``to_anthropic`` returns the system prompt as the
separate ``system`` field, and ``from_anthropic`` takes it as an argument. Content blocks
map one to one: ``text``, ``image`` (base64, url or file source), ``tool_use`` and
``tool_result``. A user message carrying tool results becomes a ``role="tool"`` message
(its text, if any, stays in it, in order); on the way back, results travel in a user
message, results first, and consecutive result messages share one user message, as the
API requires after an assistant turn with parallel calls.

Nothing convomem has no field for is lost: blocks it has no type for (``thinking``,
``redacted_thinking``, ``document``, server-tool blocks...) and block keys such as
``cache_control`` or ``citations`` are kept in ``metadata["anthropic"]`` with their
position and written back in place. Message-level keys of a response object (``id``,
``model``, ``usage``...) are kept there too but not sent back, since the API accepts only
``role`` and ``content``. Anthropic has no message ``name``; it is not sent.

Messages without an id get a deterministic one (as in ``convomem.formats.openai``), so
converting the same dicts again gives the same ids.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidMessage
from ..model import (
    Block,
    ImageBlock,
    Message,
    ResultPart,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ._common import at_field, stable_id, tool_arguments

META: Final = "anthropic"
"""The ``Message.metadata`` key holding what the Messages format has and convomem has not."""

_BLOCK_KEYS: Final = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "source"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
}


def _plain(value: Any) -> Any:
    """A mapping from a dict or an SDK model object (``response.content`` items)."""
    if not isinstance(value, Mapping) and hasattr(value, "model_dump"):
        dumped = value.model_dump(exclude_none=True)
        if isinstance(dumped, Mapping):
            return dumped
    return value


# -- Anthropic -> convomem ---------------------------------------------------------------


def _image_from_anthropic(block: Mapping[str, Any], where: str) -> ImageBlock | None:
    source = _plain(block.get("source"))
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
    return None  # a source type convomem does not know: the block is kept verbatim


def _result_content(content: Any, where: str) -> str | tuple[ResultPart, ...]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        raise InvalidMessage(where, content, "must be a string or a list of text/image blocks")
    parts: list[ResultPart] = []
    for k, raw in enumerate(content):
        part = _plain(raw)
        at = f"{where}[{k}]"
        if not isinstance(part, Mapping):
            raise InvalidMessage(at, part, "a content block must be an object")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(TextBlock(part["text"]))
        elif kind == "image" and (image := _image_from_anthropic(part, at)) is not None:
            parts.append(image)
        else:
            raise InvalidMessage(at + ".type", kind, "convomem keeps only text and images here")
    return tuple(parts)


def _block_from_anthropic(block: Mapping[str, Any], where: str, role: str) -> Block | None:
    """The convomem block for ``block``, or None when it must be kept verbatim."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise InvalidMessage(where + ".text", text, "must be a string")
        return TextBlock(text)
    if kind == "image":
        return _image_from_anthropic(block, where)
    if kind == "tool_use":
        if role != "assistant":
            raise InvalidMessage(where + ".type", kind, "only assistant messages call tools")
        call_id, name, args = block.get("id"), block.get("name"), block.get("input", {})
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(where + ".id", call_id, "must be a non-empty string")
        if not isinstance(name, str) or not name:
            raise InvalidMessage(where + ".name", name, "must be a non-empty string")
        if not isinstance(args, Mapping):
            raise InvalidMessage(where + ".input", args, "must be an object")
        return ToolUseBlock(call_id, name, copy.deepcopy(dict(args)))
    if kind == "tool_result":
        if role != "user":
            raise InvalidMessage(where + ".type", kind, "tool results belong in user messages")
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(where + ".tool_use_id", call_id, "must be a non-empty string")
        is_error = block.get("is_error", False)
        if not isinstance(is_error, bool):
            raise InvalidMessage(where + ".is_error", is_error, "must be a bool")
        content = _result_content(block.get("content"), where + ".content")
        return ToolResultBlock(call_id, content, is_error)
    if not isinstance(kind, str) or not kind:
        raise InvalidMessage(where + ".type", kind, "a content block needs a type")
    return None


def _message_from_anthropic(data: Mapping[str, Any], i: int, seen: dict[str, int]) -> Message:
    where = f"messages[{i}]"
    role = data.get("role")
    if role not in ("user", "assistant"):
        raise InvalidMessage(where + ".role", role, "must be 'user' or 'assistant'")
    raw_content = data.get("content", "")
    meta: dict[str, Any] = {}
    content: str | list[Block]
    if isinstance(raw_content, str):
        content = raw_content
    elif isinstance(raw_content, list | tuple):
        content = []
        verbatim: list[list[Any]] = []
        extras: list[list[Any]] = []
        for j, raw in enumerate(raw_content):
            block = _plain(raw)
            at = f"{where}.content[{j}]"
            if not isinstance(block, Mapping):
                raise InvalidMessage(at, block, "a content block must be an object")
            converted = _block_from_anthropic(block, at, role)
            if converted is None:
                verbatim.append([j, copy.deepcopy(dict(block))])
                continue
            kind = block["type"]
            more = {k: v for k, v in block.items() if k not in _BLOCK_KEYS[kind]}
            if kind == "tool_result" and block.get("is_error") is False:
                more["is_error"] = False  # an explicit false is kept as given
            if kind == "tool_result" and "content" not in block:
                more["content"] = None  # marks a result that had no content key
            if more:
                extras.append([j, kind, copy.deepcopy(more)])
            content.append(converted)
        if verbatim:
            meta["verbatim"] = verbatim
        if extras:
            meta["extras"] = extras
    else:
        raise InvalidMessage(where + ".content", raw_content, "must be a string or a list")
    others = {k: v for k, v in data.items() if k not in ("role", "content", "id")}
    if others:
        meta["message"] = copy.deepcopy(others)
    msg_id = data.get("id")
    if msg_id is None:
        msg_id = stable_id(data, seen, "an")
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


def _system_from_anthropic(system: Any, seen: dict[str, int]) -> Message:
    if isinstance(system, str):
        return Message(stable_id({"system": system}, seen, "an"), "system", content=system)
    if not isinstance(system, list | tuple):
        raise InvalidMessage("system", system, "must be a string or a list of text blocks")
    blocks: list[Block] = []
    plain = [_plain(b) for b in system]
    for k, block in enumerate(plain):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise InvalidMessage(f"system[{k}]", block, "must be a text block")
        text = block.get("text")
        if not isinstance(text, str):
            raise InvalidMessage(f"system[{k}].text", text, "must be a string")
        blocks.append(TextBlock(text))
    return Message(stable_id({"system": plain}, seen, "an"), "system", content=blocks)


def from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Convert a Messages API request (``messages`` and optional ``system``) to messages.

    ``system`` may be a string or a list of text blocks; it becomes one leading system
    message. Items may also be the SDK's objects (anything with ``model_dump()``), so a
    response's ``content`` can be appended as it is.
    """
    seen: dict[str, int] = {}
    out: list[Message] = []
    if system is not None:
        out.append(_system_from_anthropic(system, seen))
    for i, raw in enumerate(messages):
        data = _plain(raw)
        if not isinstance(data, Mapping):
            raise InvalidMessage(f"messages[{i}]", data, "must be an object")
        out.append(_message_from_anthropic(data, i, seen))
    return out


# -- convomem -> Anthropic ---------------------------------------------------------------


def _image_to_anthropic(block: ImageBlock, where: str) -> dict[str, Any]:
    src = block.source
    if src.startswith("data:"):
        header, sep, data = src[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding != "base64":
            raise InvalidMessage(where + ".source", src[:40], "a data URL must be base64")
        source: dict[str, Any] = {
            "type": "base64",
            "media_type": block.media_type or media_type,
            "data": data,
        }
    elif src.startswith(("http://", "https://")):
        source = {"type": "url", "url": src}
    else:  # a provider file id
        source = {"type": "file", "file_id": src}
    return {"type": "image", "source": source}


def _block_to_anthropic(block: Block, where: str) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return _image_to_anthropic(block, where)
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": tool_arguments(block, where + ".input", "Anthropic"),
        }
    content: Any = block.content
    if not isinstance(content, str):
        content = [_block_to_anthropic(p, f"{where}.content[{k}]") for k, p in enumerate(content)]
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    out["content"] = content
    if block.is_error:
        out["is_error"] = True
    return out


def _content_to_anthropic(m: Message, where: str) -> str | list[dict[str, Any]]:
    meta = m.metadata.get(META) or {}
    verbatim = {int(pos): block for pos, block in meta.get("verbatim", ())}
    if isinstance(m.content, str) and not verbatim:
        return m.content
    extras = {int(pos): (kind, more) for pos, kind, more in meta.get("extras", ())}
    out: list[dict[str, Any]] = []
    pos = 0
    for j, block in enumerate(m.blocks):
        if m.role == "assistant" and isinstance(block, ToolResultBlock):
            raise InvalidMessage(f"{where}.content[{j}]", block, "a result in an assistant turn")
        if m.role != "assistant" and isinstance(block, ToolUseBlock):
            raise InvalidMessage(f"{where}.content[{j}]", block, "only the assistant calls tools")
        while pos in verbatim:
            out.append(copy.deepcopy(verbatim.pop(pos)))
            pos += 1
        d = _block_to_anthropic(block, f"{where}.content[{j}]")
        kind, more = extras.get(pos, (None, None))
        if kind == d["type"] and more:  # keys recorded for this very block, written back
            no_content = kind == "tool_result" and "content" in more
            d = {**copy.deepcopy({k: v for k, v in more.items() if k != "content"}), **d}
            if no_content and d["content"] == "":
                del d["content"]
        out.append(d)
        pos += 1
    out.extend(copy.deepcopy(verbatim[p]) for p in sorted(verbatim))
    return out


def _has_results(content: str | list[dict[str, Any]]) -> bool:
    return not isinstance(content, str) and any(b.get("type") == "tool_result" for b in content)


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def to_anthropic(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert messages to ``(system, messages)`` for the Messages API.

    Every system message goes to ``system`` (joined by blank lines; None when there is
    none). Tool messages become user messages. A message carrying tool results is merged
    into a user message just before it, results first: so the results of parallel calls
    (one OpenAI-style tool message each) share the one user message that must follow the
    assistant turn, and no text ever precedes them.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if m.role == "system":
            system.append(m.text())
            continue
        if m.role == "tool" and not m.has_tool_result():
            raise InvalidMessage(
                where + ".content", m.content, "a tool message needs a ToolResultBlock"
            )
        role = "assistant" if m.role == "assistant" else "user"
        content = _content_to_anthropic(m, where)
        last = out[-1] if out else None
        if role == "user" and _has_results(content):
            if last is not None and last["role"] == "user":
                content = _as_blocks(last["content"]) + _as_blocks(content)
                out.pop()
            blocks = _as_blocks(content)
            content = [b for b in blocks if b.get("type") == "tool_result"] + [
                b for b in blocks if b.get("type") != "tool_result"
            ]
        out.append({"role": role, "content": content})
    return ("\n\n".join(system) if system else None), out
