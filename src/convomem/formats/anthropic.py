"""Anthropic Messages API <-> convomem messages.

The Messages API has no system role: ``to_anthropic`` returns the system prompt as the
separate ``system`` field, and ``from_anthropic`` takes it as an argument (a string, or a
list of text blocks, which comes back as a list with its ``cache_control``). Content
blocks map one to one: ``text``, ``image`` (base64, url or file source), ``tool_use`` and
``tool_result``. A user message carrying tool results becomes a ``role="tool"`` message
(its text, if any, stays in it, in order); on the way back, results travel in a user
message, results first, and consecutive result messages share one user message, as the
API requires after an assistant turn with parallel calls.

Nothing is lost: blocks convomem does not interpret (``thinking``, ``redacted_thinking``,
``document``, ``search_result``, server-tool blocks...), in a message or inside a tool
result, become ``OpaqueBlock``s, counted and written back exactly; block keys such as
``cache_control`` or ``citations`` (inside tool results too) are kept in
``metadata["anthropic"]`` with their position and written back in place. Message-level
keys of a response object (``id``, ``model``, ``usage``...) are kept there too but not
sent back, since the API accepts only ``role`` and ``content``. Anthropic has no message
``name``; it is not sent.

A round trip ``to_anthropic(from_anthropic(messages, system))`` gives the request back,
with these normalizations. Since the API would reject them, empty text blocks are left
out, and so is a message left with no content at all (``content: []`` or ``""``); a
system list with no block left, or an empty system string, is None. Message keys other
than ``role`` and ``content`` are not sent. A user message carrying tool results is
merged into a user message right before it, results first. A ``tool_use`` without
``input`` gets ``{}``, a ``tool_result`` with ``content: null`` gets ``""``, and an image
source keeps only its own keys.
Opaque blocks of another provider go over when the equivalent is faithful (an OpenAI
refusal becomes assistant text, a PDF ``file`` part a ``document``, a text part with
``cache_control`` a text block with it); anything else (audio, file ids) is left out.

Messages without an id get a deterministic one (as in ``convomem.formats.openai``), so
converting the same dicts again gives the same ids.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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
from ..model.values import thaw, too_deep
from ._anthropic_read import META as META  # the metadata key, public as before
from ._anthropic_read import message_from_anthropic, system_from_anthropic
from ._common import message_list, plain, tool_arguments


def from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Convert a Messages API request (``messages`` and optional ``system``) to messages.

    ``system`` may be a string or a list of text blocks; it becomes one leading system
    message. Items may also be the SDK's objects (anything with ``model_dump()``), so a
    response's ``content`` can be appended as it is. Malformed input raises
    ``InvalidMessage`` naming the position and field.
    """
    seen: dict[str, int] = {}
    items = message_list(messages, "Messages API message dicts")
    out: list[Message] = []
    try:
        if system is not None:
            out.append(system_from_anthropic(system, seen))
        for i, raw in enumerate(items):
            data = plain(raw)
            if not isinstance(data, Mapping):
                raise InvalidMessage(f"messages[{i}]", data, "must be an object")
            out.append(message_from_anthropic(data, i, seen))
    except RecursionError:  # input too deep even to show in an error
        raise too_deep("messages") from None
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


def _foreign_block(block: OpaqueBlock, where: str) -> dict[str, Any] | None:
    """The Messages API block faithful to another provider's block, or None."""
    if block.provider != "openai":
        return None
    data, kind = block.data, block.kind
    if kind == "refusal" or (kind == "text" and "text" in data):
        out: dict[str, Any] = {"type": "text", "text": block.text() or str(data.get("text", ""))}
        if kind == "text" and isinstance(data.get("cache_control"), Mapping):
            out["cache_control"] = thaw(data["cache_control"])
        return out
    if kind == "image_url":
        spec = data.get("image_url")
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        return _image_to_anthropic(ImageBlock(url), where) if isinstance(url, str) and url else None
    spec = data.get("file")
    if kind == "file" and isinstance(spec, Mapping) and isinstance(spec.get("file_data"), str):
        prefix = "data:application/pdf;base64,"
        if spec["file_data"].startswith(prefix):
            doc: dict[str, Any] = {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": spec["file_data"][len(prefix) :],
                },
            }
            if isinstance(spec.get("filename"), str) and spec["filename"]:
                doc["title"] = spec["filename"]
            return doc
    return None  # audio, input_audio, a file by id: nothing faithful


def _block_to_anthropic(block: Block, where: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return _image_to_anthropic(block, where)
    if isinstance(block, OpaqueBlock):
        return dict(thaw(block.data)) if block.provider == META else _foreign_block(block, where)
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": tool_arguments(block, where + ".input", "Anthropic"),
        }
    content: Any = block.content
    if not isinstance(content, str):
        parts = (_block_to_anthropic(p, f"{where}.content[{k}]") for k, p in enumerate(content))
        content = [p for p in parts if p is not None]
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    out["content"] = content
    if block.is_error:
        out["is_error"] = True
    return out


def _with_extras(d: dict[str, Any], kind: Any, more: Any) -> dict[str, Any]:
    """``d`` with the keys recorded for it written back (when the block type still matches)."""
    if kind != d["type"] or not more:
        return d
    no_content = kind == "tool_result" and "content" in more
    d = {**copy.deepcopy({k: v for k, v in more.items() if k != "content"}), **d}
    if no_content and d["content"] == "":
        del d["content"]
    return d


def _nonempty(d: dict[str, Any]) -> bool:
    return not (d["type"] == "text" and d.get("text") == "")


def _content_to_anthropic(
    m: Message, where: str, *, text_only: bool = False
) -> str | list[dict[str, Any]]:
    meta: Any = thaw(m.metadata.get(META) or {})
    verbatim = {int(pos): block for pos, block in meta.get("verbatim", ())}  # before 0.2
    if isinstance(m.content, str) and not verbatim:
        return m.content
    extras: dict[int, tuple[Any, Any]] = {}
    nested: dict[tuple[int, int], tuple[Any, Any]] = {}
    for entry in meta.get("extras", ()):
        if len(entry) == 4:
            nested[int(entry[0]), int(entry[1])] = (entry[2], entry[3])
        else:
            extras[int(entry[0])] = (entry[1], entry[2])
    out: list[dict[str, Any]] = []
    pos = 0
    for j, block in enumerate(m.blocks):
        at = f"{where}.content[{j}]"
        if text_only and not isinstance(block, TextBlock):
            pos += 1
            continue
        if m.role == "assistant" and isinstance(block, ToolResultBlock):
            raise InvalidMessage(at, block, "a result in an assistant turn")
        if m.role != "assistant" and isinstance(block, ToolUseBlock):
            raise InvalidMessage(at, block, "only the assistant calls tools")
        while pos in verbatim:
            out.append(verbatim.pop(pos))
            pos += 1
        d = _block_to_anthropic(block, at)
        if d is not None:
            if isinstance(block, ToolResultBlock) and isinstance(d["content"], list):
                d["content"] = [
                    _with_extras(p, *nested.get((pos, k), (None, None)))
                    for k, p in enumerate(d["content"])
                    if _nonempty(p)
                ]
            d = _with_extras(d, *extras.get(pos, (None, None)))
            if _nonempty(d):
                out.append(d)
        pos += 1
    out.extend(verbatim[p] for p in sorted(verbatim))
    return out


def _has_results(content: str | list[dict[str, Any]]) -> bool:
    return not isinstance(content, str) and any(b.get("type") == "tool_result" for b in content)


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def _system_to_anthropic(systems: list[Message]) -> str | list[dict[str, Any]] | None:
    """Plain-text system messages join into one string; any block list makes a list.
    Empty ones are left out (the API rejects an empty system), so none at all is None."""
    if not systems:
        return None
    if all(isinstance(m.content, str) and META not in m.metadata for m in systems):
        return "\n\n".join(m.text() for m in systems if m.text()) or None
    blocks: list[dict[str, Any]] = []
    for m in systems:  # only text goes: the system field takes text blocks alone
        blocks += _as_blocks(_content_to_anthropic(m, "system", text_only=True))
    return blocks or None


def to_anthropic(
    messages: Sequence[Message],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Convert messages to ``(system, messages)`` for the Messages API.

    System messages go to ``system``: one string (joined by blank lines) when they are
    all plain text, else a list of text blocks with their ``cache_control``; None when
    there is none. Tool messages become user messages. A message carrying tool results
    is merged into a user message just before it, results first: so the results of
    parallel calls (one OpenAI-style tool message each) share the one user message that
    must follow the assistant turn, and no text ever precedes them. A message with
    nothing to send is left out (the API rejects empty content).
    """
    systems: list[Message] = []
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Message):
            raise NotAMessage(where, m, "must be a Message")
        if m.role == "system":
            systems.append(m)
            continue
        if m.role == "tool" and not m.has_tool_result():
            raise InvalidMessage(
                where + ".content", m.content, "a tool message needs a ToolResultBlock"
            )
        role = "assistant" if m.role == "assistant" else "user"
        content = _content_to_anthropic(m, where)
        if not content:
            continue
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
    return _system_to_anthropic(systems), out
