"""The seeds' named designs, by their published names, composed from convomem's parts."""

from .recipes import (
    ConversationMemoryManager,
    SlidingWindowMemory,
    TokenBudgetManager,
)

__all__ = [
    "ConversationMemoryManager",
    "SlidingWindowMemory",
    "TokenBudgetManager",
]
