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
key, when present, becomes the message id (as given, not derived).

A round trip ``to_openai(from_openai(dicts))`` gives the dicts back, with three
normalizations: the ``id`` key is not written back (the API has no such field); a tool
call is written as ``{"id", "type": "function", "function": {"name", "arguments"}}``
(other keys of the call are dropped, missing arguments are ``""``); an ``image_url`` given
as a bare string is written as ``{"url": ...}``. Arguments are kept as the exact text
unless they are a JSON object that ``json.dumps`` writes identically.

``to_openai`` writes what Chat Completions can carry. A message with tool results
(Anthropic style) becomes one ``role: "tool"`` message per result, then one message with
everything else, tool calls included (in the message's own role, ``user`` for a tool
message); results come first unless one answers a call of the same message. Only an
assistant message may call tools, and a tool message needs a result: anything else
raises ``InvalidMessage``, as ``to_anthropic`` does. Opaque blocks of another provider
go over when the equivalent is faithful: an Anthropic PDF ``document`` becomes a
``file`` part, a text ``document`` or a ``search_result`` a text part; anything else
(``thinking``, ``redacted_thinking``, server tool blocks, Responses ``reasoning`` and
hosted tool items) is left out, and a message left with nothing to send is not written
at all (Chat Completions rejects an empty ``content``), as ``to_anthropic`` does.

``to_openai`` keeps the order of its messages. ``order_tool_results`` puts the dicts in
the order the API requires (every tool message right after the assistant message whose
call it answers); a session's ``context("openai")`` and ``Packer.pack_openai`` apply it:
one message answering the calls of two assistant messages (Anthropic style) is split
there, each result after its own call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
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
from ._common import message_list
from ._openai_read import IMAGE_EXTRA, NO_CONTENT, field_of, message_from_openai
from ._openai_read import META as META  # the metadata key, public as before


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Convert Chat Completions message dicts (or SDK message objects) to messages.

    Malformed input raises ``InvalidMessage`` naming the position and field
    (``messages[3].tool_calls[0].id``).
    """
    seen: dict[str, int] = {}
    items = message_list(messages, "Chat Completions message dicts")
    try:
        return [message_from_openai(data, i, seen) for i, data in enumerate(items)]
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


def _nothing_to_send(blocks: Sequence[Block]) -> bool:
    """True when ``blocks`` are only other providers' opaque blocks with no faithful
    Chat Completions equivalent (Responses reasoning or hosted tool items, Anthropic
    thinking): the message would be ``"content": []``, which the API rejects."""
    return bool(blocks) and all(
        isinstance(b, OpaqueBlock) and b.provider != META and _foreign_part(b) is None
        for b in blocks
    )


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
    fields = [b for b in blocks if isinstance(b, OpaqueBlock) and field_of(b)]
    calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
    parts = [p for b in blocks if not field_of(b) and (p := _part_to_openai(b, images)) is not None]
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
        form = ("content" in extra, extra.pop("content", None), bool(extra.pop(NO_CONTENT, 0)))
        images = iter(extra.pop(IMAGE_EXTRA, None) or ())
        if isinstance(m.content, str):
            d: dict[str, Any] = {"role": role, "content": m.content}
            if m.name is not None:
                d["name"] = m.name
            out.append({**d, **extra})
            continue
        results = [b for b in m.content if isinstance(b, ToolResultBlock)]
        rest = [b for b in m.content if not isinstance(b, ToolResultBlock)]
        if _nothing_to_send(rest):
            if not results:
                continue  # left out, as to_anthropic leaves out what it cannot send
            rest = []
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


def order_tool_results(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``dicts`` (Chat Completions messages) with every ``tool`` message right after the
    assistant message that made its call, after that message's earlier results.

    The API requires an assistant message with ``tool_calls`` to be followed by the
    results of all its calls. Two assistant messages each making a call, answered by one
    message carrying both results, convert to ``assistant(c1), assistant(c2), tool(c1),
    tool(c2)``, which it rejects; here it becomes ``assistant(c1), tool(c1),
    assistant(c2), tool(c2)``. Anything else keeps its order (a result whose call comes
    later, or nowhere, stays where it is). Returns ``dicts`` itself when nothing moves.
    """
    made: dict[Any, int] = {}  # call id -> the position of the assistant message making it
    keys: list[tuple[int, int, int]] = []
    for i, d in enumerate(dicts):
        at = made.get(d.get("tool_call_id")) if d.get("role") == "tool" else None
        keys.append((i, 0, 0) if at is None else (at, 1, i))
        for call in d.get("tool_calls") or ():
            if isinstance(call, Mapping):
                made[call.get("id")] = i
    if all(a <= b for a, b in pairwise(keys)):
        return dicts
    order = sorted(range(len(dicts)), key=keys.__getitem__)
    return [dicts[i] for i in order]
