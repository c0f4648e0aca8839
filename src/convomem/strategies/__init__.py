"""Packing strategies: budget strategies and windows that compose with them.

Budget strategies (``Recency``, ``FirstFit``, ``Importance``) decide which chunks fit
the budget; windows (``MaxTurns``, ``MaxAge``, ``HeadTail``) pre-filter. Combine them
in a stage list that ends with a budget strategy:
``Packer(budget=4000, strategy=[MaxTurns(20), Recency()])``.
"""

from ..packing import ChunkStrategy, Pipeline, Strategy, Window
from .budget import FirstFit, Importance, Recency, default_scorer
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
    "Strategy",
    "Window",
    "default_scorer",
]
