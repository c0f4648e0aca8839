"""EmbeddingCache: each distinct text embedded once, batched, sync or async."""

from __future__ import annotations

import asyncio
import inspect
import math
import numbers
from array import array
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from .. import _check
from .._io import is_async_callable
from ..errors import ConfigError, EmbeddingError, InvalidMessage
from ..model import Message
from .embedders import EmbedderLike, Vector, _numpy

# -- EmbeddingCache --------------------------------------------------------------------

_Frozen: TypeAlias = "memoryview[float]"
# texts -> outputs: a list of vectors, or a 2-D numpy array (checked by _commit)
_SyncFn: TypeAlias = Callable[[list[str]], Any]
_AsyncFn: TypeAlias = Callable[[list[str]], Awaitable[Any]]


def _method(embedder: object, name: str) -> Callable[..., Any] | None:
    fn = getattr(embedder, name, None)
    return fn if callable(fn) else None


def _refuse_awaitable(result: Any, where: str) -> Any:
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise EmbeddingError(
            f"{where} returned an awaitable; use the async API (avectors / pack_async)"
        )
    return result


def _sync_caller(embedder: object) -> _SyncFn | None:
    """The embedder's best synchronous texts -> outputs function, if it has one: its
    ``embed_matrix`` when numpy is installed (no list per vector), else ``embed_batch``,
    else ``embed`` of each text."""
    matrix = _method(embedder, "embed_matrix")
    if matrix is not None and not is_async_callable(matrix) and _numpy() is not None:
        return matrix
    batch = _method(embedder, "embed_batch")
    if batch is not None and not is_async_callable(batch):
        fn_b = batch
        return lambda texts: _refuse_awaitable(fn_b(texts), "embed_batch")
    one = _method(embedder, "embed")
    if one is None and not any(
        _method(embedder, n) for n in ("embed_batch", "aembed", "aembed_batch")
    ):
        one = cast(Callable[..., Any], embedder) if callable(embedder) else None
    if one is not None and not is_async_callable(one):
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
        if fn is None or (name.startswith("embed") and not is_async_callable(fn)):
            continue
        return _make_async(fn, batched)
    if callable(embedder) and is_async_callable(cast(Callable[..., Any], embedder)):
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
    embedded: its vector is the zero vector, which never duplicates anything (empty
    while nothing has been embedded yet and the dimension is unknown; the search
    treats an empty vector as a zero vector of any length). Vectors
    are read-only float64 ``memoryview`` objects (``list(v)`` or ``v.tolist()`` copies
    one); the cache keeps at most ``max_size`` texts, dropping the oldest first.
    """

    def __init__(
        self, embedder: EmbedderLike, *, max_size: int = 1_000_000, batch_size: int = 256
    ) -> None:
        _check.non_negative_int("max_size", max_size)
        _check.positive_int("batch_size", batch_size)
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
    ) -> tuple[list[str | None], list[list[tuple[str, str]]], dict[str, _Frozen]]:
        """Each message's text (None: not embedded), the batches of (text, id) to embed,
        and the cached vectors of the others (held: committing the batches may evict
        them from a full cache before the call returns)."""
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
        held = {t: cache[t] for t in texts if t is not None and t in cache}
        for i in [i for i, t in enumerate(texts) if t is not None and t not in held]:
            t = texts[i]
            assert t is not None
            if not t or t.isspace():
                texts[i] = None  # nothing to embed
            elif t not in misses:
                misses[t] = messages[i].id
        items = list(misses.items())
        size = self.batch_size
        return texts, [items[i : i + size] for i in range(0, len(items), size)], held

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
            out[i] = zero if t is None else fresh[t]  # blank, or evicted by this call
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
        texts, batches, fresh = self._plan(messages, eligible)
        for batch in batches:
            self._commit(batch, self._sync([t for t, _ in batch]), fresh)
        return self._assemble(texts, fresh)

    async def avectors(
        self, messages: Sequence[Message], eligible: Sequence[bool] | None = None
    ) -> list[Vector]:
        """The async twin of ``vectors``: awaits async embedders, threads sync ones."""
        texts, batches, fresh = self._plan(messages, eligible)
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
