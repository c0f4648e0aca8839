"""``RecallIndex``: hybrid (BM25 + vector) search over past messages, scoped per user.

``RecallIndex(db_or_url, embedder=...)`` keeps its tables in the store database the
sessions live in: SQLite (BM25 over an in-memory inverted index + exact numpy vector
search over the user's partition; see ``_sqlite_recall``) or PostgreSQL (``tsvector`` +
pgvector HNSW with iterative scans; see ``_pg_recall``). Redis has no recall backend.
``AsyncRecallIndex`` is the async twin over ``aopen_store``'s databases; both drive the
same sans-I/O logic (``_core``).

- **Scope**: every statement names the tenant and the user; a search never returns
  another user's or tenant's item, whatever the ids and texts.
- **Ranking**: BM25F over each item's terms and its session neighbours' (``analyze``:
  stop words out, English stems) and the embedder's cosines; the two candidate lists
  (``candidates`` each) are fused linearly, each scaled to [0, 1]
  (``fusion.fuse_linear``; ``fusion="rrf"``: reciprocal rank fusion); ties go to the
  newer item; a question naming a speaker, a month or a year raises their items, a
  "now" or "when" question reorders the candidates (``rerank``, ``_rerank``); of items
  with the same text only the best is returned.
- **Keys**: a message is embedded under its ``keys`` (``recall.keys``: its text, its
  sentences, the exchange a reply answers, the facts a user states) and scores its best
  key.
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
from collections.abc import Sequence
from typing import Any

from .. import _io
from ..model import Message
from ..stores.database import StoreDatabase
from ..summaries.supersession import FactHistory
from ._backend import Hit
from ._core import Db, Embed, Planned, plan_add
from ._facts_table import UserFacts
from ._setup import IndexBase, check_url

__all__ = ["Hit", "RecallIndex"]


class RecallIndex(IndexBase):
    """Hybrid recall over a store database (sync); see the module docstring.

    ``db`` is a store database from ``open_store`` (SQLite or PostgreSQL), whose
    ``run_statements`` runs the index's statements, or a URL (the index opens the
    database and closes it with ``close()``). ``embedder``
    defaults to ``StaticEmbedder()`` (MiniLM distilled into a token table, shipped); a
    spec string names one (``embedder_named``: ``"static"``, ``"hashing"``, ``"minilm"``,
    ``"e5"``, ``"openai:MODEL"``); ``candidates`` is how many lexical and how many vector
    candidates are fused; ``fusion`` how: ``"linear"`` (scores scaled to [0, 1] and
    added) or ``"rrf"`` (reciprocal ranks, ``rrf_k`` the constant); ``vector_weight`` the
    vector list's weight against the lexical list's 1 (None: the embedder's
    ``linear_weight``, else ``fusion.LINEAR_WEIGHT``, for a linear fusion; the embedder's
    ``fusion_weight`` for RRF); ``keys`` which texts each message is embedded under
    (``recall.keys``: the whole text, its sentences, the exchange it answers, the facts a
    user states; an item scores its best key; None: what the embedder declares);
    ``rerank`` whether a question about the present ("now") or a time ("when") reorders
    the best candidates, newer or dated items up (``_rerank``), before the cut to ``k``.
    """

    db: StoreDatabase

    def _database(self, db: object) -> Any:
        self._owned = isinstance(db, str)
        if isinstance(db, str):
            from ..stores.opening import open_store

            check_url(db)
            return open_store(db)
        return db

    def _start(self) -> None:
        for migration in self._migrations():
            self._run_db(migration)
        self._queue: queue.Queue[Planned | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()

    def _run_db(self, req: Db) -> Any:
        return self.db.run_statements(req.op, write=req.write)

    def _perform(self, req: Embed | Db) -> Any:
        if isinstance(req, Embed):
            return self._embed(req).vectors(req.messages)
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
        return _io.drive(self._add_gen(plan), self._perform)

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
        distinct: bool = True,
    ) -> list[Hit]:
        """The ``k`` best items of ``user_id`` (in ``tenant``) for ``query``, best first;
        only ``kinds`` when given, only items created at or before ``as_of`` when given.
        ``neighbours=w`` attaches to each hit the items of its session within ``w`` seqs
        (``Hit.context``; one more statement per search). ``distinct``: of items with
        the same text, the best only (False: every item, e.g. records that happen to
        hold equal texts)."""
        gen = self._search_gen(query, user_id, k, tenant, kinds, as_of, neighbours, distinct)
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
        those ids in every session with ``session_id=None``); how many. A whole
        session's facts go too (the user's other facts are filed again without them)."""
        n: int = self._run_db(self._delete(user_id, session_id, message_ids, tenant))
        return n

    def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every item of ``user_id`` in ``tenant``, and the user's facts; how many
        items."""
        n: int = self._run_db(self._erase(user_id, tenant))
        return n

    def expired_sessions(self, user_id: str, *, tenant: str | None = None) -> frozenset[str]:
        """The ids of the user's sessions expired now (``stores.expiry``), whose items
        ``search`` does not find and whose facts ``facts`` does not serve: what a cache
        of anything read from them must be checked against."""
        return frozenset(self._run_db(self._expired(user_id, tenant)))

    def facts(self, user_id: str, *, tenant: str | None = None, **options: Any) -> UserFacts:
        """The long-term facts of ``user_id`` (in ``tenant``), shared by all the user's
        sessions: a ``FactHistory`` (``current()``, ``history(attr)`` for "what was my
        old address?") whose ``version`` goes back to ``save_facts``. ``options`` are
        ``FactHistory``'s (``extractor=``, ``tokenizer=``)."""
        read, done = self._facts(user_id, tenant, options)
        return done(self._run_db(read))

    def facts_version(self, user_id: str, *, tenant: str | None = None) -> int:
        """The version ``facts(user_id)`` would have now (0: none stored), in one indexed
        read: what a cached copy of the facts is checked against."""
        n: int = self._run_db(self._facts_version(user_id, tenant))
        return n

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
        save, done = self._save_facts(user_id, history, tenant, expected_version)
        return done(self._run_db(save))

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
