"""pydantic-ai ``ModelMessage`` lists <-> convomem messages (extra ``pydantic-ai``).

A ``ModelRequest`` becomes a ``user`` message (its user prompts as text and image blocks,
its tool returns as ``ToolResultBlock``s answering their ``tool_call_id``; ``tool`` when it
holds nothing but tool returns), preceded by a ``system`` message for its system prompt
parts, so convomem pins the system prompt. A ``ModelResponse`` becomes an ``assistant``
message: text parts as text, tool calls as ``ToolUseBlock``s, so a call and its return
enter and leave a view together. Parts convomem has no block for (thinking, provider-run
tools, files, instruction deltas...) are ``OpaqueBlock("pydantic_ai", part)``, counted by
their JSON text.

A round trip is exact: every message keeps its own serialization (pydantic-ai's
``ModelMessagesTypeAdapter``, JSON mode) in ``metadata["pydantic_ai"]``, written back as
long as the message's blocks are unchanged. A message convomem changed (a compressed
stand-in, a copy without a stray result) is rebuilt from its blocks, its tool parts
keeping their names and fields. A convomem message that did not come from pydantic-ai
(a summary, the recalled facts, a message added by another adapter) converts to a new
``ModelMessage`` carrying ``metadata={"convomem": {...}}`` (its id and fields), and
converts back to the same ``Message``.

Ids: pydantic-ai messages have none. A message's id is derived from its serialization
(timestamps included) and its occurrence in the list (``is_derived_id``), as in
``convomem.formats.openai``; its system half gets that id with ``:system`` appended. A
memory re-ids a derived id it already holds, so the digest itself is kept in the metadata:
``key(message)`` / ``model_key(model_message)`` match a convomem message with the
``ModelMessage`` it was made of, which is how an adapter finds, in a history, the newest
message a memory holds. pydantic-ai is imported only when a function is called.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import InvalidMessage, MissingDependency, NotAMessage
from ..model import (
    Block,
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..model.values import thaw
from ._common import message_list, stable_id

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["MARK", "META", "digest", "from_pydantic_ai", "key", "model_key", "to_pydantic_ai"]

META: Final = "pydantic_ai"
"""The ``Message.metadata`` key holding a message's pydantic-ai serialization."""
MARK: Final = "convomem"
"""The ``ModelMessage.metadata`` key marking a message that came from convomem."""
SYSTEM_SUFFIX: Final = ":system"
"""Appended to a request's id for the message holding its system prompt parts."""
_FIELDS: Final = ("name", "metadata", "created_at", "priority", "tokens")


def _pm() -> Any:
    try:
        import pydantic_ai.messages as pm
    except ImportError:
        raise MissingDependency(
            "the pydantic-ai format", "pydantic-ai", "pydantic-ai-slim"
        ) from None
    return pm


def digest(message: Any) -> str:
    """A ``ModelMessage``'s digest: what ``key`` gives for the convomem message(s) made of
    it. Its serialization's hash, timestamps included, so it names one message."""
    (dump,) = _adapter(_pm()).dump_python([message], mode="json")
    return _digest(dump)


def key(message: Message) -> str:
    """The digest of the ``ModelMessage`` ``message`` was made of (its id when it was not
    made of one): lets an adapter find, in a pydantic-ai history, the newest message a
    memory already holds, whatever id the memory gave it."""
    meta = message.metadata.get(META)
    found = meta.get("digest") if isinstance(meta, Mapping) else None
    return found if isinstance(found, str) else message.id


def model_key(message: Any) -> str:
    """``key`` for a ``ModelMessage``: the convomem id it carries, else its ``digest``."""
    mark = (message.metadata or {}).get(MARK)
    if isinstance(mark, Mapping) and isinstance(mark.get("id"), str):
        return str(mark["id"])
    return digest(message)


def _digest(dump: Mapping[str, Any]) -> str:
    text = json.dumps(dump, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _fingerprint(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# -- pydantic-ai -> convomem --------------------------------------------------------------


def _user_blocks(content: Any, pm: Any, ta: Any) -> list[Block]:
    items = [content] if isinstance(content, str) else list(content)
    out: list[Block] = []
    for item in items:
        if isinstance(item, str):
            out.append(TextBlock(item))
        elif isinstance(item, pm.ImageUrl):
            out.append(ImageBlock(item.url))
        elif isinstance(item, pm.BinaryContent) and item.is_image:
            out.append(ImageBlock(item.data_uri, item.media_type))
        else:
            out.append(OpaqueBlock(META, {"content": ta.dump_python(item, mode="json")}))
    return out


def _part_blocks(part: Any, dump: dict[str, Any], pm: Any, ta: Any) -> list[Block]:
    """The blocks of one part (``dump`` is its serialization)."""
    if isinstance(part, pm.SystemPromptPart | pm.TextPart):
        return [TextBlock(part.content)]
    if isinstance(part, pm.UserPromptPart):
        return _user_blocks(part.content, pm, ta)
    if isinstance(part, pm.ToolCallPart):  # a provider-run (native) call is not one
        args = part.args if part.args is not None else {}
        return [ToolUseBlock(part.tool_call_id, part.tool_name, args)]
    if isinstance(part, pm.ToolReturnPart):
        text = part.model_response_str(wrap_if_error=False)
        return [ToolResultBlock(part.tool_call_id, text, part.outcome != "success")]
    if isinstance(part, pm.RetryFeedbackPart):
        return [TextBlock(part.model_response())]
    return [OpaqueBlock(META, dump)]


def _message(mid: str, role: str, blocks: list[Block], meta: dict[str, Any], where: str) -> Message:
    try:
        m = Message(mid, role, content=blocks)
    except InvalidMessage as exc:
        raise InvalidMessage(f"{where}.{exc.field}", exc.value, exc.problem) from None
    meta["fp"] = _fingerprint({"role": role, "content": m.to_dict()["content"]})
    return m.replace(metadata={META: meta})


def _marked(m: Any, blocks: list[Block], mark: Mapping[str, Any], where: str) -> Message:
    """A message that came from convomem: its id and fields from the mark."""
    fields = {k: mark[k] for k in _FIELDS if k in mark}
    content: str | list[Block] = blocks
    if mark.get("text") and not blocks:
        content = ""
    elif mark.get("text") and len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        content = blocks[0].text
    try:
        return Message(str(mark.get("id")), str(mark.get("role")), content=content, **fields)
    except InvalidMessage as exc:
        raise InvalidMessage(
            f"{where}.metadata.{MARK}.{exc.field}", exc.value, exc.problem
        ) from None


def from_pydantic_ai(messages: Iterable[ModelMessage]) -> list[Message]:
    """Convert pydantic-ai messages to ``Message`` objects (see the module docstring)."""
    pm = _pm()
    ta = _adapter(pm)
    out: list[Message] = []
    seen: dict[str, int] = {}
    for i, m in enumerate(message_list(messages, "pydantic-ai ModelMessages")):
        where = f"messages[{i}]"
        if not isinstance(m, pm.ModelRequest | pm.ModelResponse):
            raise InvalidMessage(where, m, "must be a pydantic-ai ModelRequest or ModelResponse")
        (dump,) = ta.dump_python([m], mode="json")
        parts = list(m.parts)
        part_dumps = dump.pop("parts")
        blocks = [_part_blocks(p, d, pm, ta) for p, d in zip(parts, part_dumps, strict=True)]
        mark = (m.metadata or {}).get(MARK)
        if isinstance(mark, Mapping) and "id" in mark:
            out.append(_marked(m, [b for bs in blocks for b in bs], mark, where))
            continue
        found = _digest({**dump, "parts": part_dumps})
        mid = stable_id(found, seen, "pai", where)
        if isinstance(m, pm.ModelResponse):
            flat = [b for bs in blocks for b in bs]
            meta = {"digest": found, "kind": "response", "fields": dump, "parts": part_dumps}
            out.append(_message(mid, "assistant", flat, meta, where))
            continue
        system = [j for j, p in enumerate(parts) if isinstance(p, pm.SystemPromptPart)]
        rest = [j for j, p in enumerate(parts) if not isinstance(p, pm.SystemPromptPart)]
        if not system or not rest:  # one message
            flat = [b for bs in blocks for b in bs]
            role = "system" if system else _request_role(flat)
            meta = {"digest": found, "kind": "request", "fields": dump, "parts": part_dumps}
            out.append(_message(mid, role, flat, meta, where))
            continue
        for half, idx in (("system", system), ("rest", rest)):
            flat = [b for j in idx for b in blocks[j]]
            meta = {
                "digest": found,
                "kind": "request",
                "fields": dump,
                "parts": [part_dumps[j] for j in idx],
                "half": half,
                "order": idx,
            }
            if half == "system":
                out.append(_message(mid + SYSTEM_SUFFIX, "system", flat, meta, where))
            else:
                out.append(_message(mid, _request_role(flat), flat, meta, where))
    return out


def _request_role(blocks: Sequence[Block]) -> str:
    if blocks and all(isinstance(b, ToolResultBlock) for b in blocks):
        return "tool"
    return "user"


# -- convomem -> pydantic-ai --------------------------------------------------------------


def _adapter(pm: Any) -> Any:
    return pm.ModelMessagesTypeAdapter


def _unchanged(m: Message, meta: Mapping[str, Any]) -> bool:
    content = {"role": m.role, "content": m.to_dict()["content"]}
    return bool(meta.get("fp") == _fingerprint(content))


def _rebuilt_parts(
    m: Message, kept: Sequence[Mapping[str, Any]], names: Mapping[str, str], pm: Any, ta: Any
) -> list[Any]:
    """Parts for a message whose blocks convomem changed (or that never had parts)."""
    by_call = {d.get("tool_call_id"): d for d in kept if "tool_call_id" in d}
    parts: list[Any] = []
    text_part = pm.SystemPromptPart if m.role == "system" else pm.UserPromptPart
    if m.role == "assistant":
        text_part = pm.TextPart
    for j, b in enumerate(m.blocks):
        if isinstance(b, TextBlock):
            parts.append(text_part(b.text))
        elif isinstance(b, ImageBlock) and m.role != "assistant":
            image = (
                pm.BinaryContent.from_data_uri(b.source)
                if b.source.startswith("data:")
                else pm.ImageUrl(b.source)
            )
            parts.append(pm.UserPromptPart([image]))
        elif isinstance(b, ToolUseBlock):
            args = thaw(b.input)
            old = by_call.get(b.id)
            extra = {} if old is None else {k: old[k] for k in ("id", "provider_name")}
            parts.append(pm.ToolCallPart(b.name, args, tool_call_id=b.id, **extra))
        elif isinstance(b, ToolResultBlock):
            old = by_call.get(b.tool_use_id)
            name = old.get("tool_name") if old is not None else names.get(b.tool_use_id)
            if not isinstance(name, str):
                raise InvalidMessage(
                    f"messages[{m.id!r}].content[{j}].tool_use_id",
                    b.tool_use_id,
                    "pydantic-ai needs the tool's name: put the call before its result",
                )
            outcome = "failed" if b.is_error else "success"
            parts.append(pm.ToolReturnPart(name, b.text(), b.tool_use_id, outcome=outcome))
        elif isinstance(b, OpaqueBlock) and b.provider == META:
            data = thaw(b.data)
            if set(data) == {"content"}:  # an item of a user prompt
                parts.append(pm.UserPromptPart([_item(data["content"], pm, ta)]))
            else:
                parts.append(data)
    return parts


def _item(dump: Any, pm: Any, ta: Any) -> Any:
    if isinstance(dump, str):
        return dump
    request = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": [dump]}]}
    return ta.validate_python([request])[0].parts[0].content[0]


def _mark(m: Message) -> dict[str, Any]:
    mark: dict[str, Any] = {"id": m.id, "role": m.role}
    if isinstance(m.content, str):
        mark["text"] = True
    data = m.to_dict()
    mark |= {k: data[k] for k in _FIELDS if k in data}
    return mark


def _build(kind: str, fields: Mapping[str, Any], parts: list[Any], pm: Any, ta: Any) -> Any:
    """A ``ModelMessage`` from its fields and parts (part objects or serialized parts)."""
    if all(isinstance(p, Mapping) for p in parts):
        return ta.validate_python([{**fields, "kind": kind, "parts": list(parts)}])[0]
    objs = [p if not isinstance(p, Mapping) else _one_part(kind, p, ta) for p in parts]
    shell = ta.validate_python([{**fields, "kind": kind, "parts": []}])[0]
    shell.parts = objs
    return shell


def _one_part(kind: str, dump: Mapping[str, Any], ta: Any) -> Any:
    return ta.validate_python([{"kind": kind, "parts": [dict(dump)]}])[0].parts[0]


def _meta(m: Message) -> dict[str, Any] | None:
    """The message's pydantic-ai metadata while its blocks are unchanged, else None."""
    raw = m.metadata.get(META)
    meta = thaw(raw) if isinstance(raw, Mapping) else None
    return meta if meta is not None and _unchanged(m, meta) else None


def to_pydantic_ai(messages: Sequence[Message]) -> list[ModelMessage]:
    """Convert messages to pydantic-ai ``ModelRequest`` / ``ModelResponse`` objects.

    The two halves of a request (its system prompt parts and the rest) become that one
    request again, at the system half's place, when both are in ``messages`` unchanged
    (a view may put the user's facts or a summary between them), so what a model is sent
    is the request the history holds.
    """
    pm = _pm()
    ta = _adapter(pm)
    out: list[Any] = []
    names: dict[str, str] = {}
    metas: list[dict[str, Any] | None] = []
    rest_at: dict[str, int] = {}  # digest -> index of the unchanged rest half
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise NotAMessage(f"messages[{i}]", m, "must be a Message")
        metas.append(_meta(m))
        meta = metas[-1]
        if meta is not None and meta.get("half") == "rest":
            rest_at.setdefault(meta["digest"], i)
    merged: set[int] = set()
    for i, (m, meta) in enumerate(zip(messages, metas, strict=True)):
        for b in m.blocks:
            if isinstance(b, ToolUseBlock):
                names[b.id] = b.name
        if i in merged:
            continue
        if meta is None:
            raw = m.metadata.get(META)
            old = thaw(raw) if isinstance(raw, Mapping) else None
            kind = "response" if m.role == "assistant" else "request"
            parts = _rebuilt_parts(m, old.get("parts", []) if old else [], names, pm, ta)
            msg = _build(kind, old["fields"] if old else {}, parts, pm, ta)
            if old is None:
                msg.metadata = {MARK: _mark(m)}
            out.append(msg)
            continue
        rest = rest_at.get(meta["digest"], -1) if meta.get("half") == "system" else -1
        if rest > i:
            other = metas[rest]
            assert other is not None
            pairs = sorted(
                zip(meta["order"] + other["order"], meta["parts"] + other["parts"], strict=True),
                key=lambda pair: pair[0],
            )
            out.append(_build("request", meta["fields"], [p for _, p in pairs], pm, ta))
            merged.add(rest)
            continue
        out.append(_build(meta["kind"], meta["fields"], meta["parts"], pm, ta))
    return out
