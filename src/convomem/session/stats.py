"""MemoryStats: a snapshot of what a ConversationMemory holds and the work it did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .engine import SessionEngine
from .tiers import Tiers


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """A snapshot of a ConversationMemory (counters are cumulative across ``clear``)."""

    context_tokens: int
    """What ``context()`` costs now: per-message overhead and reply priming included."""
    context_messages: int
    """Messages in ``context()`` now (the summary included)."""
    log_messages: int
    """Messages in the log (the store)."""
    view_messages: int
    """Messages kept in the view (not evicted), pinned ones included."""
    summarized_messages: int
    """Messages the running summary stands for."""
    compactions: int
    compaction_failures: int
    """Compactions aborted because the summarizer and its fallback failed."""
    compressions: int
    """Priority-1 messages compressed in the view."""
    summarizer_calls: int
    """Every summarizer call (retries, fallbacks, merges and compressions included)."""
    summarizer_input_tokens: int
    summary_tokens: int
    degraded: bool
    """The summary was (partly) made by the fallback summarizer."""
    compaction_pending: bool
    """A failed compaction waits to be retried on the next ``add``."""
    omitted: int
    """Messages left out of ``context()`` (not evicted) while a compaction is pending."""
    prefix_kept: bool | None
    """Whether the last ``context()`` started with the one before (None: no previous)."""
    prefix_breaks: int
    """``context()`` calls that did not start with the previous context."""
    fits: bool
    """False when what every context must send (the pinned messages and the current turn,
    its tool results reduced) exceeds the budget: it is sent anyway, and ``problems``
    says why."""
    waiting: int = 0
    """Messages held back from ``context()`` because a tool call they belong to still
    awaits its result (pinned messages among them are sent anyway)."""
    reids: int = 0
    """Messages whose derived id (from a format converter) was already in the log and
    that got a fresh one (two equal texts converted one at a time)."""
    recall: Mapping[str, Any] | None = None
    """The last ``context()``'s recall: ``status`` ("ok", "failed", "timeout", "open"
    (the circuit breaker is open), "off"), ``error``, ``query``, ``k``, ``hits`` (each
    ``message_id``, ``session_id``, ``kind``, ``score``, ``shown``) and ``tokens``."""
    facts: Mapping[str, Any] | None = None
    """The user's long-term facts: ``count`` (current values), ``tokens`` (rendered in the
    last context), ``reserve``, ``extracted`` (messages read), ``version``, ``unsaved``,
    ``saves``, ``conflicts`` (saves that lost to another session and merged),
    ``degraded`` (the extractor's model failed on its last batch: the offline extractor's
    facts stand in, ``LLMExtractor``); None: off."""
    drift: Mapping[str, Any] | None = None
    """The drift detector: ``score``, ``action``, ``suggestion`` of the last user message,
    ``checks``, ``drifts``, ``segments_started``, ``widened``; None: off."""
    budget_split: Mapping[str, int] | None = None
    """Tokens of the last context per tier: ``system``, ``facts``, ``recall``,
    ``summary``, ``history``, the ``total`` (priming included) and the ``limit``."""
    emergency_compactions: int = 0
    """Contexts whose tiers did not fit after the normal compaction: the evictable history
    was folded and what still did not fit was cut (snippets, then facts)."""
    tier_error: str | None = None
    """The last error of a tier (extraction, drift check, facts save, search)."""
    turn_tokens: int = 0
    """What the current turn (the newest user message and its open exchange: the calls
    and every result answering them) costs in ``context()``."""
    reduced_results: int = 0
    """Tool results ``context()`` sends reduced to ``result_limit`` (their head and tail;
    ``messages()`` returns them whole)."""
    problems: tuple[str, ...] = ()
    """Why ``context()`` does not fit, one sentence each (empty when it fits)."""


def snapshot(engine: SessionEngine) -> MemoryStats:
    """The stats of a session engine now (its memory's lock held by the caller)."""
    v = engine.current()
    c = engine.compactor
    rs = engine.summary
    st = rs.stats
    current = rs.current()
    return MemoryStats(
        context_tokens=v.tokens,
        context_messages=len(v.messages),
        log_messages=engine.book.count,
        view_messages=len(engine.view.log),
        summarized_messages=len(rs.covered_ids),
        compactions=c.compactions,
        compaction_failures=c.failures,
        compressions=c.compressions,
        summarizer_calls=st.summarizer_calls,
        summarizer_input_tokens=st.input_tokens,
        summary_tokens=0 if current is None else (current.tokens or 0),
        degraded=current is not None and current.degraded,
        compaction_pending=c.pending_retry,
        omitted=v.omitted,
        prefix_kept=engine.prefix_kept,
        prefix_breaks=engine.prefix_breaks,
        fits=v.fits,
        waiting=v.waiting,
        reids=engine.reids,
        turn_tokens=v.turn_tokens,
        reduced_results=v.reduced,
        problems=v.problems,
        **tier_stats(engine.tiers, c.emergencies),
    )


def tier_stats(t: Tiers | None, emergencies: int) -> dict[str, Any]:
    """The tiers' part of ``MemoryStats``."""
    if t is None:
        return {"recall": {"status": "off"}, "emergency_compactions": emergencies}
    p = t.profile
    h = p.history
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
            "reserve": p.tokens,
            "extracted": p.extracted,
            "version": p.version,
            "unsaved": len(p.pending),
            "saves": p.saves,
            "conflicts": p.conflicts,
            "degraded": p.degraded,
        },
        "drift": drift,
        "budget_split": dict(t.split),
        "emergency_compactions": emergencies,
        "tier_error": None if t.last_error is None else repr(t.last_error),
    }
