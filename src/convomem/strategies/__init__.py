"""Packing strategies: budget strategies and windows that compose with them.

Budget strategies (``Recency``, ``FirstFit``, ``Importance``, ``SummaryEvict``,
``SemanticDedup``) decide which chunks fit the budget; windows (``MaxTurns``,
``MaxAge``, ``HeadTail``) pre-filter. Combine them in a stage list that ends with a
budget strategy:
``Packer(budget=4000, strategy=[MaxTurns(20), Recency()])``.
"""

from ..packing import ChunkStrategy, Pipeline, Strategy, Window
from .budget import FirstFit, Importance, Recency, default_scorer
from .dedup import SemanticDedup
from .summary import SummaryEvict
from .windows import HeadTail, MaxAge, MaxTurns

__all__ = [
    "ChunkStrategy",
    "FirstFit",
    "HeadTail",
    "Importance",
    "MaxAge",
    "MaxTurns",
    "Pipeline",
    "Recency",
    "SemanticDedup",
    "Strategy",
    "SummaryEvict",
    "Window",
    "default_scorer",
]
