"""Durable sessions: a ConversationMemory over a ``SessionStore`` resumes exactly.

When the store is a ``SessionStore`` / ``AsyncSessionStore`` (``db.session(...)``) the
memory keeps its *derived state* in the store beside the log (``persist``): the running
summary, the seq range of each segment, compressed texts and the view's snapshot.

- **Writes.** Each ``add`` appends its message with ``expected_seq`` (the newest seq
  this memory knows) and its token count (``counts``, under the tokenizer's name). When
  the message triggered a compaction, the new state goes in the *same* append
  (``state=``, ``expected_version=``): the log and the state never disagree. The view
  is changed first, tentatively; if the append fails, the memory drops its view and
  rebuilds it from the store on next use, so a failed add changes nothing.
- **Resume.** On first use the memory loads the state and reads only the log's rows the
  snapshot refers to (from its ``cut``) plus the messages appended after it (the tail,
  replayed with their stored counts): no summarizer and no tokenizer runs for what the
  previous process did, and ``context()`` is what it would have returned. A session
  without a usable state (written by ``add_items``, by another version, another
  configuration, or a ``pop`` of a message the state refers to) replays its log once,
  as a memory over a plain ``Store`` does, and saves the state.
- **Concurrency.** Another writer moving the session makes the append raise
  ``ConcurrentUpdate``: the memory rebuilds from the store (the other's state, if it
  saved one, and every message since, in seq order) and adds its message again. State
  saves are compare-and-set on the state's version, so two processes compacting at once
  never interleave: the loser adopts the winner's state (its compaction's summarizer
  work is lost and redone if still needed).
- **Duplicates.** Appends are idempotent: re-adding a message whose id the log holds
  with the same content is a no-op returning it; other content raises
  ``MessageConflict``. An id a format converter derived from content
  (``model.is_derived_id``) that the log already holds gets a fresh id instead
  (``<id>~<n>``, ``n`` from the newest seq), as with any store (``stats().reids``).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..errors import ConcurrentUpdate, ConfigError, MessageConflict
from ..model import Message, is_derived_id
from ..stores import AsyncStore, Store
from ..stores.database import AsyncSessionStore, LogEntry, SessionStore
from ..summaries import RunningSummary
from ..tokens import Tokenizer
from ._ops import Gen, PauseOp, StoreOp
from ._tiers import Tiers
from .persist import FORMAT, VERSION, Stale, dump_view, load_view, view_cut
from .view import SessionView

MAX_RACES: Final = 64
"""Lost races (``ConcurrentUpdate``) one operation survives before it gives up."""
PAGE: Final = 1000
"""Rows per page when a resume reads the log."""


def race_pause(lost: int) -> PauseOp:
    """The pause after the ``lost``-th race in a row: full jitter over a window that
    doubles from 2 ms up to 250 ms (AWS's "exponential backoff and jitter")."""
    return PauseOp(random.uniform(0.0, min(0.002 * 2**lost, 0.25)))


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def is_session_store(store: object) -> bool:
    """Whether ``store`` is a durable session (it can hold derived state)."""
    return isinstance(store, SessionStore | AsyncSessionStore)


class Durable:
    """The durable half of ``SessionCore`` (see the module docstring)."""

    _store: Store | AsyncStore
    _rs: RunningSummary
    _tok: Tokenizer
    _view_engine: SessionView
    _loaded: bool
    _ids: set[str]
    _compactions: int
    _reids: int
    _tlock: threading.RLock
    _tiers: Tiers | None

    def _durable_init(self, config: dict[str, Any]) -> None:
        self._durable = is_session_store(self._store)
        self._config = config
        self._tok_name: str | None = getattr(self._tok, "name", None)
        self._last = 0  # the newest seq of the log this memory knows
        self._upto = 0  # the newest seq applied to the view
        self._count = 0  # messages in the log
        self._sversion = 0  # the version of the stored state this memory knows
        self._saved: dict[str, Any] | None = None  # that state
        # Messages of the view (and orphans waiting) by id, with their seq; the object is
        # the log's own, so a snapshot can refer to it instead of saving it whole.
        self._logged: dict[str, tuple[int, Message | None]] = {}
        self._bounds: dict[str, int] = {}  # seqs of the summary segments' first/last ids

    # the shared core's (SessionCore)
    _compact_gen: Callable[[], Gen[None]]
    _apply: Callable[[Message, int], None]
    _prepare: Callable[[Message, str], tuple[Message, int]]
    _reset: Callable[[], None]
    _summary_reserve: Callable[[], int]
    _tier_drift_gen: Callable[[Message], Gen[None]]
    _tier_extract_gen: Callable[[Message], Gen[None]]
    _tier_after_gen: Callable[[bool], Gen[None]]
    _tier_loaded_gen: Callable[[list[Message]], Gen[None]]
    _tier_fit_gen: Callable[[], Gen[None]]

    def _after_compaction(self) -> None:
        """Keep the seqs the next state needs; forget those of messages that left."""
        if not self._durable:
            return
        logged = self._logged
        bounds: dict[str, int] = {}
        for s in self._rs.segments:
            for mid in (s.first_id, s.last_id):
                if mid is None:
                    continue
                seq = self._bounds.get(mid)
                if seq is None and mid in logged:
                    seq = logged[mid][0]
                if seq is not None:
                    bounds[mid] = seq
        self._bounds = bounds
        view = self._view_engine
        keep = view.log._ids.union(m.id for m in view.to_fold)
        self._logged = {k: v for k, v in logged.items() if k in keep}

    # -- the state ----------------------------------------------------------------------

    def _dump_state(self) -> dict[str, Any] | None:
        """The derived state now, or None when the view cannot be saved (a resume then
        replays the log)."""
        logged = self._logged
        try:
            view = dump_view(self._view_engine, logged)
        except Stale:
            return None
        return {
            "format": FORMAT,
            "version": VERSION,
            "config": self._config,
            "upto": self._upto,
            "count": self._count,
            # The two big parts go as JSON text: a store checks a string at C speed, but
            # walks nested values one by one (a full facts ledger is 70,000 of them).
            "summary": _text(self._rs.state()),
            "segments": [
                [self._bounds.get(s.first_id or ""), self._bounds.get(s.last_id or "")]
                for s in self._rs.segments
            ],
            "view": _text(view),
            "tiers": None if self._tiers is None else self._tiers.state(),
        }

    def _usable(self, state: object) -> Mapping[str, Any] | None:
        if (
            isinstance(state, Mapping)
            and state.get("format") == FORMAT
            and state.get("version") == VERSION
            and state.get("config") == self._config
        ):
            try:
                parts = {k: json.loads(state[k]) for k in ("summary", "view")}
            except (KeyError, TypeError, ValueError):
                return None
            return {**state, **parts}
        return None

    def _entry_count(self, e: LogEntry) -> int:
        name = self._tok_name
        t = None if name is None else e.counts.get(name)
        return self._view_engine.log.count(e.message) if t is None else t

    def _replay(self, entries: list[LogEntry]) -> Gen[None]:
        """Apply logged messages in seq order, compacting as an add would."""
        for e in entries:
            m = e.message
            yield from self._tier_drift_gen(m)
            self._apply(m, self._entry_count(e))
            self._logged[m.id] = (e.seq, m)
            self._upto = e.seq
            self._count += 1
            if self._view_engine.over(self._summary_reserve()):
                yield from self._compact_gen()

    def _read_back(self, cut: int, last: int) -> Gen[list[LogEntry]]:
        """The log's entries from seq ``cut`` to the newest, oldest first."""
        out: list[LogEntry] = []
        cursor: str | None = None
        limit = max(1, min(PAGE, last - cut + 1))
        while True:
            page, cursor = yield StoreOp("entries", (cursor, limit, True))
            out.extend(e for e in page if e.seq >= cut)
            if cursor is None or not page or page[-1].seq <= cut:
                break
            limit = PAGE
        out.reverse()
        return out

    def _read_all(self) -> Gen[list[LogEntry]]:
        out: list[LogEntry] = []
        cursor: str | None = None
        while True:
            page, cursor = yield StoreOp("entries", (cursor, PAGE, False))
            out.extend(page)
            if cursor is None or not page:
                return out

    def _restore(self, state: Mapping[str, Any], entries: list[LogEntry]) -> list[LogEntry]:
        """Put the saved state in place; return the tail to replay. ``Stale`` if the
        state cannot be used (then the summary and the view are left cleared)."""
        upto = state["upto"]
        view = state["view"]
        by_id = {e.message.id: e for e in entries if e.seq <= upto}
        seqs = view["seqs"]
        logged: dict[str, Message] = {}
        for mid in view["refs"]:
            seq = seqs[mid][0]
            e = by_id.get(mid)
            if e is None or e.seq != seq:
                raise Stale(f"message {mid!r} (seq {seq}) is no longer in the log")
            logged[mid] = e.message
        self._rs.load_state(state["summary"], lazy=True)  # ConfigError (Stale): unusable
        engine = self._view_engine
        try:
            load_view(engine, view, logged)
        except Stale:
            self._rs.clear()
            raise
        held = {m.id: m for m in (*engine.log.kept(), *engine.to_fold)}
        self._logged = {
            mid: (int(seq), held[mid] if same else None)
            for mid, (seq, same) in seqs.items()
            if mid in held
        }
        self._bounds = {
            mid: seq
            for s, pair in zip(self._rs.segments, state["segments"], strict=True)
            for mid, seq in ((s.first_id, pair[0]), (s.last_id, pair[1]))
            if mid is not None and seq is not None
        }
        self._upto = upto
        self._count = int(state["count"])
        return [e for e in entries if e.seq > upto]

    # -- the generators -----------------------------------------------------------------

    def _dload_gen(self) -> Gen[None]:
        """Rebuild the view from the stored state and the log's tail, once."""
        lost: ConcurrentUpdate | None = None
        for _ in range(MAX_RACES):
            raw, version = yield StoreOp("load_state")
            last: int = yield StoreOp("last_seq")
            self._reset()
            self._logged, self._bounds = {}, {}
            self._upto = self._count = 0
            state = self._usable(raw)
            before = self._compactions
            tail: list[LogEntry] | None = None
            if state is not None:
                entries = yield from self._read_back(view_cut(state["view"], state["upto"]), last)
                try:
                    tail = self._restore(state, entries)
                except (Stale, KeyError, TypeError, ValueError):
                    tail = None
            if tail is None:  # replay the whole log, once
                tail = yield from self._read_all()
                if state is not None:
                    try:  # the summary keeps what it covers (after a pop): nothing twice
                        self._rs.load_state(state["summary"])
                    except (ConfigError, KeyError, TypeError):
                        self._rs.clear()
                else:
                    self._rs.clear()
                self._view_engine.compressions.clear()
                dirty = raw is not None or bool(tail)
            else:
                dirty = False
            if self._tiers is not None:
                restored = state is not None and not dirty
                self._tiers.load_state(state.get("tiers") if restored and state else None)
            yield from self._replay(tail)
            yield from self._tier_loaded_gen([e.message for e in tail])
            self._last = max(last, self._upto)
            self._sversion = version
            self._saved = raw
            self._loaded = True
            if not (dirty or self._compactions != before):
                return
            new = self._dump_state()
            if new is None or (raw is None and self._compactions == before):
                return
            try:
                self._sversion = yield StoreOp("save_state", (new,), {"expected_version": version})
                self._saved = new
                return
            except ConcurrentUpdate as exc:
                lost = exc
                continue  # another writer saved first: adopt its state
        assert lost is not None
        raise lost  # lost every race: give up

    def _session_id(self) -> str:
        return str(getattr(self._store, "session_id", "?"))

    def _dadd_gen(
        self, batch: list[Message], wheres: list[str], expected_seq: int | None
    ) -> Gen[list[Message]]:
        """Append ``batch`` (checked Messages) in one store append: the view changes
        tentatively, the append carries the messages, their counts and (when they made a
        compaction) the state; any failure drops the view (rebuilt on next use).

        ``expected_seq`` is the caller's precondition: the newest seq it saw. It is held
        to the store's newest seq (re-read once when this memory's may be stale); a
        mismatch raises ``ConcurrentUpdate`` and writes nothing. Without it, a lost race
        re-reads the store and tries again.
        """
        skip = 0  # fresh ids tried for derived ids the log already holds
        lost: ConcurrentUpdate | None = None
        for race in range(MAX_RACES):
            fresh = not self._loaded
            yield from self._dload_gen_if_needed()
            if expected_seq is not None and expected_seq != self._last:
                if not fresh:
                    self._loaded = False  # this memory may be behind: re-read, then judge
                    continue
                raise ConcurrentUpdate(self._session_id(), "seq", expected_seq, self._last)
            # Derived ids the view does not hold may still be in the log: ask once.
            derived = [m.id for m in batch if is_derived_id(m.id) and m.id not in self._logged]
            held: set[str] = set()
            if derived:
                held = set((yield StoreOp("get_counts", (derived,))))
            out: list[Message] = []
            todo: list[tuple[Message, int]] = []
            resend: list[Message] = []
            taken: set[str] = set()
            for i, given in enumerate(batch):
                hit = self._logged.get(given.id)
                if hit is not None and not is_derived_id(given.id):
                    scored, _ = self._prepare(given, wheres[i])  # as it was logged
                    if hit[1] is None:  # the view holds a copy: the store compares
                        resend.append(scored)
                    elif hit[1] != scored:
                        raise MessageConflict(
                            self._session_id(), given.id, hit[0], "is in the log with other content"
                        )
                    out.append(scored if hit[1] is None else hit[1])
                    continue
                if is_derived_id(given.id) and (
                    hit is not None or given.id in held or given.id in taken or skip
                ):
                    given = self._fresh_id(given, skip, taken)
                m, t = self._prepare(given, wheres[i])
                taken.add(m.id)
                todo.append((m, t))
                out.append(m)
            if resend:  # a replay of these alone: a no-op, or MessageConflict
                yield StoreOp("append", (resend,))
            if not todo:
                return out
            start = self._last
            before = self._compactions
            for m, t in todo:  # tentative, as the view: a reload restores
                yield from self._tier_drift_gen(m)
                self._apply(m, t)
                self._upto += 1
                self._logged[m.id] = (self._upto, m)
                self._count += 1
                if self._view_engine.over(self._summary_reserve()):
                    yield from self._compact_gen()
            state = self._dump_state() if self._compactions != before else None
            kwargs: dict[str, Any] = {"expected_seq": start}
            if self._tok_name is not None:
                kwargs["counts"] = {m.id: {self._tok_name: t} for m, t in todo}
            if state is not None:
                kwargs["state"] = state
                kwargs["expected_version"] = self._sversion
            try:
                got: int = yield StoreOp("append", ([m for m, _ in todo],), kwargs)
            except ConcurrentUpdate as exc:
                self._loaded = False
                lost = exc
                yield race_pause(race + 1)
                continue
            except BaseException:
                self._loaded = False
                raise
            if got == start + len(todo):
                self._last = got
                if state is not None:
                    self._sversion += 1
                    self._saved = state
                self._reids += sum(1 for m, g in zip(out, batch, strict=True) if m.id != g.id)
                for m, _ in todo:
                    yield from self._tier_extract_gen(m)
                yield from self._tier_after_gen(state is not None)
                yield from self._tier_fit_gen()
                return out
            # Some ids were in the log already, with this content: the store appended only
            # the others (or nothing). The view is re-read; the state goes back.
            self._loaded = False
            if state is not None:
                yield from self._put_back()
            if got != start or not any(is_derived_id(m.id) for m, _ in todo):
                return out
            skip = max(skip, self._last) + 1  # a derived id raced in: fresh ids, again
        assert lost is not None
        raise lost  # lost every race: give up

    def _fresh_id(self, m: Message, skip: int, taken: set[str]) -> Message:
        n = max(skip, self._last)
        while f"{m.id}~{n}" in self._logged or f"{m.id}~{n}" in taken:
            n += 1
        return m.replace(id=f"{m.id}~{n}")

    def _put_back(self) -> Gen[None]:
        with contextlib.suppress(ConcurrentUpdate):  # another writer replaced it already
            yield StoreOp("save_state", (self._saved,), {"expected_version": self._sversion + 1})

    def _dload_gen_if_needed(self) -> Gen[None]:
        if not self._loaded:
            yield from self._dload_gen()

    def _dsave_gen(self) -> Gen[None]:
        """Save the state now (compare-and-set), when no message goes with it: after
        background summaries completed, or a summary set from outside. A lost race
        drops this memory's view (it adopts the other writer's state on next use)."""
        if not (self._durable and self._loaded):
            return
        state = self._dump_state()
        if state is None:
            return
        try:
            version = yield StoreOp("save_state", (state,), {"expected_version": self._sversion})
        except BaseException:
            self._loaded = False
            raise
        self._sversion, self._saved = version, state

    def _dclear_state_gen(self) -> Gen[None]:
        """Drop the stored state (after the log was cleared to its system prompt)."""
        for _ in range(MAX_RACES):
            raw, version = yield StoreOp("load_state")
            if raw is None:
                return
            try:
                yield StoreOp("save_state", (None,), {"expected_version": version})
                return
            except ConcurrentUpdate:
                continue
