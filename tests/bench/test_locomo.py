"""``bench/locomo/run.py`` on a conversation made up here in LoCoMo's format (the real
data is never in the repository): it reads the format, runs the real ``RecallIndex``
path, and on a conversation shaped like the real ones (answers that follow the question
that names their topic, inflected words, two speakers, a question naming a month) the
default ranking finds at least what plain BM25 finds, and more at rank 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from locomo import run as locomo

FILLER = [
    "That sounds great, tell me more!",
    "Haha yes, it was a lot of fun.",
    "I hope you have a wonderful week.",
    "Thanks, that means a lot to me.",
    "Wow, I did not expect that at all.",
]
TURNS = [  # (session, speaker, text); an answer follows its question, chatter elsewhere
    (1, "Ana", "Did you finish painting the old fence last weekend?"),
    (1, "Ben", "Yes! Took two days, but it looks brand new now."),
    (1, "Ana", "I adopted a puppy from the shelter yesterday."),
    (1, "Ben", "A puppy! What breed is she?"),
    (1, "Ana", "A beagle. Her name is Biscuit."),
    (2, "Ben", "How was the marathon you were training for?"),
    (2, "Ana", "I finished in four hours and ten minutes."),
    (2, "Ben", "Which books are you reading these days?"),
    (2, "Ana", "Mostly poetry collections from the library."),
    (2, "Ben", "I started volunteering at the food bank."),
    (3, "Ana", "We went camping by the lake with my sister."),
    (3, "Ben", "I paint landscapes on Sundays now."),
    (3, "Ana", "Biscuit loves chasing ducks at the lake."),
]
ANSWERS = {1, 4, 6, 8}  # the turns that answer the one before
QUESTIONS = [  # (question, evidence turn numbers)
    ("When did Ben paint the fence?", [1]),
    ("What breed is Ana's puppy?", [4]),
    ("How long did Ana take to finish the marathon?", [6]),
    ("What does Ana read?", [8]),
    ("Where does Ben volunteer?", [9]),
    ("What did Ana do in June 2023?", [10]),
    ("What does Ben paint?", [11]),
]


def conversation() -> dict[str, Any]:
    data: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben", "qa": []}
    dates = {
        1: "2:00 pm on 3 May, 2023",
        2: "4:15 pm on 20 May, 2023",
        3: "9:30 am on 8 June, 2023",
    }
    ids = []
    for s, date in dates.items():
        data[f"session_{s}_date_time"] = date
        turns = []
        for i, (session, speaker, text) in enumerate(TURNS):
            if session != s:
                continue
            for filler in [] if i in ANSWERS else FILLER[: 2 + i % 3]:  # chatter
                who = "Ben" if speaker == "Ana" else "Ana"
                turns.append({"speaker": who, "dia_id": f"D{s}:{len(turns) + 1}", "text": filler})
            turns.append({"speaker": speaker, "dia_id": f"D{s}:{len(turns) + 1}", "text": text})
            ids.append(turns[-1]["dia_id"])
        data[f"session_{s}"] = turns
    for q, evidence in QUESTIONS:
        data["qa"].append(
            {"question": q, "answer": "-", "evidence": [ids[e] for e in evidence], "category": 4}
        )
    data["qa"].append({"question": "Unanswerable?", "answer": "-", "category": 5})
    return data


def test_the_default_finds_what_plain_bm25_finds_and_more_at_rank_one(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps(conversation()))
    turns, questions = locomo.load(path)
    assert len(questions) == len(QUESTIONS)  # category 5 (no evidence) left out
    assert turns[0]["text"].startswith("Ben: ") and turns[0]["seq"] == 0
    convs = {"x": (turns, questions)}
    search = locomo.bm25(turns, stop=False)
    plain = locomo.score([search(q["q"], 10) for q in questions], questions)
    default = locomo.run_index(convs)
    assert default["r@10"] >= plain["r@10"]
    assert default["r@1"] > plain["r@1"]


def test_the_runner_prints_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").write_text(json.dumps(conversation()))
    locomo.main(["--data", str(tmp_path), "--embedders", "hashing", "--json", str(tmp_path / "o")])
    out = capsys.readouterr().out
    for row in ("bm25 plain", "bm25 stop", "default", "lexical", "hashing"):
        assert f"\n{row} " in out
    assert set(json.loads((tmp_path / "o").read_text())) >= {"default", "bm25 plain"}
