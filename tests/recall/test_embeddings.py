"""Embeddings: HashingEmbedder, EmbeddingCache (sync and async), near-duplicate search."""

from __future__ import annotations

import asyncio
import hashlib
import math
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from convomem.errors import (
    ConfigError,
    ConvomemError,
    EmbeddingError,
    InvalidMessage,
    MissingDependency,
)
from convomem.model import ImageBlock, Message, TextBlock, ToolUseBlock
from convomem.recall import (
    COSINE_TOLERANCE,
    AsyncEmbedder,
    Embedder,
    EmbeddingCache,
    HashingEmbedder,
    NearDuplicateFinder,
    find_near_duplicates,
)
from convomem.recall import _search as search_mod
from convomem.recall import cache as cache_mod
from convomem.recall import embedders as embedders_mod

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    a = [x / max(map(abs, a)) for x in a]  # scaled: no underflow
    b = [x / max(map(abs, b)) for x in b]
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def digest(v: Sequence[float]) -> str:
    return hashlib.sha256(struct.pack(f"<{len(v)}d", *v)).hexdigest()[:16]


def user(i: int | str, text: str) -> Message:
    return Message(f"m{i}", "user", content=text)


# -- HashingEmbedder -------------------------------------------------------------------

texts = st.text(
    alphabet=st.characters(codec="utf-8") | st.sampled_from(" \t\nabcAB\u00e9\u2603"), max_size=60
)


@SETTINGS
@given(text=texts, dim=st.integers(1, 64), lo=st.integers(1, 4), extra=st.integers(0, 2))
def test_hashing_is_normalized_deterministic_and_backend_independent(
    text: str, dim: int, lo: int, extra: int
) -> None:
    py = HashingEmbedder(dim, (lo, lo + extra), backend="python")
    vec = py.embed(text)
    assert len(vec) == dim and all(isinstance(x, float) for x in vec)
    norm = math.sqrt(sum(x * x for x in vec))
    assert norm == 0.0 or math.isclose(norm, 1.0, rel_tol=1e-12)
    if not text.split():
        assert norm == 0.0
    # deterministic, and bit-identical across the pure-Python and numpy paths
    fresh = HashingEmbedder(dim, (lo, lo + extra), backend="numpy")
    assert fresh.embed(text) == vec
    assert fresh.embed_batch([text, "x", text]) == [vec, py.embed("x"), vec]
    assert py.embed_batch([text]) == [vec]


@SETTINGS
@given(batch=st.lists(texts, max_size=6), dim=st.integers(1, 32))
def test_embed_matrix_is_embed_batch_as_one_matrix_on_both_backends(
    batch: list[str], dim: int
) -> None:
    for backend in ("python", "numpy"):
        e = HashingEmbedder(dim, backend=backend)  # type: ignore[arg-type]
        mat = e.embed_matrix(batch)
        assert mat.dtype == np.float64 and mat.shape == (len(batch), dim)
        assert mat.tolist() == e.embed_batch(batch)


def test_the_cache_takes_an_embedders_matrix_when_it_has_one() -> None:
    class Counting(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(16)
            self.calls: list[str] = []

        def embed_matrix(self, texts: Sequence[str]) -> Any:
            self.calls.append("matrix")
            return super().embed_matrix(texts)

        def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
            self.calls.append("batch")
            return super().embed_batch(texts)

    e = Counting()
    got = EmbeddingCache(e).vectors([user(0, "hello"), user(1, "bye")])
    assert e.calls == ["matrix"]
    assert [list(v) for v in got] == HashingEmbedder(16).embed_batch(["hello", "bye"])


def test_hashing_long_texts_agree_across_paths() -> None:
    text = "A long tool output, line after line. " * 300 + "ÿ\U0001f600"
    vec = HashingEmbedder(backend="python").embed(text)
    assert HashingEmbedder().embed(text) == vec == HashingEmbedder().embed_batch([text])[0]


def test_hashing_identical_text_has_cosine_one_and_near_duplicates_are_close() -> None:
    e = HashingEmbedder()
    a = e.embed("Could you tell me the status of order 1234, please?")
    assert a == e.embed("Could you tell me the status of order 1234, please?")
    assert math.isclose(cosine(a, a), 1.0)
    near = e.embed("could you tell me the status of order 1234 please")
    other = e.embed("The weather in Lisbon is sunny with light winds today.")
    assert cosine(a, near) > 0.85
    assert cosine(a, other) < 0.3


def test_hashing_options_change_the_features() -> None:
    assert HashingEmbedder().embed("Hello  World") == HashingEmbedder().embed("hello world")
    cased = HashingEmbedder(lowercase=False)
    assert cased.embed("Hello") != cased.embed("hello")
    assert HashingEmbedder(seed=1).embed("hello") != HashingEmbedder(seed=0).embed("hello")
    short = HashingEmbedder()  # shorter than the smallest n-gram: one feature, not zero
    assert any(short.embed("ok")) and short.embed("ok") != short.embed("no")
    assert HashingEmbedder().embed(" \n\t ") == [0.0] * 256
    assert HashingEmbedder(dim=8).embed_batch([]) == []


def test_hashing_golden_vectors_never_change() -> None:
    # Stored embeddings depend on these exact bits: changing the algorithm is a break.
    assert digest(HashingEmbedder().embed("hello world")) == "48fb04c0e687f521"
    assert digest(HashingEmbedder(64, (2, 4)).embed("The quick brown fox")) == "30490acaf94f6cc3"
    assert digest(HashingEmbedder().embed("ok")) == "c9ab8e5b68181f10"
    assert digest(HashingEmbedder(16).embed("Ünïcode ☃ text")) == "a52bcf86e16cecd6"


def test_hashing_is_identical_in_another_process() -> None:
    code = (
        "import sys; from convomem.recall import HashingEmbedder as H; "
        "print(repr(H(32, seed=7).embed(sys.argv[1])))"
    )
    text = "the same text, another process"
    out = subprocess.run(
        [sys.executable, "-c", code, text],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert eval(out.stdout) == HashingEmbedder(32, seed=7).embed(text)


def test_hashing_is_an_embedder_and_rejects_non_text() -> None:
    e = HashingEmbedder()
    assert isinstance(e, Embedder)
    assert not isinstance(e, AsyncEmbedder)
    with pytest.raises(EmbeddingError, match="text=3"):
        e.embed(3)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match="text=None"):
        e.embed_batch(["ok", None])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"dim": 0}, "dim=0"),
        ({"dim": -3}, "dim=-3"),
        ({"dim": True}, "dim=True"),
        ({"dim": 2.0}, "dim=2.0"),
        ({"dim": 1 << 25}, "dim=33554432"),
        ({"ngram": (0, 2)}, "ngram=(0, 2)"),
        ({"ngram": (3, 2)}, "ngram=(3, 2)"),
        ({"ngram": (3,)}, "ngram=(3,)"),
        ({"ngram": "35"}, "ngram='35'"),
        ({"ngram": (1.0, 2)}, "ngram=(1.0, 2)"),
        ({"lowercase": "yes"}, "lowercase='yes'"),
        ({"seed": -1}, "seed=-1"),
        ({"seed": 1 << 64}, "seed=18446744073709551616"),
        ({"seed": 1.5}, "seed=1.5"),
        ({"backend": "fast"}, "backend='fast'"),
    ],
)
def test_hashing_rejects_bad_options(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        HashingEmbedder(**kwargs)
    assert needle in str(info.value)


def test_numpy_backend_needs_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders_mod, "_numpy", lambda: None)
    monkeypatch.setattr(cache_mod, "_numpy", lambda: None)
    with pytest.raises(MissingDependency, match=r"convomem\[numpy\]"):
        HashingEmbedder(backend="numpy")
    with pytest.raises(MissingDependency, match="numpy"):
        find_near_duplicates([[1.0]], [True], 0.9, backend="numpy")
    # "auto" quietly uses pure Python
    assert HashingEmbedder().embed_batch(["abc"]) == [
        HashingEmbedder(backend="python").embed("abc")
    ]
    assert find_near_duplicates([[1.0], [2.0]], [True, True], 0.9) == {1: 0}
    cache = EmbeddingCache(HashingEmbedder(dim=8))
    assert cache.vectors([user(1, "hello")])[0].tolist() == HashingEmbedder(dim=8).embed("hello")


# -- EmbeddingCache --------------------------------------------------------------------


class Counting:
    """A sync embedder that records every call; ``dim`` 3 vectors from the text."""

    def __init__(self, *, batch: bool = True) -> None:
        self.calls: list[list[str]] = []
        self.threads: set[int] = set()
        if not batch:
            self.embed_batch = None  # type: ignore[assignment]

    def embed(self, text: str) -> list[float]:
        self.calls.append([text])
        self.threads.add(threading.get_ident())
        return [float(len(text)), float(text.count("a")), 1.0]

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        self.threads.add(threading.get_ident())
        return [[float(len(t)), float(t.count("a")), 1.0] for t in texts]


def history(n: int) -> list[Message]:
    return [user(i, f"message number {i % 7}") for i in range(n)]


def test_cache_embeds_each_distinct_text_once_across_calls() -> None:
    embedder = Counting()
    cache = EmbeddingCache(embedder, batch_size=3)
    msgs = history(20)  # 7 distinct texts
    vecs = cache.vectors(msgs)
    assert cache.embedded == 7 and len(cache) == 7 and cache.dim == 3
    assert [len(c) for c in embedder.calls] == [3, 3, 1]  # batches of batch_size
    assert [list(v) for v in vecs] == [embedder.embed(m.text()) for m in msgs]
    embedder.calls.clear()
    # a repeated call, and messages rebuilt from the same dicts, embed nothing new
    cache.vectors(msgs)
    cache.vectors([Message.from_dict(m.to_dict()) for m in msgs])
    assert cache.embedded == 7 and embedder.calls == []
    # one new message costs one embedding
    cache.vectors([*msgs, user("new", "something new")])
    assert cache.embedded == 8 and embedder.calls == [["something new"]]


def test_cache_uses_embed_or_a_plain_function_without_batch() -> None:
    one = Counting(batch=False)
    cache = EmbeddingCache(one)
    cache.vectors(history(4))
    assert one.calls == [[f"message number {i}"] for i in range(4)]
    seen: list[str] = []

    def fn(text: str) -> list[float]:
        seen.append(text)
        return [1.0, float(len(text))]

    cache = EmbeddingCache(fn)
    assert [list(v) for v in cache.vectors([user(1, "ab"), user(2, "ab")])] == [[1.0, 2.0]] * 2
    assert seen == ["ab"] and cache.embedded == 1


def test_cache_vectors_match_the_embedder_and_are_read_only() -> None:
    e = HashingEmbedder(dim=32)
    cache = EmbeddingCache(e)
    msgs = [user(1, "alpha beta"), user(2, "gamma"), user(3, "alpha beta")]
    vecs = cache.vectors(msgs)
    assert [v.tolist() for v in vecs] == [e.embed(m.text()) for m in msgs]  # type: ignore[attr-defined]
    assert vecs[0] is vecs[2]
    assert cache.vector(msgs[1]) is vecs[1]
    with pytest.raises(TypeError):
        vecs[0][0] = 5.0  # type: ignore[index]


def test_cache_skips_ineligible_and_blank_messages() -> None:
    embedder = Counting()
    cache = EmbeddingCache(embedder)
    image_only = Message("img", "user", content=[ImageBlock("https://x/y.png")])
    call = Message("call", "assistant", content=[ToolUseBlock("c1", "lookup", {"q": 1})])
    # nothing embedded yet: the zero vector has no length
    assert [len(v) for v in cache.vectors([image_only, user(0, "  ")])] == [0, 0]
    msgs = [user(1, "keep"), image_only, call, user(2, "pinned text"), user(3, "")]
    vecs = cache.vectors(msgs, [True, True, True, False, True])
    assert embedder.calls == [["keep"]]
    assert [list(v) for v in vecs] == [[4.0, 0.0, 1.0], *[[0.0, 0.0, 0.0]] * 4]
    with pytest.raises(ConfigError, match="eligible"):
        cache.vectors(msgs, [True])


def test_cache_eviction_keeps_at_most_max_size() -> None:
    embedder = Counting()
    cache = EmbeddingCache(embedder, max_size=2)
    cache.vectors([user(1, "a"), user(2, "b"), user(3, "c")])
    assert len(cache) == 2 and cache.embedded == 3
    cache.vectors([user(4, "c")])
    assert cache.embedded == 3  # still cached
    cache.vectors([user(5, "a")])
    assert cache.embedded == 4  # the oldest was evicted
    none = EmbeddingCache(Counting(), max_size=0)
    vecs = none.vectors([user(1, "aa"), user(2, "aa"), user(3, "b")])
    assert len(none) == 0 and none.embedded == 2
    assert [v[0] for v in vecs] == [2.0, 2.0, 1.0]
    cache.clear()
    assert len(cache) == 0


def test_a_cached_text_evicted_by_the_same_call_still_gets_its_vector() -> None:
    """A full cache: the call's new texts evict the cached one it also asks for."""
    cache = EmbeddingCache(Counting(), max_size=2)
    cache.vectors([user(1, "a"), user(2, "bb")])
    vecs = cache.vectors([user(3, "a"), user(4, "ccc"), user(5, "dddd"), user(6, "a")])
    assert [v[0] for v in vecs] == [1.0, 3.0, 4.0, 1.0] and cache.embedded == 4
    assert "a" not in cache._cache


class Scripted:
    """An embedder returning prepared outputs, to test validation."""

    def __init__(self, outputs: Any) -> None:
        self.outputs = outputs

    def embed_batch(self, texts: Sequence[str]) -> Any:
        return self.outputs


@pytest.mark.parametrize(
    ("outputs", "needle"),
    [
        ([[1.0, 2.0], [1.0]], "id='m2' has 1 numbers; earlier embeddings have 2"),
        ([[1.0, 2.0]], "returned 1 vectors for 2 texts"),
        ([[1.0, "x"], [1.0, 2.0]], "id='m1' is unusable: expected numbers, got 'x'"),
        ([[1.0, 2.0], [math.nan, 1.0]], "id='m2' is unusable: contains the non-finite value nan"),
        ([[1.0, math.inf], [1.0, 2.0]], "id='m1' is unusable: contains the non-finite"),
        ([[10**400], [1.0]], "id='m1' is unusable: expected numbers, got a number too large"),
        ([1.0, 2.0], "id='m1' is unusable: expected a sequence of numbers, got float"),
        (["ab", "cd"], "id='m1' is unusable: expected a sequence of numbers, got str"),
        ([[], []], "id='m1' is empty"),
        ("nope", "returned 'nope'"),
        (None, "returned None"),
        (np.ones((1, 2)), "returned 1 vectors for 2 texts"),
        (np.array([[1.0, 2.0], [np.nan, 0.0]]), "id='m2' is unusable: contains a non-finite"),
        (np.array([["a", "b"], ["c", "d"]]), "expected numbers"),
        (np.ones((2, 0)), "id='m1' has 0 numbers"),
    ],
)
def test_cache_rejects_bad_embedder_output_and_keeps_its_state(outputs: Any, needle: str) -> None:
    cache = EmbeddingCache(Scripted(outputs))
    with pytest.raises(EmbeddingError) as info:
        cache.vectors([user(1, "first"), user(2, "second")])
    assert needle in str(info.value)
    assert isinstance(info.value, ConvomemError)
    assert len(cache) == 0 and cache.embedded == 0 and cache.dim is None


def test_cache_rejects_a_dimension_change_between_calls() -> None:
    scripted = Scripted([[1.0, 2.0, 3.0]])
    cache = EmbeddingCache(scripted)
    cache.vectors([user(1, "a")])
    scripted.outputs = np.ones((1, 2))
    with pytest.raises(EmbeddingError, match="id='m2' has 2 numbers; earlier embeddings have 3"):
        cache.vectors([user(1, "a"), user(2, "b")])
    assert len(cache) == 1 and cache.embedded == 1 and cache.dim == 3
    scripted.outputs = np.ones((1, 3), dtype=np.float32)  # a numpy matrix is accepted
    assert [list(v) for v in cache.vectors([user(2, "b")])] == [[1.0, 1.0, 1.0]]


def test_cache_rejects_bad_options_and_inputs() -> None:
    with pytest.raises(ConfigError, match="max_size=-1"):
        EmbeddingCache(Counting(), max_size=-1)
    with pytest.raises(ConfigError, match="batch_size=0"):
        EmbeddingCache(Counting(), batch_size=0)
    with pytest.raises(ConfigError, match="embedder=42"):
        EmbeddingCache(42)  # type: ignore[arg-type]
    cache = EmbeddingCache(Counting())
    with pytest.raises(InvalidMessage, match=r"messages\[1\]='hi'"):
        cache.vectors([user(1, "ok"), "hi"])  # type: ignore[list-item]
    assert cache.embedded == 0


def test_cache_refuses_an_awaitable_from_a_sync_method() -> None:
    class Sneaky:
        def embed(self, text: str) -> Any:
            async def later() -> list[float]:
                return [1.0]

            return later()

    cache = EmbeddingCache(Sneaky())  # the coroutine is closed: no "never awaited" warning
    with pytest.raises(EmbeddingError, match="returned an awaitable; use the async API"):
        cache.vectors([user(1, "x")])


class AsyncBatch:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def aembed(self, text: str) -> list[float]:
        raise AssertionError("aembed_batch is preferred")

    async def aembed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        self.calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]


class AsyncOne:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def embed(self, text: str) -> list[float]:  # an async embed counts as async
        await asyncio.sleep(0)
        self.calls.append(text)
        return [float(len(text)), 1.0]


async def test_avectors_awaits_async_embedders_natively() -> None:
    batch = AsyncBatch()
    assert isinstance(batch, AsyncEmbedder)
    cache = EmbeddingCache(batch, batch_size=2)
    msgs = [user(i, t) for i, t in enumerate(["a", "bb", "a", "ccc"])]
    vecs = await cache.avectors(msgs)
    assert batch.calls == [["a", "bb"], ["ccc"]]
    assert [v[0] for v in vecs] == [1.0, 2.0, 1.0, 3.0]
    assert (await cache.avector(msgs[3])) is vecs[3]
    assert cache.embedded == 3 and batch.calls == [["a", "bb"], ["ccc"]]
    one = AsyncOne()
    cache = EmbeddingCache(one)
    await cache.avectors(msgs)
    assert one.calls == ["a", "bb", "ccc"]


async def test_avectors_runs_sync_embedders_in_a_thread_and_shares_the_cache() -> None:
    embedder = Counting()
    cache = EmbeddingCache(embedder)
    msgs = history(10)
    vecs = await cache.avectors(msgs)
    assert threading.get_ident() not in embedder.threads
    assert cache.embedded == 7
    assert [list(v) for v in cache.vectors(msgs)] == [list(v) for v in vecs]
    assert cache.embedded == 7
    hashing = EmbeddingCache(HashingEmbedder(dim=16))
    assert [v.tolist() for v in await hashing.avectors(msgs)] == [  # type: ignore[attr-defined]
        HashingEmbedder(dim=16).embed(m.text()) for m in msgs
    ]


async def test_sync_vectors_with_an_async_embedder_inside_a_loop_says_use_avectors() -> None:
    cache = EmbeddingCache(AsyncBatch())
    with pytest.raises(RuntimeError, match="avectors"):
        cache.vectors([user(1, "a")])


def test_sync_vectors_with_an_async_embedder_outside_a_loop_runs_it() -> None:
    batch = AsyncBatch()
    cache = EmbeddingCache(batch)
    assert [v[0] for v in cache.vectors([user(1, "abc")])] == [3.0]
    assert batch.calls == [["abc"]]

    async def fn(text: str) -> list[float]:
        return [2.0]

    assert [list(v) for v in EmbeddingCache(fn).vectors([user(1, "x")])] == [[2.0]]


# -- near-duplicate search -------------------------------------------------------------


def oracle(
    vectors: Sequence[Sequence[float]], eligible: Sequence[bool], t: float
) -> dict[int, int]:
    """The definition, with exact rational arithmetic."""
    limit = Fraction(t - COSINE_TOLERANCE)
    exact = [[Fraction(x) for x in v] for v in vectors]
    survivors: list[int] = []
    out: dict[int, int] = {}
    for i, v in enumerate(exact):
        if not eligible[i] or not any(v):
            continue
        for j in survivors:
            w = exact[j]
            dot = sum((a * b for a, b in zip(v, w, strict=True)), Fraction(0))
            norms = sum(a * a for a in v) * sum(b * b for b in w)
            if dot > 0 and dot * dot >= limit * limit * norms:  # cos >= limit > 0
                out[i] = j
                break
        else:
            survivors.append(i)
    return out


def ambiguous(vectors: Sequence[Sequence[float]], eligible: Sequence[bool], t: float) -> bool:
    """Whether some cosine is so close to the limit that float rounding may decide it."""
    live = [v for v, e in zip(vectors, eligible, strict=True) if e and any(v)]
    limit = t - COSINE_TOLERANCE
    return any(abs(cosine(a, b) - limit) < 1e-11 for i, a in enumerate(live) for b in live[i + 1 :])


@contextmanager
def column_cells(n: int) -> Iterator[None]:
    saved = search_mod.COL_CELLS
    search_mod.COL_CELLS = n  # type: ignore[misc]
    try:
        yield
    finally:
        search_mod.COL_CELLS = saved  # type: ignore[misc]


components = st.one_of(
    st.integers(-2, 2).map(float),
    st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=True),
    st.sampled_from([1e-300, -1e300, 5e-324]),
)


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[list[float]], list[bool], float]:
    dim = draw(st.integers(1, 4))
    n = draw(st.integers(0, 24))
    pool = draw(st.lists(st.lists(components, min_size=dim, max_size=dim), min_size=1, max_size=6))
    # reuse rows and scaled rows so that exact and near duplicates are common
    rows = [
        [x * draw(st.sampled_from([1.0, 2.0, 0.5])) for x in draw(st.sampled_from(pool))]
        for _ in range(n)
    ]
    eligible = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    threshold = draw(
        st.sampled_from([1.0, 0.999, 0.9, 0.7071067811865476, 0.5, 0.2]) | st.floats(0.01, 1.0)
    )
    return rows, eligible, threshold


@SETTINGS
@given(problem=problems(), block=st.integers(1, 6), cells=st.sampled_from([1, 5, 1 << 24]))
def test_find_near_duplicates_matches_the_definition_on_both_backends(
    problem: tuple[list[list[float]], list[bool], float], block: int, cells: int
) -> None:
    vectors, eligible, threshold = problem
    assume(not ambiguous(vectors, eligible, threshold))
    expected = oracle(vectors, eligible, threshold)
    assert find_near_duplicates(vectors, eligible, threshold, backend="python") == expected
    with column_cells(cells):
        got = find_near_duplicates(vectors, eligible, threshold, backend="numpy", block_size=block)
    assert got == expected
    assert list(got) == sorted(got)
    assert all(j < i and eligible[i] and eligible[j] and j not in got for i, j in got.items())


def frozen(row: Sequence[float]) -> memoryview:
    """A vector as EmbeddingCache returns it: a read-only float64 memoryview."""
    return memoryview(struct.pack(f"<{len(row)}d", *row)).cast("d")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problem=problems(),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["append", "flip", "change", "mutate", "truncate"]),
            st.integers(0, 30),
        ),
        max_size=6,
    ),
    backend=st.sampled_from(["python", "numpy"]),
    views=st.booleans(),
)
def test_finder_reuses_work_and_agrees_with_a_fresh_search(
    problem: tuple[list[list[float]], list[bool], float],
    edits: list[tuple[str, int]],
    backend: str,
    views: bool,
) -> None:
    rows, eligible, threshold = problem
    finder = NearDuplicateFinder(threshold, backend=backend, block_size=3)  # type: ignore[arg-type]
    dim = len(rows[0]) if rows else 4
    make = frozen if views else list
    vectors: list[Any] = [make(r) for r in rows]
    pool = vectors or [make([1.0] * dim)]  # shared objects, like cached vectors
    for op, k in [("none", 0), *edits]:
        if op == "append":
            vectors = [*vectors, pool[k % len(pool)]]
            eligible = [*eligible, bool(k % 3)]
        elif op == "flip" and vectors:
            eligible = list(eligible)
            eligible[k % len(eligible)] ^= True
        elif op == "change" and vectors:
            vectors = list(vectors)
            vectors[k % len(vectors)] = make([float(k % 5 - 2)] * dim)
        elif op == "mutate" and vectors and not views:
            vectors[k % len(vectors)][0] += 1.0  # in place: the finder must notice
        elif op == "truncate":
            cut = k % (len(vectors) + 1)
            vectors, eligible = vectors[:cut], eligible[:cut]
        assume(not ambiguous(vectors, eligible, threshold))
        before = finder.computed
        got = finder.find(vectors, eligible)
        assert got == find_near_duplicates(vectors, eligible, threshold, backend="python")
        assert finder.computed - before <= sum(eligible)


def test_finder_appending_one_vector_compares_only_that_vector() -> None:
    cache = EmbeddingCache(HashingEmbedder(dim=64))
    msgs = [user(i, f"note {i}: " + "lorem ipsum " * (i % 5)) for i in range(300)]
    for backend in ("numpy", "python"):
        finder = NearDuplicateFinder(0.9, backend=backend)  # type: ignore[arg-type]
        vecs = cache.vectors(msgs)
        first = finder.find(vecs, [True] * 300)
        assert finder.computed == 300
        more = [*msgs, user("x", "note 7: lorem ipsum lorem ipsum")]
        vecs = cache.vectors(more)  # the same vector objects for the old messages
        result = finder.find(vecs, [True] * 301)
        assert finder.computed == 301
        assert result == find_near_duplicates(vecs, [True] * 301, 0.9)
        assert {k: v for k, v in result.items() if k < 300} == first
        # a message that becomes ineligible near the end: only the tail is redone
        flags = [True] * 301
        flags[299] = False
        finder.find(vecs, flags)
        assert finder.computed == 302
        finder.reset()
        finder.find(vecs, flags)
        assert finder.computed == 302 + 300


@pytest.mark.parametrize("backend", ["python", "numpy"])
def test_exact_copies_are_resolved_without_a_search(backend: Any) -> None:
    a, b, c = [1.0, 0.0], [0.8, 0.6], [0.0, 1.0]  # cos(a, b) = 0.8, cos(b, c) = 0.6
    finder = NearDuplicateFinder(0.75, backend=backend)
    vectors = [a, b, a, c, b, b, c, a]
    assert finder.find(vectors, [True] * 8) == {1: 0, 2: 0, 4: 0, 5: 0, 6: 3, 7: 0}
    assert (finder.computed, finder.compared) == (8, 3)  # only a, b and c were searched
    vectors += [[0.0, 2.0], c, b]
    assert finder.find(vectors, [True] * 11) == {
        1: 0, 2: 0, 4: 0, 5: 0, 6: 3, 7: 0, 8: 3, 9: 3, 10: 0
    }  # fmt: skip
    assert (finder.computed, finder.compared) == (11, 4)
    # the first a becomes ineligible: everything is redone, and b now survives
    flags = [False] + [True] * 10
    expected = {2: 1, 4: 1, 5: 1, 6: 3, 7: 1, 8: 3, 9: 3, 10: 1}
    assert find_near_duplicates(vectors, flags, 0.75, backend=backend) == expected
    assert finder.find(vectors, flags) == expected
    assert (finder.computed, finder.compared) == (21, 8)
    assert finder.find(vectors, flags) == expected  # unchanged input: no work at all
    assert (finder.computed, finder.compared) == (21, 8)


def test_duplicate_of_a_dropped_duplicate_is_kept_unless_close_to_a_survivor() -> None:
    a = [1.0, 0.0]
    b = [math.cos(0.3), math.sin(0.3)]  # 0.3 rad from a
    c = [math.cos(0.6), math.sin(0.6)]  # 0.3 rad from b, 0.6 from a
    t = math.cos(0.35)
    for backend in ("python", "numpy"):
        # b duplicates a and is dropped; c is close only to b, so it survives
        assert find_near_duplicates([a, b, c], [True] * 3, t, backend=backend) == {1: 0}  # type: ignore[arg-type]
        # the earliest matching survivor wins
        assert find_near_duplicates([a, c, b], [True] * 3, t, backend=backend) == {2: 0}  # type: ignore[arg-type]
        assert find_near_duplicates([b, a, c], [True] * 3, t, backend=backend) == {1: 0, 2: 0}  # type: ignore[arg-type]


def test_zero_and_ineligible_vectors_never_take_part() -> None:
    v = [1.0, 2.0, 3.0]
    for backend in ("python", "numpy"):
        kw: dict[str, Any] = {"backend": backend}
        assert find_near_duplicates([[0.0] * 3, [0.0] * 3, v], [True] * 3, 0.5, **kw) == {}
        assert find_near_duplicates([v, v, v], [False, True, True], 1.0, **kw) == {2: 1}
        assert find_near_duplicates([v, v, [2.0, 4.0, 6.0]], [True, False, True], 1.0, **kw) == {
            2: 0
        }
        # ineligible entries may be anything at all
        assert find_near_duplicates(
            [v, "junk", None, v], [True, False, False, True], 1.0, **kw
        ) == {3: 0}
        assert find_near_duplicates([], [], 0.9, **kw) == {}
        assert find_near_duplicates([[], []], [True, True], 0.9, **kw) == {}


def test_find_accepts_cache_vectors_and_numpy_matrices() -> None:
    cache = EmbeddingCache(HashingEmbedder())
    msgs = [
        user(1, "Where is my order #1234? It has not arrived."),
        user(2, "ok"),
        user(3, "where is my order #1234?  it has not arrived"),
        Message("img", "user", content=[ImageBlock("https://x/y.png")]),
        Message("img2", "user", content=[ImageBlock("https://x/z.png"), TextBlock("")]),
        user(4, "ok"),
    ]
    vecs = cache.vectors(msgs)
    for backend in ("python", "numpy"):
        assert find_near_duplicates(vecs, [True] * 6, 0.9, backend=backend) == {2: 0, 5: 1}  # type: ignore[arg-type]
    mat = np.array([list(v) for v in vecs])
    assert find_near_duplicates(mat, [True] * 6, 0.9) == {2: 0, 5: 1}
    assert find_near_duplicates(mat.astype(np.float32), [True] * 6, 0.9) == {2: 0, 5: 1}


def test_many_vectors_cross_block_boundaries() -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((150, 16))
    noisy = base[rng.integers(0, 150, 250)] + 0.05 * rng.standard_normal((250, 16))
    vectors = np.concatenate([base, noisy])[rng.permutation(400)].tolist()
    eligible = (rng.random(400) < 0.9).tolist()
    expected = find_near_duplicates(vectors, eligible, 0.99, backend="python")
    assert len(expected) > 50
    for block in (1, 7, 64, 1024):
        with column_cells(100):
            assert (
                find_near_duplicates(vectors, eligible, 0.99, backend="numpy", block_size=block)
                == expected
            )


@pytest.mark.parametrize("threshold", [0, 0.0, -0.5, 1.0001, 2, math.nan, math.inf, True, "0.9"])
def test_threshold_outside_zero_one_is_rejected(threshold: Any) -> None:
    with pytest.raises(ConfigError) as info:
        find_near_duplicates([[1.0]], [True], threshold)
    assert f"threshold={threshold!r}" in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ConfigError, match="threshold"):
        NearDuplicateFinder(threshold)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"backend": "gpu"}, "backend='gpu'"), ({"block_size": 0}, "block_size=0")],
)
def test_find_rejects_bad_options(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        find_near_duplicates([[1.0]], [True], 0.9, **kwargs)


@pytest.mark.parametrize("backend", ["python", "numpy"])
@pytest.mark.parametrize(
    ("vectors", "needle"),
    [
        ([[1.0, 2.0], [1.0]], r"vectors\[1\]: has 1 numbers; vectors\[0\] has 2"),
        ([[1.0, 2.0], ["a", 1.0]], r"vectors\[1\]: expected numbers, got 'a'"),
        ([[1.0, 2.0], [1.0, math.nan]], r"vectors\[1\]: contains the non-finite value nan"),
        ([[1.0, 2.0], 3.0], r"vectors\[1\]: expected a sequence of numbers, got float"),
        ([[1.0, 2.0], "ab"], r"vectors\[1\]: expected a sequence of numbers, got str"),
        ([memoryview(struct.pack("<2d", 1.0, math.inf)).cast("d"), [1.0, 2.0]], r"vectors\[0\]"),
    ],
)
def test_find_rejects_bad_vectors_naming_the_index(
    vectors: list[Any], needle: str, backend: str
) -> None:
    finder = NearDuplicateFinder(0.9, backend=backend)  # type: ignore[arg-type]
    finder.find([[1.0, 2.0]], [True])
    with pytest.raises(EmbeddingError, match=needle):
        finder.find(vectors, [True, True])
    assert finder.computed == 1  # state untouched: the next call reuses the old prefix
    assert finder.find([[1.0, 2.0], [2.0, 4.0]], [True, True]) == {1: 0}
    assert finder.computed == 2


def test_find_rejects_mismatched_eligible() -> None:
    with pytest.raises(ConfigError, match=r"eligible=.*1 flags for 2 vectors"):
        find_near_duplicates([[1.0], [2.0]], [True], 0.9)


def test_finder_restarts_when_the_dimension_changes() -> None:
    finder = NearDuplicateFinder(0.9)
    assert finder.find([[1.0, 0.0], [1.0, 0.0]], [True, True]) == {1: 0}
    assert finder.find([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], [True, True]) == {1: 0}
    assert finder.find([], []) == {}
    assert finder.find([[3.0], [1.0]], [True, True]) == {1: 0}


def test_embedder_named_builds_each_kind_and_names_a_bad_one() -> None:
    from convomem.recall import E5Embedder, MiniLMEmbedder, StaticEmbedder
    from convomem.recall.embedders import EMBEDDERS, embedder_named

    kinds = {
        "static": StaticEmbedder,
        "hashing": HashingEmbedder,
        "minilm": MiniLMEmbedder,
        "e5": E5Embedder,
    }
    assert set(EMBEDDERS) == set(kinds)
    for name, cls in kinds.items():
        assert type(embedder_named(name)) is cls
    with pytest.raises(ConfigError, match="embedder='bert'"):
        embedder_named("bert")
