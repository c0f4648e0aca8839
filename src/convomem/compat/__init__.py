"""The seeds' named designs, by their published interfaces, composed from convomem's parts.

- ``ConversationMemoryManager`` (``seed_memory_manager``): a word-counted window with a
  summary slot.
- ``SlidingWindowMemory`` (``seed_sliding_window``): turns and tokens, priority tiers.
- ``TokenBudgetManager`` (``seed_budget``): a model's context split 15/60/25.
- The memory-patterns article's designs (``memory_patterns``): ``TokenWindowMemory``,
  ``TimeBasedWindow``, ``HybridWindow``, ``ConversationTurn`` and
  ``AdaptiveSlidingWindow``, ``ProgressiveSummarizer``, ``MemoryTier`` and
  ``HierarchicalMemory``.
- The article's safety nets (``seed_safety``): ``ContextDriftDetector`` and
  ``SummaryValidator``.

Model names (``model="gpt-4o"``) map to tokenizers offline: see ``compat._models``.
"""

from ._models import model_tokenizer
from .memory_patterns import (
    AdaptiveSlidingWindow,
    ConversationTurn,
    HierarchicalMemory,
    HybridWindow,
    MemoryTier,
    ProgressiveSummarizer,
    TimeBasedWindow,
    TokenWindowMemory,
)
from .seed_budget import TokenBudgetManager
from .seed_memory_manager import ConversationMemoryManager
from .seed_safety import ContextDriftDetector, SummaryValidator
from .seed_sliding_window import SlidingWindowMemory

__all__ = [
    "AdaptiveSlidingWindow",
    "ContextDriftDetector",
    "ConversationMemoryManager",
    "ConversationTurn",
    "HierarchicalMemory",
    "HybridWindow",
    "MemoryTier",
    "ProgressiveSummarizer",
    "SlidingWindowMemory",
    "SummaryValidator",
    "TimeBasedWindow",
    "TokenBudgetManager",
    "TokenWindowMemory",
    "model_tokenizer",
]
