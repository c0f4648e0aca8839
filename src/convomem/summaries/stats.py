"""SummaryStats: the work counters of a RunningSummary."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SummaryStats:
    """Work done by a RunningSummary (cumulative; failed attempts included)."""

    folds: int = 0
    """Folds that covered new messages."""
    summarizer_calls: int = 0
    """Every summarizer invocation: retries, fallbacks and merges included."""
    primary_calls: int = 0
    """Calls of the primary summarizer (or of a ``compress(summarizer=...)`` override)."""
    fallback_calls: int = 0
    """Calls of the fallback summarizer."""
    input_tokens: int = 0
    """Tokens passed to summarizers: the messages plus the previous summary, per call."""
    merges: int = 0
    truncations: int = 0
    retries: int = 0
    fallbacks: int = 0
    """Summaries (segments, merges, compressions) the fallback made."""
    failures: int = 0
    """Folds and compressions aborted with SummarizerError (state left unchanged)."""
    compressions: int = 0
    """``compress`` calls that shortened their messages."""
    compressions_kept: int = 0
    """``compress`` calls whose summary was not shorter (``Summary.kept_original``)."""
    skipped: int = 0
    """Messages passed to fold that were already covered (never re-summarized)."""
    extractions: int = 0
    """Message texts scanned for facts on this summary's behalf. A text is scanned once:
    a fold and a compression of the same message share the scan (the extraction memo),
    and facts passed in with ``fold(..., facts=...)`` are not scanned at all."""
    background_replaced: int = 0
    background_discarded: int = 0
    background_failures: int = 0
    validations: int = 0
    """Primary summaries checked by the validator (``RunningSummary(validate=...)``)."""
    rejections: int = 0
    """Of them, scored below ``min_score``: the fallback's summary was used instead
    (marked degraded), or, without a fallback, the primary's was kept."""
    validation_errors: int = 0
    """Validator calls that failed (the summary was then accepted unvalidated)."""
