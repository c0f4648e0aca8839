"""``RecallIndex``: hybrid (BM25 + vector) search over past messages, scoped per user.

``RecallIndex(db_or_url, embedder=...)`` keeps its tables in the store database the
sessions live in: SQLite (FTS5 BM25 + exact numpy vector search over the user's
partition; see ``_sqlite_recall``) or PostgreSQL (``tsvector`` + pgvector HNSW with
iterative scans; see ``_pg_recall``). Redis has no recall backend. ``AsyncRecallIndex``
is the async twin over ``aopen_store``'s databases; both drive the same sans-I/O logic
(``_core``).

- **Scope**: every statement names the tenant and the user; a search never returns
  another user's or tenant's item, whatever the ids and texts.
- **Ranking**: the lexical and the vector candidates (``candidates`` of each) are fused
  by reciprocal rank fusion (``fusion.fuse``); ties go to the newer item.
- **Embedding**: each distinct text once (a content-keyed ``EmbeddingCache``, batched);
  an item already indexed is never embedded again.
- **Ingest off the hot path**: ``submit`` queues messages for a background worker;
  ``flush()`` (``await aflush()``) waits for them and raises the first failure.
- **Erasure**: deleting a session in the store (``delete_session``, ``erase_user``, TTL
  expiry) deletes its items in the same transaction (a trigger); ``erase_user`` here
  removes every item of the user, whichever session it came from, and the user's facts.
- **Long-term facts**: ``facts(user_id)`` reads the user's ``FactHistory`` (kept across
  sessions in one row per user, ``_facts_table``); ``save_facts(user_id, history,
  expected_version=history.version)`` stores it, compare-and-set. The store deleting a
  user's last session (its ``erase_user`` among others) deletes the facts too.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import _check, _io
from ..errors import ConfigError, MissingDependency
from ..model import Message
from ..stores.database import StoreDatabase
from ..summaries.supersession import FactHistory
from ._core import (
    Db,
    Embed,
    Gen,
    Hit,
    Planned,
    add_gen,
    check_as_of,
    check_kinds,
    plan_add,
    scope_of,
    search_gen,
)
from ._facts_table import FactsTable, UserFacts, dump, history_of
from .cache import EmbeddingCache
from .embedders import EmbedderLike, HashingEmbedder, _numpy
from .fusion import RRF_K, vector_weight_of
from .keys import keys_for

__all__ = ["Hit", "RecallIndex"]

_SUPPORTED = "sqlite:// (embedded) and postgresql:// (with pgvector)"


def _np() -> Any:
    np = _numpy()
    if np is None:
        raise MissingDependency("RecallIndex", "numpy", "numpy")
    return np


def _kind_of(db: object) -> str:
    module = type(db).__module__
    if module in ("convomem.stores.sqlite", "convomem.stores.sqlite_async"):
        return "sqlite"
    if module in ("convomem.stores.postgres", "convomem.stores.postgres_async"):
        return "postgresql"
    raise ConfigError(
        f"db={db!r}: a RecallIndex needs a store database with search; supported: "
        f"{_SUPPORTED} (Redis has no vector search here)"
    )


def _check_url(url: str) -> None:
    from ..stores.url import parse_store_url

    if parse_store_url(url).scheme not in ("sqlite", "postgresql", "postgres"):
        raise ConfigError(
            f"url={url!r}: a RecallIndex needs a store with search; supported: {_SUPPORTED} "
            "(Redis has no vector search here)"
        )


def _facts_table(kind: str, db: Any) -> FactsTable:
    if kind == "sqlite":
        return FactsTable("sqlite")
    return FactsTable("postgresql", db._settings.schema)


def _backend(kind: str, np: Any, db: Any) -> Any:
    if kind == "sqlite":
        from ._sqlite_recall import SQLiteRecall

        return SQLiteRecall(np)
    from ._pg_recall import PgRecall

    return PgRecall(np, db._settings.schema)


def _sync_runner(kind: str, db: Any) -> Callable[[Db], Any]:
    if kind == "sqlite":
        from ..stores._sqlite_calls import Call
        from ._sqlite_recall import perform

        def run_sqlite(req: Db) -> Any:
            def fn(tx: Any) -> Any:
                return _io.drive(req.op(), lambda q: perform(tx.conn, q))

            return db._run(Call(fn, req.write))

        return run_sqlite
    from ..stores._pg_calls import Call as PgCall
    from ..stores._pg_ops import in_tx

    def run_pg(req: Db) -> Any:
        return db._run(PgCall(lambda tx: in_tx(tx, req.op()) if req.write else req.op()))

    return run_pg


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
    ) -> None:
        self.np = _np()
        self.rerank = _check.flag("rerank", rerank)
        self.embedder = HashingEmbedder() if embedder is None else embedder
        self.vector_weight = vector_weight_of(self.embedder, vector_weight)
        self.keys = keys_for(self.embedder, keys)
        self.candidates = _check.positive_int("candidates", candidates)
        self.rrf_k = _check.integer("rrf_k", rrf_k, minimum=0)
        self.cache = EmbeddingCache(self.embedder, max_size=cache_size, batch_size=batch_size)
        self.clock = _check.function("clock", clock, "() -> epoch seconds")

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
        )


class RecallIndex:
    """Hybrid recall over a store database (sync); see the module docstring.

    ``db_or_url`` is a ``StoreDatabase`` from ``open_store`` (SQLite or PostgreSQL) or a
    URL (the index opens the database and closes it with ``close()``). ``embedder``
    defaults to ``HashingEmbedder()``; ``candidates`` is how many lexical and how many
    vector candidates are fused; ``rrf_k`` the fusion constant; ``vector_weight`` the
    vector list's weight in the fusion against the lexical list's 1 (None: the
    embedder's ``fusion_weight``, see ``fusion``); ``keys`` which texts each message is
    embedded under (``recall.keys``: the whole text, its sentences, the exchange it
    answers; an item scores its best key; None: what the embedder declares); ``rerank``
    whether a question about the present ("now") or a time ("when") reorders the best
    candidates, newer or dated items up (``_rerank``), before the cut to ``k``.
    """

    def __init__(
        self,
        db_or_url: StoreDatabase | str,
        *,
        embedder: EmbedderLike | None = None,
        candidates: int = 50,
        rrf_k: int = RRF_K,
        cache_size: int = 100_000,
        batch_size: int = 256,
        clock: Callable[[], float] = time.time,
        vector_weight: float | None = None,
        keys: Sequence[str] | None = None,
        rerank: bool = True,
    ) -> None:
        self._opts = _Options(
            embedder, candidates, rrf_k, cache_size, batch_size, clock, vector_weight, keys, rerank
        )
        self._owned = isinstance(db_or_url, str)
        if isinstance(db_or_url, str):
            from ..stores.opening import open_store

            _check_url(db_or_url)
            db_or_url = open_store(db_or_url)
        self.db = db_or_url
        kind = _kind_of(db_or_url)
        if kind == "sqlite" and type(db_or_url).__name__.startswith("Async"):
            raise ConfigError(f"db={db_or_url!r}: an async database; use AsyncRecallIndex")
        self.backend = _backend(kind, self._opts.np, db_or_url)
        self._run_db = _sync_runner(kind, db_or_url)
        self.facts_table = _facts_table(kind, db_or_url)
        self._run_db(Db(self.backend.migrate, True))
        self._run_db(Db(self.facts_table.migrate, True))
        self._queue: queue.Queue[Planned | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()

    @property
    def embedded(self) -> int:
        """Texts embedded since the index was made (each distinct text once)."""
        return self._opts.cache.embedded

    def _perform(self, req: Embed | Db) -> Any:
        if isinstance(req, Embed):
            return self._opts.cache.vectors(req.messages)
        return self._run_db(req)

    def add(
        self,
        messages: Sequence[Message],
        *,
        user_id: str,
        session_id: str,
        tenant: str | None = None,
        seqs: Sequence[int] | None = None,
        kind: str | None = None,
    ) -> int:
        """Index ``messages`` of ``session_id`` for ``user_id`` now; how many were new.

        ``kind`` (default: each message's role) is what ``search(kinds=...)`` filters
        on (e.g. ``"summary"``); ``seqs`` their seqs in the session's log.
        """
        plan = plan_add(messages, user_id, session_id, tenant, seqs, kind)
        return int(self._add(plan))

    def _add(self, plan: Planned) -> Any:
        return _io.drive(self._opts.add_gen(self.backend, plan), self._perform)

    def submit(
        self,
        messages: Sequence[Message],
        *,
        user_id: str,
        session_id: str,
        tenant: str | None = None,
        seqs: Sequence[int] | None = None,
        kind: str | None = None,
    ) -> None:
        """``add`` in a background thread: returns at once (bad input still raises
        here); ``flush()`` waits for everything submitted."""
        plan = plan_add(messages, user_id, session_id, tenant, seqs, kind)
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._work, name="convomem-recall", daemon=True
                )
                self._worker.start()
        self._queue.put(plan)

    def _work(self) -> None:
        while True:
            plan = self._queue.get()
            try:
                if plan is None:
                    return
                try:
                    self._add(plan)
                except Exception as exc:  # reported by flush()
                    with self._lock:
                        self._errors.append(exc)
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Wait until every submitted message is indexed; raise the first failure
        since the last flush."""
        self._queue.join()
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def search(
        self,
        query: str,
        *,
        user_id: str,
        k: int = 10,
        tenant: str | None = None,
        kinds: Sequence[str] | str | None = None,
        as_of: float | None = None,
        neighbours: int = 0,
    ) -> list[Hit]:
        """The ``k`` best items of ``user_id`` (in ``tenant``) for ``query``, best first;
        only ``kinds`` when given, only items created at or before ``as_of`` when given.
        ``neighbours=w`` attaches to each hit the items of its session within ``w`` seqs
        (``Hit.context``; one more statement per search)."""
        gen = self._opts.search_gen(
            self.backend, query, user_id, tenant, k, kinds, as_of, neighbours
        )
        hits: list[Hit] = _io.drive(gen, self._perform)
        return hits

    def delete(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        message_ids: Sequence[str] | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete the user's items of ``session_id`` (only ``message_ids`` when given;
        those ids in every session with ``session_id=None``); how many."""
        scope, sid, ids = _check_delete(user_id, session_id, message_ids, tenant)
        n: int = self._run_db(Db(lambda: self.backend.delete(scope, sid, ids), True))
        return n

    def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every item of ``user_id`` in ``tenant``, and the user's facts; how many
        items."""
        scope = scope_of(user_id, tenant)
        n: int = self._run_db(Db(lambda: erase_op(self.backend, self.facts_table, scope), True))
        return n

    def facts(self, user_id: str, *, tenant: str | None = None, **options: Any) -> UserFacts:
        """The long-term facts of ``user_id`` (in ``tenant``), shared by all the user's
        sessions: a ``FactHistory`` (``current()``, ``history(attr)`` for "what was my
        old address?") whose ``version`` goes back to ``save_facts``. ``options`` are
        ``FactHistory``'s (``extractor=``, ``tokenizer=``)."""
        scope = scope_of(user_id, tenant)
        loaded = self._run_db(Db(lambda: self.facts_table.load(scope), False))
        return history_of(loaded, scope, tenant, **options)

    def save_facts(
        self,
        user_id: str,
        history: FactHistory,
        *,
        tenant: str | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Store ``history`` as the facts of ``user_id``; the new version. With
        ``expected_version`` (``history.version`` of ``facts()``; 0: nothing stored yet)
        only over that version, else ``ConcurrentUpdate`` and nothing is written."""
        scope, state, expected = check_save(user_id, history, tenant, expected_version)
        now = self._opts.clock()
        n: int = self._run_db(Db(lambda: self.facts_table.save(scope, state, expected, now), True))
        if isinstance(history, UserFacts):
            history.version = n
        return n

    def close(self) -> None:
        """Finish the queued work, stop the worker; close the database if the index
        opened it."""
        with self._lock:
            worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join()
        if self._owned:
            self.db.close()

    def __enter__(self) -> RecallIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RecallIndex on {self.db.url} embedder={self._opts.embedder!r}>"


def erase_op(backend: Any, table: FactsTable, scope: Any) -> Any:
    """Delete every item of the scope and its facts, in one transaction."""
    n = yield from backend.delete(scope, None, None)
    yield from table.delete(scope)
    return n


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
    from ..stores.records import check_name

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
