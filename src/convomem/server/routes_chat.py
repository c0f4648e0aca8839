"""``POST /v1/sessions/{id}/chat``: one turn with the configured model, streamed.

The turn: the user's message is appended to the session (through its
``ConversationMemory``, resumed from the store, so the cost does not grow with the
session), the context is assembled under budget, the OpenAI-compatible upstream
(``Settings.upstream_url`` / ``upstream_model`` / ``upstream_api_key``) is called with
``stream: true``, and its reply is relayed as server-sent events:

- ``event: delta`` — ``{"content": "..."}`` for each piece of text, as it arrives;
- ``event: done`` — ``{"message_id", "seq", "user_message_id", "finish_reason",
  "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}`` once the reply is
  stored;
- ``event: error`` — a problem document (``type`` ``.../upstream-failed`` when the
  model failed) and the end of the stream.

What is stored: the user's message before the model is called (it is what the user
said, whatever the model does; sent with an ``id`` it is idempotent, so a retried turn
does not add it twice), and the assistant's reply only once it is complete. An upstream
failure mid-reply stores nothing of the reply. A client that disconnects mid-stream
cancels the upstream call and nothing of the reply is stored either (the user did not
see it; the next turn's context must not hold text nobody read); a reply the upstream
had finished is stored whole even if the client left while it was being written.
Errors before the stream starts (no such session, a bad message, no upstream
configured) are ordinary problem responses.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import Field

from .._sse import encode_event
from ..errors import ConvomemError, TransientError
from ..formats import from_anthropic, from_openai, to_openai
from ..model import Message
from ..session import ConversationMemory
from ..session.turn_records import TURN_KEY, record_turn, with_usage
from ..stores.database import SessionInfo
from .deps import (
    ApiKey,
    Services,
    get_services,
    require_key,
    session_info,
    use_memory,
)
from .indexing import index_appended, settle
from .models import Body
from .operations import check_message_chars, message_chars
from .problems import Problem, body_of, from_error, problem_body
from .summary import trim
from .upstream import Finished, Upstream

__all__ = ["ChatRequest", "router"]

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["chat"])
_LONE: Final = re.compile("[\ud800-\udfff]")

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]

_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events: ``delta`` ({content}), then ``done`` ({message_id, "
        "seq, user_message_id, finish_reason, usage}) or ``error`` (a problem document).",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


class ChatRequest(Body):
    """One user turn: ``content`` (text), or ``message`` (a dict in ``format``; its
    ``id`` makes the turn idempotent). ``budget`` (below the session's) and ``query``
    shape this turn's context only."""

    content: str | None = Field(default=None, min_length=1, description="the user's text")
    message: dict[str, Any] | None = Field(
        default=None, description="the user's message as an OpenAI, Anthropic or convomem dict"
    )
    format: Literal["openai", "anthropic", "convomem"] = "openai"
    budget: int | None = Field(default=None, ge=1, description="a smaller budget for this turn")
    query: str | None = Field(default=None, max_length=4000)


def _user_message(body: ChatRequest, max_chars: int) -> Message:
    if (body.content is None) == (body.message is None):
        raise Problem(
            422,
            "bad-request",
            "give content (the user's text) or message (a dict), exactly one",
            field="content" if body.content is None else "message",
            value=None,
        )
    if body.content is not None:
        if not body.content.strip():
            raise Problem(422, "bad-request", "content: empty", field="content", value="")
        check_message_chars({"role": "user", "content": body.content}, max_chars, "content")
        return Message(role="user", content=body.content)
    d = body.message or {}
    check_message_chars(d, max_chars, "message")
    if body.format == "convomem":
        messages = [Message.from_dict(d)]
    elif body.format == "anthropic":
        messages = from_anthropic([d])
    else:
        messages = from_openai([d])
    if len(messages) != 1 or messages[0].role != "user":
        raise Problem(
            422,
            "bad-request",
            "message: one user message (role user) is what a chat turn sends",
            field="message.role",
            value=d.get("role"),
        )
    if not (messages[0].text().strip() or messages[0].image_count()):
        raise Problem(
            422,
            "bad-request",
            "message: the user's message has no content",
            field="message.content",
            value=d.get("content"),
        )
    return messages[0]


@router.post("/chat", response_class=StreamingResponse, responses=_STREAM_DOC)
async def chat(session_id: str, body: ChatRequest, key: Key, svc: Svc) -> StreamingResponse:
    """Append the user's message, call the model with the session's context and stream
    its reply as server-sent events (see the module docstring for what is stored)."""
    s = svc.settings
    if not s.upstream_url or not s.upstream_model:
        raise Problem(
            501,
            "not-implemented",
            "the chat route needs an upstream model: set upstream_url and upstream_model",
        )
    message = _user_message(body, s.max_message_chars)
    info = await session_info(svc, key, session_id)
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        (user,) = await _store(svc, key, info, memory, message)
        # Recall (when configured) looks for what this turn is about: the query given,
        # else the user's own words.
        context = await _context(memory, body.budget, body.query or user.text())
        _count(svc, memory, before)
        prompt_tokens = memory.stats().context_tokens
        turn = record_turn(memory)  # the inspector's per-turn figures, stored on the reply
    upstream = (s.upstream_url, s.upstream_model, s.upstream_api_key)
    return StreamingResponse(
        _relay(
            svc, key, session_id, user, context, prompt_tokens, upstream, turn, s.max_message_chars
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _store(
    svc: Services, key: ApiKey, info: SessionInfo, memory: ConversationMemory, message: Message
) -> tuple[Message]:
    """Append one message as the messages route does: the memory's work awaited (what
    left the view indexed, the user's facts saved), then the message indexed for recall
    (a recall failure fails nothing: ``indexing.index_appended``)."""
    stored = await memory.aadd_message(message)
    await settle(svc, memory)
    await index_appended(svc, key, info, [stored])
    return (stored,)


async def _context(
    memory: ConversationMemory, budget: int | None, query: str
) -> list[dict[str, Any]]:
    if budget is None or budget >= memory.budget:
        return await memory.acontext("openai", query=query)
    kept, _, _ = trim(memory, await memory.acontext("messages", query=query), budget)
    return to_openai(kept)


def _count(svc: Services, memory: ConversationMemory, before: Any) -> None:
    st = memory.stats()
    svc.metrics.add("compactions", st.compactions - before.compactions)
    svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)


async def _relay(
    svc: Services,
    key: ApiKey,
    session_id: str,
    user: Message,
    context: list[dict[str, Any]],
    prompt_tokens: int,
    upstream: tuple[str, str, str | None],
    turn: dict[str, Any],
    max_chars: int,
) -> AsyncIterator[str]:
    parts: list[str] = []
    kept = 0  # characters of the reply held: at most a stored message's and one more
    finished = Finished(None)
    client = Upstream(*upstream)
    try:
        async for item in client.stream(context):
            if isinstance(item, Finished):
                finished = item
            else:
                item = _LONE.sub("\ufffd", item)  # (JSON may carry them; UTF-8 cannot)
                if kept <= max_chars:
                    parts.append(item[: max_chars + 1 - kept])
                    kept += len(parts[-1])
                yield encode_event("delta", {"content": item})
    except TransientError as exc:
        yield encode_event("error", problem_body(502, "upstream-failed", str(exc)))
        return
    finally:
        await client.aclose()
    text, truncated = capped("".join(parts), max_chars)
    if not text:
        detail = f"the upstream returned no text (finish_reason={finished.finish_reason!r})"
        yield encode_event("error", problem_body(502, "upstream-failed", detail))
        return
    record = with_usage(turn, finished.usage or None)
    reply = Message(role="assistant", content=text, metadata={TURN_KEY: record})
    try:
        # Shielded: a reply the model finished is stored whole even if the client left.
        stored, seq, tokenizer = await asyncio.shield(_store_reply(svc, key, session_id, reply))
    except ConvomemError as exc:
        yield encode_event("error", body_of(from_error(exc)))
        return
    yield encode_event(
        "done",
        {
            "message_id": stored.id,
            "seq": seq,
            "user_message_id": user.id,
            "finish_reason": finished.finish_reason,
            "usage": _usage(prompt_tokens, tokenizer, stored, finished.usage),
            "truncated": truncated,
        },
    )


TRUNCATED: Final = "\n[... the reply was cut here: it was over {limit} characters]"
"""The marker ending a stored reply that was over ``Settings.max_message_chars``."""


def capped(text: str, limit: int) -> tuple[str, bool]:
    """``text`` as stored: whole when an assistant message of it is within ``limit``
    characters (``message_chars``, as ``/messages`` measures), else cut and ended by
    ``TRUNCATED``; and whether it was cut."""
    if message_chars({"role": "assistant", "content": text}) <= limit:
        return text, False
    marker = TRUNCATED.format(limit=limit)
    cut = text[: max(0, limit - len(marker))]
    while cut and message_chars({"role": "assistant", "content": cut + marker}) > limit:
        over = message_chars({"role": "assistant", "content": cut + marker}) - limit
        cut = cut[: len(cut) - over]  # (escapes make some characters count twice or more)
    return cut + marker, True


async def _store_reply(
    svc: Services, key: ApiKey, session_id: str, reply: Message
) -> tuple[Message, int, Any]:
    """Store the model's reply through the session's memory, taken again (the stream
    held no lock): the session's info is read anew, so what moved meanwhile is seen."""
    info = await session_info(svc, key, session_id)
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        (stored,) = await _store(svc, key, info, memory, reply)
        _count(svc, memory, before)
        return stored, memory.last_seq, memory.tokenizer


def _usage(
    prompt_tokens: int,
    tokenizer: Any,
    reply: Message,
    reported: dict[str, Any],
) -> dict[str, int]:
    """The upstream's usage when it reports one, else the session tokenizer's counts."""
    prompt = reported.get("prompt_tokens")
    completion = reported.get("completion_tokens")
    if not isinstance(prompt, int):
        prompt = prompt_tokens
    if not isinstance(completion, int):
        completion = tokenizer.count(reply.text())
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
