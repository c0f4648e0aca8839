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
    AsyncStatementRunner,
    AsyncStoreDatabase,
    LogEntry,
    SessionInfo,
    SessionStore,
    StatementRunner,
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
    "AsyncStatementRunner",
    "AsyncStore",
    "AsyncStoreDatabase",
    "InMemoryStore",
    "LoadProgress",
    "LogEntry",
    "SessionInfo",
    "SessionStore",
    "StatementRunner",
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
