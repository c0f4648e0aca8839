"""Embedders: the protocol, and HashingEmbedder (no dependency, deterministic)."""

from __future__ import annotations

import math
import operator
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, runtime_checkable

from .. import _check
from ..errors import ConfigError, EmbeddingError, MissingDependency
from ..retry import CircuitBreaker, hinted_policy
from .openai_embeddings import OPENAI_URL, OpenAIEmbedder

Vector: TypeAlias = Sequence[float]
Backend: TypeAlias = Literal["auto", "numpy", "python"]

COSINE_TOLERANCE: Final = 1e-9
"""Two vectors are near-duplicates when ``cosine >= threshold - COSINE_TOLERANCE``.

The slack absorbs floating-point rounding (identical texts must match at threshold
1.0) and makes the numpy and pure-Python searches agree, since they add in different
orders.
"""


# -- protocols -------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """What convomem needs from an embedder: ``embed(text) -> vector``.

    Optional methods, used when present: ``embed_batch(texts) -> list[vector]`` (one
    call for many texts; a 2-D numpy array is taken as it is), ``embed_matrix(texts)``
    (the same vectors as one 2-D numpy array: ``EmbeddingCache`` prefers it when numpy
    is installed, no list per vector) and the async twins ``aembed`` / ``aembed_batch``,
    which the async APIs await natively. A model trained with a query side (E5's ``query:`` and
    ``passage:``) adds ``embed_query(text)`` (or ``aembed_query``): a recall search
    embeds its query with it and the messages it searches with ``embed``. ``name``, when
    present, names the model its vectors come from: a recall index records it and
    refuses an embedder of another name, whose vectors would not compare.
    """

    def embed(self, text: str) -> Vector:
        """The embedding of one text: a fixed-length sequence of finite numbers."""
        ...


@runtime_checkable
class AsyncEmbedder(Protocol):
    """An embedder with a native async API (``aembed_batch`` is used when present)."""

    async def aembed(self, text: str) -> Vector:
        """The embedding of one text."""
        ...


EmbedderLike: TypeAlias = (
    Embedder | AsyncEmbedder | Callable[[str], Vector] | Callable[[str], Awaitable[Vector]]
)


EMBEDDERS: Final = ("static", "hashing", "minilm", "e5")
"""The offline embedders a name stands for (beside ``"openai:MODEL"``)."""
EMBEDDING_BASE_URL_ENV: Final = "CONVOMEM_EMBEDDING_BASE_URL"
"""The embeddings endpoint's base URL when none is given (else api.openai.com)."""
EMBEDDING_API_KEY_ENV: Final = "CONVOMEM_EMBEDDING_API_KEY"
"""The embeddings endpoint's key when none is given (else ``OPENAI_API_KEY``)."""
EMBEDDING_TIMEOUT: Final = 30.0
"""Seconds an embeddings request may take by default."""


def embedder_named(
    name: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = EMBEDDING_TIMEOUT,
    option: str = "embedder",
) -> Any:
    """A new embedder of the kind the spec ``name`` names: ``"static"``
    (``StaticEmbedder``, the default: MiniLM distilled into a token table shipped in the
    package, numpy only), ``"hashing"`` (``HashingEmbedder``, no dependency),
    ``"minilm"`` (``MiniLMEmbedder``, extra ``minilm``), ``"e5"`` (``E5Embedder``, extra
    ``e5``) or ``"openai:MODEL"``
    (``OpenAIEmbedder``: any OpenAI-compatible ``/embeddings``, no dependency).
    ``MissingDependency`` names the extra to install; a bad spec is a ``ConfigError``
    naming ``option`` and the value.

    For ``openai:MODEL`` the endpoint is ``base_url``, else
    ``$CONVOMEM_EMBEDDING_BASE_URL``, else api.openai.com; the key ``api_key``, else
    ``$CONVOMEM_EMBEDDING_API_KEY``, else ``$OPENAI_API_KEY`` (never shown). Requests
    take at most ``timeout`` seconds, transient failures are retried by
    ``retry.hinted_policy()`` and a ``CircuitBreaker`` (5 failures in a row: no request
    for 30 s) keeps a dead endpoint from slowing recall: its searches answer "failed" at
    once (``GuardedRecall``), and the messages are still stored."""
    kind, model = _check.model_spec(option, name, EMBEDDERS)
    if kind == "openai":
        return _openai(option, model, base_url, api_key, timeout)
    if kind == "static":
        from .static import StaticEmbedder

        return StaticEmbedder()
    if kind == "minilm":
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if kind == "e5":
        from .e5 import E5Embedder

        return E5Embedder()
    return HashingEmbedder()


def _openai(
    option: str, model: str, base_url: str | None, api_key: str | None, timeout: float
) -> Any:
    timeout = _check.number("timeout", timeout, minimum=0.0, low_open=True)
    url = base_url if base_url is not None else os.environ.get(EMBEDDING_BASE_URL_ENV) or None
    if url is not None:
        _check.http_url("base_url" if base_url is not None else EMBEDDING_BASE_URL_ENV, url)
    key = api_key or os.environ.get(EMBEDDING_API_KEY_ENV) or os.environ.get("OPENAI_API_KEY")
    if key is None and url is None:
        raise ConfigError(
            f"{option}=openai:{model}: needs an API key (api_key=, ${EMBEDDING_API_KEY_ENV} "
            f"or $OPENAI_API_KEY), or the base URL (base_url=, ${EMBEDDING_BASE_URL_ENV}) "
            "of a server that needs none"
        )
    return OpenAIEmbedder(
        model,
        base_url=OPENAI_URL if url is None else url,
        api_key=key,
        timeout=timeout,
        retry=hinted_policy(max_delay=timeout),
        breaker=CircuitBreaker(),
    )


def query_side(embedder: object) -> EmbedderLike | None:
    """The function that embeds ``embedder``'s queries (``embed_query``, else
    ``aembed_query``), or None when it embeds a query like any text."""
    for name in ("embed_query", "aembed_query"):
        fn = getattr(embedder, name, None)
        if callable(fn):
            return cast(EmbedderLike, fn)
    return None


# -- HashingEmbedder -------------------------------------------------------------------

_MEMO_LIMIT: Final = 1 << 18
_M64: Final = (1 << 64) - 1
_FNV_OFFSET: Final = 0xCBF29CE484222325
_FNV_PRIME: Final = 0x100000001B3
_MIX1: Final = 0xFF51AFD7ED558CCD
_MIX2: Final = 0xC4CEB9FE1A85EC53
_BATCH_CHARS: Final = 1 << 20  # characters hashed per numpy pass (bounds its memory)
_LONG_TEXT: Final = 200  # a single text longer than this is hashed with numpy, if installed


def _fmix64(h: int) -> int:
    """MurmurHash3's 64-bit finalizer: spreads FNV's weak low bits over the word."""
    h ^= h >> 33
    h = (h * _MIX1) & _M64
    h ^= h >> 33
    h = (h * _MIX2) & _M64
    return h ^ (h >> 33)


class HashingEmbedder:
    """Character n-gram feature hashing: an offline, deterministic embedder.

    The text is whitespace-collapsed (and lowercased by default); every character
    n-gram with ``ngram[0] <= n <= ngram[1]`` is hashed (64-bit FNV-1a over its code
    points, offset by ``seed``, then MurmurHash3's finalizer: plain integer arithmetic,
    so the result is identical in every process, on every machine, with or without
    numpy) to a bucket and a sign; the signed counts are L2-normalized. A text shorter
    than the smallest n is one feature; an empty text is the zero vector. Near-identical
    texts share most n-grams, so their cosine is close to 1.

    ``embed_batch`` hashes a whole batch in a few vectorized passes when numpy is
    installed (``backend="auto"``); ``backend="python"`` forces the pure-Python path,
    which memoizes n-gram hashes. Both give bit-identical vectors.

    ``recall_keys``: what a ``RecallIndex`` embeds a message under by default (below).
    ``fusion_weight``: its cosines weigh a quarter of BM25's ranks in the hybrid fusion
    (n-gram overlap is weak evidence; chosen on the LongMem dev set, see bench/README.md).
    """

    fusion_weight: float = 0.25
    recall_keys: tuple[str, ...] = ("message",)
    """One key a message (``recall.keys``): at its fusion weight more keys moved the
    hybrid recall by 1-2.5 points on the LongMem sets but cost 2.5x the search and 4x
    the ingest (sentences, exchange) or 2.3x the ingest (facts: the extractor's rules
    run on every user message), bench/README.md."""

    def __init__(
        self,
        dim: int = 256,
        ngram: tuple[int, int] = (3, 5),
        *,
        lowercase: bool = True,
        seed: int = 0,
        backend: Backend = "auto",
    ) -> None:
        _check.integer("dim", dim, minimum=1, maximum=1 << 24)
        if (
            not isinstance(ngram, Sequence)
            or isinstance(ngram, str)
            or len(ngram) != 2
            or not all(map(_check.is_int, ngram))
            or not 1 <= ngram[0] <= ngram[1]
        ):
            raise ConfigError(
                f"ngram={ngram!r}: must be a pair of integers (lo, hi), 1 <= lo <= hi"
            )
        _check.flag("lowercase", lowercase)
        _check.integer("seed", seed, minimum=0, maximum=(1 << 64) - 1)
        self._np = _resolve_backend(backend, "HashingEmbedder")
        self.dim = dim
        self.ngram = (ngram[0], ngram[1])
        self.lowercase = lowercase
        self.seed = seed
        self.backend = backend
        self.name = f"hashing(dim={dim}, ngram={self.ngram}, lowercase={lowercase}, seed={seed})"
        self._offset = _FNV_OFFSET ^ _fmix64(seed)
        # n-gram -> 2 * bucket + sign bit; a pure function of the n-gram, so a cache.
        self._memo: dict[str, int] = {}

    def _prepare(self, text: str) -> str:
        if not isinstance(text, str):
            raise EmbeddingError(f"text={text!r}: must be a string, not {type(text).__name__}")
        text = " ".join(text.split())
        return text.lower() if self.lowercase else text

    def _code(self, gram: str) -> int:
        h = self._offset
        for ch in gram:
            h = ((h ^ ord(ch)) * _FNV_PRIME) & _M64
        h = _fmix64(h)
        return 2 * (((h >> 32) * self.dim) >> 32) + (h & 1)  # bucket, and the sign bit

    def _grams(self, text: str) -> list[str]:
        lo, hi = self.ngram
        size = len(text)
        if size < lo:
            return [text]
        grams: list[str] = []
        for n in range(lo, min(hi, size) + 1):
            grams += [text[i : i + n] for i in range(size - n + 1)]
        return grams

    def _embed_python(self, text: str) -> list[float]:
        dim = self.dim
        if not text:
            return [0.0] * dim
        grams = self._grams(text)
        memo = self._memo
        codes = list(map(memo.get, grams))  # the per-gram work stays in C when memoized
        if None in codes:
            for i, code in enumerate(codes):
                if code is None:
                    gram = grams[i]
                    code = memo.get(gram)
                    if code is None:
                        code = self._code(gram)
                        if len(memo) >= _MEMO_LIMIT:
                            memo.clear()
                        memo[gram] = code
                    codes[i] = code
        get = Counter(codes).get
        vec = [get(c, 0) - get(c + 1, 0) for c in range(0, 2 * dim, 2)]
        norm = math.sqrt(sum(map(operator.mul, vec, vec)))
        if norm == 0.0:
            return [0.0] * dim
        return [x / norm for x in vec]

    def _embed_numpy(self, texts: list[str]) -> Any:
        """The same vectors as ``_embed_python`` (as a matrix), in a few array passes."""
        np = self._np
        dim2 = 2 * self.dim
        lo, hi = self.ngram
        lens = np.array([len(t) for t in texts], dtype=np.int64)
        total = int(lens.sum())
        padded = np.zeros(total + hi, dtype=np.uint64)
        joined = "".join(texts).encode("utf-32-le", "surrogatepass")
        padded[:total] = np.frombuffer(joined, dtype="<u4")
        base = np.repeat(np.arange(len(texts), dtype=np.int64) * dim2, lens)  # text's first bin
        starts = np.cumsum(lens) - lens
        room = np.repeat(starts + lens, lens) - np.arange(total)  # characters left in the text
        whole = np.repeat(lens, lens)
        first = np.zeros(total, dtype=bool)
        first[starts[lens > 0]] = True
        parts = []
        h = np.full(total, self._offset, dtype=np.uint64)
        prime, mix1, mix2 = np.uint64(_FNV_PRIME), np.uint64(_MIX1), np.uint64(_MIX2)
        s32, one = np.uint64(32), np.uint64(1)
        for k in range(hi):
            n = k + 1
            h = (h ^ padded[k : k + total]) * prime
            # n-grams of length n that fit; a text shorter than lo is one gram, from its start
            sel = room >= n if n >= lo else first & (whole == n)
            g = h[sel]
            g ^= g >> np.uint64(33)
            g *= mix1
            g ^= g >> np.uint64(33)
            g *= mix2
            g ^= g >> np.uint64(33)
            code = (((g >> s32) * np.uint64(self.dim)) >> s32) * np.uint64(2) + (g & one)
            parts.append(base[sel] + code.astype(np.int64))
        counts = np.bincount(np.concatenate(parts), minlength=len(texts) * dim2)
        mat = counts.reshape(len(texts), dim2)
        vec = mat[:, 0::2] - mat[:, 1::2]
        norm = np.sqrt((vec * vec).sum(axis=1).astype(np.float64))
        norm[norm == 0.0] = np.inf  # a zero vector stays zero
        return vec / norm[:, None]

    def embed_matrix(self, texts: Sequence[str]) -> Any:
        """``embed_batch`` as one float64 numpy matrix (a row a text): what
        ``EmbeddingCache`` asks for, without a list per vector. Vectorized with the numpy
        backend; with ``backend="python"`` the rows are hashed in Python. Needs numpy."""
        np = self._np
        if np is None:
            np = _numpy()
            if np is None:
                raise MissingDependency("HashingEmbedder.embed_matrix", "numpy", "numpy")
            rows = [self._embed_python(self._prepare(t)) for t in texts]
            return np.array(rows, dtype=np.float64).reshape(len(rows), self.dim)
        prepared = [self._prepare(t) for t in texts]
        blocks = []
        group: list[str] = []
        chars = 0
        for t in prepared:
            group.append(t)
            chars += len(t)
            if chars >= _BATCH_CHARS or len(group) >= 4096:
                blocks.append(self._embed_numpy(group))
                group, chars = [], 0
        if group or not blocks:
            blocks.append(self._embed_numpy(group))
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)

    def embed(self, text: str) -> list[float]:
        """The L2-normalized hashed n-gram vector of ``text`` (``dim`` floats)."""
        text = self._prepare(text)
        if self._np is not None and len(text) > _LONG_TEXT:
            row: list[float] = self._embed_numpy([text])[0].tolist()
            return row
        return self._embed_python(text)

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` of each text, in order (vectorized with numpy when available)."""
        if self._np is None:
            return [self._embed_python(self._prepare(t)) for t in texts]
        out: list[list[float]] = self.embed_matrix(texts).tolist()
        return out

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim}, ngram={self.ngram}, seed={self.seed})"


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _resolve_backend(backend: object, what: str) -> Any:
    """The numpy module for ``backend`` ("auto": if installed), or None for pure Python."""
    backend = _check.one_of("backend", backend, ("auto", "numpy", "python"))
    if backend == "python":
        return None
    np = _numpy()
    if np is None and backend == "numpy":
        raise MissingDependency(f"{what}(backend='numpy')", "numpy", "numpy")
    return np
