"""MemoryStats: a snapshot of what a ConversationMemory holds and the work it did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
    """False when pinned messages alone exceed the budget (they are sent anyway)."""
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
    ``saves``, ``conflicts`` (saves that lost to another session and merged); None: off."""
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
