"""Recall over real conversations: LoCoMo (dev half), the index against plain BM25.

    .venv/bin/python bench/locomo/run.py                        # default config + BM25
    .venv/bin/python bench/locomo/run.py --embedders static hashing minilm e5
    .venv/bin/python bench/locomo/run.py --data PATH --json out.json

The data is read from ``--data`` (default: ``../shared/data/locomo-dev`` from the repo
root; CC BY-NC 4.0, never copied into this repository). Each conversation is one user;
each of its sessions one session; each turn one message ``"Speaker: text"`` (plus
``" [shares a photo: caption]"`` when it has one), with its seq in the session and its
session's date (UTC) as ``created_at``. The questions of categories 1-4 are asked with
``search(question, user_id=..., k=10)`` and scored by any-evidence recall@1/5/10 over
the turns' ``dia_id`` (a hit of another conversation would be a miss: none can come back,
one user each).

Rows, each through the real code path (``RecallIndex(url)`` on a SQLite file):

- **default**: ``RecallIndex(url)``, nothing else given;
- **lexical**: the same with ``vector_weight=0`` (BM25F alone, the boosts kept);
- **<embedder>**: ``RecallIndex(url, embedder=embedder_named(name))`` per ``--embedders``;
- **bm25 plain** / **bm25 stop**: the issue's baseline, a 30-line Okapi BM25 (k1 1.2,
  b 0.75, ``ln(1 + (N - df + .5) / (df + .5))``) over the same "Speaker: text" turns per
  conversation, words ``\\w+`` lowercased; "stop" leaves out ``analyze.STOP_WORDS``.

Also: ingest rate (messages/s through ``add``, one call per session, embedding
included) and search latency p50/p99 (ms, every question, the partitions loaded).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from convomem.model import Message
from convomem.recall import RecallIndex
from convomem.recall.analyze import STOP_WORDS
from convomem.recall.embedders import EMBEDDERS, embedder_named

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev"
KS = (1, 5, 10)


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One conversation file: its turns (in order) and its questions with evidence."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = []
    n = 1
    while isinstance(data.get(f"session_{n}"), list):
        when = dt.datetime.strptime(
            data[f"session_{n}_date_time"].strip(), "%I:%M %p on %d %B, %Y"
        ).replace(tzinfo=dt.UTC)
        for i, t in enumerate(data[f"session_{n}"]):
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            turns.append(
                {"id": t["dia_id"], "session": n, "seq": i, "text": text, "at": when.timestamp()}
            )
        n += 1
    questions = []
    for q in data["qa"]:
        evidence = {e.strip() for e in ";".join(q.get("evidence") or []).split(";") if e.strip()}
        if q.get("category") in (1, 2, 3, 4) and evidence:
            questions.append({"q": q["question"], "evidence": evidence, "cat": q["category"]})
    return turns, questions


def bm25(turns: list[dict[str, Any]], stop: bool) -> Any:
    """The issue's baseline: plain Okapi BM25 over the turns; returns search(q, k)."""

    def words(s: str) -> list[str]:
        return [w for w in re.findall(r"\w+", s.lower()) if not (stop and w in STOP_WORDS)]

    docs = [Counter(words(t["text"])) for t in turns]
    lens = [sum(d.values()) for d in docs]
    avg = sum(lens) / len(docs)
    df = Counter(w for d in docs for w in d)

    def search(q: str, k: int) -> list[str]:
        scores = []
        for d, dl in zip(docs, lens, strict=True):
            s = 0.0
            for w in set(words(q)):
                if w in d:
                    idf = math.log(1 + (len(docs) - df[w] + 0.5) / (df[w] + 0.5))
                    s += idf * d[w] * 2.2 / (d[w] + 1.2 * (0.25 + 0.75 * dl / avg))
            scores.append(s)
        order = sorted(range(len(docs)), key=lambda i: -scores[i])
        return [turns[i]["id"] for i in order[:k]]

    return search


def score(found: list[list[str]], questions: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for k in KS:
        out[f"r@{k}"] = sum(
            bool(q["evidence"] & set(f[:k])) for f, q in zip(found, questions, strict=True)
        )
        out[f"r@{k}"] = round(out[f"r@{k}"] / len(questions), 3)
    return out


def run_index(convs: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Every conversation into one RecallIndex on a SQLite file; every question asked."""
    with tempfile.TemporaryDirectory() as tmp:
        index = RecallIndex(f"sqlite:///{tmp}/recall.db", **options)
        t0 = time.perf_counter()
        count = 0
        for name, (turns, _) in convs.items():
            sessions: dict[int, list[dict[str, Any]]] = {}
            for t in turns:
                sessions.setdefault(t["session"], []).append(t)
            for s, ts in sessions.items():
                msgs = [
                    Message(id=t["id"], role="user", content=t["text"], created_at=t["at"])
                    for t in ts
                ]
                index.add(msgs, user_id=f"c{name}", session_id=f"s{s}", seqs=[t["seq"] for t in ts])
                count += len(ts)
        ingest = time.perf_counter() - t0
        found, lat, questions = [], [], []
        for name, (_, qs) in convs.items():
            index.search("warm up", user_id=f"c{name}")  # the partition loaded
            for q in qs:
                t1 = time.perf_counter()
                hits = index.search(q["q"], user_id=f"c{name}", k=max(KS))
                lat.append(time.perf_counter() - t1)
                found.append([h.message_id for h in hits])
                questions.append(q)
        index.close()
    lat.sort()
    out = score(found, questions)
    out.update(
        ingest_per_s=round(count / ingest),
        p50_ms=round(1000 * lat[len(lat) // 2], 2),
        p99_ms=round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2),
    )
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--embedders", nargs="*", choices=EMBEDDERS, default=["static", "hashing"])
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    files = sorted(args.data.glob("*.json"))
    if not files:
        sys.exit(f"no conversations (*.json) in {args.data}")
    convs = {f.stem: load(f) for f in files}
    rows: dict[str, dict[str, Any]] = {}
    for stop in (False, True):
        found, questions = [], []
        for turns, qs in convs.values():
            search = bm25(turns, stop)
            found += [search(q["q"], max(KS)) for q in qs]
            questions += qs
        rows["bm25 stop" if stop else "bm25 plain"] = score(found, questions)
    rows["default"] = run_index(convs)
    rows["lexical"] = run_index(convs, vector_weight=0.0)
    for name in args.embedders:
        rows[name] = run_index(convs, embedder=embedder_named(name))
    nq = sum(len(qs) for _, qs in convs.values())
    print(f"LoCoMo {args.data.name}: {len(convs)} conversations, {nq} questions (categories 1-4)")
    cols = ["r@1", "r@5", "r@10", "ingest_per_s", "p50_ms", "p99_ms"]
    print(f"{'row':<12}" + "".join(f"{c:>14}" for c in cols))
    for name, r in rows.items():
        print(f"{name:<12}" + "".join(f"{r.get(c, ''):>14}" for c in cols))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
