"""convomem: the memory of a conversational agent."""

from ._version import __version__
from .chunks import (
    Chunk,
    PairProblem,
    group_pairs,
    repair_pairs,
    resolve_pins,
    validate_pairs,
)
from .errors import (
    ConfigError,
    ConvomemError,
    HistoryLoadError,
    InvalidMessage,
    MissingDependency,
    TokenizerError,
    TransientError,
)
from .formats.openai import from_openai, to_openai
from .messages import (
    Block,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from .tokens import BaseTokenizer, Tokenizer, get_tokenizer

__all__ = [
    "BaseTokenizer",
    "Block",
    "Chunk",
    "ConfigError",
    "ConvomemError",
    "HistoryLoadError",
    "ImageBlock",
    "InvalidMessage",
    "Message",
    "MissingDependency",
    "PairProblem",
    "Role",
    "TextBlock",
    "Tokenizer",
    "TokenizerError",
    "ToolResultBlock",
    "ToolUseBlock",
    "TransientError",
    "__version__",
    "from_openai",
    "get_tokenizer",
    "group_pairs",
    "repair_pairs",
    "resolve_pins",
    "to_openai",
    "validate_pairs",
]
