"""Recall: embedders, the embedding cache, near-duplicate search and the hybrid
(BM25 + vector) recall index over a store database."""

from ._core import Turn
from .cache import (
    EmbeddingCache,
)
from .drift import DriftAction, DriftDetector, DriftResult
from .embedders import (
    COSINE_TOLERANCE,
    AsyncEmbedder,
    Backend,
    Embedder,
    EmbedderLike,
    HashingEmbedder,
    Vector,
)
from .index import Hit, RecallIndex
from .index_async import AsyncRecallIndex
from .minilm import MiniLMEmbedder
from .neardup import (
    NearDuplicateFinder,
    find_near_duplicates,
)
from .openai_embeddings import OpenAIEmbedder

__all__ = [
    "COSINE_TOLERANCE",
    "AsyncEmbedder",
    "AsyncRecallIndex",
    "Backend",
    "DriftAction",
    "DriftDetector",
    "DriftResult",
    "Embedder",
    "EmbedderLike",
    "EmbeddingCache",
    "HashingEmbedder",
    "Hit",
    "MiniLMEmbedder",
    "NearDuplicateFinder",
    "OpenAIEmbedder",
    "RecallIndex",
    "Turn",
    "Vector",
    "find_near_duplicates",
]
