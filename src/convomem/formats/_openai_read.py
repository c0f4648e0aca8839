"""Reading the Chat Completions format: dicts (or SDK objects) to convomem messages.

The parsing half of ``convomem.formats.openai``; see that module for the mapping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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

META: Final = "openai"
"""The ``Message.metadata`` key holding what Chat Completions has and convomem has not."""

_OWN_KEYS = frozenset({"role", "content", "name", "id"})
IMAGE_EXTRA = "_image_url"  # per-image keys of image_url besides url (detail), in order
NO_CONTENT = "_no_content"  # the message had no content key at all
_FIELDS: Final = ("refusal", "audio")  # assistant fields carrying content: opaque blocks
_PART_CHECKS: Final = {"refusal": ("refusal", str), "input_audio": ("input_audio", Mapping)}


def _where(i: int, key: str) -> str:
    return f"messages[{i}].{key}"


def _made(make: Any, where: str, *args: Any) -> Any:
    """``make(*args)``, its ``InvalidMessage`` placed at ``where`` (the input's position)."""
    try:
        return make(*args)
    except InvalidMessage as exc:
        _, dot, rest = exc.field.partition(".")  # "TextBlock.text", "OpaqueBlock.data[...]"
        tail = rest.partition("[")[1] + rest.partition("[")[2] if dot else ""
        raise InvalidMessage(where + tail, exc.value, exc.problem) from None


def _part_from_openai(raw: Any, where: str, image_extra: list[dict[str, Any]]) -> ResultPart:
    part: Any = plain(raw)
    if not isinstance(part, Mapping):
        raise InvalidMessage(where, part, "a content part must be an object")
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise InvalidMessage(where + ".text", part.get("text"), "must be a string")
        if len(part) == 2:
            return _made(TextBlock, where + ".text", part["text"])  # type: ignore[no-any-return]
    elif kind == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        if not isinstance(url, str) or not url:
            raise InvalidMessage(where + ".image_url.url", url, "must be a non-empty string")
        if len(part) == 2:
            more = spec if isinstance(spec, Mapping) else {}
            image_extra.append({k: v for k, v in more.items() if k != "url"})
            return _made(ImageBlock, where + ".image_url.url", url)  # type: ignore[no-any-return]
    elif not isinstance(kind, str) or not kind:
        raise InvalidMessage(where + ".type", kind, "a content part needs a type")
    elif kind in _PART_CHECKS:
        key, want = _PART_CHECKS[kind]
        if not isinstance(part.get(key), want):
            raise InvalidMessage(f"{where}.{key}", part.get(key), f"a {kind} part needs it")
    # Kept exactly; a text or image part with keys of its own too.
    return _made(OpaqueBlock, where, META, part)  # type: ignore[no-any-return]


def _content_from_openai(content: Any, i: int, image_extra: list[dict[str, Any]]) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_made(TextBlock, _where(i, "content"), content)] if content else []
    if not isinstance(content, list | tuple):
        raise InvalidMessage(_where(i, "content"), content, "must be a string, a list or null")
    return [
        _part_from_openai(part, _where(i, f"content[{j}]"), image_extra)
        for j, part in enumerate(content)
    ]


def _tool_use_from_openai(raw: Any, where: str) -> ToolUseBlock:
    call = plain(raw)
    if not isinstance(call, Mapping):
        raise InvalidMessage(where, call, "a tool call must be an object")
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        raise InvalidMessage(where + ".function", fn, "must be an object with name and arguments")
    args = fn.get("arguments", "")
    if not isinstance(args, str):
        raise InvalidMessage(where + ".function.arguments", args, "must be a JSON string")
    parsed: Mapping[str, Any] | str = args
    if args:
        try:
            loaded = json.loads(args)
        except (ValueError, RecursionError):
            loaded = None
        # Only an object that re-serializes to the same text is parsed; anything else
        # (``""`` included) is kept verbatim so the round trip is exact.
        if isinstance(loaded, dict) and json.dumps(loaded, ensure_ascii=False) == args:
            parsed = loaded
    call_id = call.get("id")
    name = fn.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(where + ".id", call_id, "must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise InvalidMessage(where + ".function.name", name, "must be a non-empty string")
    try:
        return ToolUseBlock(call_id, name, parsed)
    except InvalidMessage as exc:
        if not isinstance(parsed, str):  # NaN, or nested too deep, as a value: keep the text
            return _tool_use_from_text(call_id, name, args, where)
        raise InvalidMessage(where + ".function.arguments", exc.value, exc.problem) from None


def _tool_use_from_text(call_id: str, name: str, args: str, where: str) -> ToolUseBlock:
    try:
        return ToolUseBlock(call_id, name, args)
    except InvalidMessage as exc:
        raise InvalidMessage(where + ".function.arguments", exc.value, exc.problem) from None


def message_from_openai(raw: Any, i: int, seen: dict[str, int]) -> Message:
    data = plain(raw)
    if not isinstance(data, Mapping):
        raise InvalidMessage(f"messages[{i}]", data, "must be an object")
    role = data.get("role")
    if role == "developer":  # the newer name for the system role
        role = "system"
    if not isinstance(role, str) or role not in ("system", "user", "assistant", "tool"):
        raise InvalidMessage(
            _where(i, "role"),
            data.get("role"),
            "must be system, developer, user, assistant or tool",
        )
    image_extra: list[dict[str, Any]] = []
    raw_content = data.get("content")
    blocks: list[Block] = []
    converted: set[str] = set()  # message fields that became blocks
    if role == "tool":
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(_where(i, "tool_call_id"), call_id, "a tool message needs one")
        parts = _content_from_openai(raw_content, i, image_extra)
        result = raw_content or "" if not isinstance(raw_content, list | tuple) else tuple(parts)
        try:
            blocks.append(ToolResultBlock(call_id, result))
        except InvalidMessage as exc:
            raise at_block(f"messages[{i}]", exc, {"tool_use_id": "tool_call_id"}) from None
        own = "tool_call_id"
    else:
        blocks += _content_from_openai(raw_content, i, image_extra)
        for key in _FIELDS if role == "assistant" else ():
            value = data.get(key)
            if value is not None:
                if not isinstance(value, str if key == "refusal" else Mapping):
                    want = "a string" if key == "refusal" else "an object"
                    raise InvalidMessage(_where(i, key), value, f"must be {want} or null")
                blocks.append(_made(OpaqueBlock, f"messages[{i}]", META, {key: value}))
                converted.add(key)
        calls = data.get("tool_calls")
        if calls is None:
            calls = []
        elif not isinstance(calls, list | tuple):
            raise InvalidMessage(_where(i, "tool_calls"), calls, "must be a list")
        if calls and role != "assistant":
            raise InvalidMessage(
                _where(i, "tool_calls"), calls, "only assistant messages call tools"
            )
        for j, call in enumerate(calls):
            blocks.append(_tool_use_from_openai(call, _where(i, f"tool_calls[{j}]")))
        own = "tool_calls"
    extra = {
        k: v for k, v in data.items() if k not in _OWN_KEYS and k != own and k not in converted
    }
    for key in (own, "name"):  # an explicit null or [] is kept as given
        if key in data and data[key] in (None, []):
            extra[key] = data[key]
    if data.get("role") == "developer":
        extra["role"] = "developer"
    if any(image_extra):
        extra[IMAGE_EXTRA] = image_extra
    content: str | list[Block] = blocks
    beside = any(isinstance(b, ToolUseBlock | OpaqueBlock) and field_of(b) for b in blocks)
    # The form of the content is remembered where to_openai would not infer it: "" or
    # null, a list of parts beside tool calls, or no content key at all.
    if "content" not in data:
        extra[NO_CONTENT] = True
    elif role == "tool":
        if raw_content is None:
            extra["content"] = None
    elif isinstance(raw_content, str):
        if not beside:
            content = raw_content
        elif not raw_content:
            extra["content"] = ""
    elif raw_content is None and not beside:
        extra["content"] = None
    elif isinstance(raw_content, list | tuple) and beside:
        extra["content"] = []
    msg_id = data.get("id")
    if msg_id is None:
        msg_id = stable_id(data, seen, "oa", f"messages[{i}]")
    try:
        return Message(
            msg_id,
            role,
            content=content,
            name=data.get("name"),
            metadata={META: extra} if extra else None,
        )
    except InvalidMessage as exc:
        raise at_field(f"messages[{i}]", exc) from None


def field_of(block: Block) -> bool:
    """True for a tool call, or an OpenAI block holding a message field (refusal, audio)."""
    if isinstance(block, ToolUseBlock):
        return True
    return isinstance(block, OpaqueBlock) and block.provider == META and "type" not in block.data
