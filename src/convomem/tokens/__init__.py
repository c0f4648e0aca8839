"""Token counting: built-in tokenizers behind one protocol, each message counted once.

``checked_count`` / ``checked_count_many`` are how every part of convomem asks a
tokenizer (a custom one included) for a message's count: the answer is validated once,
the same way everywhere. ``BaseTokenizer.count_many`` counts a cold batch, tokenizing
each distinct uncached content once, in one batch.
"""

from .base import (
    FLAT_BLOCK_TOKENS,
    IMAGE_TOKENS,
    PER_MESSAGE_TOKENS,
    BaseTokenizer,
    Tokenizer,
    checked_count,
    checked_count_many,
)
from .bpe import TiktokenTokenizer
from .builtin import (
    ApproxTokenizer,
    FunctionTokenizer,
    GivenTokenizer,
    HFTokenizer,
    WordsTokenizer,
)
from .registry import BUILTIN_SPECS, get_tokenizer

__all__ = [
    "BUILTIN_SPECS",
    "FLAT_BLOCK_TOKENS",
    "IMAGE_TOKENS",
    "PER_MESSAGE_TOKENS",
    "ApproxTokenizer",
    "BaseTokenizer",
    "FunctionTokenizer",
    "GivenTokenizer",
    "HFTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "WordsTokenizer",
    "checked_count",
    "checked_count_many",
    "get_tokenizer",
]
