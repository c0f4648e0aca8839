"""Embeddings for semantic deduplication: a protocol, a built-in embedder, a cache, a search.

- ``Embedder``: anything with ``embed(text)``; ``embed_batch``, ``aembed`` and
  ``aembed_batch`` are used when present (a plain function ``text -> vector`` works too).
- ``HashingEmbedder``: dependency-free character n-gram feature hashing, so
  deduplication works offline and deterministically out of the box.
- ``EmbeddingCache``: embeds each distinct text once; a repeated call embeds only new
  texts (``embedded`` counts the real work). Sync and async twins share all logic.
- ``find_near_duplicates`` / ``NearDuplicateFinder``: which messages repeat an earlier
  surviving one (cosine >= threshold), exact and vectorized with numpy when installed
  (extra ``numpy``), in pure Python otherwise, with identical results.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import numbers
import operator
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, runtime_checkable

from .errors import ConfigError, ConvomemError, InvalidMessage, MissingDependency
from .messages import Message

Vector: TypeAlias = Sequence[float]
Backend: TypeAlias = Literal["auto", "numpy", "python"]

COSINE_TOLERANCE: Final = 1e-9
"""Two vectors are near-duplicates when ``cosine >= threshold - COSINE_TOLERANCE``.

The slack absorbs floating-point rounding (identical texts must match at threshold
1.0) and makes the numpy and pure-Python searches agree, since they add in different
orders.
"""


class EmbeddingError(ConvomemError, ValueError):
    """An embedder returned something that is not a usable vector, or got bad input."""


# -- protocols -------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """What convomem needs from an embedder: ``embed(text) -> vector``.

    Optional methods, used when present: ``embed_batch(texts) -> list[vector]`` (one
    call for many texts) and the async twins ``aembed`` / ``aembed_batch``, which the
    async APIs await natively.
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


# -- HashingEmbedder -------------------------------------------------------------------

_MEMO_LIMIT: Final = 1 << 18
_M64: Final = (1 << 64) - 1
_FNV_OFFSET: Final = 0xCBF29CE484222325
_FNV_PRIME: Final = 0x100000001B3
_MIX1: Final = 0xFF51AFD7ED558CCD
_MIX2: Final = 0xC4CEB9FE1A85EC53
_BATCH_CHARS: Final = 1 << 20  # characters hashed per numpy pass (bounds its memory)
_LONG_TEXT: Final = 200  # a single text longer than this is hashed with numpy, if installed


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    """

    def __init__(
        self,
        dim: int = 256,
        ngram: tuple[int, int] = (3, 5),
        *,
        lowercase: bool = True,
        seed: int = 0,
        backend: Backend = "auto",
    ) -> None:
        if not _is_int(dim) or not 1 <= dim <= 1 << 24:
            raise ConfigError(f"dim={dim!r}: must be a positive integer (at most 2**24)")
        if (
            not isinstance(ngram, Sequence)
            or isinstance(ngram, str)
            or len(ngram) != 2
            or not all(_is_int(n) for n in ngram)
            or not 1 <= ngram[0] <= ngram[1]
        ):
            raise ConfigError(
                f"ngram={ngram!r}: must be a pair of integers (lo, hi), 1 <= lo <= hi"
            )
        if not isinstance(lowercase, bool):
            raise ConfigError(f"lowercase={lowercase!r}: must be a bool")
        if not _is_int(seed) or not 0 <= seed < 1 << 64:
            raise ConfigError(f"seed={seed!r}: must be an integer in [0, 2**64)")
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

    def _embed_matrix(self, texts: Sequence[str]) -> Any:
        """``embed_batch`` as a float64 matrix (numpy only): EmbeddingCache's fast path."""
        prepared = [self._prepare(t) for t in texts]
        np = self._np
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
        out: list[list[float]] = self._embed_matrix(texts).tolist()
        return out

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim}, ngram={self.ngram}, seed={self.seed})"


# -- EmbeddingCache --------------------------------------------------------------------

_Frozen: TypeAlias = "memoryview[float]"
# texts -> outputs: a list of vectors, or a 2-D numpy array (checked by _commit)
_SyncFn: TypeAlias = Callable[[list[str]], Any]
_AsyncFn: TypeAlias = Callable[[list[str]], Awaitable[Any]]


def _method(embedder: object, name: str) -> Callable[..., Any] | None:
    fn = getattr(embedder, name, None)
    return fn if callable(fn) else None


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


def _refuse_awaitable(result: Any, where: str) -> Any:
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise EmbeddingError(
            f"{where} returned an awaitable; use the async API (avectors / pack_async)"
        )
    return result


def _sync_caller(embedder: object) -> _SyncFn | None:
    """The embedder's best synchronous texts -> outputs function, if it has one."""
    if type(embedder) is HashingEmbedder and embedder._np is not None:
        return embedder._embed_matrix  # the same vectors, without a detour through lists
    batch = _method(embedder, "embed_batch")
    if batch is not None and not _is_async_callable(batch):
        fn_b = batch
        return lambda texts: _refuse_awaitable(fn_b(texts), "embed_batch")
    one = _method(embedder, "embed")
    if one is None and not any(
        _method(embedder, n) for n in ("embed_batch", "aembed", "aembed_batch")
    ):
        one = cast(Callable[..., Any], embedder) if callable(embedder) else None
    if one is not None and not _is_async_callable(one):
        fn_1 = one
        return lambda texts: [_refuse_awaitable(fn_1(t), "embed") for t in texts]
    return None


def _async_caller(embedder: object) -> _AsyncFn | None:
    """The embedder's best native async texts -> outputs function, if it has one."""
    candidates: list[tuple[str, bool]] = [
        ("aembed_batch", True),
        ("embed_batch", True),
        ("aembed", False),
        ("embed", False),
    ]
    for name, batched in candidates:
        fn = _method(embedder, name)
        if fn is None or (name.startswith("embed") and not _is_async_callable(fn)):
            continue
        return _make_async(fn, batched)
    if callable(embedder) and _is_async_callable(cast(Callable[..., Any], embedder)):
        return _make_async(cast(Callable[..., Any], embedder), False)
    return None


def _make_async(fn: Callable[..., Any], batched: bool) -> _AsyncFn:
    async def run(value: Any) -> Any:
        result = fn(value)
        return await result if inspect.isawaitable(result) else result

    if batched:
        return run

    async def call_each(texts: list[str]) -> list[Any]:
        return [await run(t) for t in texts]

    return call_each


def _as_list(outputs: Any, first_id: str) -> list[Any]:
    if isinstance(outputs, str | bytes | Mapping) or not isinstance(outputs, Iterable):
        raise EmbeddingError(
            f"the embedder returned {_short(outputs)} for a batch starting at message "
            f"id={first_id!r}: expected a list of vectors"
        )
    return list(outputs)


def _as_vector(output: Any) -> array[float]:
    """``output`` as float64 numbers, or ValueError saying what is wrong with it."""
    if isinstance(output, str | bytes | bytearray | Mapping) or not isinstance(output, Iterable):
        raise ValueError(f"expected a sequence of numbers, got {type(output).__name__}")
    try:
        values = array("d", output)
    except (TypeError, ValueError, OverflowError):
        bad = next((x for x in output if not isinstance(x, numbers.Real)), None)
        what = "a number too large for a float" if bad is None else repr(bad)
        raise ValueError(f"expected numbers, got {what}") from None
    if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
        bad_value = next(x for x in values if not math.isfinite(x))
        raise ValueError(f"contains the non-finite value {bad_value!r}")
    return values


def _freeze(values: array[float]) -> memoryview[float]:
    # A read-only float64 view of private bytes: immutable, 8 bytes a number, and
    # numpy reads a batch of them with one join (see _row_key).
    return memoryview(values.tobytes()).cast("d")


class EmbeddingCache:
    """Embeds each distinct message text once and remembers it.

    ``vectors(messages)`` embeds only the texts it has not seen (each distinct text
    once per call, with ``embed_batch`` in batches of ``batch_size`` when the embedder
    has it) and returns one vector per message; ``await avectors(messages)`` is the
    async twin (async embedders are awaited, sync ones run in a worker thread so the
    event loop is not blocked). ``embedded`` counts the texts actually embedded.

    The key is the message's text (``Message.text()``), so messages rebuilt from the
    same dicts every turn, or equal texts in different messages, are embedded once.
    A message whose text is blank (an image-only message, a bare tool call) is not
    embedded: its vector is the zero vector, which never duplicates anything. Vectors
    are read-only float64 ``memoryview`` objects (``list(v)`` or ``v.tolist()`` copies
    one); the cache keeps at most ``max_size`` texts, dropping the oldest first.
    """

    def __init__(
        self, embedder: EmbedderLike, *, max_size: int = 1_000_000, batch_size: int = 256
    ) -> None:
        if not _is_int(max_size) or max_size < 0:
            raise ConfigError(f"max_size={max_size!r}: must be a non-negative integer")
        if not _is_int(batch_size) or batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r}: must be a positive integer")
        sync = _sync_caller(embedder)
        async_ = _async_caller(embedder)
        if sync is None and async_ is None:
            raise ConfigError(
                f"embedder={embedder!r}: must have embed(text) (or embed_batch, aembed, "
                "aembed_batch), or be a function text -> vector"
            )
        self.embedder = embedder
        self.max_size = max_size
        self.batch_size = batch_size
        self.dim: int | None = None
        self.embedded = 0
        self._sync = sync
        self._async = async_
        self._cache: dict[str, _Frozen] = {}
        self._zeros: dict[int, _Frozen] = {}

    def __len__(self) -> int:
        return len(self._cache)

    def clear(self) -> None:
        """Forget every cached vector (``dim`` and ``embedded`` are kept)."""
        self._cache.clear()

    # -- shared logic ----------------------------------------------------------------

    def _plan(
        self, messages: Sequence[Message], eligible: Sequence[bool] | None
    ) -> tuple[list[str | None], list[list[tuple[str, str]]]]:
        """Each message's text (None: not embedded) and the batches of (text, id) to embed."""
        if eligible is not None and len(eligible) != len(messages):
            raise ConfigError(
                f"eligible={_short(eligible)}: has {len(eligible)} flags for "
                f"{len(messages)} messages"
            )
        if set(map(type, messages)) - {Message}:  # C-level check first: the common case
            for i, m in enumerate(messages):
                if not isinstance(m, Message):
                    raise InvalidMessage(f"messages[{i}]", m, "must be a Message")
        texts: list[str | None] = [m.text() for m in messages]
        if eligible is not None:
            texts = [t if e else None for t, e in zip(texts, eligible, strict=True)]
        cache = self._cache
        misses: dict[str, str] = {}
        for i in [i for i, t in enumerate(texts) if t is not None and t not in cache]:
            t = texts[i]
            assert t is not None
            if not t or t.isspace():
                texts[i] = None  # nothing to embed
            elif t not in misses:
                misses[t] = messages[i].id
        items = list(misses.items())
        size = self.batch_size
        return texts, [items[i : i + size] for i in range(0, len(items), size)]

    def _check_outputs(self, batch: list[tuple[str, str]], outputs: Any) -> list[_Frozen]:
        """The batch's outputs as frozen vectors, or EmbeddingError naming the message."""
        dim = self.dim
        np = _numpy()
        if np is not None and isinstance(outputs, np.ndarray) and outputs.ndim == 2:
            if outputs.dtype.kind not in "biuf":
                raise EmbeddingError(
                    f"the embedder returned a {outputs.dtype} matrix for a batch starting at "
                    f"message id={batch[0][1]!r}: expected numbers"
                )
            if outputs.shape[0] != len(batch):
                raise EmbeddingError(
                    f"the embedder returned {outputs.shape[0]} vectors for {len(batch)} texts "
                    f"(batch starting at message id={batch[0][1]!r})"
                )
            width = outputs.shape[1]
            if (dim is None and width == 0) or (dim is not None and width != dim):
                raise EmbeddingError(
                    f"the embedding of message id={batch[0][1]!r} has {width} numbers"
                    + ("" if dim is None else f"; earlier embeddings have {dim}")
                )
            mat = np.ascontiguousarray(outputs, dtype=np.float64)
            finite = np.isfinite(mat).all(axis=1)
            if not finite.all():
                mid = batch[int(np.argmin(finite))][1]
                raise EmbeddingError(
                    f"the embedding of message id={mid!r} is unusable: contains a non-finite value"
                )
            return [memoryview(row.tobytes()).cast("d") for row in mat]
        rows = _as_list(outputs, batch[0][1])
        if len(rows) != len(batch):
            raise EmbeddingError(
                f"the embedder returned {len(rows)} vectors for {len(batch)} texts "
                f"(batch starting at message id={batch[0][1]!r})"
            )
        checked: list[_Frozen] = []
        for (_, mid), out in zip(batch, rows, strict=True):
            try:
                values = _as_vector(out)
            except ValueError as exc:
                raise EmbeddingError(
                    f"the embedding of message id={mid!r} is unusable: {exc}"
                ) from None
            if dim is None:
                if not values:
                    raise EmbeddingError(f"the embedding of message id={mid!r} is empty")
                dim = len(values)
            elif len(values) != dim:
                raise EmbeddingError(
                    f"the embedding of message id={mid!r} has {len(values)} numbers; "
                    f"earlier embeddings have {dim}"
                )
            checked.append(_freeze(values))
        return checked

    def _commit(
        self, batch: list[tuple[str, str]], outputs: Any, fresh: dict[str, _Frozen]
    ) -> None:
        """Check a batch's outputs; store them only if all of them are usable vectors."""
        checked = self._check_outputs(batch, outputs)
        if self.dim is None:
            self.dim = len(checked[0])
        self.embedded += len(batch)
        cache, limit = self._cache, self.max_size
        for (text, _), vec in zip(batch, checked, strict=True):
            fresh[text] = vec
            if limit:
                if len(cache) >= limit:
                    del cache[next(iter(cache))]  # evict the oldest entry
                cache[text] = vec

    def _assemble(self, texts: list[str | None], fresh: dict[str, _Frozen]) -> list[Vector]:
        dim = self.dim or 0
        zero = self._zeros.get(dim)
        if zero is None:
            zero = self._zeros[dim] = _freeze(array("d", bytes(8 * dim)))
        out: list[Vector | None] = list(map(self._cache.get, texts))  # type: ignore[arg-type]
        for i in [i for i, vec in enumerate(out) if vec is None]:  # identity tests only
            t = texts[i]
            out[i] = zero if t is None else fresh[t]  # blank, or evicted meanwhile
        return cast(list[Vector], out)

    # -- sync and async faces --------------------------------------------------------

    def vectors(
        self, messages: Sequence[Message], eligible: Sequence[bool] | None = None
    ) -> list[Vector]:
        """One vector per message, embedding only texts not seen before.

        With ``eligible``, messages flagged False are not embedded (their vector is
        the zero vector). An async-only embedder is run with ``asyncio.run``; inside a
        running event loop that is impossible and a ``RuntimeError`` says to use
        ``avectors``.
        """
        if self._sync is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(self.avectors(messages, eligible))
            raise RuntimeError(
                f"embedder {self.embedder!r} is async-only and an event loop is running: "
                "use `await cache.avectors(...)` (or `await packer.pack_async(...)`)"
            )
        texts, batches = self._plan(messages, eligible)
        fresh: dict[str, _Frozen] = {}
        for batch in batches:
            self._commit(batch, self._sync([t for t, _ in batch]), fresh)
        return self._assemble(texts, fresh)

    async def avectors(
        self, messages: Sequence[Message], eligible: Sequence[bool] | None = None
    ) -> list[Vector]:
        """The async twin of ``vectors``: awaits async embedders, threads sync ones."""
        texts, batches = self._plan(messages, eligible)
        fresh: dict[str, _Frozen] = {}
        for batch in batches:
            chunk = [t for t, _ in batch]
            if self._async is not None:
                outputs = await self._async(chunk)
            else:
                assert self._sync is not None
                outputs = await asyncio.to_thread(self._sync, chunk)
            self._commit(batch, outputs, fresh)
        return self._assemble(texts, fresh)

    def vector(self, message: Message) -> Vector:
        """The vector of one message (see ``vectors``)."""
        return self.vectors([message])[0]

    async def avector(self, message: Message) -> Vector:
        """The async twin of ``vector``."""
        return (await self.avectors([message]))[0]

    def __repr__(self) -> str:
        return f"<EmbeddingCache {self.embedder!r}: {len(self._cache)} texts, dim={self.dim}>"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- near-duplicate search -------------------------------------------------------------

_COL_CELLS: Final = 1 << 24  # similarity cells computed at once (64 MB of float32)


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _resolve_backend(backend: str, what: str) -> Any:
    """The numpy module for ``backend`` ("auto": if installed), or None for pure Python."""
    if backend not in ("auto", "numpy", "python"):
        raise ConfigError(f"backend={backend!r}: must be 'auto', 'numpy' or 'python'")
    if backend == "python":
        return None
    np = _numpy()
    if np is None and backend == "numpy":
        raise MissingDependency(f"{what}(backend='numpy')", "numpy", "numpy")
    return np


def _check_options(threshold: float, backend: str, block_size: int) -> Any:
    """Validate the search options; return the numpy module to use, or None."""
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, numbers.Real)
        or not 0 < threshold <= 1
    ):
        raise ConfigError(f"threshold={threshold!r}: must be a number in (0, 1]")
    if not _is_int(block_size) or block_size < 1:
        raise ConfigError(f"block_size={block_size!r}: must be a positive integer")
    return _resolve_backend(backend, "find_near_duplicates")


def _row_key(v: Any) -> bytes:
    """The float64 bytes of one vector (ValueError if it is not a sequence of numbers)."""
    if type(v) is memoryview and v.format == "d" and v.ndim == 1:
        obj = v.obj
        if type(obj) is bytes and len(obj) == v.nbytes and v.c_contiguous:
            return obj  # a vector from EmbeddingCache: no copy
        return v.tobytes()
    return _as_vector(v).tobytes()


_UNTRUSTED: Final = object()  # never identical to a vector


def _row_keys(
    np: Any,
    vectors: Any,
    flags: list[bool],
    prev: tuple[list[Any], list[bytes | None], list[bool]],
) -> tuple[list[bytes | None], list[Any], int | None]:
    """Each eligible vector's float64 bytes (None for the others) and its identity tag.

    A tag is the vector object itself when it is immutable (a bytes-backed float64
    memoryview, as EmbeddingCache returns) or ineligible, else a sentinel. ``prev``
    holds the previous call's tags, keys and flags: an unchanged leading run of identical
    objects is recognised with C-level identity tests and its keys are reused. Also
    returns the vectors' common length (None without eligible vectors).
    """
    n = len(flags)
    if (
        np is not None
        and isinstance(vectors, np.ndarray)
        and vectors.ndim == 2
        and vectors.dtype.kind in "biuf"
    ):
        mat = np.ascontiguousarray(vectors, dtype=np.float64)
        keys: list[bytes | None] = [mat[i].tobytes() if f else None for i, f in enumerate(flags)]
        return keys, [_UNTRUSTED] * n, mat.shape[1] if any(flags) else None
    prev_tags, prev_keys, prev_flags = prev
    same = list(map(operator.is_, vectors, prev_tags))  # stops at the shorter list
    start = same.index(False) if False in same else len(same)
    if flags[:start] != prev_flags[:start]:
        start = next(i for i in range(start) if flags[i] != prev_flags[i])
    keys = prev_keys[:start] + [None] * (n - start)
    tags = prev_tags[:start] + [_UNTRUSTED] * (n - start)
    dim: int | None = None
    first = -1
    for i in range(start):
        key = keys[i]
        if key is not None:
            dim, first = len(key) // 8, i
            break
    for i in range(start, n):
        v = vectors[i]
        if not flags[i]:
            tags[i] = v
            continue
        try:
            key = _row_key(v)
        except ValueError as exc:
            raise EmbeddingError(f"vectors[{i}]: {exc}") from None
        if type(v) is memoryview and v.obj is key:
            tags[i] = v
        if dim is None:
            dim, first = len(key) // 8, i
        elif len(key) != 8 * dim:
            raise EmbeddingError(
                f"vectors[{i}]: has {len(key) // 8} numbers; vectors[{first}] has {dim}"
            )
        keys[i] = key
    return keys, tags, dim


def _normalize_python(row: Sequence[float]) -> tuple[float, ...] | None:
    # Scale by the largest magnitude first: no overflow or underflow, and a vector is
    # zero exactly when all its numbers are (numpy does the same arithmetic).
    top = max(map(abs, row), default=0.0)
    if top == 0.0:
        return None
    scaled = [x / top for x in row]
    norm = math.sqrt(sum(x * x for x in scaled))
    return tuple(x / norm for x in scaled)


def _normalize_numpy(np: Any, mat: Any) -> tuple[Any, Any]:
    """(mask of nonzero rows, their unit vectors), same arithmetic as the Python path."""
    top = np.abs(mat).max(axis=1) if mat.shape[1] else np.zeros(mat.shape[0])
    nonzero = top > 0
    scaled = mat[nonzero] / top[nonzero, None]
    norms = np.sqrt(np.einsum("ij,ij->i", scaled, scaled))
    return nonzero, scaled / norms[:, None]


class _NumpyState:
    """Unit vectors of the candidates seen so far and which of them survive."""

    def __init__(self, np: Any, dim: int) -> None:
        self.np = np
        self.dim = dim
        self.size = 0  # candidates resolved
        self.x64 = np.empty((0, dim))
        self.x32 = np.empty((0, dim), dtype=np.float32)
        self.dup_of = np.empty(0, dtype=np.intp)  # candidate -> candidate it duplicates, or -1
        self.s32 = np.empty((0, dim), dtype=np.float32)  # survivors' rows, in order
        self.surv = np.empty(0, dtype=np.intp)  # survivors' candidate numbers
        self.k = 0

    def truncate(self, size: int) -> None:
        """Forget candidates from ``size`` on (the survivors among them too)."""
        self.size = size
        self.k = int(self.np.searchsorted(self.surv[: self.k], size))

    def _grow(self, name: str, need: int) -> Any:
        arr = getattr(self, name)
        if arr.shape[0] < need:
            new = self.np.empty((max(need, 2 * arr.shape[0]), *arr.shape[1:]), dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            setattr(self, name, new)
            arr = new
        return arr

    def extend(self, unit: Any, threshold: float, block: int) -> None:
        """Resolve new candidates (rows of ``unit``) against the survivors, in order."""
        np = self.np
        start, n = self.size, self.size + unit.shape[0]
        x64, x32 = self._grow("x64", n), self._grow("x32", n)
        dup_of = self._grow("dup_of", n)
        s32, surv = self._grow("s32", n), self._grow("surv", n)
        x64[start:n] = unit
        x32[start:n] = unit
        dup_of[start:n] = -1
        thr = threshold - COSINE_TOLERANCE
        # float32 products find candidates; float64 decides. A float32 dot product of
        # unit vectors is within (dim + 2) * 2**-24 of the exact one: twice that is safe.
        lo = thr - (self.dim + 4) * 2.0**-23
        for b0 in range(start, n, block):
            rows = np.arange(b0, min(b0 + block, n))
            # 1. against the survivors of earlier blocks (earliest match wins)
            step = max(block, _COL_CELLS // max(rows.size, 1))
            for c0 in range(0, self.k, step):
                if not rows.size:
                    break
                c1 = min(self.k, c0 + step)
                cand = (x32[rows] @ s32[c0:c1].T) >= lo
                ri = np.flatnonzero(cand.any(axis=1))
                if not ri.size:
                    continue
                ci = np.flatnonzero(cand[ri].any(axis=0))
                cols = surv[c0 + ci]
                hit = (x64[rows[ri]] @ x64[cols].T) >= thr
                found = hit.any(axis=1)
                if found.any():
                    dup_of[rows[ri[found]]] = cols[hit[found].argmax(axis=1)]
                    rows = np.delete(rows, ri[found])
            # 2. within the block, in order, on the small block matrix
            if rows.size > 1:
                cand = np.tril((x32[rows] @ x32[rows].T) >= lo, -1)
                ri = np.flatnonzero(cand.any(axis=1))
                if ri.size:
                    ci = np.flatnonzero(cand[ri].any(axis=0))
                    hit = ((x64[rows[ri]] @ x64[rows[ci]].T) >= thr) & (ci < ri[:, None])
                    alive = np.ones(rows.size, dtype=bool)
                    for a, r in enumerate(ri.tolist()):
                        earlier = ci[hit[a]]
                        if earlier.size:
                            live = earlier[alive[earlier]]
                            if live.size:
                                alive[r] = False
                                dup_of[rows[r]] = rows[live[0]]
                    rows = rows[alive]
            m = rows.size
            s32[self.k : self.k + m] = x32[rows]
            surv[self.k : self.k + m] = rows
            self.k += m
        self.size = n


def _sum_of_products(u: Sequence[float], v: Sequence[float]) -> float:
    total: float = sum(map(operator.mul, u, v))
    return total


_dot: Callable[[Sequence[float], Sequence[float]], float] = getattr(
    math, "sumprod", _sum_of_products
)  # math.sumprod (Python 3.12+) is about 4x faster


class _PythonState:
    """The pure-Python twin of ``_NumpyState``."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.dup_of: list[int] = []
        self.survivors: list[tuple[int, tuple[float, ...]]] = []

    @property
    def size(self) -> int:
        return len(self.dup_of)

    def truncate(self, size: int) -> None:
        del self.dup_of[size:]
        keep = bisect_left(self.survivors, size, key=operator.itemgetter(0))
        del self.survivors[keep:]

    def extend(self, unit: list[tuple[float, ...]], threshold: float) -> None:
        thr = threshold - COSINE_TOLERANCE
        dot = _dot
        survivors = self.survivors
        for u in unit:
            c = len(self.dup_of)
            target = -1
            for j, v in survivors:
                if dot(u, v) >= thr:
                    target = j
                    break
            self.dup_of.append(target)
            if target < 0:
                survivors.append((c, u))


class NearDuplicateFinder:
    """``find_near_duplicates`` that reuses its previous call's work.

    When a call's input starts like the previous one (equal vectors with the same
    eligibility), only the vectors from the first difference on are compared, against
    the survivors before it: an agent loop that appends a message and searches again
    pays O(survivors) per new message instead of a quadratic search. A vector equal to
    an earlier candidate is resolved like it without any comparison. ``computed``
    counts the candidate vectors resolved and ``compared`` those among them that
    needed a similarity search: deterministic measures of work.
    """

    def __init__(
        self, threshold: float, *, backend: Backend = "auto", block_size: int = 1024
    ) -> None:
        self._np = _check_options(threshold, backend, block_size)
        self.threshold = float(threshold)
        self.backend = backend
        self.block_size = block_size
        self.computed = 0
        self.compared = 0
        self.reset()

    def reset(self) -> None:
        """Forget the previous call."""
        self._keys: list[bytes | None] = []
        self._tags: list[Any] = []  # the last call's vectors where identity proves equality
        self._flags: list[bool] = []
        self._positions: list[int] = []  # candidate -> index in the input
        # candidate -> its row in the backend state, or ~c: "an exact copy of candidate c"
        self._links: list[int] = []
        self._rows: list[int] = []  # backend row -> candidate
        self._first: dict[bytes, int] = {}  # a row's bytes -> the candidate holding it
        self._first_order: list[bytes] = []  # keys of _first, by candidate
        self._target: list[int] = []  # candidate -> the candidate it duplicates, or -1
        self._result: dict[int, int] = {}  # the answer, in increasing order
        self._state: _NumpyState | _PythonState | None = None

    def _common_prefix(self, keys: list[bytes | None]) -> int:
        same = list(map(operator.eq, self._keys, keys))  # C-level; None == None
        return same.index(False) if False in same else len(same)

    def find(self, vectors: Sequence[Vector] | Any, eligible: Sequence[bool]) -> dict[int, int]:
        """Map each near-duplicate's index to the earlier surviving index it repeats."""
        np = self._np
        n = len(vectors)
        if len(eligible) != n:
            raise ConfigError(
                f"eligible={_short(eligible)}: has {len(eligible)} flags for {n} vectors"
            )
        flags = [bool(e) for e in eligible]
        keys, tags, dim = _row_keys(np, vectors, flags, (self._tags, self._keys, self._flags))
        state = self._state
        fresh = state is None or dim is None or state.dim != dim
        keep = 0 if fresh else self._common_prefix(keys)
        cand_keep = bisect_left(self._positions, keep)
        first = self._first
        # Which new rows are exact copies of an earlier candidate or of each other.
        new_pos = [i for i in range(keep, n) if flags[i]]
        local: dict[bytes, int] = {}  # bytes -> number among the new distinct rows
        refs: list[int] = []  # per new row: distinct row u, or ~c for old candidate c
        distinct: list[int] = []  # new distinct rows' positions
        for p in new_pos:
            key = cast(bytes, keys[p])
            c = None if fresh else first.get(key)
            if c is not None and c < cand_keep:
                refs.append(~c)
                continue
            u = local.get(key)
            if u is None:
                u = local[key] = len(distinct)
                distinct.append(p)
            refs.append(u)
        # Validate and normalize the distinct new rows before touching any state.
        units: Any
        if np is not None:
            count = len(distinct)
            mat = np.frombuffer(b"".join(cast(bytes, keys[i]) for i in distinct), np.float64)
            mat = mat.reshape(count, len(mat) // count if count else 0)
            finite = np.isfinite(mat).all(axis=1)
            bad = None if finite.all() else distinct[int(np.argmin(finite))]
            if bad is None:
                nonzero_arr, units = _normalize_numpy(np, mat)
                nonzero: list[bool] = nonzero_arr.tolist()
        else:
            rows = [array("d", cast(bytes, keys[i])) for i in distinct]
            finite_rows = [math.isfinite(sum(r)) or all(map(math.isfinite, r)) for r in rows]
            bad = None if all(finite_rows) else distinct[finite_rows.index(False)]
            if bad is None:
                normalized = [_normalize_python(r) for r in rows]
                nonzero = [u is not None for u in normalized]
                units = [u for u in normalized if u is not None]
        if bad is not None:
            raise EmbeddingError(f"vectors[{bad}]: contains a non-finite value")
        # Commit.
        if fresh:
            self.reset()
            cand_keep = 0
            state = None if dim is None else _NumpyState(np, dim) if np else _PythonState(dim)
            self._state = state
        positions, links, backend_rows = self._positions, self._links, self._rows
        first, order = self._first, self._first_order
        del positions[cand_keep:], links[cand_keep:]
        del backend_rows[bisect_left(backend_rows, cand_keep) :]
        while order and first[order[-1]] >= cand_keep:
            del first[order.pop()]
        cand_of: list[int] = [-1] * len(distinct)  # distinct new row -> its candidate
        for p, ref in zip(new_pos, refs, strict=True):
            if ref < 0:
                link = ref
            elif not nonzero[ref]:
                continue  # a zero vector is not a candidate
            elif cand_of[ref] >= 0:
                link = ~cand_of[ref]
            else:
                cand_of[ref] = len(positions)
                link = len(backend_rows)
                backend_rows.append(len(positions))
                key = cast(bytes, keys[p])
                first[key] = len(positions)
                order.append(key)
            positions.append(p)
            links.append(link)
        self.computed += len(positions) - cand_keep
        self._keys, self._tags, self._flags = keys, tags, flags
        target, result = self._target, self._result
        del target[cand_keep:]
        while result and next(reversed(result)) >= keep:
            result.popitem()
        if state is None:
            return {}
        rows_keep = bisect_left(backend_rows, cand_keep)
        state.truncate(rows_keep)
        self.compared += len(units)
        if len(units):
            if isinstance(state, _NumpyState):
                state.extend(units, self.threshold, self.block_size)
            else:
                state.extend(units, self.threshold)
        new_dups: Any = state.dup_of[rows_keep : len(backend_rows)]
        dup_rows: list[int] = new_dups.tolist() if np is not None else new_dups
        for i in range(cand_keep, len(positions)):
            link = links[i]
            if link >= 0:
                d = dup_rows[link - rows_keep]
                t = -1 if d < 0 else backend_rows[d]
            else:
                c = ~link
                t = c if target[c] < 0 else target[c]
            target.append(t)
            if t >= 0:
                result[positions[i]] = positions[t]
        return dict(result)


def find_near_duplicates(
    vectors: Sequence[Vector] | Any,
    eligible: Sequence[bool],
    threshold: float,
    *,
    backend: Backend = "auto",
    block_size: int = 1024,
) -> dict[int, int]:
    """Which vectors repeat an earlier one: ``{duplicate index: index it repeats}``.

    Index ``i`` is a duplicate when ``cosine(i, j) >= threshold`` for some earlier
    *surviving* index ``j`` (one that is not itself a duplicate); it maps to the
    earliest such ``j``, so the first occurrence survives and a chain of near-copies
    maps to its survivor. Only indices flagged in ``eligible`` take part, and a zero
    vector never duplicates anything. Cosines are compared with a tolerance of
    ``COSINE_TOLERANCE``.

    ``backend="auto"`` uses numpy when it is installed (extra ``numpy``): blocks of
    ``block_size`` vectors are compared to the earlier survivors with matrix products,
    then resolved in order on the small within-block matrix; ``"python"`` is the pure
    Python search, with identical results. ``vectors`` may also be a 2-D numpy array.
    """
    return NearDuplicateFinder(threshold, backend=backend, block_size=block_size).find(
        vectors, eligible
    )
