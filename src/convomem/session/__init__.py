"""Sessions: ConversationMemory, one conversation's log, view and summary."""

from .memory import (
    COMPRESSED_KEY,
    ConversationMemory,
)
from .stats import MemoryStats

__all__ = [
    "COMPRESSED_KEY",
    "ConversationMemory",
    "MemoryStats",
]
