"""The tiers a session adds to its view: recall, the user's facts, drift.

``Tiers`` holds what a memory adds when it is given ``recall=``, ``extractor=`` or
``drift=``: the user's ``FactHistory`` (read from the recall index's facts table, shared
by the user's sessions, saved back compare-and-set), the recall index (through one
``GuardedRecall`` per index) that receives everything the view evicts, and a
``DriftDetector``. The engine calls it at fixed points of its operations; each call that
needs I/O is a generator of ``_io.Call`` requests, like the engine's own.

- **Add**: a user message is checked for drift before the compaction it may trigger (a
  ``new_segment`` suggestion makes it a fold boundary: the next fold starts a summary
  segment there); its facts are extracted once; what a compaction evicted (messages, the
  originals of compressed ones, new summary segments, kind ``"summary"``) is handed to
  the index in the background; the facts are saved when a compaction happened.
- **Load**: the user's facts are read once; the replayed messages are extracted (each id
  once: a resumed session extracts nothing it extracted before).
- **Context**: ``[system] [facts + recalled snippets] [summary] [recent]``; the tiers
  take the room the view leaves (the compaction kept their reserve free); what does not
  fit is cut, snippets first.

No tier ever fails a session's operation: a failed search answers without recall
(``status`` "failed" / "timeout" / "open"); a failed extraction, drift check or facts
save is recorded (``last_error``) and the session goes on. ``flush`` reports a failed
background ingest.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import weakref
from collections.abc import Iterable
from typing import Any, Final, TypeVar

from .._io import Gen, call, is_async_callable
from ..errors import ConfigError, ConvomemError
from ..model import COMPRESSED_KEY, Message
from ..recall.guarded import AsyncGuardedRecall, GuardedRecall
from ..summaries import Summary
from ..tokens import Tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS
from ._tier_render import render_tiers, snippets_of
from .profile import Profile
from .view import Plan, View

T = TypeVar("T")

FACTS_SHARE: Final = 0.10
RECALL_SHARE: Final = 0.15
RECALL_K: Final = 10
"""Snippets a context recalls by default: on the LongMem dev set (MiniLM) the
QA-context hit rate was 85.8% at 5, 91.7% at 8, 92.5% at 10 and 12 (bench/README.md)."""
NEIGHBOURS: Final = 1
"""Turns on each side of a recalled hit shown with it: an answer is often the reply to
(or the question before) the turn that matched."""
_GUARDS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def segment_id(s: Summary) -> str:
    """The recall id of a summary segment (its coverage and a hash of its text)."""
    digest = hashlib.blake2b(s.text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return f"summary:{s.first_id}..{s.last_id}:{digest}"


def _guarded(recall: Any) -> tuple[Any, Any]:
    """``(searcher, index)``: a plain index is searched through a ``GuardedRecall``
    (deadline, circuit breaker), one per index, so the memories sharing an index share
    one breaker and no memory starts worker threads of its own."""
    if isinstance(recall, GuardedRecall | AsyncGuardedRecall):
        return recall, recall.index
    try:
        guard = _GUARDS.get(recall)
    except TypeError:  # not weakly referable: a guard of its own
        guard = None
    if guard is None:
        async_ = is_async_callable(recall.search)
        guard = AsyncGuardedRecall(recall) if async_ else GuardedRecall(recall)
        with contextlib.suppress(TypeError):
            _GUARDS[recall] = guard
    return guard, recall


def _takes_neighbours(index: Any) -> bool:
    """Whether ``index.search`` accepts ``neighbours=`` (a custom index may not)."""
    try:
        params = inspect.signature(index.search).parameters
    except (TypeError, ValueError):
        return False
    return "neighbours" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class Tiers:
    """The tiers of one memory (see the module docstring). ``limit`` is the memory's
    budget less its reply reserve and priming; ``scope`` the store's user, tenant and
    session."""

    def __init__(
        self,
        *,
        recall: Any,
        recall_k: int,
        extractor: Any,
        drift: Any,
        facts_share: float,
        recall_share: float,
        tokenizer: Tokenizer,
        limit: int,
        scope: tuple[str | None, str | None, str],
    ) -> None:
        self.user_id, self.tenant, self.session_id = scope
        self.searcher: Any = None
        self.index: Any = None
        if recall is not None:
            if self.user_id is None:
                raise ConfigError(
                    f"recall={recall!r}: needs a store scoped to a user: "
                    "store=db.session(session_id, user_id=..., tenant=...)"
                )
            self.searcher, self.index = _guarded(recall)
        self.neighbours = NEIGHBOURS if recall is not None and _takes_neighbours(self.index) else 0
        self.k = recall_k
        self.extractor = extractor
        self.drift = drift
        self.facts_on = recall is not None or extractor is not None
        self.recall_cap = int(limit * recall_share) if recall is not None else 0
        self.tok = tokenizer
        self.profile = Profile(
            index=self.index,
            extractor=extractor,
            tokenizer=tokenizer,
            cap=int(limit * facts_share) if self.facts_on else 0,
            scope=scope,
        )
        self.breaks: set[str] = set()  # drift boundaries: a summary segment starts there
        self.widen = False
        self.last_user: Message | None = None
        self.last_recall: dict[str, Any] = {"status": "off" if recall is None else "ok"}
        self.last_error: BaseException | None = None
        self.segments_started = self.widened = 0
        self.split: dict[str, int] = {}
        self.to_index: list[tuple[list[Message], str | None, list[int] | None]] = []

    @property
    def on(self) -> bool:
        return self.facts_on or self.index is not None or self.drift is not None

    @property
    def shapes_context(self) -> bool:
        """Whether a context carries the tiers' message (facts or recall are on)."""
        return self.facts_on or self.index is not None

    def reserve(self) -> int:
        """Tokens the compaction keeps free for the tiers: the facts as they render now
        (an unused facts share goes to the history) and the recall share."""
        return (self.profile.tokens if self.facts_on else 0) + self.recall_cap

    def note(self, m: Message) -> None:
        """A message entered the view: the newest user text is the default query."""
        if m.role == "user" and m.text().strip():
            self.last_user = m

    def reset(self) -> None:
        """The view was dropped: what it alone knew goes too."""
        self.last_user = None
        self.to_index = []

    # -- derived state ------------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        """What a durable session keeps of the tiers: drift state and boundaries."""
        if self.drift is None:
            return None
        return {"drift": self.drift.state(), "breaks": sorted(self.breaks), "widen": self.widen}

    def load_state(self, data: Any) -> None:
        """Restore ``state()`` (None or unusable: start over; the log is replayed)."""
        if self.drift is None:
            return
        self.drift.reset()
        self.breaks, self.widen = set(), False
        if not isinstance(data, dict):
            return
        try:
            self.drift.load_state(data["drift"])
            self.breaks = set(map(str, data["breaks"]))
            self.widen = bool(data["widen"])
        except (ConfigError, TypeError, KeyError):
            pass

    # -- the write path -----------------------------------------------------------------

    def _recorded(self, work: Gen[T], default: T) -> Gen[T]:
        """``work``, its failure recorded instead of raised (a tier never fails a
        session's operation; a misuse, ``ConfigError``, is raised)."""
        try:
            return (yield from work)
        except ConfigError:
            raise
        except ConvomemError as exc:
            self.last_error = exc
            return default

    def check_drift(self, m: Message) -> Gen[None]:
        """Check a new user message for drift (before the compaction it may trigger)."""
        drift = self.drift
        if drift is None or m.role != "user" or not m.text().strip():
            return

        def attempt() -> Gen[None]:
            result = yield call(drift.check, m, afn=drift.acheck)
            if result.action == "new_segment":
                self.breaks.add(m.id)
                self.segments_started += 1
            elif result.action == "widen_recall":
                self.widen = True

        yield from self._recorded(attempt(), None)

    def extract(self, messages: list[Message]) -> Gen[None]:
        """Extract the facts of messages not read before (each id once)."""
        if self.facts_on and messages:
            yield from self._recorded(self.profile.extract(messages), None)

    def loaded(self, replayed: list[Message], kept: list[Message]) -> Gen[None]:
        """After a (re)load: the newest user text, the facts read once, the replayed
        messages extracted, what waits indexed."""
        if self.last_user is None:
            for m in reversed(kept):
                if m.role == "user" and m.text().strip():
                    self.last_user = m
                    break
        if self.facts_on:
            yield from self._recorded(self.profile.load(), None)
            yield from self.extract(replayed)
        yield from self._ingest()

    def collect(self, plan: Plan, new_segments: Iterable[Summary], seqs: list[int] | None) -> None:
        """What a committed compaction took out of the view, to be indexed: ``seqs`` are
        the seqs of ``evicted(plan)`` when the session knows them."""
        self.breaks.difference_update(m.id for m in plan.folded)
        if self.index is None:
            return
        gone = evicted(plan)
        if gone:
            self.to_index.append((gone, None, seqs))
        segments = [
            Message(segment_id(s), "assistant", content=s.text, created_at=s.created_at)
            for s in new_segments
        ]
        if segments:
            self.to_index.append((segments, "summary", None))

    def after_add(self, compacted: bool) -> Gen[None]:
        """After an add was accepted: index what left the view; save the facts."""
        yield from self._ingest()
        if compacted and self.profile.pending:
            yield from self._recorded(self.profile.save(), None)

    def _ingest(self) -> Gen[None]:
        todo, self.to_index = self.to_index, []
        index = self.index
        if index is None:
            return
        add = getattr(index, "submit", None) or index.add
        for messages, kind, seqs in todo:
            if messages:
                yield from self._recorded(self._ingest_one(add, messages, kind, seqs), None)

    def _ingest_one(self, add: Any, messages: list[Message], kind: Any, seqs: Any) -> Gen[None]:
        yield call(
            add,
            messages,
            user_id=self.user_id,
            session_id=self.session_id,
            tenant=self.tenant,
            seqs=seqs,
            kind=kind,
        )

    def flush(self) -> Gen[None]:
        """Index what waits, wait for the index (its failure is raised), save the facts."""
        yield from self._ingest()
        index = self.index
        if index is not None:
            aflush = getattr(index, "aflush", None)  # an async index has only this one
            flush: Any = getattr(index, "flush", None) or aflush
            yield call(flush, afn=aflush)
        yield from self.profile.save()

    # -- the context --------------------------------------------------------------------

    def query_for(self, query: str | None) -> str | None:
        if query is not None:
            if not isinstance(query, str):
                raise ConfigError(f"query={query!r}: must be a string or None")
            return query
        return None if self.last_user is None else self.last_user.text()

    def k_now(self) -> int:
        """k for this context: doubled after a ``widen_recall`` suggestion (once)."""
        if self.widen:
            self.widened += 1
            self.widen = False
            return self.k * 2
        return self.k

    def search(self, query: str, k: int) -> Gen[tuple[list[Any], str, str | None]]:
        """The hits of ``query``, the status and the error (never raises an outage)."""
        args: dict[str, Any] = {"user_id": self.user_id, "tenant": self.tenant, "k": k}
        if self.neighbours:
            args["neighbours"] = self.neighbours
        try:
            got = yield call(self.searcher.search, query, **args)
        except ConfigError:
            raise
        except ConvomemError as exc:  # an outage the guard let through
            return [], "failed", str(exc)
        if isinstance(got, list):
            return got, "ok", None
        return list(got.hits), str(got.status), got.error

    def context(
        self,
        v: View,
        query: str | None,
        *,
        limit: int,
        head_tokens: int,
        summary: Message | None,
        in_view: set[str],
    ) -> Gen[Message | None]:
        """The message to put after the view's system prompt: the facts and the recalled
        snippets not in the view (``in_view``: the view's ids and segments' recall ids),
        in the room the view leaves. Read-only; records ``last_recall`` and ``split``."""
        q = self.query_for(query)
        k = self.k_now()
        hits: list[Any] = []
        status, error = ("off", None) if self.searcher is None else ("ok", None)
        if self.searcher is not None and q is not None and q.strip():
            hits, status, error = yield from self.search(q, k + 8)
        hits = [h for h in hits if h.message_id not in in_view][:k]
        room = limit - (v.tokens - REPLY_PRIMING_TOKENS)
        msg, facts, recalled, shown = self.message(1 << 30, hits, in_view)  # all they want
        if facts + recalled > room:  # read-only: cut to the room (the write path folds)
            msg, facts, recalled, shown = self.message(max(0, room), hits, in_view)
        shown_ids = {s.message_id for s in shown}
        self.last_recall = {
            "status": status,
            "error": error,
            "query": q,
            "k": k,
            "hits": [
                {
                    "message_id": h.message_id,
                    "session_id": h.session_id,
                    "kind": h.kind,
                    "score": h.score,
                    "shown": h.message_id in shown_ids,
                }
                for h in hits
            ],
            "tokens": recalled,
        }
        s_tok = 0
        if summary is not None and any(m is summary for m in v.messages):
            s_tok = self.tok.count_message(summary)
        base = v.tokens - REPLY_PRIMING_TOKENS
        self.split = {
            "limit": limit,
            "system": head_tokens,
            "facts": facts,
            "recall": recalled,
            "summary": s_tok,
            "history": base - head_tokens - s_tok,
            "total": v.tokens + facts + recalled,
        }
        return msg

    def message(
        self, room: int, hits: list[Any], in_view: Any
    ) -> tuple[Message | None, int, int, list[Any]]:
        """The facts and snippets message within ``room`` tokens: facts within their
        share, snippets within theirs (hits already in the view left out). Returns the
        message, the facts' and the snippets' tokens, and the hits shown. A hit's
        neighbouring turns (``Hit.context``) follow the hits, each shown once, in the
        room the hits leave."""
        snippets = snippets_of(hits, in_view)
        facts_room = min(self.profile.cap, room)
        h = self.profile.history if self.facts_on else None
        msg, facts, recalled, lines = render_tiers(
            self.tok, h, snippets, facts_room, min(self.recall_cap, room), room, self.session_id
        )
        return msg, facts, recalled, [s for s in lines if not s.neighbour]


def evicted(plan: Plan) -> list[Message]:
    """What a compaction takes out of the view for good: the folded messages and the
    originals of the messages it compresses (their stand-ins stay)."""
    gone = [m for m in plan.folded if COMPRESSED_KEY not in m.metadata]
    for chunk, out, _ in plan.rewrites:
        now = {m.id for m in out if COMPRESSED_KEY in m.metadata}
        gone += [m for m in chunk.messages if m.id in now and COMPRESSED_KEY not in m.metadata]
    return gone


def insert_tiers(messages: list[Message], summary: Message | None, tm: Message) -> list[Message]:
    """``messages`` with ``tm`` after the leading system prompt (before the summary)."""
    i = 0
    while i < len(messages) and messages[i].role == "system" and messages[i] is not summary:
        i += 1
    return [*messages[:i], tm, *messages[i:]]
