"""LlamaIndex ``ChatMessage`` lists <-> convomem messages (extra ``llamaindex``).

Roles: ``system`` / ``developer`` -> system, ``user`` -> user, ``assistant`` / ``chatbot``
/ ``model`` -> assistant, and a ``tool`` (or legacy ``function``) message answering
``additional_kwargs["tool_call_id"]`` -> a tool message with a ``ToolResultBlock``. Blocks:
text and images (by URL, or inline bytes as a data URL) map to convomem's; a
``ToolCallBlock`` is a ``ToolUseBlock`` (as are OpenAI-style
``additional_kwargs["tool_calls"]``, which older LlamaIndex LLMs write), so a call and its
result stay together; thinking, audio, video, documents, citations and cache points are
``OpaqueBlock("llamaindex", block)``, counted by their JSON text. A tool message without a
``tool_call_id`` (a ReAct observation) is kept as a user message, its role remembered.

A round trip is exact: each message keeps its own serialization
(``ChatMessage.model_dump(mode="json")``) in ``metadata["llamaindex"]``, written back while
its blocks are unchanged; a message convomem changed (a compressed stand-in, a copy without
a stray result) is rebuilt from its blocks, ``additional_kwargs`` kept.

Ids: ``ChatMessage`` has none, and the same text can be said twice, so the id is derived
from the content and its occurrence in the list (``is_derived_id``), as in
``convomem.formats.openai``: a memory re-ids such a message when the id is taken. None is
written back (LlamaIndex LLMs send ``additional_kwargs`` to the provider). LlamaIndex is
imported only when a function is called.
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
    ResultPart,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..model.values import thaw
from ._common import at_field, message_list, stable_id

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ChatMessage

__all__ = ["META", "from_llamaindex", "to_llamaindex"]

META: Final = "llamaindex"
"""The ``Message.metadata`` key holding a message's LlamaIndex serialization."""

_ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _types() -> Any:
    try:
        import llama_index.core.base.llms.types as li
    except ImportError:
        raise MissingDependency("the LlamaIndex format", "llamaindex", "llama-index-core") from None
    return li


def _fingerprint(m: Message) -> str:
    data = json.dumps([m.role, m.to_dict()["content"]], sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(data.encode(), digest_size=8).hexdigest()


# -- LlamaIndex -> convomem -----------------------------------------------------------


def _block(b: Any, dump: Mapping[str, Any], li: Any) -> Block | None:
    if isinstance(b, li.TextBlock):
        return TextBlock(b.text)
    if isinstance(b, li.ImageBlock) and b.path is None and b.detail is None:
        if b.url is not None and b.image is None:
            return ImageBlock(str(b.url), b.image_mimetype)
        if b.image is not None and b.url is None and b.image_mimetype:
            data = dump["image"]
            return ImageBlock(f"data:{b.image_mimetype};base64,{data}", b.image_mimetype)
    if isinstance(b, li.ToolCallBlock):
        return None  # read with the message's calls
    return OpaqueBlock(META, dump)


def _legacy_calls(kwargs: Mapping[str, Any], where: str) -> list[ToolUseBlock]:
    """OpenAI-style ``additional_kwargs["tool_calls"]`` (dicts or SDK objects)."""
    out: list[ToolUseBlock] = []
    for j, call in enumerate(kwargs.get("tool_calls") or ()):
        data = call.model_dump() if hasattr(call, "model_dump") else call
        fn = data.get("function") if isinstance(data, Mapping) else None
        if not isinstance(fn, Mapping):
            raise InvalidMessage(f"{where}.additional_kwargs.tool_calls[{j}]", call, "no function")
        args = fn.get("arguments") or "{}"
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            parsed = args
        out.append(ToolUseBlock(str(data.get("id")), str(fn.get("name")), parsed))
    return out


def _message(m: Any, i: int, seen: dict[str, int], li: Any) -> Message:
    where = f"messages[{i}]"
    dump = m.model_dump(mode="json")
    role = _ROLES.get(str(m.role.value))
    if role is None:
        raise InvalidMessage(where + ".role", m.role, f"must be one of {sorted(_ROLES)}")
    kwargs = m.additional_kwargs
    call_id = kwargs.get("tool_call_id")
    if role == "tool" and not (isinstance(call_id, str) and call_id):
        role = "user"  # an observation with no call to answer
    blocks: list[Block] = []
    generated: list[str] = []
    for j, (b, d) in enumerate(zip(m.blocks, dump["blocks"], strict=True)):
        block = _block(b, d, li)
        if block is None:  # a ToolCallBlock; some LLMs give no id: a stable one stands in
            cid = b.tool_call_id or f"{stable_id(dump, {}, 'li', where)}:call{j}"
            if not b.tool_call_id:
                generated.append(cid)
            block = ToolUseBlock(cid, b.tool_name, b.tool_kwargs)
        blocks.append(block)
    if role == "assistant":
        blocks += _legacy_calls(kwargs, where)
    content: list[Block]
    if role == "tool":
        parts: list[ResultPart] = [
            b for b in blocks if isinstance(b, TextBlock | ImageBlock | OpaqueBlock)
        ]
        only_text = all(isinstance(b, TextBlock) for b in parts)
        result: str | tuple[ResultPart, ...] = (
            "\n".join(b.text for b in parts if isinstance(b, TextBlock))
            if only_text
            else tuple(parts)
        )
        content = [ToolResultBlock(str(call_id), result)]
    else:
        content = blocks
    try:
        msg = Message(stable_id(dump, seen, "li", where), role, content=content)
    except InvalidMessage as exc:
        raise at_field(where, exc) from None
    meta = {"fp": _fingerprint(msg), "message": dump}
    if generated:
        meta["generated"] = generated
    return msg.replace(metadata={META: meta})


def from_llamaindex(messages: Iterable[ChatMessage]) -> list[Message]:
    """Convert LlamaIndex ``ChatMessage``s to ``Message`` objects."""
    li = _types()
    seen: dict[str, int] = {}
    out: list[Message] = []
    for i, m in enumerate(message_list(messages, "LlamaIndex ChatMessages")):
        if not isinstance(m, li.ChatMessage):
            raise InvalidMessage(f"messages[{i}]", m, "must be a LlamaIndex ChatMessage")
        out.append(_message(m, i, seen, li))
    return out


# -- convomem -> LlamaIndex -----------------------------------------------------------


def _to_block(b: Block, li: Any, generated: Sequence[str] = ()) -> Any:
    if isinstance(b, TextBlock):
        return li.TextBlock(text=b.text)
    if isinstance(b, ImageBlock):
        if b.source.startswith("data:") and ";base64," in b.source:
            head, data = b.source.split(";base64,", 1)
            mime = b.media_type or head.removeprefix("data:")
            return li.ImageBlock(image=data.encode(), image_mimetype=mime)
        return li.ImageBlock(url=b.source, image_mimetype=b.media_type)
    if isinstance(b, ToolUseBlock):
        cid = None if b.id in generated else b.id
        return li.ToolCallBlock(tool_call_id=cid, tool_name=b.name, tool_kwargs=thaw(b.input))
    if isinstance(b, OpaqueBlock) and b.provider == META:
        return li.ChatMessage.model_validate({"blocks": [thaw(b.data)]}).blocks[0]
    text = b.text() if isinstance(b, OpaqueBlock) else ""
    return li.TextBlock(text=text) if text else None


def _rebuilt(m: Message, meta: Mapping[str, Any] | None, li: Any) -> list[Any]:
    """LlamaIndex messages for ``m`` built from its blocks."""
    original = meta.get("message", {}) if meta else {}
    kwargs = dict(original.get("additional_kwargs", {}))
    role = original.get("role") or m.role
    results = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
    others = [b for b in m.blocks if not isinstance(b, ToolResultBlock)]
    out: list[Any] = []
    for r in results:  # one tool message per result (Anthropic style holds several)
        parts = [r.content] if isinstance(r.content, str) else list(r.content)
        blocks = [li.TextBlock(text=p) if isinstance(p, str) else _to_block(p, li) for p in parts]
        extra = kwargs if role in ("tool", "function") else {}
        out.append(
            li.ChatMessage(
                role="tool" if role not in ("tool", "function") else role,
                blocks=[b for b in blocks if b is not None],
                additional_kwargs={**extra, "tool_call_id": r.tool_use_id},
            )
        )
    if others or not results:
        if "tool_calls" in kwargs:  # legacy calls: keep those still in the message
            ids = {b.id for b in others if isinstance(b, ToolUseBlock)}
            kwargs["tool_calls"] = [c for c in kwargs["tool_calls"] if _call_id(c) in ids]
            others = [b for b in others if not isinstance(b, ToolUseBlock)]
        blocks = [_to_block(b, li, meta.get("generated", ()) if meta else ()) for b in others]
        out.append(
            li.ChatMessage(
                role=role if role not in ("tool", "function") else "user",
                blocks=[b for b in blocks if b is not None],
                additional_kwargs={} if results else kwargs,
            )
        )
    return out


def _call_id(call: Any) -> Any:
    data = call.model_dump() if hasattr(call, "model_dump") else call
    return data.get("id") if isinstance(data, Mapping) else None


def to_llamaindex(messages: Sequence[Message]) -> list[ChatMessage]:
    """Convert messages to LlamaIndex ``ChatMessage``s.

    A message carrying several tool results (Anthropic style) becomes one ``tool``
    message per result, then a message for anything else it holds.
    """
    li = _types()
    out: list[ChatMessage] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise NotAMessage(f"messages[{i}]", m, "must be a Message")
        raw = m.metadata.get(META)
        meta = thaw(raw) if isinstance(raw, Mapping) else None
        if meta is not None and meta.get("fp") == _fingerprint(m):
            out.append(li.ChatMessage.model_validate(meta["message"]))
        else:
            out.extend(_rebuilt(m, meta, li))
    return out
