"""convomem: the memory of a conversational agent.

A log of messages and views of it under a token budget: paginated loading, an
incremental window, tool-pair-safe packing strategies, running summaries that never
lose history, and one session object that puts them together.
"""

from ._version import __version__
from .compat import ConversationMemoryManager, SlidingWindowMemory, TokenBudgetManager
from .errors import (
    ConfigError,
    ConvomemError,
    EmbeddingError,
    HistoryLoadError,
    InvalidMessage,
    InvalidPage,
    MissingDependency,
    SummarizerError,
    TokenizerError,
    TransientError,
)
from .formats.anthropic import from_anthropic, to_anthropic
from .formats.openai import from_openai, to_openai
from .model import (
    Block,
    Chunk,
    ImageBlock,
    Message,
    PairProblem,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    group_pairs,
    repair_pairs,
    resolve_pins,
    validate_pairs,
)
from .packing import Decision, Packer, PackResult, Strategy
from .recall import (
    Embedder,
    EmbeddingCache,
    HashingEmbedder,
    NearDuplicateFinder,
    find_near_duplicates,
)
from .session import ConversationMemory, MemoryStats
from .stores import AsyncStore, InMemoryStore, Store
from .stores.forgetting import evict_conversations
from .stores.loading import (
    LoadProgress,
    aiter_history,
    aload_history,
    iter_history,
    load_history,
)
from .strategies import (
    FirstFit,
    HeadTail,
    Importance,
    MaxAge,
    MaxTurns,
    Pipeline,
    Recency,
    SemanticDedup,
    SummaryEvict,
    default_scorer,
)
from .summaries import (
    ExtractiveSummarizer,
    RunningSummary,
    Summarizer,
    Summary,
    TruncatingSummarizer,
    as_summarizer,
)
from .summaries.facts import Fact, FactLedger, extract_facts
from .tokens import BaseTokenizer, Tokenizer, get_tokenizer
from .views.budget import ContextBudget
from .views.window import History, longest_fitting_run

__all__ = [
    "AsyncStore",
    "BaseTokenizer",
    "Block",
    "Chunk",
    "ConfigError",
    "ContextBudget",
    "ConversationMemory",
    "ConversationMemoryManager",
    "ConvomemError",
    "Decision",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingError",
    "ExtractiveSummarizer",
    "Fact",
    "FactLedger",
    "FirstFit",
    "HashingEmbedder",
    "HeadTail",
    "History",
    "HistoryLoadError",
    "ImageBlock",
    "Importance",
    "InMemoryStore",
    "InvalidMessage",
    "InvalidPage",
    "LoadProgress",
    "MaxAge",
    "MaxTurns",
    "MemoryStats",
    "Message",
    "MissingDependency",
    "NearDuplicateFinder",
    "PackResult",
    "Packer",
    "PairProblem",
    "Pipeline",
    "Recency",
    "Role",
    "RunningSummary",
    "SemanticDedup",
    "SlidingWindowMemory",
    "Store",
    "Strategy",
    "Summarizer",
    "SummarizerError",
    "Summary",
    "SummaryEvict",
    "TextBlock",
    "TokenBudgetManager",
    "Tokenizer",
    "TokenizerError",
    "ToolResultBlock",
    "ToolUseBlock",
    "TransientError",
    "TruncatingSummarizer",
    "__version__",
    "aiter_history",
    "aload_history",
    "as_summarizer",
    "default_scorer",
    "evict_conversations",
    "extract_facts",
    "find_near_duplicates",
    "from_anthropic",
    "from_openai",
    "get_tokenizer",
    "group_pairs",
    "iter_history",
    "load_history",
    "longest_fitting_run",
    "repair_pairs",
    "resolve_pins",
    "to_anthropic",
    "to_openai",
    "validate_pairs",
]
