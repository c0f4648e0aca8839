"""convomem: the memory of a conversational agent.

A log of messages and views of it under a token budget. Which one to use:

- ``Packer`` when you own the message list and want what fits, per call;
- ``History`` for an incremental token window (the seed's interface);
- ``ConversationMemory`` for a session: a log in a store, a view under budget, a
  running summary of what left it; ``open_store("sqlite:///sessions.db")`` keeps the log
  durable.

Everything else lives in its room: ``convomem.model``, ``.tokens``, ``.views``,
``.packing``, ``.strategies``, ``.summaries``, ``.recall``, ``.stores``, ``.session``,
``.formats``, ``.compat``, ``.errors``.

``import convomem`` loads only the errors: every other name here (and every room, as
``convomem.stores``) is imported on first use (PEP 562), so a program that needs a
``Message`` does not pay for the service, the stores or the seeds' designs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    ConfigError,
    ConvomemError,
    InvalidMessage,
    SummarizerError,
    TokenizerError,
    TransientError,
)

if TYPE_CHECKING:
    from .compat import ConversationMemoryManager, SlidingWindowMemory, TokenBudgetManager
    from .formats.anthropic import from_anthropic, to_anthropic
    from .formats.openai import from_openai, to_openai
    from .model import Message, TextBlock, ToolResultBlock, ToolUseBlock
    from .packing import Packer, PackResult
    from .session import ConversationMemory
    from .stores import InMemoryStore, aopen_store, evict_conversations, load_history, open_store
    from .strategies import Recency, SummaryEvict
    from .summaries import RunningSummary
    from .tokens import get_tokenizer
    from .views import ContextBudget, History

__all__ = [
    "ConfigError",
    "ContextBudget",
    "ConversationMemory",
    "ConversationMemoryManager",
    "ConvomemError",
    "History",
    "InMemoryStore",
    "InvalidMessage",
    "Message",
    "PackResult",
    "Packer",
    "Recency",
    "RunningSummary",
    "SlidingWindowMemory",
    "SummarizerError",
    "SummaryEvict",
    "TextBlock",
    "TokenBudgetManager",
    "TokenizerError",
    "ToolResultBlock",
    "ToolUseBlock",
    "TransientError",
    "__version__",
    "aopen_store",
    "evict_conversations",
    "from_anthropic",
    "from_openai",
    "get_tokenizer",
    "load_history",
    "open_store",
    "to_anthropic",
    "to_openai",
]

# Each lazily imported name and the module that defines it.
_LAZY: dict[str, str] = {
    "ContextBudget": "views",
    "ConversationMemory": "session",
    "ConversationMemoryManager": "compat",
    "History": "views",
    "InMemoryStore": "stores",
    "Message": "model",
    "PackResult": "packing",
    "Packer": "packing",
    "Recency": "strategies",
    "RunningSummary": "summaries",
    "SlidingWindowMemory": "compat",
    "SummaryEvict": "strategies",
    "TextBlock": "model",
    "TokenBudgetManager": "compat",
    "ToolResultBlock": "model",
    "ToolUseBlock": "model",
    "aopen_store": "stores",
    "evict_conversations": "stores",
    "from_anthropic": "formats.anthropic",
    "from_openai": "formats.openai",
    "get_tokenizer": "tokens",
    "load_history": "stores",
    "open_store": "stores",
    "to_anthropic": "formats.anthropic",
    "to_openai": "formats.openai",
}

# The rooms, reachable as attributes (``convomem.stores.open_store``) without an import.
_ROOMS = frozenset(
    {
        "cli",
        "client",
        "compat",
        "errors",
        "formats",
        "integrations",
        "mcp",
        "model",
        "packing",
        "recall",
        "retry",
        "server",
        "session",
        "stores",
        "strategies",
        "summaries",
        "tokens",
        "views",
    }
)


def __getattr__(name: str) -> Any:
    """Import a lazily exported name (or a room) on first use, then keep it here."""
    home = _LAZY.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif name in _ROOMS:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_ROOMS})
