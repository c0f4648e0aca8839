"""MemoryStats: a snapshot of what a ConversationMemory holds and the work it did."""

from __future__ import annotations

from dataclasses import dataclass


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
