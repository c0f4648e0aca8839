"""LangChain ``BaseMessage`` lists <-> convomem messages (extra ``langchain``).

``SystemMessage``, ``HumanMessage``, ``AIMessage`` (its ``tool_calls`` become
``ToolUseBlock``s) and ``ToolMessage`` (a ``ToolResultBlock`` answering ``tool_call_id``;
``status="error"`` is ``is_error``) map to the four roles; a ``ChatMessage`` with one of
those roles is accepted too. langchain-core is imported only when a function is called.

A round trip is exact: ids, names and the fields convomem has no place for
(``additional_kwargs``, ``response_metadata``, ``usage_metadata``, ``invalid_tool_calls``,
a tool message's ``name`` and ``artifact``) are kept in ``metadata["langchain"]``. A
content list that convomem cannot rebuild exactly (provider blocks such as ``tool_use``
or ``reasoning``, extra keys) is kept whole and sent back as long as the message's blocks
are unchanged. Messages without an id get a deterministic one (as in
``convomem.formats.openai``); it is not written back to a message that had none.
"""

from __future__ import annotations

import copy
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
from ..model.blocks import _block_to_dict
from ..model.values import thaw
from ._anthropic_read import image_from_anthropic
from ._common import at_block, at_field, message_list, stable_id, tool_arguments

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

META: Final = "langchain"
"""The ``Message.metadata`` key holding LangChain fields convomem has no place for."""

_KEPT_FIELDS: Final = ("additional_kwargs", "response_metadata")
_AI_FIELDS: Final = ("invalid_tool_calls", "usage_metadata")
_CHAT_ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
}


def _lc() -> Any:
    try:
        import langchain_core.messages as lc_messages
    except ImportError:
        raise MissingDependency("the LangChain format", "langchain", "langchain-core") from None
    return lc_messages


def _fingerprint(blocks: Iterable[Block]) -> str:
    """A digest of the blocks, to tell whether a kept original still matches them."""
    data = [_block_to_dict(b) for b in blocks if not isinstance(b, ToolUseBlock)]
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# -- LangChain -> convomem ---------------------------------------------------------------


def _image_from_langchain(item: Mapping[str, Any], where: str) -> ImageBlock | None:
    kind = item.get("type")
    if kind == "image_url":
        spec = item.get("image_url")
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        return ImageBlock(url) if isinstance(url, str) and url else None
    if "source" in item:  # an Anthropic-style block inside LangChain content
        return image_from_anthropic(item, where)
    if isinstance(item.get("url"), str) and item["url"]:
        return ImageBlock(item["url"])
    data = item.get("base64", item.get("data"))
    mime = item.get("mime_type")
    if isinstance(data, str) and data and isinstance(mime, str) and mime:
        return ImageBlock(f"data:{mime};base64,{data}", mime)
    file_id = item.get("file_id", item.get("id") if item.get("source_type") == "id" else None)
    if isinstance(file_id, str) and file_id:
        return ImageBlock(file_id)
    return None


_CALL_ITEMS: Final = frozenset(
    {"tool_use", "tool_call", "tool_call_chunk", "invalid_tool_call", "function_call"}
)
"""Content items that repeat ``AIMessage.tool_calls``: skipped, or a call would count twice."""


def _blocks_from_content(content: Any, where: str) -> list[ResultPart]:
    """The blocks of a LangChain content list: text, images, and the rest opaque.

    Provider items (``thinking``, ``reasoning``, ``document``...) become
    ``OpaqueBlock("langchain", item)``, so they are counted; items repeating tool calls
    are skipped.
    """
    out: list[ResultPart] = []
    for j, item in enumerate(content):
        at = f"{where}[{j}]"
        try:
            if isinstance(item, str):
                out.append(TextBlock(item))
                continue
            if not isinstance(item, Mapping):
                raise InvalidMessage(at, item, "a content item must be a string or an object")
            kind = item.get("type")
            if kind == "text" and isinstance(item.get("text"), str):
                out.append(TextBlock(item["text"]))
            elif kind in ("image", "image_url") and (image := _image_from_langchain(item, at)):
                out.append(image)
            elif isinstance(kind, str) and kind and kind not in _CALL_ITEMS:
                out.append(OpaqueBlock(META, item))
        except InvalidMessage as exc:
            raise at_block(at, exc) from None
    return out


def _content_form(m: Any, parts: Sequence[Block], kind: str) -> Any:
    """What ``to_langchain`` would write as the content for ``parts``."""
    if kind == "tool":
        return _result_to_langchain(ToolResultBlock("x", tuple(_as_parts(parts))))
    has_calls = bool(getattr(m, "tool_calls", None))
    return _content_to_langchain(parts, has_calls)


def _as_parts(blocks: Sequence[Block]) -> list[ResultPart]:
    """The blocks LangChain content can hold: text, images, and typed opaque items."""
    return [
        b
        for b in blocks
        if isinstance(b, TextBlock | ImageBlock)
        or (isinstance(b, OpaqueBlock) and isinstance(b.data.get("type"), str))
    ]


def _message_from_langchain(m: Any, i: int, seen: dict[str, int], lc: Any) -> Message:
    where = f"messages[{i}]"
    meta: dict[str, Any] = {}
    if isinstance(m, lc.ToolMessage):
        kind = "tool"
    elif isinstance(m, lc.AIMessage):
        kind = "assistant"
    elif isinstance(m, lc.HumanMessage):
        kind = "user"
    elif isinstance(m, lc.SystemMessage):
        kind = "system"
    elif isinstance(m, lc.ChatMessage) and m.role in _CHAT_ROLES:
        kind = _CHAT_ROLES[m.role]
        meta["chat_role"] = m.role
    else:
        raise InvalidMessage(
            where,
            type(m).__name__,
            "unsupported message type; use SystemMessage, HumanMessage, AIMessage, "
            "ToolMessage or a ChatMessage with a system/user/assistant role",
        )
    msg_id = m.id
    if msg_id is None:
        msg_id = stable_id(m.model_dump(), seen, "lc", where)
        meta["no_id"] = True
    raw = m.content
    parts: list[Block]
    if isinstance(raw, str):
        parts = [TextBlock(raw)] if raw else []
    elif isinstance(raw, list):
        parts = list(_blocks_from_content(raw, where + ".content"))
        if _content_form(m, parts, kind) != raw:
            meta["content"] = [_fingerprint(parts), copy.deepcopy(raw)]
    else:
        raise InvalidMessage(where + ".content", raw, "must be a string or a list")

    content: str | list[Block]
    if kind == "tool":
        call_id = m.tool_call_id
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(where + ".tool_call_id", call_id, "must be a non-empty string")
        result: str | tuple[ResultPart, ...] = (
            raw if isinstance(raw, str) else tuple(_as_parts(parts))
        )
        content = [ToolResultBlock(call_id, result, m.status == "error")]
        if m.name is not None:
            meta["name"] = m.name
        if m.artifact is not None:
            meta["artifact"] = copy.deepcopy(m.artifact)
    else:
        content = raw if isinstance(raw, str) else parts
        calls = list(getattr(m, "tool_calls", None) or [])
        if calls:
            if isinstance(content, str):
                content = parts
            generated: list[str] = []
            for j, call in enumerate(calls):
                call_id = call.get("id")
                if call_id is None:  # some providers give none; a stable one stands in
                    call_id = f"{msg_id}:call{j}"
                    generated.append(call_id)
                name, args = call.get("name"), call.get("args", {})
                at = f"{where}.tool_calls[{j}]"
                if not isinstance(name, str) or not name:
                    raise InvalidMessage(at + ".name", name, "must be a non-empty string")
                if not isinstance(args, Mapping):
                    raise InvalidMessage(at + ".args", args, "must be a dict")
                if not isinstance(call_id, str) or not call_id:
                    raise InvalidMessage(at + ".id", call_id, "must be a non-empty string")
                content.append(ToolUseBlock(call_id, name, copy.deepcopy(dict(args))))
            if generated:
                meta["generated_call_ids"] = generated
        for field in _AI_FIELDS if kind == "assistant" else ():
            value = getattr(m, field, None)
            if value:
                meta[field] = copy.deepcopy(value)
    for field in _KEPT_FIELDS:
        value = getattr(m, field, None)
        if value:
            meta[field] = copy.deepcopy(value)
    try:
        return Message(
            msg_id,
            kind,
            content=content,
            name=None if kind == "tool" else m.name,
            metadata={META: meta} if meta else None,
        )
    except InvalidMessage as exc:
        raise at_field(where, exc) from None


def from_langchain(messages: Iterable[BaseMessage]) -> list[Message]:
    """Convert LangChain messages to ``Message`` objects."""
    lc = _lc()
    seen: dict[str, int] = {}
    out: list[Message] = []
    for i, m in enumerate(message_list(messages, "LangChain messages")):
        if not isinstance(m, lc.BaseMessage):
            raise InvalidMessage(f"messages[{i}]", m, "must be a LangChain BaseMessage")
        out.append(_message_from_langchain(m, i, seen, lc))
    return out


# -- convomem -> LangChain ---------------------------------------------------------------


def _part_to_langchain(block: ResultPart) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, OpaqueBlock):  # a provider item: LangChain content holds it as is
        return dict(thaw(block.data))
    return {"type": "image_url", "image_url": {"url": block.source}}


def _content_to_langchain(blocks: Sequence[Block], has_calls: bool) -> str | list[Any]:
    parts = _as_parts(blocks)
    if has_calls and all(isinstance(p, TextBlock) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextBlock))
    return [_part_to_langchain(p) for p in parts]


def _result_to_langchain(block: ToolResultBlock) -> str | list[Any]:
    if isinstance(block.content, str):
        return block.content
    return [_part_to_langchain(p) for p in _as_parts(block.content)]


def _kept(meta: Mapping[str, Any], blocks: Sequence[Block]) -> Any:
    """The original content list, if it was kept and the blocks are unchanged."""
    original = meta.get("content")
    if original and original[0] == _fingerprint(blocks):
        return copy.deepcopy(original[1])
    return None


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """Convert messages to LangChain messages.

    A message carrying several tool results (Anthropic style) becomes one
    ``ToolMessage`` per result, followed by a ``HumanMessage`` for any text beside them.
    """
    lc = _lc()
    out: list[BaseMessage] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise NotAMessage(f"messages[{i}]", m, "must be a Message")
        meta = thaw(m.metadata.get(META) or {})
        msg_id = None if meta.get("no_id") else m.id
        common: dict[str, Any] = {
            field: copy.deepcopy(meta[field]) for field in _KEPT_FIELDS if field in meta
        }
        if m.has_tool_result():
            results = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
            for k, r in enumerate(results):
                kept = None
                if len(results) == 1 and isinstance(r.content, tuple):
                    kept = _kept(meta, r.content)
                out.append(
                    lc.ToolMessage(
                        content=kept if kept is not None else _result_to_langchain(r),
                        tool_call_id=r.tool_use_id,
                        status="error" if r.is_error else "success",
                        id=msg_id if k == 0 or msg_id is None else f"{msg_id}#{k}",
                        name=meta.get("name"),
                        artifact=copy.deepcopy(meta.get("artifact")),
                        **common,
                    )
                )
            others = _as_parts(m.blocks)
            if others:
                out.append(
                    lc.HumanMessage(
                        content=[_part_to_langchain(p) for p in others],
                        id=None if msg_id is None else f"{msg_id}#text",
                        name=m.name,
                    )
                )
            continue
        if m.role == "tool":
            raise InvalidMessage(
                f"messages[{i}].content", m.content, "a tool message needs a ToolResultBlock"
            )
        calls = [b for b in m.blocks if isinstance(b, ToolUseBlock)]
        content: Any
        if isinstance(m.content, str):
            content = m.content
        else:
            kept = _kept(meta, m.content)
            content = kept if kept is not None else _content_to_langchain(m.content, bool(calls))
        kwargs: dict[str, Any] = {"content": content, "id": msg_id, "name": m.name, **common}
        fields = {  # an OpenAI refusal or audio field: where ChatOpenAI keeps it
            k: v
            for b in m.blocks
            if isinstance(b, OpaqueBlock) and b.provider == "openai" and "type" not in b.data
            for k, v in thaw(b.data).items()
        }
        if fields:
            kwargs["additional_kwargs"] = {**fields, **kwargs.get("additional_kwargs", {})}
        if "chat_role" in meta:
            out.append(lc.ChatMessage(role=meta["chat_role"], **kwargs))
        elif m.role == "system":
            out.append(lc.SystemMessage(**kwargs))
        elif m.role == "user":
            out.append(lc.HumanMessage(**kwargs))
        else:
            generated = set(meta.get("generated_call_ids") or ())
            tool_calls = [
                {
                    "name": c.name,
                    "args": copy.deepcopy(
                        tool_arguments(c, f"messages[{i}].tool_calls[{c.id!r}].args", "LangChain")
                    ),
                    "id": None if c.id in generated else c.id,
                    "type": "tool_call",
                }
                for c in calls
            ]
            for field in _AI_FIELDS:
                if field in meta:
                    kwargs[field] = copy.deepcopy(meta[field])
            out.append(lc.AIMessage(tool_calls=tool_calls, **kwargs))
    return out
