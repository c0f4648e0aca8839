"""The LongMemEval-shaped benchmark's generator (deterministic, well-formed: every question
answerable from its evidence) and its metrics (on hand-made cases)."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from longmem import metrics
from longmem.generate import generate


def _text(m: dict[str, object]) -> str:
    content = m["content"]
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return " ".join(str(b.get("content", "")) for b in content)


def test_same_seed_same_bytes_other_seed_other_set() -> None:
    a = json.dumps(generate(7, 2, "dev"), sort_keys=True)
    assert a == json.dumps(generate(7, 2, "dev"), sort_keys=True)
    assert a != json.dumps(generate(8, 2, "dev"), sort_keys=True)
    assert a != json.dumps(generate(7, 2, "heldout"), sort_keys=True)


@pytest.mark.parametrize("set_name", ["dev", "heldout"])
def test_questions_are_answerable_from_their_evidence(set_name: str) -> None:
    data = generate(3, 2, set_name)
    owner: dict[str, str] = {}
    texts: dict[str, str] = {}
    where: dict[str, int] = {}
    for user in data["users"]:
        sessions = user["sessions"]
        assert len(sessions) == 20
        dates = [dt.datetime.fromisoformat(s["date"]) for s in sessions]
        assert dates == sorted(dates) and len(set(dates)) == 20
        for i, s in enumerate(sessions):
            assert 16 <= len(s["messages"]) <= 80
            for m in s["messages"]:
                owner[m["id"]] = user["user_id"]
                texts[m["id"]] = _text(m)
                where[m["id"]] = i
    types = {q["type"] for q in data["questions"]}
    assert types == {
        "single-session-user",
        "single-session-preference",
        "single-session-assistant",
        "knowledge-update",
        "temporal-reasoning",
        "multi-session",
        "abstention",
    }
    for q in data["questions"]:
        if q["type"] == "abstention":
            assert q["evidence"] == [] and q["must_contain"] == []
            continue
        assert q["evidence"] and q["must_contain"]
        assert all(owner[e] == q["user_id"] for e in q["evidence"])
        said = " ".join(texts[e] for e in q["evidence"]).casefold()
        assert all(s.casefold() in said for s in q["must_contain"]), q
        if q["type"] == "knowledge-update":
            (old,) = q["superseded"]
            assert where[old] < where[q["evidence"][0]]
        if q["type"] == "multi-session":
            assert len({where[e] for e in q["evidence"]}) == len(q["evidence"]) >= 2


def test_metrics_on_a_hand_made_case() -> None:
    ranked = ["a", "b", "c", "d"]
    assert not metrics.recall_any(ranked, ["c", "x"], 2)
    assert metrics.recall_any(ranked, ["c", "x"], 3)
    assert not metrics.recall_all(ranked, ["c", "x"], 4)
    assert metrics.recall_all(ranked, ["a", "c"], 3)
    assert not metrics.recall_all(ranked, [], 3)
    # c at rank 3: 1/log2(4) = 0.5; ideal for two relevant: 1 + 1/log2(3)
    assert metrics.ndcg(ranked, ["c", "x"], 3) == pytest.approx(0.5 / (1 + 1 / math.log2(3)))
    assert metrics.ndcg(ranked, ["a"], 10) == 1.0
    assert metrics.ndcg(ranked, ["z"], 10) == 0.0
    assert metrics.current_first(ranked, ["b"], ["c"], 10)
    assert metrics.current_first(ranked, ["b"], ["z"], 10)
    assert not metrics.current_first(ranked, ["c"], ["a"], 10)
    assert not metrics.current_first(ranked, ["d"], [], 3)
    t = metrics.calibrate([0.9, 0.8, 0.3], [0.2, 0.4])
    assert t == 0.3  # 4 of 5 right; 0.8 also gets 4, the lower one wins
    assert metrics.abstention([0.9, 0.8, 0.3, 0.2, 0.4], [False] * 3 + [True] * 2, t) == (
        1.0,
        0.5,
        1,
    )
    assert metrics.holds("Your gate is B22.", ["b22"])
    assert not metrics.holds("Your gate is B22.", ["b22", "C7"])
    assert not metrics.holds("anything", [])


def test_the_runner_end_to_end_on_two_users(tmp_path: Path) -> None:
    from convomem.recall import HashingEmbedder
    from longmem.run import run_set, score

    data = generate(5, 2, "dev", sessions=10, exchanges=6)
    result = run_set(data, HashingEmbedder(), str(tmp_path), None, "direct")
    assert len(result["records"]) == len(data["questions"])
    s = score(result, None)
    assert s["cross_user"] == 0
    for method in ("hybrid", "fusion", "bm25", "vector", "recency"):
        row = s[method]
        assert 0.0 <= row["recall_any@5"] <= row["recall_any@10"] <= 1.0
        assert 0.0 <= row["ndcg@10"] <= 1.0
    # a question whose words are its evidence's is found: the pipeline is wired up
    assert s["bm25"]["recall_any@10"] > 0.0 and s["hybrid"]["recall_any@10"] > 0.0
    held = generate(5, 2, "heldout", sessions=10, exchanges=6)
    result = run_set(held, HashingEmbedder(), str(tmp_path), None, "direct")
    assert score(result, s["thresholds"])["thresholds"] == s["thresholds"]  # dev's, reused


def test_planted_turns_look_like_filler() -> None:
    from longmem.filler import TOPICS

    data = generate(11, 3, "dev")
    evidence = {e for q in data["questions"] for e in q["evidence"]}
    openers = tuple(o for t in TOPICS.values() for o in t["open"])
    planted, filler = [], []
    for user in data["users"]:
        for s in user["sessions"]:
            for m in s["messages"]:
                if m["role"] != "user" or not isinstance(m["content"], str):
                    continue
                if m["id"] in evidence:
                    planted.append(m["content"])
                elif m["content"].startswith(openers):
                    filler.append(m["content"])
    assert planted and len(filler) > 5 * len(planted)
    # planted user turns open like filler does, and are about as long
    assert all(p.startswith(openers) for p in planted)
    words = [sum(len(t.split()) for t in group) / len(group) for group in (planted, filler)]
    assert 0.7 < words[0] / words[1] < 1.45, words
    # a filler turn carries a first-person aside as often as not
    asides = {a for t in TOPICS.values() for a in t["aside"]}
    with_aside = sum(any(a in f for a in asides) for f in filler)
    assert with_aside > 0.4 * len(filler)
