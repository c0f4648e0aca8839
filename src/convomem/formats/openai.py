"""OpenAI Chat Completions messages <-> convomem messages.

Assistant ``tool_calls`` become ``ToolUseBlock``s and ``role: "tool"`` messages become
``ToolResultBlock``s. Keys convomem has no field for are kept in
``metadata["openai"]`` and written back, so a round trip loses nothing.

Messages without an ``id`` get a deterministic one derived from their content and
occurrence, so converting the same dicts again (as agents do every turn) gives the
same ids, and caches keyed by id keep working. An ``id`` key, when present, becomes the
message id and is not written back (the API has no such field).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

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
from ._common import at_field, stable_id

_OWN_KEYS = frozenset({"role", "content", "name", "id"})
_IMAGE_EXTRA = "_image_url"  # per-image keys of image_url besides url (detail), in order


def _where(i: int, key: str) -> str:
    return f"messages[{i}].{key}"


def _content_from_openai(
    content: Any, i: int, image_extra: list[dict[str, Any]] | None = None
) -> list[Block]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(content)] if content else []
    if not isinstance(content, list):
        raise InvalidMessage(_where(i, "content"), content, "must be a string, a list or null")
    blocks: list[Block] = []
    for j, part in enumerate(content):
        where = _where(i, f"content[{j}]")
        if not isinstance(part, Mapping):
            raise InvalidMessage(where, part, "a content part must be an object")
        kind = part.get("type")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise InvalidMessage(where + ".text", part.get("text"), "must be a string")
            blocks.append(TextBlock(part["text"]))
        elif kind == "image_url":
            spec = part.get("image_url")
            url = spec.get("url") if isinstance(spec, Mapping) else spec
            if not isinstance(url, str) or not url:
                raise InvalidMessage(where + ".image_url.url", url, "must be a non-empty string")
            blocks.append(ImageBlock(url))
            if image_extra is not None:
                more = spec if isinstance(spec, Mapping) else {}
                image_extra.append({k: v for k, v in more.items() if k != "url"})
        else:
            raise InvalidMessage(where + ".type", kind, "unsupported content part")
    return blocks


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Convert Chat Completions message dicts to ``Message`` objects."""
    out: list[Message] = []
    seen: dict[str, int] = {}
    for i, data in enumerate(messages):
        if not isinstance(data, Mapping):
            raise InvalidMessage(f"messages[{i}]", data, "must be an object")
        role = data.get("role")
        if role == "developer":  # the newer name for the system role
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise InvalidMessage(
                _where(i, "role"),
                data.get("role"),
                "must be system, developer, user, assistant or tool",
            )
        blocks: list[Block]
        image_extra: list[dict[str, Any]] = []
        raw_content = data.get("content")
        if role == "tool":
            call_id = data.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidMessage(_where(i, "tool_call_id"), call_id, "a tool message needs one")
            raw = raw_content
            parts = _content_from_openai(raw, i, image_extra)
            result: str | tuple[ResultPart, ...]
            if raw is None or isinstance(raw, str):
                result = raw or ""
            else:
                result = tuple(p for p in parts if isinstance(p, TextBlock | ImageBlock))
            blocks = [ToolResultBlock(call_id, result)]
        else:
            blocks = _content_from_openai(raw_content, i, image_extra)
            calls = data.get("tool_calls") or []
            if calls and role != "assistant":
                raise InvalidMessage(
                    _where(i, "tool_calls"), calls, "only assistant messages call tools"
                )
            if not isinstance(calls, list):
                raise InvalidMessage(_where(i, "tool_calls"), calls, "must be a list")
            for j, call in enumerate(calls):
                blocks.append(_tool_use_from_openai(call, _where(i, f"tool_calls[{j}]")))
        own = "tool_call_id" if role == "tool" else "tool_calls"
        extra = {k: v for k, v in data.items() if k not in _OWN_KEYS and k != own}
        for key in (own, "name"):  # an explicit null or [] is kept as given
            if key in data and data[key] in (None, []):
                extra[key] = data[key]
        if data.get("role") == "developer":
            extra["role"] = "developer"
        if any(image_extra):
            extra[_IMAGE_EXTRA] = image_extra
        content: str | list[Block] = blocks
        has_calls = role != "tool" and bool(data.get("tool_calls"))
        # "content" in extra remembers the form of empty content: "" or null, and [] for a
        # list of parts beside tool calls (which would otherwise come back as a string).
        if role != "tool" and isinstance(raw_content, str):
            if not has_calls:
                content = raw_content
            elif not raw_content:
                extra["content"] = ""
        elif raw_content is None and not has_calls and "content" in data:
            extra["content"] = None
        elif isinstance(raw_content, list) and has_calls:
            extra["content"] = []
        msg_id = data.get("id")
        if msg_id is None:
            msg_id = stable_id(data, seen)
        try:
            message = Message(
                msg_id,
                role,
                content=content,
                name=data.get("name"),
                metadata={"openai": extra} if extra else None,
            )
        except InvalidMessage as exc:
            raise at_field(f"messages[{i}]", exc) from None
        out.append(message)
    return out


def _tool_use_from_openai(call: Any, where: str) -> ToolUseBlock:
    if not isinstance(call, Mapping):
        raise InvalidMessage(where, call, "a tool call must be an object")
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        raise InvalidMessage(where + ".function", fn, "must be an object with name and arguments")
    args = fn.get("arguments", "")
    parsed: Mapping[str, Any] | str = args if isinstance(args, str) else json.dumps(args)
    if isinstance(args, str):
        try:
            loaded = json.loads(args) if args else {}
        except ValueError:
            loaded = None
        # Only an object that re-serializes to the same text is parsed; anything else is
        # kept verbatim so the round trip is exact.
        if isinstance(loaded, dict) and (
            not args or json.dumps(loaded, ensure_ascii=False) == args
        ):
            parsed = loaded
    call_id = call.get("id")
    name = fn.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(where + ".id", call_id, "must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise InvalidMessage(where + ".function.name", name, "must be a non-empty string")
    return ToolUseBlock(call_id, name, parsed)


def _part_to_openai(
    block: TextBlock | ImageBlock, image_extra: Iterator[Mapping[str, Any]]
) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    return {"type": "image_url", "image_url": {"url": block.source, **next(image_extra, {})}}


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to Chat Completions dicts.

    A message carrying several tool results (Anthropic style) becomes one
    ``role: "tool"`` message per result, as the Chat Completions API requires.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        extra = dict(m.metadata.get("openai") or {})
        role = extra.pop("role", m.role)
        has_form = "content" in extra
        content_form = extra.pop("content", None)
        images = iter(extra.pop(_IMAGE_EXTRA, None) or ())
        if m.has_tool_result():
            for b in m.blocks:
                if isinstance(b, ToolResultBlock):
                    result: Any = (
                        b.content
                        if isinstance(b.content, str)
                        else [_part_to_openai(p, images) for p in b.content]
                    )
                    if result == "" and has_form:
                        result = content_form
                    out.append({"role": "tool", "tool_call_id": b.tool_use_id, "content": result})
            other = [b for b in m.blocks if isinstance(b, TextBlock | ImageBlock)]
            if other:  # text that travelled with the results follows them as a user message
                out.append({"role": "user", "content": [_part_to_openai(p, images) for p in other]})
            if m.name is not None:
                out[-1]["name"] = m.name
            out[-1].update(extra)
            continue
        d: dict[str, Any] = {"role": role}
        calls = [b for b in m.blocks if isinstance(b, ToolUseBlock)]
        parts = [b for b in m.blocks if isinstance(b, TextBlock | ImageBlock)]
        if isinstance(m.content, str):
            d["content"] = m.content
        elif (
            calls
            and not isinstance(content_form, list)
            and all(isinstance(p, TextBlock) for p in parts)
        ):
            texts = [p.text for p in parts if isinstance(p, TextBlock)]
            d["content"] = "\n".join(texts) if texts else content_form
        elif not parts and has_form:
            d["content"] = content_form
        else:
            d["content"] = [_part_to_openai(p, images) for p in parts]
        if calls:
            d["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments()},
                }
                for c in calls
            ]
        if m.name is not None:
            d["name"] = m.name
        d.update(extra)
        out.append(d)
    return out
