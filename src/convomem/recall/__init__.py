"""Recall: embedders, the embedding cache and near-duplicate search."""

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
from .neardup import (
    NearDuplicateFinder,
    find_near_duplicates,
)

__all__ = [
    "COSINE_TOLERANCE",
    "AsyncEmbedder",
    "Backend",
    "DriftAction",
    "DriftDetector",
    "DriftResult",
    "Embedder",
    "EmbedderLike",
    "EmbeddingCache",
    "HashingEmbedder",
    "NearDuplicateFinder",
    "Vector",
    "find_near_duplicates",
]
