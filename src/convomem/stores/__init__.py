"""Stores: the Store seam, paginated loading and forgetting old conversations."""

from .base import (
    AsyncStore,
    InMemoryStore,
    Store,
    check_items,
    check_limit,
)
from .forgetting import (
    evict_conversations,
)
from .loading import (
    LoadProgress,
    aiter_history,
    aload_history,
    iter_history,
    load_history,
)

__all__ = [
    "AsyncStore",
    "InMemoryStore",
    "LoadProgress",
    "Store",
    "aiter_history",
    "aload_history",
    "check_items",
    "check_limit",
    "evict_conversations",
    "iter_history",
    "load_history",
]
