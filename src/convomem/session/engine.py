"""The session engine: one conversation's log, view, summary and tiers, as generators.

Every operation of a ``ConversationMemory`` is one generator here, yielding its I/O as
``_io.Call`` requests (a store call through the ``journal``, a summarizer call, a tier's
search): ``_io.run`` drives it synchronously and ``_io.arun`` in an event loop, so the
sync and async methods share all of it. One path each:

- **load** — once, before first use: the stored derived state and the log's rows it
  refers to, plus the tail after it, replayed; or (no usable state, or a plain store) the
  whole log replayed, compacting as the adds did.
- **add** — a batch (a single add is a batch of one): duplicates and derived ids sorted
  out, each message counted once and put into the view, compacting past the trigger, and
  one journal append. A durable append carries the derived state a compaction made and
  is made after the view changed (tentatively: any failure drops the view, rebuilt from
  the store on next use); a plain store's append is made first (it keeps no state).
- **context** — the view rendered (``SessionView.render``), the tiers placed in it
  (``placement``: the profile after the summary, each turn's update before its user
  message), converted to the requested format. Read-only.

A compaction plans first (summarizer calls) and commits after, so a failing summarizer
changes nothing (``Compactor``: retried on the next add).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from typing import Any

from .._io import Gen
from ..errors import (
    ClearIncomplete,
    ConcurrentUpdate,
    ConfigError,
)
from ..model import Message, is_derived_id
from ..stores.database import LogEntry
from ..summaries import RunningSummary, SummarizerLike
from ..tokens import Tokenizer, checked_count
from ..views.budget import REPLY_PRIMING_TOKENS
from . import state as derived
from ._ops import into_user_turns, render_context
from .compaction import CACHE_TURNS, Compactor
from .intake import Intake
from .journal import RACES, DurableJournal, PlainJournal
from .tiers import Tiers
from .view import SessionView, View


class SessionEngine:
    """State and logic of one session (see the module docstring). Not thread-safe: the
    face (``ConversationMemory``) serializes calls."""

    def __init__(
        self,
        *,
        journal: PlainJournal,
        view: SessionView,
        summary: RunningSummary,
        summarize: bool,
        tokenizer: Tokenizer,
        scorer: Any,
        compressor: SummarizerLike | None,
        background: bool,
        tiers: Tiers | None,
        config: Mapping[str, Any],
        cache_turns: int = CACHE_TURNS,
    ) -> None:
        self.journal = journal
        self.view = view
        self.summary = summary
        self.summarize = summarize
        self.tokenizer = tokenizer
        self.background = background
        self.tiers = tiers
        self.config = dict(config)
        self.book = derived.LogBook()
        self.compactor = Compactor(
            view=view,
            summary=summary,
            summarize=summarize,
            tiers=tiers,
            book=self.book,
            tokenizer=tokenizer,
            compressor=compressor,
            background=background,
            cache_turns=cache_turns,
        )
        self.intake = Intake(
            journal, self.book, scorer, functools.partial(checked_count, tokenizer)
        )
        self.prefix_breaks = self.reids = 0
        self.reset()

    def reset(self) -> None:
        """Drop the view (the log is the store's): it is rebuilt on next use."""
        self.view.reset()
        self.loaded = False
        self.compactor.pending_retry = False
        self.prefix_kept: bool | None = None
        self._cache: tuple[int, Message | None, View] | None = None
        self._rendered: dict[int, tuple[Message, list[dict[str, Any]]]] = {}
        self._prev: list[Message] | None = None
        if self.tiers is not None:
            self.tiers.reset()

    # -- reading ------------------------------------------------------------------------

    def summary_reserve(self) -> int:
        """What a compaction keeps free beside the history (``Compactor.reserve``)."""
        return self.compactor.reserve()

    def current(self) -> View:
        """The view as ``context()`` renders it now (cached while nothing changed)."""
        summary = self.summary.message()
        cache = self._cache
        if cache is not None and cache[0] == self.view.version and cache[1] is summary:
            return cache[2]
        v = self.view.render(summary)
        self._cache = (self.view.version, summary, v)
        return v

    # -- load ---------------------------------------------------------------------------

    def load(self) -> Gen[None]:
        """Rebuild the view from the stored state and the log, once (see the module
        docstring); a state save that loses a race adopts the winner's state."""
        if not self.loaded:
            yield from RACES.retried(self._load)
            yield from self.fit()

    def _load(self) -> Gen[None]:
        j = self.journal
        raw, version = yield from j.read_state()
        last = yield from j.last_seq()
        self.reset()
        self.book.reset()
        state = derived.usable(raw, self.config)
        before = self.compactor.compactions
        tail: list[LogEntry] | None = None
        if state is not None:
            entries = yield from j.read_from(derived.cut(state), last)
            try:
                tail = derived.restore(
                    state, entries, book=self.book, view=self.view, summary=self.summary
                )
            except (ConfigError, KeyError, TypeError, ValueError):
                tail = None
        dirty = False
        if tail is None:  # replay the whole log, once
            tail = yield from j.read_all()
            if state is not None:  # the summary keeps what it covers (after a pop)
                try:
                    self.summary.load_state(state["summary"])
                except (ConfigError, KeyError, TypeError):
                    self.summary.clear()
            elif j.durable:
                self.summary.clear()
            # (a plain store's summary is this memory's own: it keeps what it covers)
            if j.durable:
                self.view.compressions.clear()
            dirty = raw is not None or bool(tail)
        if self.tiers is not None:
            restored = state is not None and not dirty
            self.tiers.load_state(state.get("tiers") if restored and state else None)
        for e in tail:
            yield from self._apply(e.message, self._count_of(e), e.seq)
        if self.tiers is not None:
            yield from self.tiers.loaded([e.message for e in tail], self.view.log.kept())
        self.book.last = max(last, self.book.upto)
        self.book.version = version
        self.book.saved = raw
        self.loaded = True
        compacted = self.compactor.compactions != before
        if not j.durable or not (dirty or compacted):
            return
        new = self._dump()
        if new is None or (raw is None and not compacted):
            return
        self.loaded = False  # until the save is in: a lost race re-reads
        self.book.version = yield from j.save_state(new, version)
        self.book.saved = new
        self.loaded = True

    def _count_of(self, e: LogEntry) -> int:
        name = getattr(self.tokenizer, "name", None)
        t = None if name is None else e.counts.get(name)
        return self.view.log.count(e.message) if t is None else t

    def _apply(self, m: Message, t: int, seq: int) -> Gen[None]:
        """Put a logged message (``seq``) into the view, drift checked first, compacting
        past the trigger."""
        if self.tiers is not None:
            yield from self.tiers.check_drift(m)
            self.tiers.note(m)
        self.view.add(m, t)
        self.book.note(m, seq)
        if self.compactor.due():
            yield from self.compactor.run()

    def _dump(self) -> dict[str, Any] | None:
        return derived.dump(
            config=self.config,
            book=self.book,
            view=self.view,
            summary=self.summary,
            tiers=self.tiers,
        )

    # -- add ----------------------------------------------------------------------------

    def add(
        self, batch: list[Message], wheres: list[str], expected_seq: int | None
    ) -> Gen[list[Message]]:
        """Append ``batch`` (see the module docstring); the messages as logged.

        ``expected_seq`` is the caller's precondition: the newest seq it saw, held to the
        store's (re-read once when this memory may be behind); a mismatch raises
        ``ConcurrentUpdate`` and writes nothing. Without it a lost race re-reads the
        store and tries again.
        """
        skip = [0]  # fresh ids tried for derived ids the log already holds
        behind = False

        def attempt() -> Gen[list[Message] | None]:
            nonlocal behind
            fresh = not self.loaded
            yield from self.load()
            if expected_seq is not None and expected_seq != self.book.last:
                if fresh:
                    behind = True  # the caller's precondition failed: nothing to retry
                self.loaded = False  # this memory may be behind: re-read, then judge
                return None
            return (yield from self._add_once(batch, wheres, skip))

        while not behind:
            out = yield from RACES.retried(attempt)
            if out is not None:
                return out
        self.loaded = True  # it was just read: still current
        raise ConcurrentUpdate(self.journal.session_id, "seq", expected_seq or 0, self.book.last)

    def _add_once(
        self, batch: list[Message], wheres: list[str], skip: list[int]
    ) -> Gen[list[Message]]:
        j = self.journal
        out, todo, resend = yield from self.intake.sort(batch, wheres, skip[0])
        if resend:  # a replay of these alone: a no-op, or MessageConflict
            assert isinstance(j, DurableJournal)
            yield from j.replay(resend)
        if not todo:
            return out
        messages = [m for m, _ in todo]
        start = self.book.last
        if not j.durable:  # a plain store keeps no state: the log first, then the view
            self.book.last = yield from j.append(messages, expected_seq=start)
        before = self.compactor.compactions
        try:
            for i, (m, t) in enumerate(todo, start + 1):
                yield from self._apply(m, t, i)
        except BaseException:
            self.loaded = False
            raise
        compacted = self.compactor.compactions != before
        if j.durable:
            state = self._dump() if compacted else None
            name = getattr(self.tokenizer, "name", None)
            counts = None if name is None else {m.id: {name: t} for m, t in todo}
            try:
                got = yield from j.append(
                    messages,
                    expected_seq=start,
                    counts=counts,
                    state=state,
                    expected_version=self.book.version,
                )
            except BaseException:
                self.loaded = False  # a lost race re-reads (RACES), anything else raises
                raise
            if got != start + len(todo):
                # Some ids were in the log already, with this content: the store appended
                # only the others (or nothing). The view is re-read; the state goes back.
                self.loaded = False
                if state is not None:
                    with contextlib.suppress(ConcurrentUpdate):  # another writer replaced it
                        yield from j.save_state(self.book.saved, self.book.version + 1)
                if got == start and any(is_derived_id(m.id) for m in messages):
                    skip[0] = max(skip[0], self.book.last) + 1  # a derived id raced in
                    raise ConcurrentUpdate(j.session_id, "seq", start, got)
                return out
            self.book.last = got
            if state is not None:
                self.book.version += 1
                self.book.saved = state
        self.reids += sum(1 for m, g in zip(out, batch, strict=True) if m.id != g.id)
        if self.tiers is not None:
            yield from self.tiers.extract(messages)
            yield from self.tiers.after_add(compacted)
        yield from self.fit()
        return out

    # -- compaction ---------------------------------------------------------------------

    def fit(self) -> Gen[None]:
        """On the write path (after an add, a load): when the tiers' reserve no longer
        fits beside the view (facts merged from another session, pins grown), an
        emergency compaction folds the oldest history by the deficit
        (``Compactor.emergency``); ``context()`` never folds."""
        t = self.tiers
        if t is None or not t.shapes_context:
            return
        room = self.view.limit - (self.current().tokens - REPLY_PRIMING_TOKENS)
        if not (yield from self.compactor.emergency(t.reserve() - room)):
            return
        with contextlib.suppress(ConcurrentUpdate):  # another writer moved: re-read next time
            yield from self.save()
        yield from t.after_add(True)

    def save(self) -> Gen[None]:
        """Save the state now (compare-and-set), when no message goes with it: after
        background summaries completed, or a summary set from outside. A lost race drops
        this memory's view (it adopts the other writer's state on next use)."""
        if not (self.journal.durable and self.loaded):
            return
        state = self._dump()
        if state is None:
            return
        try:
            self.book.version = yield from self.journal.save_state(state, self.book.version)
        except BaseException:
            self.loaded = False
            raise
        self.book.saved = state

    # -- the other operations -----------------------------------------------------------

    def context(self, format: str, query: str | None = None) -> Gen[Any]:
        """What to send now, in ``format`` (``"openai"``, ``"anthropic"``, ``"messages"``)."""
        if format not in ("openai", "anthropic", "messages"):
            raise ConfigError(
                f"format={format!r}: must be one of ['openai', 'anthropic', 'messages']"
            )
        yield from self.load()
        v = self.current()
        prev = self._prev
        if prev is not None:  # the view's prefix (a provider's cache): did it hold?
            self.prefix_kept = v.messages is prev or v.messages[: len(prev)] == prev
            self.prefix_breaks += not self.prefix_kept
        self._prev = v.messages
        msgs = v.anthropic if format == "anthropic" and v.anthropic is not None else v.messages
        t = self.tiers
        if t is not None and t.shapes_context:
            summary = self.summary.message()
            yield from t.context(v, query, self.view, summary, self.summary.segments)
            msgs = t.placement.arrange(msgs, summary)
            if format == "anthropic":
                msgs = into_user_turns(msgs)
        elif query is not None:
            raise ConfigError(f"query={query!r}: needs recall= (or extractor=) on the memory")
        return render_context(msgs, format, self._rendered, stand_in=v.stand_in)

    def messages(self, limit: int | None) -> Gen[list[Message]]:
        return (yield from self.journal.messages(limit))

    def pop(self) -> Gen[Message | None]:
        """Remove the newest message from the log; the view is rebuilt from the log on
        next use (the summary keeps what it covers: nothing is summarized twice)."""
        yield from self.load()
        popped = yield from self.journal.pop()
        if popped is not None:
            self.reset()  # a stored state that holds it is stale: the reload replays
        return popped

    def clear(self, keep_system: bool) -> Gen[None]:
        """Empty the log but its leading system messages, all or nothing (see
        ``PlainJournal.clear``); the summary, the view and the stored state go too."""
        try:
            yield from self.journal.clear(keep_system)
        except ClearIncomplete:
            self.reset()  # the store holds less than the view: re-read it
            raise
        self.summary.clear()
        self.reset()
        self.view.compressions.clear()
        if self.tiers is not None:
            self.tiers.load_state(None)  # a new conversation: a new opening topic
        yield from self.journal.drop_state()

    def set_summary(self, text: str) -> Gen[Any]:
        yield from self.load()
        summary = self.summary.set_text(text)
        yield from self.save()
        return summary

    def flush(self) -> Gen[None]:
        if self.tiers is not None:
            yield from self.tiers.flush()
