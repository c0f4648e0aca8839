"""Sessions: ConversationMemory, one conversation's log, view and summary."""

from .memory import (
    COMPRESSED_KEY,
    ConversationMemory,
    MemoryStats,
)

__all__ = [
    "COMPRESSED_KEY",
    "ConversationMemory",
    "MemoryStats",
]
