"""Stores: the Store seam, durable session stores (``open_store``), paginated loading
and forgetting old conversations."""

from .base import (
    AsyncStore,
    InMemoryStore,
    Store,
    check_items,
    check_limit,
)
from .database import (
    AsyncSessionStore,
    AsyncStoreDatabase,
    LogEntry,
    SessionInfo,
    SessionStore,
    StoreDatabase,
    StoreKind,
    StoreStats,
    TTLPolicy,
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
from .opening import aopen_store, open_store

__all__ = [
    "AsyncSessionStore",
    "AsyncStore",
    "AsyncStoreDatabase",
    "InMemoryStore",
    "LoadProgress",
    "LogEntry",
    "SessionInfo",
    "SessionStore",
    "Store",
    "StoreDatabase",
    "StoreKind",
    "StoreStats",
    "TTLPolicy",
    "aiter_history",
    "aload_history",
    "aopen_store",
    "check_items",
    "check_limit",
    "evict_conversations",
    "iter_history",
    "load_history",
    "open_store",
]
