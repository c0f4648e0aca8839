"""``Settings``: everything a service process is configured with, in one frozen object.

``convomem serve`` builds one from its options; ``create_app(settings)`` takes one, so an
embedding application or a test configures the service the same way. Nothing here
imports FastAPI: the settings are checked (``ConfigError`` naming the field) before any
server starts. ``build_models`` makes the summarizer, extractor and embedder they name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import _check
from ..errors import ConfigError
from ..recall.embedders import EMBEDDERS
from ..session.tiers import RECALL_K
from ..stores.url import DEFAULT_STORE
from ..summaries.specs import EXTRACTORS, SUMMARIZERS

__all__ = ["DEFAULT_STORE", "Models", "Settings", "build_models"]


@dataclass(frozen=True, slots=True)
class Settings:
    """The configuration of one service process (every replica gets the same one).

    - ``store``: the store URL (``open_store``'s); every session, its log and derived
      state, and the API keys live there.
    - ``recall``: a store URL for the recall index (SQLite or PostgreSQL); None: the
      store itself when it has search (SQLite, PostgreSQL), else no recall.
    - ``redis_url``: a Redis server for the per-key rate limit, so the limit holds
      across replicas; None: an in-process bucket per replica.
    - ``budget`` / ``tokenizer``: how each session's context is assembled (a session
      created with ``metadata["budget"]`` keeps its own budget).
    - ``use_recall``: False turns recall off (no index, no facts, no snippets).
    - ``embedder``: what the recall index embeds with: ``"static"`` (the default:
      MiniLM distilled into a token table shipped in the package, numpy only),
      ``"hashing"`` (no dependency), ``"minilm"``, ``"e5"``
      (``recall.embedders.embedder_named``) or ``"openai:MODEL"`` (an OpenAI-compatible
      ``/embeddings`` at ``embedding_base_url``). An index refuses a model other than
      the one it was built with.
    - ``summarizer``: ``"extractive"`` (offline) or ``"openai:MODEL"``; ``extractor`` (the
      user's facts): ``"offline"`` or ``"openai:MODEL"`` (``summaries.specs``), at
      ``llm_base_url``. A model that fails (down, slow past its timeout, 429, 5xx,
      malformed answers) never fails a request nor loses a message: the summary falls
      back to the extractive one (``degraded``), the facts to the offline extractor
      (``facts.degraded``), recall answers "failed" (messages appended meanwhile are
      indexed once the embedder answers again). A model unreachable at start does not
      keep the service from starting.
    - ``llm_base_url`` / ``embedding_base_url``: the endpoints (None:
      ``$CONVOMEM_LLM_BASE_URL`` / ``$CONVOMEM_EMBEDDING_BASE_URL``, else OpenAI's);
      ``llm_api_key`` / ``embedding_api_key`` their keys (None: ``$CONVOMEM_LLM_API_KEY``
      / ``$CONVOMEM_EMBEDDING_API_KEY``, else ``$OPENAI_API_KEY``; never shown);
      ``llm_timeout`` / ``embedding_timeout`` seconds a model call may take.
    - ``recall_k`` / ``recall_deadline``: snippets recalled into a context, and how long
      a context waits for them (seconds; None: no deadline) before it is sent without
      them (``GuardedRecall``: an outage never fails a request).
    - ``rate_per_second`` / ``burst``: the token bucket of each key (0: no limit).
    - ``max_body_bytes``, ``max_messages``, ``max_message_chars``: request size limits.
    - ``upstream_url`` / ``upstream_model`` / ``upstream_api_key``: the OpenAI-compatible
      model the chat route calls.
    - ``memory_cache``: open session memories each process keeps between requests (LRU;
      0: none, every request resumes its session from the store).
    - ``metrics_key``: when set, ``/metrics`` answers only ``Authorization: Bearer
      <metrics_key>`` (``convomem serve`` reads it from ``$CONVOMEM_METRICS_KEY``).
    """

    store: str = DEFAULT_STORE
    recall: str | None = None
    redis_url: str | None = None
    budget: int = 4000
    tokenizer: str = "approx"
    use_recall: bool = True
    embedder: str = "static"
    summarizer: str = "extractive"
    extractor: str = "offline"
    llm_base_url: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout: float = 30.0
    embedding_base_url: str | None = None
    embedding_api_key: str | None = field(default=None, repr=False)
    embedding_timeout: float = 30.0
    recall_k: int = RECALL_K
    recall_deadline: float | None = 1.0
    rate_per_second: float = 20.0
    burst: int = 40
    max_body_bytes: int = 1_048_576
    max_messages: int = 100
    max_message_chars: int = 200_000
    max_page: int = 500
    upstream_url: str | None = None
    upstream_model: str | None = None
    upstream_api_key: str | None = field(default=None, repr=False)
    memory_cache: int = 256
    metrics_key: str | None = field(default=None, repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    """Settings of parts added later (one key per part), kept as given."""

    def __post_init__(self) -> None:
        if not isinstance(self.store, str) or not self.store:
            raise ConfigError(f"store={self.store!r}: must be a store URL")
        _check.positive_int("budget", self.budget)
        _check.model_spec("embedder", self.embedder, EMBEDDERS)
        _check.model_spec("summarizer", self.summarizer, SUMMARIZERS)
        _check.model_spec("extractor", self.extractor, EXTRACTORS)
        for name, url in (
            ("llm_base_url", self.llm_base_url),
            ("embedding_base_url", self.embedding_base_url),
        ):
            if url is not None:
                _check.http_url(name, url)
        _check.number("llm_timeout", self.llm_timeout, minimum=0.0, low_open=True)
        _check.number("embedding_timeout", self.embedding_timeout, minimum=0.0, low_open=True)
        _check.positive_int("recall_k", self.recall_k)
        if self.recall_deadline is not None:
            _check.number("recall_deadline", self.recall_deadline, minimum=0.0, low_open=True)
        _check.number("rate_per_second", self.rate_per_second, minimum=0.0)
        _check.non_negative_int("burst", self.burst)
        if self.rate_per_second > 0 and self.burst < 1:
            raise ConfigError(f"burst={self.burst!r}: must be at least 1 with a rate limit")
        _check.positive_int("max_body_bytes", self.max_body_bytes)
        _check.positive_int("max_messages", self.max_messages)
        _check.positive_int("max_message_chars", self.max_message_chars)
        _check.positive_int("max_page", self.max_page)
        _check.non_negative_int("memory_cache", self.memory_cache)
        if self.metrics_key is not None and (
            not isinstance(self.metrics_key, str) or len(self.metrics_key) < 16
        ):
            raise ConfigError("metrics_key: must be a string of at least 16 characters")


@dataclass(frozen=True, slots=True)
class Models:
    """The models every session of a process uses, built once (``build_models``)."""

    summarizer: Any = None
    """An ``LLMSummarizer`` (None: the extractive default)."""
    extractor: Any = None
    """An ``LLMExtractor`` (None: the offline default)."""
    embedder: Any = None
    """What recall embeds with (None: recall is off)."""


def build_models(settings: Settings) -> Models:
    """The models ``settings`` name. No model is called: one that is down or unreachable
    now does not keep the service from starting (it degrades, see ``Settings``); a bad
    spec, a missing key or a missing extra raises ``ConfigError`` / ``MissingDependency``
    here, before the service listens."""
    from ..recall.embedders import embedder_named
    from ..summaries.specs import extractor_from, summarizer_from

    s = settings
    url, key, timeout = s.llm_base_url, s.llm_api_key, s.llm_timeout
    summarizer = summarizer_from(s.summarizer, base_url=url, api_key=key, timeout=timeout)
    extractor = None
    if s.extractor != "offline":
        extractor = extractor_from(s.extractor, base_url=url, api_key=key, timeout=timeout)
    embedder = None
    if s.use_recall:
        embedder = embedder_named(
            s.embedder,
            base_url=s.embedding_base_url,
            api_key=s.embedding_api_key,
            timeout=s.embedding_timeout,
        )
    return Models(summarizer, extractor, embedder)
