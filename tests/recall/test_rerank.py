"""recall._rerank: the present first for "now" questions, dated turns for "when" ones;
every other question keeps the fused order; ``RecallIndex.search`` applies it."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message
from convomem.recall import Hit, RecallIndex
from convomem.recall._rerank import asks_present, asks_when, is_dated, rerank
from convomem.stores import open_store


def hit(mid: str, score: float, created: float, text: str = "some text") -> Hit:
    return Hit(mid, "s1", score, text, "user", None, created, None, None)


def test_the_newer_of_two_close_statements_wins_a_present_question() -> None:
    old = hit("old", 0.0330, 100.0, "I go to FitLab three times a week.")
    mid = hit("x", 0.0320, 150.0)
    new = hit("new", 0.0310, 200.0, "I cancelled FitLab; I go to PulseHaus now.")
    out = rerank([old, mid, new], "Which gym do I go to now?")
    assert [h.message_id for h in out] == ["new", "x", "old"]
    assert out[0].score == 0.0310 * 1.5  # the newest gets the whole boost
    assert out[2] is old  # the oldest is untouched
    # a far stronger old match is not buried by a 50% boost
    strong = hit("old", 0.1, 100.0)
    assert rerank([strong, new], "what is my gym now?")[0].message_id == "old"


def test_when_questions_raise_dated_turns() -> None:
    plain = hit("a", 0.030, 100.0, "Dentist reminder at 14:30")
    dated = hit("b", 0.025, 90.0, "I paid the dentist bill on March 1.")
    assert [h.message_id for h in rerank([plain, dated], "When did I go to the dentist?")] == [
        "b",
        "a",
    ]
    assert [h.message_id for h in rerank([plain, dated], "Who is my dentist?")] == ["a", "b"]


def test_recognizers() -> None:
    assert asks_present("What diet am I on these days?")
    assert asks_present("¿Dónde vivo ahora?")
    assert not asks_present("What is my dog's name?")
    assert asks_when("when did the boiler break?")
    assert asks_when("On what date did I renew my passport?")
    assert not asks_when("Where do I live?")
    for text in ("fell off my bike three days ago", "back on 2026-03-13", "last Tuesday", "ayer"):
        assert is_dated(text), text
    assert not is_dated("I bought a fern for the balcony")


scores = st.lists(st.tuples(st.floats(0.001, 1.0), st.floats(0.0, 1e9)), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(scores, st.sampled_from(["Where do I live now?", "When did I move?", "What is it?"]))
def test_a_permutation_and_untouched_order_for_other_questions(
    rows: list[tuple[float, float]], query: str
) -> None:
    hits = sorted(
        (hit(f"m{i}", s, t, "moved last week" if i % 2 else "x") for i, (s, t) in enumerate(rows)),
        key=lambda h: -h.score,
    )
    out = rerank(hits, query)
    assert sorted(h.message_id for h in out) == sorted(h.message_id for h in hits)
    assert all(b.score <= a.score for a, b in pairwise(out))
    if query == "What is it?":
        assert out == hits
    assert rerank(hits, query, k=3) == out[:3]


WORDS = ["gym", "now", "when", "FitLab", "March", "yesterday", "moved", "dentist", "I"]


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
        min_size=1,
        max_size=30,
    ),
    query=st.sampled_from(["Which gym do I go to now?", "When did I go to the dentist?", "gym"]),
    k=st.integers(1, 8),
    candidates=st.integers(1, 12),
)
def test_search_reranks_its_best_candidates_before_the_cut(
    texts: list[str], query: str, k: int, candidates: int
) -> None:
    """``RecallIndex.search`` (``rerank=True``) is the fused best ``candidates`` of an
    index without it, reordered by ``rerank``, cut to ``k``; other questions unchanged."""

    with open_store("sqlite://") as db:
        plain = RecallIndex(db, candidates=candidates, rerank=False)
        msgs = [
            Message(f"m{i}", "user", content=t, created_at=float(i)) for i, t in enumerate(texts)
        ]
        plain.add(msgs, user_id="u", session_id="s")
        index = RecallIndex(db, candidates=candidates)
        got = index.search(query, user_id="u", k=k)
        fused = plain.search(query, user_id="u", k=max(k, candidates))
        want = rerank(fused, query, k=k) if asks_present(query) or asks_when(query) else fused[:k]
        assert [(h.message_id, h.score) for h in got] == [(h.message_id, h.score) for h in want]
        index.close()
        plain.close()


def test_the_newer_statement_comes_first_for_a_now_question_and_rerank_false_keeps_it() -> None:

    old = Message("old", "user", content="My gym is the FitLab gym at the station", created_at=1.0)
    filler = [Message(f"f{i}", "user", content=f"note {i}", created_at=2.0 + i) for i in range(5)]
    new = Message("new", "user", content="I switched gym to PulseHaus", created_at=10.0)
    with open_store("sqlite://") as db:
        for on, first in ((True, "new"), (False, "old")):
            index = RecallIndex(db, rerank=on)
            index.add([old, *filler, new], user_id="u", session_id="s")
            hits = index.search("Which gym is my gym now?", user_id="u", k=2)
            assert hits[0].message_id == first
            index.close()
