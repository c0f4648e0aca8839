"""The service's operations on sessions, logs, contexts and users, each written once.

The HTTP routes (``routes_sessions``, ``routes_messages``, ``routes_users``) and the MCP
tools (``convomem.mcp``) call these with the caller's ``Services`` and ``ApiKey``: the
same checks, the same tenant scoping, the same 404 for another tenant's names, the same
work. What only HTTP has (status codes and headers, ``Idempotency-Key``, ``If-Match``)
stays in the routes. The facts are ``server.facts``'s.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from typing import Any, Literal

from ..errors import ConfigError
from ..formats import from_anthropic, from_openai
from ..model import Message
from ..stores.database import SessionInfo
from ..stores.records import ID_RULE, check_id
from .deps import (
    TTL_KEY,
    ApiKey,
    Services,
    expired,
    expires_at,
    session_info,
    ttl_of,
    use_memory,
)
from .deps import delete_session as remove_session
from .indexing import index_appended, settle
from .models import ContextResponse, Erased, HitOut, SessionOut
from .problems import Problem, not_found
from .summary import accounting, render, trim

__all__ = [
    "append",
    "check_message_chars",
    "check_sizes",
    "context",
    "convert",
    "create_session",
    "delete_session",
    "erase_user",
    "list_sessions",
    "message_chars",
    "messages_page",
    "open_or_create",
    "search",
    "session_out",
]

Format = Literal["openai", "anthropic", "convomem"]


# -- sessions ----------------------------------------------------------------------------


def public_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if not k.startswith("convomem:")}


def session_out(info: SessionInfo) -> SessionOut:
    return SessionOut(
        id=info.session_id,
        user_id=info.user_id,
        metadata=public_metadata(info.metadata),
        created_at=info.created_at,
        updated_at=info.updated_at,
        expires_at=expires_at(info),
        ttl_seconds=ttl_of(info),
        message_count=info.message_count,
        last_seq=info.last_seq,
    )


def _stored_metadata(metadata: dict[str, Any], ttl_seconds: float | None) -> dict[str, Any]:
    budget = metadata.get("budget")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 64
    ):
        raise Problem(
            422,
            "bad-request",
            "metadata.budget: an integer >= 64",
            field="metadata.budget",
            value=budget,
        )
    reserved = [k for k in metadata if k.startswith("convomem:")]
    if reserved:
        raise Problem(
            422,
            "bad-request",
            "metadata: keys starting convomem: are the service's",
            field=f"metadata.{reserved[0]}",
            value=metadata[reserved[0]],
        )
    stored = dict(metadata)
    if ttl_seconds is not None:
        stored[TTL_KEY] = ttl_seconds
    return stored


async def create_session(
    svc: Services,
    key: ApiKey,
    *,
    session_id: str | None,
    user_id: str,
    metadata: dict[str, Any] | None = None,
    ttl_seconds: float | None = None,
) -> tuple[SessionInfo, bool]:
    """Create a session owned by ``user_id`` (an id is made when none is given); returns
    it and whether it is new. The same owner and metadata again return it; another
    owner or other metadata is a 409. Ids follow the one id rule (``check_id``: every
    face, HTTP or MCP, creates only ids every route reaches)."""
    sid = session_id or uuid.uuid4().hex
    for field, value in (("id", sid), ("user_id", user_id)):
        try:
            check_id(field, value)
        except ConfigError:
            raise Problem(
                422, "bad-request", f"{field}: an id must be {ID_RULE}", field=field, value=value
            ) from None
    stored = _stored_metadata(metadata or {}, ttl_seconds)
    store = svc.db.session(sid, tenant=key.tenant)
    info = await store.info()
    if info is not None and expired(info):
        await remove_session(svc, key, info)
        info = None
    if info is None:
        await svc.db.session(sid, user_id=user_id, tenant=key.tenant).set_metadata(stored)
        info = await store.info()
        if info is None:  # expired at once (a zero TTL) or deleted meanwhile
            raise not_found("session", sid)
        return info, True
    if info.user_id != user_id or info.metadata != stored:
        raise Problem(
            409,
            "conflict",
            f"session {sid!r} exists with another owner or metadata",
            field="id",
            value=sid,
        )
    return info, False


async def open_or_create(svc: Services, key: ApiKey, session_id: str, user_id: str) -> SessionInfo:
    """The session ``session_id`` of ``user_id``, created (with no metadata) when the
    tenant has none by that id; a session of another user is a 409."""
    store = svc.db.session(session_id, tenant=key.tenant)
    info = await store.info()
    if info is None or expired(info):
        info, _ = await create_session(svc, key, session_id=session_id, user_id=user_id)
    if info.user_id != user_id:
        raise Problem(
            409,
            "conflict",
            f"session {session_id!r} belongs to another user",
            field="user_id",
            value=user_id,
        )
    return info


async def list_sessions(
    svc: Services,
    key: ApiKey,
    *,
    user_id: str | None,
    cursor: str | None = None,
    limit: int = 100,
) -> tuple[list[SessionOut], str | None]:
    """The tenant's sessions (one user's with ``user_id``), newest created first."""
    infos, nxt = await svc.db.sessions(
        user_id=user_id, tenant=key.tenant, cursor=cursor, limit=limit
    )
    live = [i for i in infos if not expired(i)]  # past their own TTL: deleted on access
    return [session_out(i) for i in live], nxt


async def delete_session(svc: Services, key: ApiKey, session_id: str) -> None:
    """Delete a session with its log, derived state and recall items."""
    info = await session_info(svc, key, session_id)  # an expired session is already gone
    if not await remove_session(svc, key, info):
        raise not_found("session", session_id)


# -- messages ----------------------------------------------------------------------------


def check_sizes(svc: Services, messages: list[dict[str, Any]]) -> None:
    """413 for more messages per request, or a bigger message, than the settings allow."""
    s = svc.settings
    if len(messages) > s.max_messages:
        raise Problem(
            413,
            "too-large",
            f"at most {s.max_messages} messages per request",
            field="messages",
            value=len(messages),
        )
    for i, d in enumerate(messages):
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


def convert(
    messages: list[dict[str, Any]], format: Format = "openai", system: Any = None
) -> list[Message]:
    """The ``Message`` s of provider dicts (every one checked before anything is
    written; a bad one is a 422 naming its position)."""
    if format == "anthropic":
        return from_anthropic(messages, system=system)
    if system is not None:
        raise Problem(
            422, "bad-request", "system: only with format=anthropic", field="system", value=system
        )
    if format == "convomem":
        out = []
        for i, d in enumerate(messages):
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
    return from_openai(messages)


async def messages_page(
    svc: Services,
    key: ApiKey,
    session_id: str,
    *,
    cursor: str | None = None,
    limit: int = 100,
    newest_first: bool = False,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the log (oldest first, or newest first), each message
    ``Message.to_dict()`` with its ``seq``; and the cursor of the next page."""
    await session_info(svc, key, session_id)
    store = svc.db.session(session_id, tenant=key.tenant)
    entries, nxt = await store.entries(
        cursor, min(limit, svc.settings.max_page), newest_first=newest_first
    )
    return [{"seq": e.seq, **e.message.to_dict()} for e in entries], nxt


async def append(
    svc: Services,
    key: ApiKey,
    info: SessionInfo,
    messages: list[Message],
    *,
    expected_seq: int | None = None,
) -> tuple[list[Message], int]:
    """Append ``messages`` to the session through its memory in one store append, all
    or nothing (the view, the summary and the state kept current, facts extracted and
    saved), then index them for recall. Returns the messages as stored and the
    session's newest seq. Idempotent by message id; a ``MessageConflict`` (an id stored
    with other content) changes nothing; ``expected_seq`` is checked inside the append's
    compare-and-set (``ConcurrentUpdate``: nothing written)."""
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        try:
            added = await memory.aadd_messages(messages, expected_seq=expected_seq)
            await settle(svc, memory)  # what left the view indexed, the user's facts saved
        finally:
            st = memory.stats()
            svc.metrics.add("compactions", st.compactions - before.compactions)
            svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)
        last: int = memory.last_seq  # the newest seq this memory wrote or saw
    await index_appended(svc, key, info, added)  # a recall failure fails nothing
    return added, last


async def context(
    svc: Services,
    key: ApiKey,
    session_id: str,
    *,
    format: Literal["openai", "anthropic"] = "openai",
    budget: int | None = None,
    query: str | None = None,
) -> tuple[ContextResponse, int]:
    """The context to send now (within ``budget`` when given, below the session's) and
    where every message of the log is; and the session's newest seq."""
    info = await session_info(svc, key, session_id)
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        kept = await memory.acontext("messages", query=query)
        rendered: Any
        dropped = 0
        sent: tuple[int, int] | None = None
        if budget is not None and budget < memory.budget:
            n = len(kept)
            kept, tokens, left_out = trim(memory, kept, budget, user_first=format == "anthropic")
            dropped = n - len(kept)
            sent = (tokens, left_out)
            rendered = render(kept, format)
        else:
            rendered = await memory.acontext(format, query=query)
        st = memory.stats()
        svc.metrics.add("compactions", st.compactions - before.compactions)
        svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)
        shown = sum(1 for h in (st.recall or {}).get("hits", ()) if h["shown"])
        svc.metrics.add("recall_hits", shown)
        answer = ContextResponse(
            format=format,
            context=rendered,
            accounting=accounting(
                memory, kept, budget=budget, query=query, dropped=dropped, packed=sent
            ),
        )
        last: int = memory.last_seq
        return answer, last


# -- users -------------------------------------------------------------------------------


async def require_user(svc: Services, key: ApiKey, user_id: str) -> None:
    """The one 404 of a user who owns no session in the key's tenant."""
    found, _ = await svc.db.sessions(user_id=user_id, tenant=key.tenant, limit=1)
    if not found:
        raise not_found("user", user_id)


def recall_index(svc: Services) -> Any:
    """The recall index, or the 400 saying recall is off."""
    if svc.recall is None:
        raise Problem(
            400,
            "recall-off",
            "recall is off: start the service with --recall URL or over a SQLite or "
            "PostgreSQL store (with the numpy extra)",
        )
    return svc.recall


async def search(
    svc: Services,
    key: ApiKey,
    user_id: str,
    query: str,
    *,
    k: int = 10,
    kinds: list[str] | None = None,
) -> list[HitOut]:
    """The ``k`` items of the user's past sessions most relevant to ``query``."""
    await require_user(svc, key, user_id)
    hits = await recall_index(svc).search(
        query, user_id=user_id, k=k, tenant=key.tenant, kinds=kinds
    )
    svc.metrics.add("recall_hits", len(hits))
    return [HitOut(**asdict(h)) for h in hits]


async def erase_user(svc: Services, key: ApiKey, user_id: str) -> Erased:
    """Erase everything of the user in the tenant: sessions (logs, summaries, state),
    recall items and vectors, facts, idempotency records."""
    await require_user(svc, key, user_id)
    if svc.idempotency is not None:
        await svc.idempotency.forget(key.tenant, user_id)
    items = 0
    if svc.recall is not None:
        items = await svc.recall.erase_user(user_id, tenant=key.tenant)
    if svc.memories is not None:
        svc.memories.evict(key.tenant, user_id=user_id)
    svc.backlog.forget(key.tenant, user_id=user_id)  # not indexed again after the erasure
    sessions = await svc.db.erase_user(user_id, tenant=key.tenant)
    return Erased(user_id=user_id, sessions=sessions, items=items)
