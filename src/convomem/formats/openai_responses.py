"""OpenAI Responses API input items <-> convomem messages.

The Responses API (and the OpenAI Agents SDK, whose sessions store these items) speaks
in *items*: messages (``{"role", "content"}``, or ``{"type": "message", "id", "status",
...}``), ``function_call`` / ``function_call_output``, ``reasoning``, and many tool items
(``web_search_call``, ``computer_call``, ``mcp_call``, ``item_reference``, ...). Each item
becomes one ``Message`` the memory understands:

- a message item: a message of its role (``developer`` is the ``system`` role); its
  ``input_text`` / ``output_text`` parts are ``TextBlock``s, an ``input_image`` by URL an
  ``ImageBlock``, any other part (``refusal``, ``input_file``, ``input_audio``, a type
  not known yet) an ``OpaqueBlock`` (provider ``"openai_responses"``) kept exactly;
- ``function_call`` / ``custom_tool_call``: an assistant message with a ``ToolUseBlock``
  (arguments parsed when they are a JSON object written as ``json.dumps`` writes it, else
  kept as their exact text); ``function_call_output`` / ``custom_tool_call_output``: a
  ``tool`` message with the ``ToolResultBlock`` answering it, so the memory keeps a call
  and its output together when it packs, evicts or summarizes;
- ``computer_call``, ``shell_call``, ``apply_patch_call`` and their outputs: the item
  kept opaque, paired by ``call_id`` the same way (a computer screenshot is an
  ``ImageBlock``, counted as an image);
- every other item (``reasoning``, hosted tool calls, ``mcp_*``, ``item_reference``, a
  type not known yet): an assistant message holding the item as an ``OpaqueBlock``.

Round trip: ``to_responses(from_responses(items)) == items`` exactly, unknown keys
included. What the blocks do not say (ids, ``status``, ``annotations``, ``logprobs``,
``phase``, the item ``type``) is kept in ``metadata["openai_responses"]`` as a small patch
against the canonical rendering (``_responses_diff``). Message ids are derived from the
item's content and occurrence (``is_derived_id``), never taken from the item's ``id``:
the Agents SDK gives different items the same placeholder id.

``to_responses`` renders any message: one from ``from_responses`` as its item; another
(from Chat Completions, Anthropic, or built by hand) as a message item, one
``function_call`` per tool call and one ``function_call_output`` per result, in block
order. Opaque blocks of other providers have no faithful Responses equivalent and are
left out, as are ``name`` and ``is_error``.

Malformed input raises ``InvalidMessage`` naming the item and field (``items[3].call_id``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidMessage, NotAMessage
from ..model import (
    Block,
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..model.values import freeze, thaw, too_deep
from ._common import message_list, plain, stable_id
from ._responses_diff import apply, diff, same
from ._responses_read import META as META
from ._responses_read import PAIRED_OUTPUTS, read_item

__all__ = ["META", "from_responses", "to_responses"]

_PART_KINDS: Final = frozenset(
    {"input_text", "output_text", "input_image", "input_file", "input_audio", "refusal"}
)
"""Opaque blocks of these types are content parts of a message item; others are items."""
_PLAIN: Final = frozenset({"easy", "function_call", "function_call_output"})
"""Kinds whose item may be exactly what any message renders as: no metadata needed."""


def from_responses(items: Iterable[Any]) -> list[Message]:
    """Convert Responses API input items (dicts, or SDK objects with ``model_dump()``)."""
    seen: dict[str, int] = {}
    out: list[Message] = []
    try:
        for i, raw in enumerate(message_list(items, "Responses API input items")):
            where = f"items[{i}]"
            data, _ = freeze(plain(raw), where)  # JSON, or an error naming the bad part
            kind, role, content = read_item(data, where)
            message_id = stable_id(data, seen, "or", where)
            base = canonical(role, content, kind)
            patch = diff(data, base)
            if patch is None and kind in _PLAIN:
                plain_message = Message(message_id, role, content=content)
                if same(_general(plain_message), [base]):  # nothing to remember
                    out.append(plain_message)
                    continue
            meta: dict[str, Any] = {"type": kind}
            if patch is not None:
                meta.update(patch)  # flat: a patch's keys are never "type"
            out.append(Message(message_id, role, content=content, metadata={META: meta}))
    except RecursionError:
        raise too_deep("items") from None
    return out


# -- convomem -> Responses -----------------------------------------------------------------


def _part(block: Block, role: str, typed: bool = False) -> dict[str, Any] | None:
    """A message item's content part for ``block`` (None: nothing faithful); ``typed``:
    of an output message as the API returns it (``logprobs`` beside ``annotations``)."""
    if isinstance(block, TextBlock):
        if role != "assistant":
            return {"type": "input_text", "text": block.text}
        if typed:
            return {"type": "output_text", "text": block.text, "annotations": [], "logprobs": []}
        return {"type": "output_text", "text": block.text, "annotations": []}
    if isinstance(block, ImageBlock):
        return {"type": "input_image", "image_url": block.source, "detail": "auto"}
    if isinstance(block, OpaqueBlock) and block.provider == META:
        return dict(thaw(block.data))
    return None


def _output(block: ToolResultBlock) -> str | list[dict[str, Any]]:
    if isinstance(block.content, str):
        return block.content
    parts: list[dict[str, Any]] = []
    for p in block.content:
        if isinstance(p, TextBlock):
            parts.append({"type": "input_text", "text": p.text})
        elif isinstance(p, ImageBlock):
            parts.append({"type": "input_image", "image_url": p.source})
        elif p.provider == META:
            parts.append(dict(thaw(p.data)))
    return parts


def _call_item(block: ToolUseBlock, kind: str = "function_call") -> dict[str, Any]:
    key = "arguments" if kind == "function_call" else "input"
    return {"type": kind, "call_id": block.id, "name": block.name, key: block.arguments()}


def _output_item(block: ToolResultBlock, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": block.tool_use_id, "output": _output(block)}


def canonical(role: str, content: str | Sequence[Block], kind: str) -> dict[str, Any] | None:
    """The canonical item of ``kind`` for a message's role and content; None when the
    content is not what an item of that kind reads into (a message changed since)."""
    blocks = () if isinstance(content, str) else tuple(content)
    if kind == "easy" or kind == "message":
        item: dict[str, Any] = {"role": role, "content": content}
        if not isinstance(content, str):
            if any(isinstance(b, ToolUseBlock | ToolResultBlock) for b in blocks):
                return None
            typed = kind == "message"
            item["content"] = [p for b in blocks if (p := _part(b, role, typed)) is not None]
        if kind == "message":  # as the API returns an output message
            item["type"] = "message"
            if role == "assistant":
                item["status"] = "completed"
        return item
    first = blocks[0] if blocks else None
    if kind in ("function_call", "custom_tool_call") and isinstance(first, ToolUseBlock):
        return _call_item(first, kind)
    if isinstance(first, ToolResultBlock):
        if kind in ("function_call_output", "custom_tool_call_output"):
            return _output_item(first, kind)
        pieces = () if isinstance(first.content, str) else first.content
        if (
            kind == "computer_call_output"
            and len(pieces) == 1
            and isinstance(pieces[0], ImageBlock)
        ):
            screenshot = {"type": "computer_screenshot", "image_url": pieces[0].source}
            return {"type": kind, "call_id": first.tool_use_id, "output": screenshot}
        if kind == "item" and len(pieces) == 1 and isinstance(pieces[0], OpaqueBlock):
            return dict(thaw(pieces[0].data))
    if kind == "item":
        opaque = [b for b in blocks if isinstance(b, OpaqueBlock) and b.provider == META]
        if len(opaque) == 1:
            return dict(thaw(opaque[0].data))
    return None


def _general(m: Message) -> list[dict[str, Any]]:
    """Items for a message of any origin, in block order."""
    role = "user" if m.role == "tool" else m.role
    if isinstance(m.content, str):
        return [{"role": role, "content": m.content}]
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            items.append({"role": role, "content": list(parts)})
            parts.clear()

    held = {  # calls whose item is held opaque beside their ToolUseBlock (computer_call)
        b.data.get("call_id")
        for b in m.content
        if isinstance(b, OpaqueBlock) and b.provider == META
    }
    for b in m.content:
        if isinstance(b, ToolUseBlock):
            if b.id not in held:
                flush()
                items.append(_call_item(b))
        elif isinstance(b, ToolResultBlock):
            flush()
            item = canonical(m.role, (b,), "item")
            held_output = (
                item is not None
                and item.get("type") in PAIRED_OUTPUTS
                and item.get("call_id") == b.tool_use_id
            )  # a computer_call_output kept whole; else an output of parts
            items.append(item if item is not None and held_output else _output_item(b))
        elif (
            isinstance(b, OpaqueBlock) and b.provider == META and b.kind not in _PART_KINDS
        ):  # a whole item held opaque (reasoning, a hosted tool call)
            flush()
            items.append(dict(thaw(b.data)))
        elif (part := _part(b, role)) is not None:
            parts.append(part)
    flush()
    if not items:
        items.append({"role": role, "content": []})
    return items


def to_responses(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to Responses API input items (plain, JSON-ready, never aliased)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise NotAMessage(f"messages[{i}]", m, "must be a Message")
        meta = m.metadata.get(META)
        kind = meta.get("type") if isinstance(meta, Mapping) else None
        role = m.role
        base = canonical(role, m.content, kind) if isinstance(kind, str) else None
        if base is None:
            out.extend(_general(m))
            continue
        patch = {k: v for k, v in meta.items() if k != "type"} if isinstance(meta, Mapping) else {}
        item = apply(base, thaw(patch))
        if not isinstance(item, dict):
            raise InvalidMessage(f"messages[{i}].metadata.{META}", meta, "is not an item patch")
        out.append(item)
    return out
