"""Summaries: the Summary artifact, summarizers, the running summary and key facts."""

from .adapter import (
    Summarizer,
    SummarizerAdapter,
    SummarizerLike,
    as_summarizer,
    asummarize,
    summarize,
)
from .extractive import (
    ExtractiveSummarizer,
    TruncatingSummarizer,
)
from .running import (
    RunningSummary,
    SummaryStats,
)
from .summary import (
    SEGMENT_KEY,
    SUMMARY_HEADER,
    TRUNCATION_MARKER,
    Summary,
    clip_to_tokens,
    message_label,
    render_summary,
    transcript,
)
from .validation import (
    Issue,
    SummaryValidation,
    validate_summary,
)

__all__ = [
    "SEGMENT_KEY",
    "SUMMARY_HEADER",
    "TRUNCATION_MARKER",
    "ExtractiveSummarizer",
    "Issue",
    "RunningSummary",
    "Summarizer",
    "SummarizerAdapter",
    "SummarizerLike",
    "Summary",
    "SummaryStats",
    "SummaryValidation",
    "TruncatingSummarizer",
    "as_summarizer",
    "asummarize",
    "clip_to_tokens",
    "message_label",
    "render_summary",
    "summarize",
    "transcript",
    "validate_summary",
]
