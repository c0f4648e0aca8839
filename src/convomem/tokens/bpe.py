"""Exact BPE counts with tiktoken, batched over threads for cold counts."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from typing import TYPE_CHECKING, Final, TypeGuard

from .._check import optional_positive_int
from ..errors import TokenizerError
from .base import BaseTokenizer
from .encodings import encoding_for, import_tiktoken

if TYPE_CHECKING:
    from tiktoken import Encoding

_PARALLEL_MIN: Final = 512
"""Below this many texts a batch is counted on the calling thread (threads cost more)."""

_CHUNKS_PER_THREAD: Final = 4


def is_tiktoken_encoding(obj: object) -> TypeGuard[Encoding]:
    """Whether ``obj`` is a ``tiktoken.Encoding`` (False when tiktoken is not imported)."""
    tiktoken = sys.modules.get("tiktoken")
    encoding_type = getattr(tiktoken, "Encoding", None)
    return isinstance(encoding_type, type) and isinstance(obj, encoding_type)


def _cpus() -> int:
    """CPUs this process may run on (a container's share, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on every platform
        return max(1, os.cpu_count() or 1)


class TiktokenTokenizer(BaseTokenizer):
    """Exact BPE counts with OpenAI's tiktoken (extra ``tiktoken``).

    ``model_or_encoding`` is a model (``"gpt-4o"``), an encoding name
    (``"o200k_base"``), the path of a local ``.tiktoken`` BPE file named after its
    encoding (``"/models/o200k_base.tiktoken"``), or a ``tiktoken.Encoding`` object.
    Nothing is downloaded unless ``CONVOMEM_TIKTOKEN_DOWNLOAD=1``; see
    ``convomem.tokens.encodings`` for where an encoding is looked for.

    Text is encoded as ordinary text: special-token strings (``<|endoftext|>``) are
    counted like any other text and never raise. ``count_many`` encodes the distinct
    uncached texts of a batch on ``threads`` threads (tiktoken releases the GIL while
    it encodes); the default is the number of CPUs this process may use, at most 8.
    """

    def __init__(
        self,
        model_or_encoding: str | Encoding,
        *,
        cache_size: int = 1_000_000,
        threads: int | None = None,
    ) -> None:
        super().__init__(cache_size=cache_size)
        threads = optional_positive_int("threads", threads)
        if isinstance(model_or_encoding, str) and model_or_encoding:
            self.encoding: Encoding = encoding_for(model_or_encoding)
            self.name = f"tiktoken:{model_or_encoding}"
        elif is_tiktoken_encoding(model_or_encoding):
            self.encoding = model_or_encoding
            self.name = f"tiktoken:{model_or_encoding.name}"
        else:
            if not isinstance(model_or_encoding, str):
                import_tiktoken()  # a missing extra explains itself first
            raise TokenizerError(
                f"model_or_encoding={model_or_encoding!r}: expected a model or encoding "
                "name, the path of a .tiktoken file, or a tiktoken Encoding"
            )
        self.threads = threads if threads is not None else min(8, _cpus())
        self._encode = self.encoding.encode_ordinary

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text; a large batch is split into a few slices, one per task.

        One task per slice rather than per text (as ``encode_ordinary_batch`` does) keeps
        the thread pool's own overhead out of the count.
        """
        n = len(texts)
        threads = self.threads
        if threads < 2 or n < _PARALLEL_MIN:
            encode = self._encode
            return [len(encode(t)) for t in texts]
        items = texts if isinstance(texts, list) else list(texts)
        step = -(-n // (threads * _CHUNKS_PER_THREAD))
        slices = [items[i : i + step] for i in range(0, n, step)]
        with ThreadPoolExecutor(threads, thread_name_prefix="convomem-tiktoken") as pool:
            parts = list(pool.map(self._count_slice, slices))
        return list(chain.from_iterable(parts))

    def _count_slice(self, texts: list[str]) -> list[int]:
        encode = self._encode
        return [len(encode(t)) for t in texts]
