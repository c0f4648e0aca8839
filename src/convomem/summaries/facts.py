"""Key facts: deterministic extraction (no model) and a ledger that carries them verbatim.

Summaries lose details: a summary of a summary drops the order number first. The
facts ledger keeps the details that matter in support-style conversations (names,
reference numbers, ids, dates, emails, amounts, quantities and explicit user
preferences) exactly as they were written, so they survive any number of folds:
facts are extracted from evicted *messages* once and are never re-summarized.

This module gathers the public names; the parts live in ``_fact`` (the value and its
rendering), ``extraction`` (the patterns, linear and memoized) and ``ledger`` (the
bounded, ranked, incrementally selected ledger).

The long-term tier is keyed: a ``KeyedFact`` has a key (subject + attribute), a value,
provenance and validity; an ``Extractor`` (``OfflineExtractor``, rule-based in four
languages, or ``LLMExtractor``, a chat model with the offline one as fallback) produces
them, and ``FactHistory`` keeps them with supersession (current values, history, as_of)
and extracts each message once.
"""

from __future__ import annotations

from ._fact import (
    FACTS_HEADER,
    KIND_VALUE,
    KINDS,
    SOURCE_TIER,
    Fact,
    FactKind,
    render_facts,
)
from .extraction import (
    MAX_SCAN_CHARS,
    FactCacheInfo,
    clear_fact_cache,
    extract_facts,
    extract_from_messages,
    fact_cache_info,
    scan_window,
    split_sentences,
)
from .extractor import AsyncExtractor, Extractor, OfflineExtractor
from .keyed import KeyedFact
from .ledger import FactLedger
from .llm_extractor import LLMExtractor
from .supersession import FactHistory

__all__ = [
    "FACTS_HEADER",
    "KINDS",
    "KIND_VALUE",
    "MAX_SCAN_CHARS",
    "SOURCE_TIER",
    "AsyncExtractor",
    "Extractor",
    "Fact",
    "FactCacheInfo",
    "FactHistory",
    "FactKind",
    "FactLedger",
    "KeyedFact",
    "LLMExtractor",
    "OfflineExtractor",
    "clear_fact_cache",
    "extract_facts",
    "extract_from_messages",
    "fact_cache_info",
    "render_facts",
    "scan_window",
    "split_sentences",
]
