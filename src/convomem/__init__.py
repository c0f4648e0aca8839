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
"""

from ._version import __version__
from .compat import ConversationMemoryManager, SlidingWindowMemory, TokenBudgetManager
from .errors import (
    ConfigError,
    ConvomemError,
    InvalidMessage,
    SummarizerError,
    TokenizerError,
    TransientError,
)
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
