"""Token counting: built-in tokenizers behind one protocol, each message counted once."""

from .counting import (
    BUILTIN_SPECS,
    IMAGE_TOKENS,
    PER_MESSAGE_TOKENS,
    ApproxTokenizer,
    BaseTokenizer,
    FunctionTokenizer,
    GivenTokenizer,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    WordsTokenizer,
    get_tokenizer,
)

__all__ = [
    "BUILTIN_SPECS",
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
    "get_tokenizer",
]
