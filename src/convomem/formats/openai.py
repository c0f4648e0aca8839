"""OpenAI Chat Completions messages <-> convomem messages.

Assistant ``tool_calls`` become ``ToolUseBlock``s and ``role: "tool"`` messages become
``ToolResultBlock``s. Parts convomem does not interpret (``refusal``, ``input_audio``,
``file``, a part type it does not know, a text or image part with keys of its own such as
``cache_control``) become ``OpaqueBlock``s, as do an assistant's ``refusal`` and ``audio``
fields: they are counted (their text where they have some, a flat estimate otherwise)
and written back exactly. Keys convomem has no field for are kept in
``metadata["openai"]`` and written back, so a round trip loses nothing. Items may be the
OpenAI SDK's message objects (anything with ``model_dump()``).

Messages without an ``id`` get a deterministic one derived from their content and
occurrence (``is_derived_id`` recognizes it), so converting the same dicts again (as
agents do every turn) gives the same ids, and caches keyed by id keep working. An ``id``
key, when present, becomes the message id and is not written back (the API has no such
field).

``to_openai`` writes what Chat Completions can carry. A message with tool results
(Anthropic style) becomes one ``role: "tool"`` message per result, then one message with
everything else, tool calls included (in the message's own role, ``user`` for a tool
message); results come first unless one answers a call of the same message. Only an
assistant message may call tools, and a tool message needs a result: anything else
raises ``InvalidMessage``, as ``to_anthropic`` does. Opaque blocks of another provider
go over when the equivalent is faithful: an Anthropic PDF ``document`` becomes a
``file`` part, a text ``document`` or a ``search_result`` a text part; anything else
(``thinking``, ``redacted_thinking``, server tool blocks) is left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidMessage, NotAMessage
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
from ..model.values import thaw, too_deep
from ._common import at_block, at_field, message_list, plain, stable_id

META: Final = "openai"
"""The ``Message.metadata`` key holding what Chat Completions has and convomem has not."""

_OWN_KEYS = frozenset({"role", "content", "name", "id"})
_IMAGE_EXTRA = "_image_url"  # per-image keys of image_url besides url (detail), in order
_NO_CONTENT = "_no_content"  # the message had no content key at all
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


def _message_from_openai(raw: Any, i: int, seen: dict[str, int]) -> Message:
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
        extra[_IMAGE_EXTRA] = image_extra
    content: str | list[Block] = blocks
    beside = any(isinstance(b, ToolUseBlock | OpaqueBlock) and _field_of(b) for b in blocks)
    # The form of the content is remembered where to_openai would not infer it: "" or
    # null, a list of parts beside tool calls, or no content key at all.
    if "content" not in data:
        extra[_NO_CONTENT] = True
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


def _field_of(block: Block) -> bool:
    """True for a tool call, or an OpenAI block holding a message field (refusal, audio)."""
    if isinstance(block, ToolUseBlock):
        return True
    return isinstance(block, OpaqueBlock) and block.provider == META and "type" not in block.data


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Convert Chat Completions message dicts (or SDK message objects) to messages.

    Malformed input raises ``InvalidMessage`` naming the position and field
    (``messages[3].tool_calls[0].id``).
    """
    seen: dict[str, int] = {}
    items = message_list(messages, "Chat Completions message dicts")
    try:
        return [_message_from_openai(data, i, seen) for i, data in enumerate(items)]
    except RecursionError:  # input too deep even to show in an error
        raise too_deep("messages") from None


# -- convomem -> OpenAI ------------------------------------------------------------------


def _foreign_part(block: OpaqueBlock) -> dict[str, Any] | None:
    """The Chat Completions part faithful to another provider's block, or None."""
    if block.provider != "anthropic":
        return None
    data, kind = block.data, block.kind
    if kind == "search_result":
        return {"type": "text", "text": block.text()}
    if kind == "document":
        source = data.get("source")
        if isinstance(source, Mapping) and source.get("type") in ("text", "content"):
            return {"type": "text", "text": block.text()}
        if (
            isinstance(source, Mapping)
            and source.get("type") == "base64"
            and source.get("media_type") == "application/pdf"
            and isinstance(source.get("data"), str)
        ):
            title = data.get("title")
            return {
                "type": "file",
                "file": {
                    "filename": title if isinstance(title, str) and title else "document.pdf",
                    "file_data": f"data:application/pdf;base64,{source['data']}",
                },
            }
    return None  # thinking, redacted_thinking, server tool blocks: nothing faithful


def _part_to_openai(block: Block, images: Iterator[Mapping[str, Any]]) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image_url", "image_url": {"url": block.source, **next(images, {})}}
    if isinstance(block, OpaqueBlock):
        return dict(thaw(block.data)) if block.provider == META else _foreign_part(block)
    return None


def _plain_text(part: Mapping[str, Any]) -> bool:
    return part.get("type") == "text" and len(part) == 2


def _body(
    role: str,
    blocks: Sequence[Block],
    form: tuple[bool, Any, bool],
    images: Iterator[Mapping[str, Any]],
) -> dict[str, Any]:
    """One Chat Completions message of ``role`` holding ``blocks`` (no results)."""
    has_form, content_form, no_content = form
    d: dict[str, Any] = {"role": role}
    fields = [b for b in blocks if isinstance(b, OpaqueBlock) and _field_of(b)]
    calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
    parts = [
        p for b in blocks if not _field_of(b) and (p := _part_to_openai(b, images)) is not None
    ]
    content: Any
    if calls or fields:
        if not isinstance(content_form, list) and all(_plain_text(p) for p in parts):
            content = "\n".join(p["text"] for p in parts) if parts else content_form
        else:
            content = parts or (content_form if has_form else [])
    elif not parts and has_form:
        content = content_form
    else:
        content = parts
    if not (no_content and not parts and content in (None, [], "")):
        d["content"] = content
    for b in fields:
        d.update(thaw(b.data))
    if calls:
        d["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments()},
            }
            for c in calls
        ]
    return d


def _result_to_openai(
    block: ToolResultBlock, form: tuple[bool, Any, bool], images: Iterator[Mapping[str, Any]]
) -> dict[str, Any]:
    has_form, content_form, no_content = form
    d: dict[str, Any] = {"role": "tool", "tool_call_id": block.tool_use_id}
    if isinstance(block.content, str):
        if block.content or not (has_form or no_content):
            d["content"] = block.content
        elif not no_content:
            d["content"] = content_form
    else:
        parts = [p for b in block.content if (p := _part_to_openai(b, images)) is not None]
        d["content"] = parts
    return d


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to Chat Completions dicts (plain, JSON-ready, never aliased)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise NotAMessage(f"messages[{i}]", m, "must be a Message")
        if m.role == "tool" and not m.has_tool_result():
            raise InvalidMessage(
                f"messages[{i}].content", m.content, "a tool message needs a ToolResultBlock"
            )
        if m.role != "assistant" and m.has_tool_use():
            raise InvalidMessage(
                f"messages[{i}].content", m.content, "only the assistant calls tools"
            )
        meta = m.metadata.get(META)
        extra: dict[str, Any] = thaw(meta) if isinstance(meta, Mapping) else {}
        role = extra.pop("role", None)
        if role != "developer" or m.role != "system":
            role = m.role
        form = ("content" in extra, extra.pop("content", None), bool(extra.pop(_NO_CONTENT, 0)))
        images = iter(extra.pop(_IMAGE_EXTRA, None) or ())
        if isinstance(m.content, str):
            d: dict[str, Any] = {"role": role, "content": m.content}
            if m.name is not None:
                d["name"] = m.name
            out.append({**d, **extra})
            continue
        results = [b for b in m.content if isinstance(b, ToolResultBlock)]
        rest = [b for b in m.content if not isinstance(b, ToolResultBlock)]
        if not results:
            d = _body(role, rest, form, images)
            if m.name is not None:
                d["name"] = m.name
            out.append({**d, **extra})
            continue
        # Results (one tool message each) and the rest of the message, which keeps its
        # tool calls: results first, unless one answers a call made right here.
        made = [_result_to_openai(b, form, images) for b in results]
        if rest:
            calls = {b.id for b in rest if isinstance(b, ToolUseBlock)}
            rest_role = "user" if m.role == "tool" else m.role
            body = _body(rest_role, rest, (False, None, False), images)
            made = [body, *made] if calls & {b.tool_use_id for b in results} else [*made, body]
            target = body
        else:
            target = made[-1]
        if m.name is not None:
            target["name"] = m.name
        target.update(extra)
        out.extend(made)
    return out
