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

import hashlib
from collections.abc import Iterable
from typing import Any, Final, TypeVar

from .._io import Gen, call
from ..errors import ConfigError, ConvomemError
from ..model import COMPRESSED_KEY, Message
from ..recall.guarded import guard_of, takes_neighbours
from ..summaries import Summary
from ..tokens import Tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS
from ._tier_render import snippets_of
from .placement import Placement
from .profile import Profile
from .view import Plan, SessionView, View

T = TypeVar("T")

FACTS_SHARE: Final = 0.10
RECALL_SHARE: Final = 0.15
RECALL_K: Final = 10
"""Snippets a context recalls by default: on the LongMem dev set (MiniLM) the
QA-context hit rate was 85.8% at 5, 91.7% at 8, 92.5% at 10 and 12 (bench/README.md)."""
NEIGHBOURS: Final = 1
"""Turns on each side of a recalled hit shown with it: an answer is often the reply to
(or the question before) the turn that matched."""


def segment_id(s: Summary) -> str:
    """The recall id of a summary segment (its coverage and a hash of its text)."""
    digest = hashlib.blake2b(s.text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return f"summary:{s.first_id}..{s.last_id}:{digest}"


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
            self.searcher = guard_of(recall)
            self.index = self.searcher.index
        self.neighbours = NEIGHBOURS if recall is not None and takes_neighbours(self.index) else 0
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
        self.placement = Placement(tokenizer, self.session_id, self.profile.cap, self.recall_cap)
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
        p = self.placement
        profile = max(self.profile.tokens, p.profile_tokens) if self.facts_on else 0
        return profile + p.update_tokens() + (p.turn_cap if self.index is not None else 0)

    def turn_tokens(self) -> int:
        """What the tiers add to the turns in the view (their updates)."""
        return self.placement.update_tokens()

    def note(self, m: Message) -> None:
        """A message entered the view: the newest user text is the default query."""
        if m.role == "user" and m.text().strip():
            self.last_user = m

    def reset(self) -> None:
        """The view was dropped: what it alone knew goes too."""
        self.last_user = None
        self.to_index = []

    # -- derived state ------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What a durable session keeps of the tiers: the placement (the profile and the
        updates its contexts send), drift state and boundaries."""
        out: dict[str, Any] = {"placement": self.placement.state()}
        if self.drift is not None:
            out.update(drift=self.drift.state(), breaks=sorted(self.breaks), widen=self.widen)
        return out

    def load_state(self, data: Any) -> None:
        """Restore ``state()`` (None or unusable: start over; the log is replayed)."""
        self.placement.load_state(data.get("placement") if isinstance(data, dict) else None)
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
        self.placement.stale = True  # the prefix changes anyway: freeze the profile again
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
        view: SessionView,
        summary: Message | None,
        segments: tuple[Summary, ...],
    ) -> Gen[None]:
        """Make this context's profile and update (``placement``): the profile frozen
        again after a compaction, the update of the newest user message of ``view`` made
        once per query: the facts changed since and the recalled snippets not in the view
        (its messages, the summary ``segments``' recall ids) nor shown yet, in the room
        the view leaves. Read-only; records ``last_recall`` and ``split``."""
        held = view.log.kept()
        in_view = {segment_id(s) for s in segments} | {m.id for m in held}
        users = anchors(held)
        limit, head_tokens = view.limit, view.head_tokens
        p = self.placement
        h = self.profile.history if self.facts_on else None
        if p.stale:
            p.freeze(h, users)
        else:
            p.forget(users)
        q = self.query_for(query)
        newest = users[-1] if users else None
        hits: list[Any] = []
        status, error = ("off", None) if self.searcher is None else ("ok", None)
        made = None if newest is None else p.updates.get(newest)
        own = 0 if made is None else made.tokens
        room = limit - (v.tokens - REPLY_PRIMING_TOKENS) - p.tokens() + own
        if newest is not None and p.wants(newest, q, room):
            k = self.k_now()
            if self.searcher is not None and q is not None and q.strip():
                hits, status, error = yield from self.search(q, k + 8)
            hits = [x for x in hits if x.message_id not in in_view][:k]
            made = p.update(newest, q, h, snippets_of(hits, in_view), room)
            seen = {s.message_id for s in made.snippets if not s.neighbour}
            self.last_recall = {
                "status": status,
                "error": error,
                "query": q,
                "k": k,
                "hits": [
                    {
                        "message_id": x.message_id,
                        "session_id": x.session_id,
                        "kind": x.kind,
                        "score": x.score,
                        "text": x.text,
                        "shown": x.message_id in seen,
                    }
                    for x in hits
                ],
                "tokens": made.tokens,
            }
        shown = p.fit(h, limit - (v.tokens - REPLY_PRIMING_TOKENS), users)
        facts = 0 if p.shown_profile is None else self.tok.count_message(p.shown_profile)
        s_tok = 0
        if summary is not None and any(m is summary for m in v.messages):
            s_tok = self.tok.count_message(summary)
        base = v.tokens - REPLY_PRIMING_TOKENS
        self.split = {
            "limit": limit,
            "system": head_tokens,
            "facts": facts,
            "recall": shown - facts,
            "summary": s_tok,
            "history": base - head_tokens - s_tok,
            "total": v.tokens + shown,
        }


def anchors(held: list[Message]) -> list[str]:
    """Where the updates may go, oldest first: before each user message of the view, or
    (none left: all folded) before its first message, or (an empty view) at the end
    (``""``)."""
    users = [m.id for m in held if m.role == "user" and m.text().strip()]
    return users or [m.id for m in held if m.role != "system"][:1] or [""]


def evicted(plan: Plan) -> list[Message]:
    """What a compaction takes out of the view for good: the folded messages and the
    originals of the messages it compresses (their stand-ins stay)."""
    gone = [m for m in plan.folded if COMPRESSED_KEY not in m.metadata]
    for chunk, out, _ in plan.rewrites:
        now = {m.id for m in out if COMPRESSED_KEY in m.metadata}
        gone += [m for m in chunk.messages if m.id in now and COMPRESSED_KEY not in m.metadata]
    return gone
