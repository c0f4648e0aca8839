"""The memory-patterns article's in-process designs, by their published names.

One import for every design of "Multi-Turn Conversation Management and Context
Optimization: LLM Chatbot Memory Patterns" that runs in process (its LangChain,
LlamaIndex, Redis and Pinecone snippets are other libraries' APIs, not designs):

- ``TokenBudgetManager(model, max_context)`` (``seed_budget``)
- ``TokenWindowMemory(max_tokens, model)``, ``TimeBasedWindow(window_minutes)``,
  ``HybridWindow(max_tokens, max_minutes)`` (``memory_windows``)
- ``ConversationTurn``, ``AdaptiveSlidingWindow(max_tokens, min_turns)``
  (``memory_adaptive``)
- ``ProgressiveSummarizer(llm, summarize_threshold)`` (``memory_progressive``)
- ``MemoryTier``, ``HierarchicalMemory(llm, short_term_limit, mid_term_limit)``
  (``memory_hierarchical``)
"""

from .memory_adaptive import AdaptiveSlidingWindow, ConversationTurn
from .memory_hierarchical import HierarchicalMemory, MemoryTier
from .memory_progressive import ProgressiveSummarizer
from .memory_windows import HybridWindow, TimeBasedWindow, TokenWindowMemory
from .seed_budget import TokenBudgetManager

__all__ = [
    "AdaptiveSlidingWindow",
    "ConversationTurn",
    "HierarchicalMemory",
    "HybridWindow",
    "MemoryTier",
    "ProgressiveSummarizer",
    "TimeBasedWindow",
    "TokenBudgetManager",
    "TokenWindowMemory",
]
