"""Empty vectors in the near-duplicate search (issue 8 #11).

``EmbeddingCache`` gives a message without text the zero vector, which is empty while
nothing has been embedded yet. The search treats an empty vector as a zero vector of
any length: never a candidate, never held to the others' dimension, and a finder that
saw only empty vectors keeps working when real ones arrive.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from convomem.errors import EmbeddingError
from convomem.model import ImageBlock, Message
from convomem.recall import (
    COSINE_TOLERANCE,
    EmbeddingCache,
    HashingEmbedder,
    NearDuplicateFinder,
    find_near_duplicates,
)

BACKENDS = ("python", "numpy")


def frozen(row: Sequence[float]) -> memoryview:
    return memoryview(struct.pack(f"<{len(row)}d", *row)).cast("d")


def brute(vectors: Sequence[Sequence[float]], eligible: Sequence[bool], t: float) -> dict[int, int]:
    """The definition; an empty or zero vector takes no part."""
    survivors: list[int] = []
    out: dict[int, int] = {}
    for i, v in enumerate(vectors):
        if not eligible[i] or not any(v):
            continue
        for j in survivors:
            w = vectors[j]
            cos = sum(a * b for a, b in zip(v, w, strict=True)) / math.sqrt(
                sum(a * a for a in v) * sum(b * b for b in w)
            )
            if cos >= t - COSINE_TOLERANCE:
                out[i] = j
                break
        else:
            survivors.append(i)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_finder_that_saw_only_empty_vectors_keeps_working(backend: Any) -> None:
    """The reproducer: vectors[1] has 256 numbers; vectors[0] has 0, on every call."""
    finder = NearDuplicateFinder(0.9, backend=backend)
    assert finder.find([[]], [True]) == {}
    a, b = [1.0, 0.0, 2.0], [2.0, 0.0, 4.0]
    assert finder.find([[], a, b], [True, True, True]) == {2: 1}
    assert finder.find([[], a, b, []], [True, True, True, True]) == {2: 1}
    assert finder.find([a, [], b], [True, True, True]) == {2: 0}
    assert finder.find([[], []], [True, True]) == {}
    assert find_near_duplicates(np.empty((3, 0)), [True] * 3, 0.9, backend=backend) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_vectors_of_different_lengths_are_still_an_error(backend: Any) -> None:
    finder = NearDuplicateFinder(0.9, backend=backend)
    with pytest.raises(EmbeddingError, match=r"vectors\[2\]: has 2 numbers; vectors\[1\] has 3"):
        finder.find([[], [1.0, 0.0, 0.0], [1.0, 0.0]], [True, True, True])
    assert finder.find([[1.0, 0.0], [1.0, 0.0]], [True, True]) == {1: 0}


@st.composite
def with_empties(draw: Any) -> tuple[list[list[float]], list[bool], float]:
    dim = draw(st.integers(1, 4))
    pool = draw(
        st.lists(
            st.lists(st.integers(-2, 2).map(float), min_size=dim, max_size=dim),
            min_size=1,
            max_size=5,
        )
    )
    n = draw(st.integers(0, 20))
    rows = [[] if draw(st.integers(0, 3)) == 0 else draw(st.sampled_from(pool)) for _ in range(n)]
    eligible = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return rows, eligible, draw(st.sampled_from([1.0, 0.99, 0.9, 0.5]))


def ambiguous(vectors: Sequence[Sequence[float]], eligible: Sequence[bool], t: float) -> bool:
    live = [v for v, e in zip(vectors, eligible, strict=True) if e and any(v)]
    limit = t - COSINE_TOLERANCE

    def cos(a: Sequence[float], b: Sequence[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    return any(abs(cos(a, b) - limit) < 1e-11 for i, a in enumerate(live) for b in live[i + 1 :])


@settings(max_examples=80, deadline=None)
@given(problem=with_empties(), backend=st.sampled_from(BACKENDS), views=st.booleans())
def test_a_reused_finder_with_empty_vectors_agrees_with_the_definition(
    problem: tuple[list[list[float]], list[bool], float], backend: Any, views: bool
) -> None:
    """Every prefix of the list, through one finder (its work reused), then fresh."""
    rows, eligible, threshold = problem
    assume(not ambiguous(rows, eligible, threshold))
    make = frozen if views else list
    vectors = [make(r) for r in rows]
    finder = NearDuplicateFinder(threshold, backend=backend, block_size=2)
    for n in range(len(rows) + 1):
        expected = brute(rows[:n], eligible[:n], threshold)
        assert finder.find(vectors[:n], eligible[:n]) == expected
        assert find_near_duplicates(vectors[:n], eligible[:n], threshold, backend=backend) == (
            expected
        )


def test_the_cache_gives_an_empty_zero_vector_until_it_knows_the_dimension() -> None:
    cache = EmbeddingCache(HashingEmbedder(dim=8))
    image = Message("i", "user", content=[ImageBlock("https://example.com/a.png")])
    first = cache.vectors([image, Message("b", "user", content="   ")])
    assert [len(v) for v in first] == [0, 0] and cache.dim is None and cache.embedded == 0
    later = cache.vectors([Message("t", "user", content="hello"), image])
    assert [len(v) for v in later] == [8, 8] and not any(later[1])
    # Vectors from both calls search together: the empty and zero ones take no part.
    both = [*first, *later, later[0]]
    assert find_near_duplicates(both, [True] * 5, 0.9) == {4: 2}
