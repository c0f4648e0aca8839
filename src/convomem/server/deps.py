"""The FastAPI dependencies every route uses: the caller's key, the open services, and a
session's memory resumed from the store.

- ``require_key``: ``Authorization: Bearer <key>`` → ``ApiKey(tenant, key_id)`` (a 401
  problem otherwise), after the key's rate limit (a 429 problem with ``Retry-After``).
- ``get_services``: the process's ``Services`` (store database, recall index, settings,
  metrics, keys, rate limit, the ``settings.Models`` built by ``create_app``), opened on first
  use and closed with the app.
- ``open_memory``: a ``ConversationMemory`` over ``db.session(id, tenant=key.tenant)``.
  It resumes from the derived state the store keeps beside the log: a request reads the
  view's rows and the tail written since the last state, never the whole log, so a
  request costs the same at 100 or 100,000 messages. ``use_memory`` holds it from the
  process's ``MemoryCache`` instead (one lock per session): reused while the session's
  info shows it current, so a request skips the resume; replicas still see each other's
  writes (a moved seq or state version drops the cached memory).

After an append, ``indexing`` settles the memory's background work and indexes the new
messages for recall.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from ..errors import (
    ConfigError,
    ConvomemError,
    MissingDependency,
    StoreError,
    TransientError,
)
from ..session import ConversationMemory
from ..stores.database import AsyncSessionStore, AsyncStoreDatabase, SessionInfo
from ..stores.expiry import TTL_KEY, expired, expires_at, ttl_of
from ._memory_cache import MemoryCache
from ._recall_backlog import RecallBacklog
from .idempotency import Idempotency
from .keys import KeyStore
from .limits import Buckets, LocalBuckets, RedisBuckets, retry_after
from .metrics import Metrics
from .problems import Problem, not_found
from .settings import Models, Settings, build_models

__all__ = [
    "TTL_KEY",
    "ApiKey",
    "Services",
    "expired",
    "expires_at",
    "get_services",
    "open_memory",
    "require_key",
    "session_info",
    "ttl_of",
    "use_memory",
]

log = logging.getLogger("convomem.server")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """The caller: the tenant its key belongs to (every store call is scoped to it).
    ``None`` is the store's own scope of no tenant: never an API key's (keys belong to a
    named tenant), only a local caller's (``convomem mcp`` over stdio without
    ``--tenant``)."""

    tenant: str | None
    key_id: str


@dataclass(slots=True)
class Services:
    """What the routes of one process share."""

    settings: Settings
    db: AsyncStoreDatabase
    keys: KeyStore
    metrics: Metrics
    limiter: Buckets | None
    recall: Any = None
    """An ``AsyncRecallIndex`` (None: recall is off)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Objects of parts added later (the chat route's HTTP client...), one key each."""
    idempotency: Idempotency | None = None
    context_recall: Any = None
    """What sessions' contexts recall through: ``recall`` behind a ``GuardedRecall``
    (deadline and circuit breaker) unless ``settings.recall_deadline`` is None."""
    memories: MemoryCache | None = None
    """Open session memories (``use_memory``), ``settings.memory_cache`` of them."""
    models: Models = field(default_factory=Models)
    """The summarizer, extractor and embedder of every session (``build_models``)."""
    backlog: RecallBacklog = field(default_factory=RecallBacklog)
    """Appended messages not indexed yet (``index_appended``)."""

    def __post_init__(self) -> None:
        if self.memories is None:
            self.memories = MemoryCache(self.settings.memory_cache)
        if self.context_recall is None and self.recall is not None:
            if self.settings.recall_deadline is None:
                self.context_recall = self.recall
            else:
                from ..recall.guarded import AsyncGuardedRecall

                self.context_recall = AsyncGuardedRecall(
                    self.recall, deadline=self.settings.recall_deadline
                )

    async def aclose(self) -> None:
        if self.recall is not None:
            await self.recall.aclose()
        if self.limiter is not None:
            await self.limiter.aclose()
        await self.db.aclose()


async def open_services(
    settings: Settings, metrics: Metrics, models: Models | None = None
) -> Services:
    """Open the store (and the recall index and the Redis limiter when configured)."""
    models = build_models(settings) if models is None else models
    from ..stores import aopen_store

    db = await aopen_store(settings.store)
    try:
        keys = KeyStore(db)
        limiter: Buckets | None = None
        if settings.rate_per_second > 0:
            if settings.redis_url is not None:
                limiter = RedisBuckets(settings.redis_url, settings.rate_per_second, settings.burst)
            else:
                limiter = LocalBuckets(settings.rate_per_second, settings.burst)
        recall = await _open_recall(settings, db, models.embedder)
    except BaseException:
        await db.aclose()
        raise
    return Services(
        settings, db, keys, metrics, limiter, recall, idempotency=Idempotency(db), models=models
    )


async def _open_recall(settings: Settings, db: AsyncStoreDatabase, embedder: Any) -> Any:
    from ..stores.url import parse_store_url

    if embedder is None:
        return None
    if settings.recall is not None:
        from ..recall.index_async import AsyncRecallIndex

        index = await AsyncRecallIndex.open(settings.recall, embedder=embedder)
    elif parse_store_url(settings.store).scheme in ("sqlite", "postgresql", "postgres"):
        try:
            from ..recall.index_async import AsyncRecallIndex

            index = AsyncRecallIndex(db, embedder=embedder)
        except ImportError:  # recall needs numpy (extra numpy): the service runs without
            return None
    else:
        return None
    try:  # its tables now: a store that cannot hold them fails the start, not appends
        await index.prepare()
    except BaseException:
        await index.aclose()
        raise
    return index


async def get_services(request: Request) -> Services:
    """The app's services, opened once per process on first use."""
    state = request.app.state
    services: Services | None = state.services
    if services is not None:
        return services
    async with state.opening:
        if state.services is None:
            state.services = await open_services(state.settings, state.metrics, state.models)
    opened: Services = state.services
    return opened


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def require_key(request: Request) -> ApiKey:
    """The caller's key (401 problem when missing, malformed, unknown or revoked), after
    its rate limit (429 problem)."""
    services = await get_services(request)
    token = _bearer(request)
    record = None if token is None else await services.keys.verify(token)
    if record is None:
        raise Problem(
            401,
            "unauthorized",
            "send a valid API key as Authorization: Bearer <key>",
            headers={"WWW-Authenticate": 'Bearer realm="convomem"'},
        )
    if services.limiter is not None:
        allowed, wait = await services.limiter.take(record.key_id)
        if not allowed:
            services.metrics.add("rate_limited")
            raise Problem(
                429,
                "rate-limited",
                f"the key's rate limit ({services.settings.rate_per_second:g}/s, burst "
                f"{services.settings.burst}) is reached; retry after {wait:.2f}s",
                headers={"Retry-After": retry_after(wait)},
            )
    key = ApiKey(record.tenant, record.key_id)
    request.state.api_key = key
    return key


def session_store(services: Services, key: ApiKey, session_id: str) -> AsyncSessionStore:
    """The tenant's session ``session_id`` (an administrative handle within the tenant)."""
    return services.db.session(session_id, tenant=key.tenant)


async def session_info(services: Services, key: ApiKey, session_id: str) -> SessionInfo:
    """The session's info, or the one 404 (another tenant's session is not found either).
    A session past its own TTL is deleted here, on first access after it expired; a
    session gone (deleted or erased through another replica) leaves this process's
    cache too."""
    info = await session_store(services, key, session_id).info()
    if info is not None and expired(info):
        await delete_session(services, key, info)
        info = None
    if info is None:
        if services.memories is not None:
            services.memories.evict(key.tenant, session_id=session_id)
        raise not_found("session", session_id)
    return info


async def delete_session(services: Services, key: ApiKey, info: SessionInfo) -> bool:
    """Delete a session with its log and state, its idempotency records, its recall items
    (the store's trigger deletes them too, but not in another database: ``--recall
    URL``) and the facts said in it. Those go first: a failure in between leaves a
    session to delete again, never traces of a deleted one."""
    if services.idempotency is not None:
        await services.idempotency.forget(key.tenant, info.user_id, info.session_id)
    recall = services.recall
    if recall is not None and info.user_id is not None:  # its items, and its facts
        await recall.delete(user_id=info.user_id, session_id=info.session_id, tenant=key.tenant)
    if services.memories is not None:
        services.memories.evict(key.tenant, session_id=info.session_id)
    services.backlog.forget(key.tenant, session_id=info.session_id)
    return await services.db.delete_session(info.session_id, tenant=key.tenant)


def session_budget(services: Services, info: SessionInfo) -> int:
    """The budget a session's context is assembled under (fixed when it was created)."""
    budget = info.metadata.get("budget")
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        return budget
    return services.settings.budget


def open_memory(services: Services, key: ApiKey, info: SessionInfo) -> ConversationMemory:
    """The session's memory; it resumes from the store on first use (see the module
    docstring). With a recall index it is the tiered memory: the user's facts and what
    recall finds for the query join the context, and what the view evicts is indexed."""
    recall = services.context_recall if info.user_id is not None else None
    models = services.models
    return ConversationMemory(
        budget=session_budget(services, info),
        tokenizer=services.settings.tokenizer,
        store=services.db.session(info.session_id, user_id=info.user_id, tenant=key.tenant),
        summarizer=models.summarizer,
        recall=recall,
        recall_k=services.settings.recall_k,
        extractor=models.extractor if recall is not None else None,
    )


@asynccontextmanager
async def use_memory(
    services: Services, key: ApiKey, info: SessionInfo
) -> AsyncIterator[ConversationMemory]:
    """The session's memory, held exclusively for the block: the process's cached one
    when ``info`` (read by this request) shows it current, else a new ``open_memory``."""
    cache = services.memories
    if cache is None:
        yield open_memory(services, key, info)
        return
    budget = session_budget(services, info)
    facts = await _facts_version(services, key, info)
    tag = await _expired_sessions(services, key, info)
    async with cache.use(
        key.tenant, info, budget, lambda: open_memory(services, key, info), facts, tag
    ) as memory:
        yield memory


async def open_at_start(app_state: Any) -> None:
    """Open the services as the app starts: a store that cannot serve (a configuration
    error: PostgreSQL without pgvector for recall, a missing extra) fails the start with
    a message saying what is missing. A store that does not answer yet does not: the
    process starts, ``/readyz`` answers 503 with the error, and the first request that
    finds it up opens it."""
    try:
        async with app_state.opening:
            if app_state.services is None:
                app_state.services = await open_services(
                    app_state.settings, app_state.metrics, app_state.models
                )
    except (ConfigError, MissingDependency):
        raise
    except (ConvomemError, OSError) as exc:
        log.warning("the store is not ready yet: %s", exc)


async def _facts_version(services: Services, key: ApiKey, info: SessionInfo) -> int | None:
    """The user's stored facts version, which a cached memory's facts must match (a fact
    edited or saved by another replica); None when there is none to check or the index
    does not answer (the memory's own recall guard decides what an outage costs)."""
    index = services.recall
    if index is None or info.user_id is None or not hasattr(index, "facts_version"):
        return None
    try:
        version: int = await index.facts_version(info.user_id, tenant=key.tenant)
    except (StoreError, TransientError, OSError):
        return None
    return version


async def _expired_sessions(
    services: Services, key: ApiKey, info: SessionInfo
) -> frozenset[str] | None:
    """The owner's expired sessions (``stores.expiry``): a cached memory holds facts read
    when they were other, so it is reused only while they are the same. None when there
    is nothing to check or the index does not answer (as ``_facts_version``)."""
    index = services.recall
    if index is None or info.user_id is None:
        return None
    try:
        gone: frozenset[str] = await index.expired_sessions(info.user_id, tenant=key.tenant)
    except (StoreError, TransientError, OSError):
        return None
    return gone


def new_state(app_state: Any, settings: Settings) -> None:
    """Prepare ``app.state`` for ``get_services``; the models are built now
    (``build_models``), so a bad model option stops ``create_app``."""
    app_state.settings = settings
    app_state.models = build_models(settings)
    app_state.metrics = Metrics()
    app_state.services = None
    app_state.opening = asyncio.Lock()
