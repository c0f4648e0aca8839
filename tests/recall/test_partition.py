"""The in-memory partition search against a brute-force oracle written in plain Python:
per-user BM25F (``_recall_oracle``) and cosine candidates cut at ``candidates`` (ties:
the newer item), the ``kinds`` and ``as_of`` filters, diacritics folded, fused linearly,
over several users and tenants whose items never cross."""

from __future__ import annotations

import itertools
import math
import os
import unicodedata
from typing import Any

import numpy as np
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from _recall_oracle import bm25f, linear
from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall.analyze import query_terms as analyzed
from convomem.recall.fusion import LINEAR_WEIGHT
from convomem.recall.keys import KINDS as KEY_KINDS

EXAMPLES = int(os.environ.get("CONVOMEM_RECALL_EXAMPLES", "40"))
WORDS = ["peanut", "allergy", "oak", "street", "invoice", "blue", "café", "Cafe", "train"]
SCOPES = [("a", None), ("b", None), ("a", "t1")]
KINDS = ["user", "assistant", "system"]  # the messages' roles, so their kinds


def fold(word: str) -> str:
    nfkd = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in nfkd if not unicodedata.combining(c))


def unit32(v: Any) -> Any:
    a = np.asarray(v, dtype=np.float64)
    norm = np.sqrt(a @ a)
    return (a / norm if norm else a).astype(np.float32)


def sentences(text: str) -> list[str]:
    """The oracle's sentence keys: parts ending ". " (the dot kept) of 3+ words, when there
    are 2+."""
    parts = [p for p in text.replace(". ", ".\x00").split("\x00") if p]
    return [p for p in parts if len(p.split()) >= 3] if len(parts) > 1 else []


def key_texts(text: str, exchange: str | None) -> list[str]:
    return [text, *sentences(text), *([f"{exchange}\n{text}"] if exchange else [])]


def oracle(
    items: list[tuple[str, str, float, str | None]],
    query: str,
    emb: HashingEmbedder,
    n: int,
    k: int,
    kinds: list[str] | None,
    as_of: float | None,
) -> list[tuple[int, float, float | None, float | None]]:
    """(item index, fused, bm25, cosine) of the k best of one user's ``(text, kind,
    created_at, exchange)`` items, index order being insertion order; an item's cosine is
    its best key's (the text, its sentences, the exchange it answers)."""
    ok = [
        (kinds is None or kd in kinds) and (as_of is None or at <= as_of) for _, kd, at, _ in items
    ]
    scores = bm25f([t for t, *_ in items], [("s", None)] * len(items), analyzed(query))
    bm25 = {i: x for i, x in enumerate(scores) if x > 0}
    lexical = sorted(((i, s) for i, s in bm25.items() if ok[i]), key=lambda p: (-p[1], -p[0]))
    q = unit32(emb.embed(query)).astype(np.float64)
    cos = {
        i: max(float(unit32(emb.embed(key)).astype(np.float64) @ q) for key in key_texts(t, x))
        for i, (t, _, _, x) in enumerate(items)
    }
    # float32 storage cannot order cosines closer than this that are not equal
    values = sorted(cos.values())
    assume(all(b == a or b - a > 1e-5 for a, b in itertools.pairwise(values)))
    vector = sorted(
        ((i, c) for i, c in cos.items() if c > 1e-6 and ok[i]), key=lambda p: (-p[1], -p[0])
    )
    n = max(n, k)  # candidates of each list: never fewer than k
    lex, vec = dict(lexical[:n]), dict(vector[:n])
    fused = linear(lex, vec, LINEAR_WEIGHT)
    top = sorted(fused, key=lambda i: (-fused[i], -i))[:k]
    return [(i, fused[i], lex.get(i), vec.get(i)) for i in top]


sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
item = st.tuples(
    st.sampled_from(SCOPES),
    st.lists(sentence, min_size=1, max_size=3).map(". ".join),
    st.sampled_from(KINDS),
    st.integers(0, 9).map(float),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    data=st.lists(item, min_size=1, max_size=24),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    n=st.integers(1, 8),
    k=st.integers(1, 8),
    kinds=st.none() | st.lists(st.sampled_from(KINDS), min_size=1, max_size=2, unique=True),
    as_of=st.none() | st.integers(0, 9).map(float),
)
def test_search_equals_the_brute_force_oracle(
    data: list[Any], query: str, n: int, k: int, kinds: list[str] | None, as_of: float | None
) -> None:
    note(repr((data, query, n, k, kinds, as_of)))
    emb = HashingEmbedder(dim=48)
    owned: dict[tuple[str, str | None], list[Any]] = {s: [] for s in SCOPES}
    with RecallIndex("sqlite://", embedder=emb, candidates=n, keys=KEY_KINDS) as idx:
        for half in (data[: len(data) // 2], data[len(data) // 2 :]):  # searched in between
            batch: dict[tuple[str, str | None], list[Message]] = {}
            for scope, text, role, at in half:
                mine = owned[scope]
                if any(t == text for t, *_ in mine):
                    continue  # equal vectors would tie by float32 noise at the cut
                sent = batch.setdefault(scope, [])
                users = [m.text() for m in sent if m.role == "user"]
                exchange = users[-1] if role != "user" and users else None
                sent.append(Message(f"m{len(mine)}", role, content=text, created_at=at))
                mine.append((text, role, at, exchange))
            for scope, msgs in batch.items():  # one add a scope: replies see their request
                idx.add(msgs, user_id=scope[0], tenant=scope[1], session_id="s")
            for (user, tenant), mine in owned.items():
                hits = idx.search(query, user_id=user, tenant=tenant, k=k, kinds=kinds, as_of=as_of)
                if not mine:
                    assert hits == []
                    continue
                want = oracle(mine, query, emb, n, k, kinds, as_of)
                assert [h.message_id for h in hits] == [f"m{i}" for i, *_ in want]
                for h, (i, score, lex, cos) in zip(hits, want, strict=True):
                    assert h.text == mine[i][0] and math.isclose(h.score, score, rel_tol=1e-6)
                    assert (h.lexical is None) == (lex is None)
                    if lex is not None:
                        assert h.lexical is not None
                        assert math.isclose(h.lexical, lex, rel_tol=1e-9)
                    assert (h.similarity is None) == (cos is None)
                    if cos is not None:
                        assert h.similarity is not None
                        assert math.isclose(h.similarity, cos, abs_tol=1e-6)


@settings(max_examples=EXAMPLES * 5, deadline=None)
@given(texts=st.lists(st.text(alphabet="abcXYZ019 _-.,!?\t\n\x00éüß", max_size=30), min_size=1))
def test_the_fast_ascii_split_finds_the_regex_words(texts: list[str]) -> None:
    from convomem.recall._partition import _END, _WORD_OR_END, split_words
    from convomem.recall.analyze import fold

    for batch in (texts, [t.encode("ascii", "ignore").decode() for t in texts]):
        folded = [fold(t).replace(_END, " ") for t in batch]
        assert split_words(batch) == _WORD_OR_END.findall(_END.join(folded) + _END)


def test_neighbours_link_in_seq_order_per_session() -> None:
    """Rows link to the row before them in their session; one out of seq order links to
    nothing and is not linked to; a view's ``nxt`` past its rows does not count."""
    from convomem.recall import _partition

    part = _partition.Partition(np, 4)
    rows = [
        (1, "user", 0.0, "a", bytes(16), "s1", 0),
        (2, "user", 0.0, "b", bytes(16), "s2", None),
        (3, "user", 0.0, "c", bytes(16), "s1", 1),
        (4, "user", 0.0, "d", bytes(16), "s1", 0),  # out of order
    ]
    part.extend(rows[:3], 3, 0)
    v, _ = part.view()
    part.extend([*rows[3:], (5, "user", 0.0, "e", bytes(16), "s2", 7)], 5, 0)
    assert part.prev[:5].tolist() == [-1, -1, 0, -1, 1]
    assert part.nxt[:5].tolist() == [2, 4, -1, -1, -1]
    assert v.n == 3  # the earlier view: row 1's next (4) is past it
    acc = _partition.term_frequencies(np, v, np.array([1]), np.array([2]))
    assert acc.tolist() == [0.0, 2.0, 0.0]


def test_a_turn_is_found_by_the_question_it_answers() -> None:
    """The neighbour weights at work: the answer shares no word with the question, the
    turn before it does."""
    from convomem.recall import _partition

    part = _partition.Partition(np, 4)
    texts = ["Did you read the book about adoption?", "Yes, self-acceptance mostly.", "ok"]
    part.extend([(i + 1, "user", 0.0, t, bytes(16), "s", i) for i, t in enumerate(texts)], 3, 0)
    found = dict(_partition.lexical(np, part, ["adopt"], 5, None, None))
    assert set(found) == {1, 2} and found[1] > found[2]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dim=st.integers(1, 40),
    batches=st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=30), max_size=4),
    zeros=st.floats(0.0, 1.0),
)
def test_similarities_are_each_rows_best_key_sparse_or_dense(
    seed: int, dim: int, batches: list[list[int]], zeros: float
) -> None:
    """Rows of 1-4 keys added in batches (the slots grow) against the float64 maximum
    of their keys' dot products, for queries from all-zero to dense (the sparse path sums
    only the non-zero dimensions); a view taken before later batches sees its rows only."""
    from convomem.recall import _partition

    rng = np.random.default_rng(seed)
    part = _partition.Partition(np, dim)
    query = rng.standard_normal(dim).astype(np.float32)
    query[rng.random(dim) < zeros] = 0.0
    rows: list[Any] = []
    views = []
    for counts in batches:
        keys = [rng.standard_normal((c, dim)).astype(np.float32) for c in counts]
        new = [
            (len(rows) + i + 1, "user", 0.0, "w", k.tobytes(), "s", None)
            for i, k in enumerate(keys)
        ]
        part.extend(new, len(rows) + len(keys), 0)
        rows += keys
        views.append((part.view()[0], len(rows)))
    for v, n in views:
        got = _partition.similarities(np, v.vecs, v.n, query)
        want = [float(np.max(k.astype(np.float64) @ query.astype(np.float64))) for k in rows[:n]]
        assert v.n == n and got.dtype == np.float32 and got.shape == (n,)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-4)
