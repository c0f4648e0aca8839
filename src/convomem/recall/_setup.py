"""What ``RecallIndex`` and ``AsyncRecallIndex`` share: the options both check the same
way, which backend a database gets, and ``IndexBase``, which builds every request of
every method (the ``_core`` generators, the ``Db`` operations and their checks); the
twins only run them, the sync one with ``_io.drive`` and ``run_statements``, the async
one with ``_io.adrive`` and ``await run_statements``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

from .. import _check, _io
from ..errors import ConcurrentUpdate, ConfigError, MissingDependency
from ..stores.database import AsyncStoreDatabase, StoreDatabase, StoreKind
from ..stores.records import check_name
from ..summaries.supersession import FactHistory
from ._backend import Scope, model_of
from ._core import (
    Db,
    Embed,
    Gen,
    Planned,
    add_gen,
    check_as_of,
    check_kinds,
    scope_of,
    search_gen,
)
from ._facts_table import FactsTable, UserFacts, dump, history_of, without
from .cache import EmbeddingCache
from .embedders import EmbedderLike, _numpy, embedder_named, query_side
from .fusion import FUSIONS, RRF_K, linear_weight_of, vector_weight_of
from .keys import keys_for

QUERY_CACHE: Final = 10_000
"""Query vectors an index keeps when its embedder embeds queries apart."""
_SUPPORTED = "sqlite:// (embedded) and postgresql:// (with pgvector)"


def _np() -> Any:
    np = _numpy()
    if np is None:
        raise MissingDependency("RecallIndex", "numpy", "numpy")
    return np


def search_kind(db: object, *, asynchronous: bool) -> StoreKind:
    """The kind of ``db`` when a recall index can keep its tables there: a store
    database (async when ``asynchronous``) with search."""
    if not isinstance(db, StoreDatabase | AsyncStoreDatabase) or db.kind == "redis":
        raise ConfigError(
            f"db={db!r}: a RecallIndex needs a store database with search; supported: "
            f"{_SUPPORTED} (Redis has no vector search here)"
        )
    if _io.is_async_callable(db.run_statements) != asynchronous:
        twin = "AsyncRecallIndex" if not asynchronous else "RecallIndex"
        what = "an async" if not asynchronous else "a sync"
        raise ConfigError(f"db={db!r}: {what} database; use {twin}")
    return db.kind


def check_url(url: str) -> None:
    """ConfigError unless the store ``url`` names can hold a recall index."""
    from ..stores.url import parse_store_url

    if parse_store_url(url).scheme not in ("sqlite", "postgresql", "postgres"):
        raise ConfigError(
            f"url={url!r}: a RecallIndex needs a store with search; supported: {_SUPPORTED} "
            "(Redis has no vector search here)"
        )


def make_backend(kind: StoreKind, np: Any, db: Any, embedder: object) -> Any:
    """The backend of ``db``, knowing the name of ``embedder``'s model (``same_embedder``)."""
    backend: Any
    if kind == "sqlite":
        from ._sqlite_recall import SQLiteRecall

        backend = SQLiteRecall(np)
    else:
        from ._pg_recall import PgRecall

        backend = PgRecall(np, db.schema)
    backend.model = model_of(embedder)
    return backend


class _Options:
    def __init__(
        self,
        embedder: EmbedderLike | None,
        candidates: int,
        rrf_k: int,
        cache_size: int,
        batch_size: int,
        clock: Callable[[], float],
        vector_weight: float | None = None,
        keys: Sequence[str] | None = None,
        rerank: bool = True,
        fusion: str = "linear",
    ) -> None:
        self.np = _np()
        self.rerank = _check.flag("rerank", rerank)
        self.fusion = _check.one_of("fusion", fusion, FUSIONS)
        if embedder is None:
            from .static import StaticEmbedder

            embedder = StaticEmbedder()
        self.embedder = embedder
        if self.fusion == "linear" and vector_weight is None:
            self.vector_weight = linear_weight_of(self.embedder)
        else:
            self.vector_weight = vector_weight_of(self.embedder, vector_weight)
        self.keys = keys_for(self.embedder, keys)
        self.candidates = _check.positive_int("candidates", candidates)
        self.rrf_k = _check.integer("rrf_k", rrf_k, minimum=0)
        self.cache = EmbeddingCache(self.embedder, max_size=cache_size, batch_size=batch_size)
        side = query_side(self.embedder)
        self.query_cache = (
            self.cache
            if side is None
            else EmbeddingCache(side, max_size=min(cache_size, QUERY_CACHE), batch_size=batch_size)
        )
        self.clock = _check.function("clock", clock, "() -> epoch seconds")

    def cache_for(self, req: Embed) -> EmbeddingCache:
        """The cache a request's vectors come from: queries have their own when the
        embedder embeds them apart from the texts they are compared with."""
        return self.query_cache if req.query else self.cache

    def embedded(self) -> int:
        """Texts embedded so far, queries embedded apart included."""
        extra = 0 if self.query_cache is self.cache else self.query_cache.embedded
        return self.cache.embedded + extra

    def add_gen(self, backend: Any, plan: Planned) -> Gen:
        """One planned ``add``, for either twin to drive."""
        return add_gen(backend, self.np, plan, self.clock(), self.keys)

    def search_gen(
        self,
        backend: Any,
        query: str,
        user_id: str,
        tenant: str | None,
        k: int,
        kinds: Sequence[str] | str | None,
        as_of: float | None,
        neighbours: int,
        distinct: bool = True,
    ) -> Gen:
        """One search, arguments checked, for either twin to drive."""
        return search_gen(
            backend,
            self.np,
            query,
            scope_of(user_id, tenant),
            _check.positive_int("k", k),
            check_kinds(kinds),
            check_as_of(as_of),
            self.candidates,
            self.rrf_k,
            _check.integer("neighbours", neighbours, minimum=0, maximum=100),
            self.vector_weight,
            self.rerank,
            self.fusion,
            _check.flag("distinct", distinct),
            self.clock(),
        )


class IndexBase:
    """What ``RecallIndex`` and ``AsyncRecallIndex`` hold and build the same way (see
    ``RecallIndex`` for the options): the checked options, the database's backend and
    facts table, and each method's requests, checked before any I/O."""

    asynchronous: ClassVar[bool] = False
    _owned: bool
    """Whether the index opened its database (and closes it): set by ``_database``."""

    def __init__(
        self,
        db: StoreDatabase | AsyncStoreDatabase | str,
        *,
        embedder: EmbedderLike | str | None = None,
        candidates: int = 50,
        rrf_k: int = RRF_K,
        cache_size: int = 100_000,
        batch_size: int = 256,
        clock: Callable[[], float] = time.time,
        vector_weight: float | None = None,
        keys: Sequence[str] | None = None,
        rerank: bool = True,
        fusion: str = "linear",
    ) -> None:
        named = embedder_named(embedder) if isinstance(embedder, str) else embedder
        self._opts = _Options(
            named,
            candidates,
            rrf_k,
            cache_size,
            batch_size,
            clock,
            vector_weight,
            keys,
            rerank,
            fusion,
        )
        self.db: Any = self._database(db)
        try:
            kind = search_kind(self.db, asynchronous=self.asynchronous)
            self.backend = make_backend(kind, self._opts.np, self.db, self._opts.embedder)
            self.facts_table = FactsTable(kind, self.db.schema)
            self._start()
        except BaseException:
            if self._owned:  # the sync twin opened it from a URL
                self.db.close()
            raise

    def _database(self, db: object) -> Any:
        """The database ``db`` names, ``_owned`` when the index opened it (the sync twin
        opens a URL)."""
        raise NotImplementedError

    def _start(self) -> None:
        """What the twin does once its database is known (the sync one migrates)."""

    @property
    def embedded(self) -> int:
        """Texts embedded since the index was made (each distinct text once; queries
        apart from messages when the embedder embeds them apart, ``embed_query``)."""
        return self._opts.embedded()

    def _embed(self, req: Embed) -> EmbeddingCache:
        return self._opts.cache_for(req)

    def _migrations(self) -> tuple[Db, Db]:
        return Db(self.backend.migrate, True), Db(self.facts_table.migrate, True)

    def _add_gen(self, plan: Planned) -> Gen:
        return self._opts.add_gen(self.backend, plan)

    def _search_gen(
        self,
        query: str,
        user_id: str,
        k: int,
        tenant: str | None,
        kinds: Sequence[str] | str | None,
        as_of: float | None,
        neighbours: int,
        distinct: bool,
    ) -> Gen:
        return self._opts.search_gen(
            self.backend, query, user_id, tenant, k, kinds, as_of, neighbours, distinct
        )

    def _delete(
        self,
        user_id: str,
        session_id: str | None,
        message_ids: Sequence[str] | None,
        tenant: str | None,
    ) -> Db:
        scope, sid, ids = _check_delete(user_id, session_id, message_ids, tenant)
        now, backend, table = self._opts.clock(), self.backend, self.facts_table
        return Db(lambda: delete_op(backend, table, scope, sid, ids, now), True)

    def _erase(self, user_id: str, tenant: str | None) -> Db:
        scope, backend, table = scope_of(user_id, tenant), self.backend, self.facts_table
        return Db(lambda: erase_op(backend, table, scope), True)

    def _expired(self, user_id: str, tenant: str | None) -> Db:
        scope, now, backend = scope_of(user_id, tenant), self._opts.clock(), self.backend
        return Db(lambda: backend.expired(scope, now), False)

    def _facts(
        self, user_id: str, tenant: str | None, options: dict[str, Any]
    ) -> tuple[Db, Callable[[Any], UserFacts]]:
        """The read of the user's facts, and what makes its ``UserFacts``."""
        scope, now, backend, table = (
            scope_of(user_id, tenant),
            self._opts.clock(),
            self.backend,
            self.facts_table,
        )

        def done(found: Any) -> UserFacts:
            loaded, gone = found
            return history_of(loaded, scope, tenant, gone, **options)

        return Db(lambda: facts_op(backend, table, scope, now), False), done

    def _facts_version(self, user_id: str, tenant: str | None) -> Db:
        scope, table = scope_of(user_id, tenant), self.facts_table
        return Db(lambda: table.version(scope), False)

    def _save_facts(
        self, user_id: str, history: FactHistory, tenant: str | None, expected_version: int | None
    ) -> tuple[Db, Callable[[int], int]]:
        """The save of the user's facts, and what records its new version."""
        scope, state, expected = check_save(user_id, history, tenant, expected_version)
        now, table = self._opts.clock(), self.facts_table

        def done(version: int) -> int:
            if isinstance(history, UserFacts):
                history.version = version
            return version

        return Db(lambda: table.save(scope, state, expected, now), True), done


def erase_op(backend: Any, table: FactsTable, scope: Scope) -> Any:
    """Delete every item of the scope, its facts and whatever names the user, in one
    transaction."""
    n = yield from backend.delete(scope, None, None)
    yield from backend.forget(scope)
    yield from table.delete(scope)
    return n


def delete_op(
    backend: Any,
    table: FactsTable,
    scope: Any,
    session_id: str | None,
    message_ids: list[str] | None,
    now: float,
) -> Any:
    """Delete items (see ``RecallIndex.delete``); a whole session's facts go with its
    items (the user's others are filed again: ``_facts_table.without``), in the same
    transaction."""
    n = yield from backend.delete(scope, session_id, message_ids)
    if session_id is None or message_ids is not None:
        return n
    lost: ConcurrentUpdate | None = None
    for _ in range(MAX_FACT_RACES):
        version, state = yield from table.load(scope)
        kept = state if state is None else without(state, {session_id})
        if kept is state:
            return n
        try:
            yield from table.save(scope, json.dumps(kept, separators=(",", ":")), version, now)
            return n
        except ConcurrentUpdate as exc:  # another session saved between: read it again
            lost = exc
    assert lost is not None
    raise lost


MAX_FACT_RACES: Final = 8
"""Saves of a user's facts by other sessions one ``delete`` of a session survives."""


def facts_op(backend: Any, table: FactsTable, scope: Any, now: float) -> Any:
    """The user's stored facts (``(version, state)``) and their expired sessions (whose
    facts are not served: ``_facts_table.without``), in one read."""
    loaded = yield from table.load(scope)
    gone = yield from backend.expired(scope, now)
    return loaded, gone


def check_save(
    user_id: object, history: object, tenant: object, expected_version: object
) -> tuple[Any, str, int | None]:
    """Check a ``save_facts`` call (raises before anything is written)."""
    scope = scope_of(user_id, tenant)
    if not isinstance(history, FactHistory):
        raise ConfigError(f"history={history!r}: must be a FactHistory")
    expected = None
    if expected_version is not None:
        expected = _check.integer("expected_version", expected_version, minimum=0)
    return scope, dump(history), expected


def _check_delete(
    user_id: object, session_id: object, message_ids: object, tenant: object
) -> tuple[Any, str | None, list[str] | None]:
    scope = scope_of(user_id, tenant)
    sid = check_name("session_id", session_id, optional=True)
    ids = None
    if message_ids is not None:
        if isinstance(message_ids, str) or not isinstance(message_ids, Sequence):
            raise ConfigError(f"message_ids={message_ids!r}: must be a list of ids")
        ids = [check_name("message_ids", m) or "" for m in message_ids]
    if sid is None and ids is None:
        raise ConfigError("delete(): give session_id=, message_ids= or both (erase_user: all)")
    return scope, sid, ids
