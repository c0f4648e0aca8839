"""``/v1/sessions/{id}/messages`` and ``/context``: append to a session's log, page
through it, and assemble its context under budget with the accounting of every message.

Appends go through the session's ``ConversationMemory`` (resumed from the store's
derived state), so the view, the summary and the state are kept current as messages
arrive, and a request costs the same however long the session is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response

from ..errors import ConcurrentUpdate, ConfigError, InvalidMessage, MessageConflict
from ..formats import from_anthropic, from_openai, to_anthropic, to_openai
from ..model import Message
from ..packing import Packer
from ..stores.database import SessionInfo
from .deps import ApiKey, Services, get_services, require_key, session_info, use_memory
from .idempotency import body_digest
from .models import Appended, AppendRequest, AppendResponse, ContextResponse, MessagePage
from .problems import Problem
from .summary import accounting

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["messages"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


def _convert(body: AppendRequest) -> list[Message]:
    if body.format == "anthropic":
        return from_anthropic(body.messages, system=body.system)
    if body.system is not None:
        raise Problem(
            422,
            "bad-request",
            "system: only with format=anthropic",
            field="system",
            value=body.system,
        )
    if body.format == "convomem":
        out = []
        for i, d in enumerate(body.messages):
            try:
                out.append(Message.from_dict(d))
            except Exception as exc:  # InvalidMessage names the field; add the position
                raise Problem(
                    422,
                    "invalid-message",
                    f"messages[{i}]: {exc}",
                    field=f"messages[{i}]",
                    value=d,
                ) from None
        return out
    return from_openai(body.messages)


def _check_sizes(svc: Services, body: AppendRequest) -> None:
    s = svc.settings
    if len(body.messages) > s.max_messages:
        raise Problem(
            413,
            "too-large",
            f"at most {s.max_messages} messages per request",
            field="messages",
            value=len(body.messages),
        )
    for i, d in enumerate(body.messages):
        check_message_chars(d, s.max_message_chars, f"messages[{i}]")


def message_chars(d: Any) -> int:
    """The size of a message dict: the characters of its JSON (what a message may hold,
    ``Settings.max_message_chars``, on every route that stores one)."""
    return len(json.dumps(d, ensure_ascii=False))


def check_message_chars(d: Any, limit: int, field: str) -> None:
    """A 413 problem naming ``field`` for a message dict over ``limit`` characters."""
    size = message_chars(d)
    if size > limit:
        raise Problem(
            413,
            "too-large",
            f"{field}: {size} characters; at most {limit}",
            field=field,
            value=size,
        )


def _with_idempotency(messages: list[Message], idem: str, body: AppendRequest) -> list[Message]:
    """Ids for messages sent without one, made from the ``Idempotency-Key``: a retry of
    the request appends nothing new (and the same key with another body meets different
    content under the same ids: a 422, should it pass the key's binding)."""
    digest = hashlib.sha256(idem.encode()).hexdigest()[:24]
    given = [("id" in d) for d in body.messages] if body.format != "anthropic" else None
    out = []
    for i, m in enumerate(messages):
        if given is not None and i < len(given) and given[i]:
            out.append(m)
        else:
            out.append(m.replace(id=f"idem-{digest}-{i}-{len(messages)}"))
    return out


def _if_match(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().removeprefix("W/").strip('"')
    try:
        seq = int(text)
    except ValueError:
        raise Problem(
            422,
            "bad-request",
            'If-Match: the session\'s seq, e.g. "12"',
            field="If-Match",
            value=value,
        ) from None
    if seq < 0:
        raise Problem(422, "bad-request", "If-Match: a seq >= 0", field="If-Match", value=value)
    return seq


@router.post("/messages", status_code=201, response_model=AppendResponse)
async def append_messages(
    session_id: str,
    body: AppendRequest,
    key: Key,
    svc: Svc,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
    if_match: Annotated[str | None, Header(max_length=64)] = None,
) -> AppendResponse:
    """Append messages, all or nothing (all checked before anything is written).
    Idempotent by message id and by ``Idempotency-Key``; ``If-Match: <seq>`` answers
    409 when the session moved past it. The new newest seq is returned in the
    ``ETag``."""
    _check_sizes(svc, body)
    expected = _if_match(if_match)
    messages = _convert(body)
    info = await session_info(svc, key, session_id)
    idem = svc.idempotency if idempotency_key is not None else None
    digest = ""
    bound = False  # whether this request bound the key (and may unbind it)
    if idem is not None and idempotency_key is not None:
        messages = _with_idempotency(messages, idempotency_key, body)
        digest = body_digest(session_id, body.model_dump(mode="json"))
        earlier = await idem.claim(key.tenant, info, idempotency_key, digest)
        if earlier is not None and earlier.digest != digest:
            raise _reused(idempotency_key)
        if earlier is not None and earlier.answer is not None:
            response.headers["ETag"] = f'"{earlier.answer["last_seq"]}"'
            response.headers["Idempotent-Replayed"] = "true"
            return AppendResponse.model_validate(earlier.answer)
        bound = earlier is None
    try:
        answer = await _append(svc, key, info, messages, expected, if_match)
    except (Problem, ConcurrentUpdate, MessageConflict, InvalidMessage, ConfigError) as exc:
        # Refused before anything was written: the key is free for a corrected request.
        if bound and idem is not None and idempotency_key is not None:
            await idem.release(key.tenant, info, idempotency_key)
        if (
            isinstance(exc, MessageConflict)
            and idempotency_key is not None
            and exc.message_id.startswith("idem-")
        ):
            raise _reused(idempotency_key) from None
        raise
    if idem is not None and idempotency_key is not None:
        await idem.complete(
            key.tenant, info, idempotency_key, digest, answer.model_dump(mode="json")
        )
    response.headers["ETag"] = f'"{answer.last_seq}"'
    return answer


async def _append(
    svc: Services,
    key: ApiKey,
    info: SessionInfo,
    messages: list[Message],
    expected: int | None,
    if_match: str | None,
) -> AppendResponse:
    """Append ``messages`` through the session's memory in one store append (all or
    nothing; ``expected``, the ``If-Match`` seq, checked inside its compare-and-set, so
    of writers racing with one ``If-Match`` exactly one wins), then index them for
    recall."""
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        try:
            added = await memory.aadd_messages(messages, expected_seq=expected)
            await memory.wait()  # what left the view indexed, the user's facts saved: now
        except ConcurrentUpdate as exc:
            if expected is None:
                raise  # races lost past the memory's own retries: a 409 conflict
            raise _moved(exc.actual, expected, if_match) from None
        finally:
            st = memory.stats()
            svc.metrics.add("compactions", st.compactions - before.compactions)
            svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)
        last: int = memory.last_seq  # the newest seq this memory wrote or saw
    if svc.recall is not None and info.user_id is not None and added:
        # Each message once (the index skips ids it holds): O(new messages) per request.
        await svc.recall.add(
            added, user_id=info.user_id, session_id=info.session_id, tenant=key.tenant
        )
    return AppendResponse(
        session_id=info.session_id,
        last_seq=last,
        messages=[Appended(id=m.id, role=m.role) for m in added],
    )


def _moved(actual: int, expected: int, if_match: str | None) -> Problem:
    return Problem(
        409,
        "precondition-failed",
        f"the session is at seq {actual}, not {expected}",
        field="If-Match",
        value=if_match,
        headers={"ETag": f'"{actual}"'},
    )


def _reused(idempotency_key: str) -> Problem:
    return Problem(
        422,
        "idempotency-conflict",
        "this Idempotency-Key was used with another request body",
        field="Idempotency-Key",
        value=idempotency_key,
    )


@router.get("/messages", response_model=MessagePage)
async def list_messages(
    session_id: str,
    key: Key,
    svc: Svc,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> MessagePage:
    """A page of the log, oldest first; ``next_cursor`` continues it (None: the end)."""
    await session_info(svc, key, session_id)
    store = svc.db.session(session_id, tenant=key.tenant)
    entries, nxt = await store.entries(cursor, min(limit, svc.settings.max_page))
    return MessagePage(
        messages=[{"seq": e.seq, **e.message.to_dict()} for e in entries], next_cursor=nxt
    )


@router.get("/context", response_model=ContextResponse)
async def get_context(
    session_id: str,
    key: Key,
    svc: Svc,
    response: Response,
    format: Literal["openai", "anthropic"] = "openai",
    budget: Annotated[int | None, Query(ge=1)] = None,
    query: Annotated[str | None, Query(max_length=4000)] = None,
) -> ContextResponse:
    """The context to send now and where every message of the log is (see
    ``summary.accounting``)."""
    info = await session_info(svc, key, session_id)
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        kept = await memory.acontext("messages", query=query)
        context: Any
        dropped = 0
        if budget is not None and budget < memory.budget:
            packed = Packer(
                budget=budget,
                tokenizer=memory.tokenizer,
                start_on="user" if format == "anthropic" else None,
            ).pack(kept)
            dropped = len(kept) - len(packed.kept)
            kept = list(packed.kept)
            context = _render(kept, format)
        else:
            context = await memory.acontext(format, query=query)
        st = memory.stats()
        svc.metrics.add("compactions", st.compactions - before.compactions)
        svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)
        shown = sum(1 for h in (st.recall or {}).get("hits", ()) if h["shown"])
        svc.metrics.add("recall_hits", shown)
        response.headers["ETag"] = f'"{memory.last_seq}"'
        return ContextResponse(
            format=format,
            context=context,
            accounting=accounting(memory, kept, budget=budget, query=query, dropped=dropped),
        )


def _render(messages: list[Message], format: str) -> Any:
    if format == "openai":
        return to_openai(messages)
    system, out = to_anthropic(messages)
    return {"messages": out} if system is None else {"system": system, "messages": out}
