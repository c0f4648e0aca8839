"""Model specs: the summarizer or the fact extractor an option names, configured.

A spec is a string, the same in the library (``ConversationMemory(summarizer=...,
extractor=...)``) and the service (``convomem serve --summarizer ... --extractor ...``):

- summarizer: ``"extractive"`` (the offline default: ``ExtractiveSummarizer``, sized by
  the ``RunningSummary`` that uses it, so ``summarizer_from`` answers None) or
  ``"openai:MODEL"`` (``LLMSummarizer``);
- extractor: ``"offline"`` (``OfflineExtractor``) or ``"openai:MODEL"``
  (``LLMExtractor``, falling back to the offline extractor batch by batch).

``openai:MODEL`` is any OpenAI-compatible Chat Completions endpoint: ``base_url``, else
``$CONVOMEM_LLM_BASE_URL``, else api.openai.com; the key is ``api_key``, else
``$CONVOMEM_LLM_API_KEY``, else ``$OPENAI_API_KEY`` (a local server needs none). The
key is never shown (reprs, errors, logs). Each model made here is ready for a service:
``timeout`` seconds a call, transient failures retried by ``retry.hinted_policy()``
(``Retry-After`` honoured up to 5 s; a longer ask ends the retries, and so does a call
that timed out), and a
``CircuitBreaker`` (5 failures in a row: no call for 30 s), so a model that is down
costs a conversation one fallback, not a wait: the summary is the extractive one, marked
``degraded``; the facts are the offline extractor's (``LLMExtractor.degraded``).
"""

from __future__ import annotations

import os
from typing import Any, Final

from .. import _check
from ..errors import ConfigError
from ..retry import CircuitBreaker, hinted_policy
from .adapter import SummarizerLike
from .extractor import Extractor, OfflineExtractor

__all__ = [
    "EXTRACTORS",
    "LLM_API_KEY_ENV",
    "LLM_BASE_URL_ENV",
    "SUMMARIZERS",
    "extractor_from",
    "summarizer_from",
]

SUMMARIZERS: Final = ("extractive",)
"""The offline summarizer specs (beside ``"openai:MODEL"``)."""
EXTRACTORS: Final = ("offline",)
"""The offline extractor specs (beside ``"openai:MODEL"``)."""
LLM_BASE_URL_ENV: Final = "CONVOMEM_LLM_BASE_URL"
"""The chat endpoint's base URL when none is given (e.g. ``http://localhost:11434/v1``)."""
LLM_API_KEY_ENV: Final = "CONVOMEM_LLM_API_KEY"
"""The chat endpoint's key when none is given (else ``OPENAI_API_KEY``)."""
TIMEOUT: Final = 30.0
"""Seconds a model call may take by default."""


def _endpoint(
    option: str, spec: str, base_url: str | None, api_key: str | None, timeout: float
) -> dict[str, Any]:
    """The client options of an ``openai:`` model (checked): its endpoint, key, timeout,
    retry policy (Retry-After honoured, within the timeout) and a breaker of its own."""
    url = base_url if base_url is not None else os.environ.get(LLM_BASE_URL_ENV) or None
    if url is not None:
        _check.http_url("base_url" if base_url is not None else LLM_BASE_URL_ENV, url)
    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        raise ConfigError("api_key: must be a non-empty string or None")
    key = api_key or os.environ.get(LLM_API_KEY_ENV) or os.environ.get("OPENAI_API_KEY")
    if key is None and url is None:
        raise ConfigError(
            f"{option}={spec!r}: needs an API key (api_key=, ${LLM_API_KEY_ENV} or "
            f"$OPENAI_API_KEY), or the base URL (base_url=, ${LLM_BASE_URL_ENV}) of a "
            "server that needs none"
        )
    seconds = _check.number("timeout", timeout, minimum=0.0, low_open=True)
    return {
        "base_url": url,
        "api_key": key,
        "timeout": seconds,
        "retry": hinted_policy(max_delay=seconds),
        "breaker": CircuitBreaker(),
    }


def summarizer_from(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = TIMEOUT,
    option: str = "summarizer",
) -> SummarizerLike | None:
    """The summarizer ``spec`` names (see the module docstring): an ``LLMSummarizer``,
    or None for ``"extractive"`` (the offline default). A bad spec is a ``ConfigError``
    naming ``option`` and the value; ``"openai:..."`` needs the extra ``llm``."""
    kind, model = _check.model_spec(option, spec, SUMMARIZERS)
    if kind != "openai":
        return None
    from .llm import LLMSummarizer

    return LLMSummarizer(model, **_endpoint(option, spec, base_url, api_key, timeout))


def extractor_from(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = TIMEOUT,
    option: str = "extractor",
) -> Extractor:
    """The fact extractor ``spec`` names (see the module docstring): an
    ``OfflineExtractor`` for ``"offline"``, else an ``LLMExtractor`` falling back to
    one. A bad spec is a ``ConfigError`` naming ``option`` and the value."""
    kind, model = _check.model_spec(option, spec, EXTRACTORS)
    if kind != "openai":
        return OfflineExtractor()
    from .llm_extractor import LLMExtractor

    return LLMExtractor(model, **_endpoint(option, spec, base_url, api_key, timeout))
