"""Resolving a tokenizer spec (a string, an instance, a function, an Encoding) once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ..errors import TokenizerError
from .base import Tokenizer
from .bpe import TiktokenTokenizer, is_tiktoken_encoding
from .builtin import ApproxTokenizer, FunctionTokenizer, GivenTokenizer, HFTokenizer, WordsTokenizer

if TYPE_CHECKING:
    from tiktoken import Encoding

BUILTIN_SPECS: Final = (
    "given",
    "words",
    "approx",
    "tiktoken:<model, encoding or .tiktoken path>",
    "hf:<path>",
)

_registry: dict[str, Tokenizer] = {}
# id(Encoding) -> (the Encoding, kept alive so its id stays unique; its tokenizer)
_by_encoding: dict[int, tuple[Any, Tokenizer]] = {}
_registry_lock = threading.Lock()


def get_tokenizer(
    spec: str | Tokenizer | Callable[[str], int] | Encoding = "approx",
) -> Tokenizer:
    """Resolve a tokenizer spec (or pass an instance through).

    Specs: ``"given"``, ``"words"``, ``"approx"``, ``"tiktoken:<model or encoding>"``,
    ``"tiktoken:<path to a .tiktoken file>"``, ``"hf:<path to tokenizer.json>"``. A spec
    string always resolves to the same instance, so its count cache is shared by
    everything that uses it; so does a ``tiktoken.Encoding`` object. A plain
    ``text -> int`` function is wrapped in a cached tokenizer.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Tokenizer):
            return spec
        if is_tiktoken_encoding(spec):
            return _for_encoding(spec)
        if callable(spec):
            return FunctionTokenizer(spec)
        raise TokenizerError(
            f"tokenizer={spec!r}: expected a spec string, a Tokenizer, a tiktoken Encoding "
            "or a text->int function"
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


def _for_encoding(encoding: Encoding) -> Tokenizer:
    hit = _by_encoding.get(id(encoding))
    if hit is not None:
        return hit[1]
    with _registry_lock:
        hit = _by_encoding.get(id(encoding))
        if hit is None:
            hit = _by_encoding[id(encoding)] = (encoding, TiktokenTokenizer(encoding))
    return hit[1]


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
