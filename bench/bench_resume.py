"""Reopening a long durable session: ConversationMemory's resume vs reading its rows raw.

A SQLite session of ``--messages`` messages (default 100,000; a file on /dev/shm when
there is one) is written with ``store.append`` batches (with token counts), then opened
once by a ``ConversationMemory`` (default configuration: extractive summarizer, facts
on): that first open has no state, replays the log once (the old path of every open) and
saves the state. Then, in interleaved rounds:

- **resume**: a new database handle, a new ``ConversationMemory`` over the session, and
  its first ``context()`` (CPU and wall; rows read, summarizer calls);
- **raw floor**: ``sqlite3`` opening the file, reading the session's state row (and
  ``json.loads`` of it and of its summary and view parts) and the view's rows (from the
  state's cut to the end, ``json.loads`` of each): the least any resume must do.

Ratio resume / floor (target 3x). The first open's replay is reported beside it, with
its summarizer calls: what every reopen cost before the state was saved.

    .venv/bin/python bench/bench_resume.py                  # 100,000 messages
    .venv/bin/python bench/bench_resume.py --messages 20000 --rounds 5

``--turns N`` (default 4,000; 0 skips) also feeds N messages, one at a time, to a
durable memory (a new SQLite session) and to a memory over the default in-memory store,
interleaved, and reports the mean and median CPU of an ``add`` of each (the durable one
writes each message, its count and, when it compacted, the state).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from convomem import ConversationMemory, open_store
from convomem.model import Message
from convomem.session.state import cut as view_cut
from convomem.tokens import get_tokenizer

_TEXT = (
    "the parcel for order {n} left the depot on Monday and support promised an update "
    "about shipping to Lyon before the weekend while the customer waited patiently"
)
WORDS = tuple(_TEXT.split(" "))


def message(i: int) -> Message:
    role = "user" if i % 2 else "assistant"
    text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8 + i % 17))
    return Message(f"m{i}", role, content=text.replace("{n}", str(1000 + i)))


def build(url: str, n: int, tokenizer: str) -> float:
    db = open_store(url)
    store = db.session("long", user_id="u")
    tok = get_tokenizer(tokenizer)
    name = getattr(tok, "name", tokenizer)
    start = time.process_time()
    for first in range(1, n + 1, 5000):
        batch = [message(i) for i in range(first, min(n, first + 4999) + 1)]
        store.append(batch, counts={m.id: {name: tok.count_message(m)} for m in batch})
    db.close()
    return time.process_time() - start


def resume(url: str, tokenizer: str) -> tuple[float, float, int, int, Any]:
    c0, w0 = time.process_time(), time.perf_counter()
    db = open_store(url)
    mem = ConversationMemory(tokenizer=get_tokenizer(tokenizer), store=db.session("long"))
    ctx = mem.context()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rows, calls = db.stats().rows_read, mem.stats().summarizer_calls
    db.close()
    return cpu, wall, rows, calls, ctx


def raw_floor(path: str) -> tuple[float, float, int]:
    c0, w0 = time.process_time(), time.perf_counter()
    conn = sqlite3.connect(path)
    pk, raw = conn.execute(
        "SELECT pk, state FROM convomem_sessions WHERE session_id = 'long'"
    ).fetchone()
    state = json.loads(raw)
    view = json.loads(state["view"])  # the summary is read too: json.loads below
    summary = json.loads(state["summary"])
    cut = view_cut({"view": view, "upto": state["upto"]})
    rows = conn.execute(
        "SELECT seq, message_id, data, counts FROM convomem_messages "
        "WHERE session_pk = ? AND seq >= ? ORDER BY seq",
        (pk, cut),
    ).fetchall()
    decoded = [(json.loads(r[2]), json.loads(r[3]) if r[3] else None) for r in rows]
    conn.close()
    assert summary
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return cpu, wall, len(decoded)


def turns(url: str, n: int, tokenizer: str) -> None:
    db = open_store(url)
    durable = ConversationMemory(tokenizer=get_tokenizer(tokenizer), store=db.session("turns"))
    memory = ConversationMemory(tokenizer=get_tokenizer(tokenizer))
    d_cpu: list[float] = []
    m_cpu: list[float] = []
    for i in range(1, n + 1):
        m = message(i)
        c0 = time.process_time()
        memory.add_message(m)
        c1 = time.process_time()
        durable.add_message(m)
        c2 = time.process_time()
        m_cpu.append(c1 - c0)
        d_cpu.append(c2 - c1)
    assert durable.context() == memory.context()
    half = slice(n // 2, n)
    dm, mm = statistics.fmean(d_cpu[half]), statistics.fmean(m_cpu[half])
    dmed, mmed = statistics.median(d_cpu[half]), statistics.median(m_cpu[half])
    print(f"\n== {n:,} adds, durable (SQLite file) vs in-memory, second half ({tokenizer})")
    print(f"  mean   {dm * 1e6:7.0f} us vs {mm * 1e6:7.0f} us: {dm / mm:.2f}x")
    print(f"  median {dmed * 1e6:7.0f} us vs {mmed * 1e6:7.0f} us: {dmed / mmed:.2f}x")
    st = durable.stats()
    print(f"  {st.compactions} compactions (each saved the state), {st.summarizer_calls} calls")
    db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--tokenizer", default="approx")
    ap.add_argument("--turns", type=int, default=4000)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else None))
    path = str(base / "resume.db")
    url = f"sqlite:///{path}"
    try:
        n = args.messages
        print(f"== resume of a {n:,}-message SQLite session ({args.tokenizer})")
        built = build(url, n, args.tokenizer)
        print(f"  written with append batches of 5,000: {built:.1f} s cpu")
        c0 = time.process_time()
        db = open_store(url)
        first = ConversationMemory(
            tokenizer=get_tokenizer(args.tokenizer), store=db.session("long")
        )
        want = first.context()
        replay_cpu = time.process_time() - c0
        replay_calls, replay_rows = first.stats().summarizer_calls, db.stats().rows_read
        view = first.stats().view_messages
        db.close()
        print(
            f"  first open (no state: replays the log once, saves the state): {replay_cpu:.2f} s "
            f"cpu, {replay_calls:,} summarizer calls, {replay_rows:,} rows read"
        )
        ours: list[tuple[float, float, int, int]] = []
        floor: list[tuple[float, float, int]] = []
        for _ in range(args.rounds):  # interleaved: load on the machine hits both alike
            cpu, wall, rows, calls, ctx = resume(url, args.tokenizer)
            assert ctx == want, "the resumed context differs"
            ours.append((cpu, wall, rows, calls))
            floor.append(raw_floor(path))
        med = statistics.median
        r_cpu, r_wall = med(o[0] for o in ours), med(o[1] for o in ours)
        f_cpu, f_wall = med(f[0] for f in floor), med(f[1] for f in floor)
        ratio = r_cpu / f_cpu
        print(
            f"  resume to context(): {r_cpu * 1e3:.2f} ms cpu ({r_wall * 1e3:.2f} ms wall), "
            f"{ours[0][2]} rows read (view: {view} messages), {ours[0][3]} summarizer calls"
        )
        print(
            f"  raw floor (sqlite3: state row + {floor[0][2]} view rows, json.loads): "
            f"{f_cpu * 1e3:.2f} ms cpu ({f_wall * 1e3:.2f} ms wall)"
        )
        verdict = "met" if ratio <= 3 else "MISSED"
        print(f"  resume / raw floor: {ratio:.2f}x cpu (target <= 3x: {verdict})")
        print(f"  resume / first open (log replay): {r_cpu / replay_cpu:.5f}x")
        if args.json:
            figures = {
                "messages": n,
                "first_open_cpu_s": replay_cpu,
                "first_open_summarizer_calls": replay_calls,
                "first_open_rows_read": replay_rows,
                "resume_cpu_s": r_cpu,
                "resume_wall_s": r_wall,
                "resume_rows_read": ours[0][2],
                "view_messages": view,
                "floor_cpu_s": f_cpu,
                "resume_over_floor": ratio,
            }
            Path(args.json).write_text(json.dumps(figures, indent=2))
        if args.turns:
            turns(url, args.turns, args.tokenizer)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
