"""Recall: embedders, the embedding cache, near-duplicate search and the hybrid
(BM25 + vector) recall index over a store database, and ``GuardedRecall``, which
answers without recall (within a deadline, behind a circuit breaker) when it fails."""

from ._backend import Turn
from .cache import (
    EmbeddingCache,
)
from .drift import DriftAction, DriftDetector, DriftResult
from .e5 import E5Embedder
from .embedders import (
    COSINE_TOLERANCE,
    AsyncEmbedder,
    Backend,
    Embedder,
    EmbedderLike,
    HashingEmbedder,
    Vector,
)
from .guarded import AsyncGuardedRecall, GuardedRecall, RecallOutcome, RecallStatus
from .index import Hit, RecallIndex
from .index_async import AsyncRecallIndex
from .minilm import MiniLMEmbedder
from .neardup import (
    NearDuplicateFinder,
    find_near_duplicates,
)
from .openai_embeddings import OpenAIEmbedder
from .static import StaticEmbedder

__all__ = [
    "COSINE_TOLERANCE",
    "AsyncEmbedder",
    "AsyncGuardedRecall",
    "AsyncRecallIndex",
    "Backend",
    "DriftAction",
    "DriftDetector",
    "DriftResult",
    "E5Embedder",
    "Embedder",
    "EmbedderLike",
    "EmbeddingCache",
    "GuardedRecall",
    "HashingEmbedder",
    "Hit",
    "MiniLMEmbedder",
    "NearDuplicateFinder",
    "OpenAIEmbedder",
    "RecallIndex",
    "RecallOutcome",
    "RecallStatus",
    "StaticEmbedder",
    "Turn",
    "Vector",
    "find_near_duplicates",
]
