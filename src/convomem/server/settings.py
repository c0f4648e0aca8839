"""``Settings``: everything a service process is configured with, in one frozen object.

``convomem serve`` builds one from its options; ``create_app(settings)`` takes one, so an
embedding application or a test configures the service the same way. Nothing here
imports FastAPI: the settings are checked (``ConfigError`` naming the field) before any
server starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import _check
from ..errors import ConfigError
from ..recall.embedders import EMBEDDERS
from ..session.tiers import RECALL_K

__all__ = ["DEFAULT_STORE", "Settings"]

DEFAULT_STORE = "sqlite:///convomem.db"
"""The store of ``convomem serve`` without ``--store``: a SQLite file, nothing to install."""


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
    - ``embedder``: what the recall index embeds with: ``"hashing"`` (no dependency),
      ``"minilm"`` or ``"e5"`` (``recall.embedders.embedder_named``; E5 recalled the
      most on the LongMem held-out set). An index refuses a model other than the one it
      was built with.
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
    embedder: str = "hashing"
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
    upstream_api_key: str | None = None
    memory_cache: int = 256
    metrics_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Settings of parts added later (one key per part), kept as given."""

    def __post_init__(self) -> None:
        if not isinstance(self.store, str) or not self.store:
            raise ConfigError(f"store={self.store!r}: must be a store URL")
        _check.positive_int("budget", self.budget)
        _check.one_of("embedder", self.embedder, EMBEDDERS)
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
