"""The dependency-free tokenizers, a wrapped ``text -> int`` function, and Hugging Face."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

from ..errors import MissingDependency, TokenizerError
from ..model import Message
from .base import BaseTokenizer, _valid, scrub


class GivenTokenizer(BaseTokenizer):
    """Trusts ``Message.tokens``; a message without one is an error naming its id.

    Bare text (a summary convomem writes, say) has no given count and is estimated
    like ``approx``.
    """

    name = "given"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def _prepare(self, message: Message) -> tuple[str, int]:
        raise TokenizerError(
            f"message id={message.id!r} has no token count; the 'given' tokenizer needs "
            "Message.tokens set (or choose a tokenizer such as 'approx' or 'tiktoken:gpt-4')"
        )


class WordsTokenizer(BaseTokenizer):
    """Whitespace-separated words, plus the per-message overhead."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


class ApproxTokenizer(BaseTokenizer):
    """About four characters a token: fast, dependency-free, good enough for budgets."""

    name = "approx"

    def count(self, text: str) -> int:
        return -(-len(text) // 4)


class FunctionTokenizer(BaseTokenizer):
    """Wraps a plain ``text -> int`` function as a cached tokenizer.

    What the function returns is checked: a count that is not a non-negative integer
    raises ``TokenizerError`` naming the tokenizer (and the message, when counting one).
    """

    def __init__(self, fn: Callable[[str], int], *, name: str | None = None) -> None:
        super().__init__()
        self._fn = fn
        self.name = name or str(getattr(fn, "__name__", "function"))

    def count(self, text: str) -> int:
        return _valid(self, None, self._call(text))

    def _call(self, text: str) -> object:
        try:
            return self._fn(text)
        except UnicodeError:  # a lone surrogate the function cannot encode
            return self._fn(scrub(text))

    def _tokenize(self, message: Message) -> int:
        text, extra = self._prepare(message)
        return _valid(self, message, self._call(text)) + extra


class HFTokenizer(BaseTokenizer):
    """Counts with a Hugging Face ``tokenizer.json`` from a local path (extra ``hf``).

    Batches go through the library's native ``encode_batch`` (parallel, outside the GIL).
    """

    def __init__(self, path: str, *, cache_size: int = 1_000_000) -> None:
        super().__init__(cache_size=cache_size)
        try:
            from tokenizers import Tokenizer as _HFTokenizer
        except ImportError:
            raise MissingDependency("the 'hf:' tokenizer", "hf", "tokenizers") from None
        if not os.path.isfile(path):
            raise TokenizerError(
                f"hf:{path!r}: no such file; give the local path of a tokenizer.json "
                "(convomem never downloads tokenizer files)"
            )
        try:
            self._tok = _HFTokenizer.from_file(path)
        except Exception as exc:
            raise TokenizerError(f"hf:{path!r}: not a readable tokenizer.json: {exc}") from exc
        self.name = f"hf:{path}"

    def count(self, text: str) -> int:
        try:
            return len(self._tok.encode(text, add_special_tokens=False).ids)
        except (TypeError, UnicodeError):  # a lone surrogate: the Rust side refuses it
            return len(self._tok.encode(scrub(text), add_special_tokens=False).ids)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        if len(texts) < 2:
            return [self.count(t) for t in texts]
        try:
            encoded = self._tok.encode_batch(list(texts), add_special_tokens=False)
        except (TypeError, UnicodeError):
            encoded = self._tok.encode_batch([scrub(t) for t in texts], add_special_tokens=False)
        return [len(e.ids) for e in encoded]
