"""The tiers' part of a session's logic, as generators (``SessionCore`` mixes it in).

- **Add**: a user message is checked for drift before the compaction it may trigger (a
  ``new_segment`` suggestion makes the message a fold boundary: the next fold starts a
  summary segment there); its facts are extracted once (``FactHistory``); what the
  compaction evicted (messages, the originals of compressed ones, new summary segments,
  kind ``"summary"``) is handed to the recall index in the background; the facts are
  saved when a compaction happened.
- **Load**: the user's facts are read once; the replayed messages are extracted (each id
  once: a resumed session extracts nothing it extracted before).
- **Context**: ``[system] [facts + recalled snippets] [summary] [recent]`` under one
  budget. The tiers take what the compaction kept free for them (the facts as they render,
  the recall share); what does not fit is cut: snippets first, then facts. The context
  is read-only (no fold, no save, no summarizer call): the *emergency compaction* runs on
  the write path, after an add or a load, when the tiers' reserve no longer fits beside
  the view (pins grew, facts merged in from another session): it folds the oldest
  history by the deficit.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Any

from .. import _check
from ..errors import ConcurrentUpdate, ConfigError
from ..model import COMPRESSED_KEY, Message
from ..summaries import RunningSummary, Summary
from ..tokens import Tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS, ContextBudget
from ._ops import Gen
from ._tiers import TierOp, Tiers
from .view import Plan, SessionView, View


def segment_id(s: Summary) -> str:
    """The recall id of a summary segment (its coverage and a hash of its text)."""
    digest = hashlib.blake2b(s.text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return f"summary:{s.first_id}..{s.last_id}:{digest}"


def segment_message(s: Summary) -> Message:
    return Message(segment_id(s), "assistant", content=s.text, created_at=s.created_at)


class TieredCore:
    """The tiers' generators of ``SessionCore`` (see the module docstring)."""

    _tiers: Tiers | None
    _rs: RunningSummary
    _view_engine: SessionView
    _durable: bool
    _logged: dict[str, tuple[int, Message | None]]
    _to_index: list[tuple[list[Message], str | None, list[int] | None]]
    _emergencies: int

    def _tiers_reserve(self) -> int:
        t = self._tiers
        return 0 if t is None else t.reserve()

    def _tier_drift_gen(self, m: Message) -> Gen[None]:
        t = self._tiers
        if t is not None and t.drift is not None and m.role == "user" and m.text().strip():
            yield TierOp("drift", (m,))

    def _tier_loaded_gen(self, messages: list[Message]) -> Gen[None]:
        """After a (re)load: the facts read once, the replayed messages extracted."""
        t = self._tiers
        if t is None:
            return
        if t.last_user is None:
            for m in reversed(self._view_engine.log.kept()):
                if m.role == "user" and m.text().strip():
                    t.last_user = m
                    break
        if t.facts_on:
            if t.history is None:
                yield TierOp("load")
            if messages:
                yield TierOp("extract", (messages,))
        yield from self._tier_ingest_gen()

    def _tier_extract_gen(self, m: Message) -> Gen[None]:
        t = self._tiers
        if t is not None and t.facts_on:
            if t.history is None:
                yield TierOp("load")
            yield TierOp("extract", ([m],))

    def _tier_after_gen(self, compacted: bool) -> Gen[None]:
        """After an add was accepted: index what left the view; save the facts."""
        t = self._tiers
        if t is None:
            return
        yield from self._tier_ingest_gen()
        if compacted and t.pending:
            yield TierOp("save")

    def _tier_flush_gen(self) -> Gen[None]:
        """Index what waits, wait for the index, save the facts."""
        yield from self._tier_ingest_gen()
        yield TierOp("flush")

    def _tier_ingest_gen(self) -> Gen[None]:
        todo, self._to_index = self._to_index, []
        t = self._tiers
        if t is None or t.index is None:
            return
        for messages, kind, seqs in todo:
            yield TierOp("ingest", (messages, kind, seqs))

    def _tier_collect(self, plan: Plan, before: tuple[Summary, ...]) -> None:
        """What a committed compaction took out of the view, to be indexed."""
        t = self._tiers
        if t is None:
            return
        t.breaks.difference_update(m.id for m in plan.folded)
        if t.index is None:
            return
        gone = [m for m in plan.folded if COMPRESSED_KEY not in m.metadata]
        for chunk, out, _ in plan.rewrites:
            now = {m.id for m in out if COMPRESSED_KEY in m.metadata}
            gone += [m for m in chunk.messages if m.id in now and COMPRESSED_KEY not in m.metadata]
        if gone:
            seqs: list[int] | None = None
            if self._durable:
                found = [self._logged.get(m.id) for m in gone]
                seqs = None if any(f is None for f in found) else [f[0] for f in found if f]
            self._to_index.append((gone, None, seqs))
        old = set(map(id, before))
        segments = [segment_message(s) for s in self._rs.segments if id(s) not in old]
        if segments:
            self._to_index.append((segments, "summary", None))

    # -- the context --------------------------------------------------------------------

    def _tier_context_gen(self, v: View, query: str | None) -> Gen[tuple[View, Message | None]]:
        """The view and the tiers' message to put after its system prompt."""
        t = self._tiers
        assert t is not None
        engine = self._view_engine
        q = t.query_for(query)
        k = t.k_now()
        hits: list[Any] = []
        status, error = ("off", None) if t.searcher is None else ("ok", None)
        if t.searcher is not None and q is not None and q.strip():
            hits, status, error = yield TierOp("search", (q, k + 8))
        in_view = {segment_id(s) for s in self._rs.segments}
        in_view.update(m.id for m in engine.log.kept())
        hits = [h for h in hits if h.message_id not in in_view][:k]
        room = engine.limit - (v.tokens - REPLY_PRIMING_TOKENS)
        msg, facts, recalled, shown = t.message(1 << 30, hits, in_view)  # all they want
        if facts + recalled > room:  # read-only: cut to the room (the write path folds)
            msg, facts, recalled, shown = t.message(max(0, room), hits, in_view)
        t.last_recall = {
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
                    "shown": any(s.message_id == h.message_id for s in shown),
                }
                for h in hits
            ],
            "tokens": recalled,
        }
        summary = self._rs.message()
        s_tok = 0
        if summary is not None and any(m is summary for m in v.messages):
            s_tok = engine.tokenizer.count_message(summary)
        base = v.tokens - REPLY_PRIMING_TOKENS
        t.split = {
            "limit": engine.limit,
            "system": engine.head_tokens,
            "facts": facts,
            "recall": recalled,
            "summary": s_tok,
            "history": base - engine.head_tokens - s_tok,
            "total": v.tokens + facts + recalled,
        }
        return v, msg

    def _tier_fit_gen(self) -> Gen[None]:
        """On the write path (after an add, a load): when the tiers' reserve (the facts as
        they render now, up to their share, and the recall share) does not fit beside the
        view (facts merged in from another session, pins grown), an *emergency
        compaction* folds the oldest history by the deficit. ``context()`` never folds."""
        t = self._tiers
        if t is None or not (t.facts_on or t.index is not None):
            return
        engine = self._view_engine
        room = engine.limit - (self._view().tokens - REPLY_PRIMING_TOKENS)
        need = t.reserve()
        if need <= room or next(iter(engine.log.evictable()), None) is None:
            return
        self._emergencies += 1
        yield from self._emergency_gen(need - room)

    def _emergency_gen(self, deficit: int) -> Gen[bool]:
        """Fold (or drop) the oldest history until ``deficit`` more tokens are free;
        whether the view changed."""
        engine = self._view_engine
        share = engine.share(self._summary_reserve())
        free = engine.free_tokens()
        target = 0.0 if share <= 0 else min(1.0, max(0.0, (free - deficit) / share))
        before = self._compactions_now()
        yield from self._compact_gen(target=target)
        if self._compactions_now() == before:
            return False
        if self._durable:
            # Another writer moved the session: this memory re-reads it next time.
            with contextlib.suppress(ConcurrentUpdate):
                yield from self._dsave_gen()
        yield from self._tier_after_gen(True)
        return True

    # the core's (SessionCore, Durable)
    _compactions_now: Callable[[], int]
    _summary_reserve: Callable[[], int]
    _compact_gen: Callable[..., Gen[None]]
    _dsave_gen: Callable[[], Gen[None]]
    _view: Callable[[], View]


def insert_tiers(messages: list[Message], summary: Message | None, tm: Message) -> list[Message]:
    """``messages`` with ``tm`` after the leading system prompt (before the summary)."""
    i = 0
    while i < len(messages) and messages[i].role == "system" and messages[i] is not summary:
        i += 1
    return [*messages[:i], tm, *messages[i:]]


def make_tiers(
    store: object,
    *,
    recall: Any,
    recall_k: int,
    extractor: Any,
    drift: Any,
    shares: Any,
    tokenizer: Tokenizer,
    limit: int,
    summary_reserve: int,
) -> Tiers | None:
    """The tiers of a memory from its options (None: none asked for); ``ConfigError``
    naming the option for a bad one."""
    k = _check.positive_int("recall_k", recall_k)
    if recall is not None and not callable(getattr(recall, "search", None)):
        raise ConfigError(
            f"recall={recall!r}: must be a RecallIndex, AsyncRecallIndex or GuardedRecall"
        )
    if extractor is not None and not callable(getattr(extractor, "extract", None)):
        raise ConfigError(f"extractor={extractor!r}: must have an extract(messages) method")
    if drift is not None and not callable(getattr(drift, "check", None)):
        raise ConfigError(f"drift={drift!r}: must be a DriftDetector")
    if shares is not None and not isinstance(shares, ContextBudget):
        raise ConfigError(f"shares={shares!r}: must be a ContextBudget (facts=, recall= shares)")
    if recall is None and extractor is None and drift is None:
        return None
    scope = (
        getattr(store, "user_id", None),
        getattr(store, "tenant", None),
        str(getattr(store, "session_id", "default")),
    )
    t = Tiers(
        recall=recall,
        recall_k=k,
        extractor=extractor,
        drift=drift,
        shares=shares,
        tokenizer=tokenizer,
        limit=limit,
        scope=scope,
    )
    if limit - summary_reserve - t.facts_cap - t.recall_cap < limit // 5:
        raise ConfigError(
            f"shares={shares!r}: the summary ({summary_reserve}), facts ({t.facts_cap}) and "
            f"recall ({t.recall_cap}) shares leave less than a fifth of the {limit} tokens "
            "to the recent history; lower them or raise the budget"
        )
    return t


def tier_stats(t: Tiers | None, emergencies: int) -> dict[str, Any]:
    """The tiers' part of ``MemoryStats``."""
    if t is None:
        return {"recall": {"status": "off"}, "emergency_compactions": emergencies}
    h = t.history
    drift = None
    if t.drift is not None:
        last = t.drift.last
        drift = {
            **t.drift.stats(),
            "score": None if last is None else last.score,
            "action": None if last is None else last.action,
            "suggestion": None if last is None else last.suggestion,
            "segments_started": t.segments_started,
            "widened": t.widened,
        }
    return {
        "recall": dict(t.last_recall),
        "facts": None
        if not t.facts_on
        else {
            "count": 0 if h is None else len(h),
            "tokens": t.split.get("facts", 0),
            "reserve": t.facts_tokens,
            "extracted": t.extracted,
            "version": t.version,
            "unsaved": len(t.pending),
            "saves": t.saves,
            "conflicts": t.conflicts,
            "degraded": bool(getattr(t.extractor, "degraded", False)),
        },
        "drift": drift,
        "budget_split": dict(t.split),
        "emergency_compactions": emergencies,
        "tier_error": None if t.last_error is None else repr(t.last_error),
    }
