"""SQLite session store: appends and reopen-to-read against the raw ``sqlite3`` driver.

Every figure is a ratio to the raw driver doing the same work in the same run, on the
same kind of file (WAL, ``synchronous=NORMAL``, one transaction per append), in
interleaved rounds (best of ``--rounds``; CPU time of this process, wall time too):

- **append x1**: ``session.append([m])`` per message, against a raw loop that per
  message serializes it (``json`` of ``m.to_dict()``, as any program storing it must)
  and runs ``BEGIN IMMEDIATE; INSERT; COMMIT``. Target 1.5x. Printed beside it: the raw
  loop with rows serialized beforehand (a bare ``INSERT`` of ready strings), and the raw
  loop doing what an append writes (the message row and an ``UPDATE`` of the session's
  row: its next seq and update time, which TTL and ``info()`` need).
- **append x100**: ``session.append(batch)`` of 100 messages against one transaction of
  ``executemany`` per batch (serialization in the loop, as above). Target 1.5x.
- **reopen + newest 100**: on a 100,000-message session, a new database object opens
  the file, and ``entries(limit=100, newest_first=True)`` decodes the newest 100 into
  ``Message`` objects; against a raw connect + ``SELECT ... ORDER BY seq DESC LIMIT 100``
  + ``Message.from_dict(json.loads(...))`` of each row. Target 3x.

    .venv/bin/python bench/bench_stores.py              # 2,000 single appends, 100k reopen
    .venv/bin/python bench/bench_stores.py --quick
    .venv/bin/python bench/bench_stores.py --dir /dev/shm   # files on tmpfs (no disk)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convomem.model import Message
from convomem.stores.records import dumps
from convomem.stores.sqlite import SQLiteDatabase
from workload import messages as workload_messages

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS raw_messages (row INTEGER PRIMARY KEY, session_pk INTEGER NOT "
    "NULL, seq INTEGER NOT NULL, message_id TEXT NOT NULL, data TEXT NOT NULL, counts TEXT, "
    "UNIQUE (session_pk, seq), UNIQUE (session_pk, message_id))"
)
SESSIONS = (
    "CREATE TABLE IF NOT EXISTS raw_sessions (pk INTEGER PRIMARY KEY, next_seq INTEGER, "
    "updated_at REAL)"
)
INSERT = "INSERT INTO raw_messages (session_pk, seq, message_id, data, counts) VALUES (?,?,?,?,?)"


def raw_connect(path: str) -> sqlite3.Connection:
    """A connection configured as the store's are (WAL, NORMAL, busy timeout)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(SCHEMA)
    conn.execute(SESSIONS)
    conn.execute("INSERT OR IGNORE INTO raw_sessions VALUES (4, 1, 0)")
    return conn


@contextlib.contextmanager
def timed(out: dict[str, list[tuple[float, float]]], name: str) -> Iterator[None]:
    gc.collect()
    gc.disable()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        yield
    finally:
        out.setdefault(name, []).append((time.process_time() - cpu, time.perf_counter() - wall))
        gc.enable()


def raw_single(conn: sqlite3.Connection, pk: int, msgs: list[Message]) -> None:
    for i, m in enumerate(msgs, 1):
        data = dumps(m.to_dict())
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (pk, i, m.id, data, None))
        conn.execute("COMMIT")


def raw_single_session(conn: sqlite3.Connection, pk: int, msgs: list[Message]) -> None:
    """The same writes as an append: the message row and the session's row (its next
    seq and update time), in one transaction."""
    for i, m in enumerate(msgs, 1):
        data = dumps(m.to_dict())
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (pk, i, m.id, data, None))
        conn.execute(
            "UPDATE raw_sessions SET next_seq = ?, updated_at = ? WHERE pk = ?",
            (i + 1, time.time(), pk),
        )
        conn.execute("COMMIT")


def raw_single_ready(conn: sqlite3.Connection, pk: int, rows: list[tuple[str, str]]) -> None:
    for i, (mid, data) in enumerate(rows, 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (pk, i, mid, data, None))
        conn.execute("COMMIT")


def raw_batches(conn: sqlite3.Connection, pk: int, msgs: list[Message], size: int) -> None:
    for start in range(0, len(msgs), size):
        rows = [
            (pk, start + i + 1, m.id, dumps(m.to_dict()), None)
            for i, m in enumerate(msgs[start : start + size])
        ]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, rows)
        conn.execute("COMMIT")


def own_single(db: SQLiteDatabase, sid: str, msgs: list[Message]) -> None:
    s = db.session(sid, user_id="u")
    for m in msgs:
        s.append([m])


def own_batches(db: SQLiteDatabase, sid: str, msgs: list[Message], size: int) -> None:
    s = db.session(sid, user_id="u")
    for start in range(0, len(msgs), size):
        s.append(msgs[start : start + size])


def best(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return min(c for c, _ in samples), min(w for _, w in samples)


def report(
    title: str,
    results: dict[str, list[tuple[float, float]]],
    own: str,
    floor: str,
    per: int,
    target: float,
    extra: tuple[str, ...] = (),
) -> None:
    print(title)
    for name in (floor, *extra, own):
        cpu, wall = best(results[name])
        print(f"  {name:<28} cpu {cpu * 1e6 / per:9.1f} us   wall {wall * 1e6 / per:9.1f} us")
    oc, ow = best(results[own])
    fc, fw = best(results[floor])
    verdict = "met" if oc / fc <= target else "MISSED"
    print(
        f"  {own} / {floor}: cpu {oc / fc:.2f}x  wall {ow / fw:.2f}x  (target {target}x: {verdict})"
    )
    for name in extra:
        ec, ew = best(results[name])
        print(f"  {own} / {name}: cpu {oc / ec:.2f}x  wall {ow / ew:.2f}x")


def bench_appends(base: Path, n: int, rounds: int) -> None:
    msgs = workload_messages(n, seed=1)
    results: dict[str, list[tuple[float, float]]] = {}
    for r in range(rounds):
        # Fresh files each round, so every subject writes into an equally empty database.
        with contextlib.closing(raw_connect(str(base / f"raw{r}.db"))) as raw:
            with timed(results, "raw x1 (serialize+INSERT)"):
                raw_single(raw, 1, msgs)
            with timed(results, "raw x1 (+ session UPDATE)"):
                raw_single_session(raw, 4, msgs)
            ready = [(m.id, dumps(m.to_dict())) for m in msgs]
            with timed(results, "raw x1 (ready rows)"):
                raw_single_ready(raw, 2, ready)
            with timed(results, "raw x100"):
                raw_batches(raw, 3, msgs, 100)
        with SQLiteDatabase(str(base / f"own{r}.db")) as db:
            with timed(results, "append x1"):
                own_single(db, "single", msgs)
            with timed(results, "append x100"):
                own_batches(db, "batches", msgs, 100)
    report(
        f"Single-message appends, {n:,} messages, best of {rounds} (per append)",
        results,
        "append x1",
        "raw x1 (serialize+INSERT)",
        n,
        1.5,
        ("raw x1 (ready rows)", "raw x1 (+ session UPDATE)"),
    )
    report(
        f"Appends in batches of 100, {n:,} messages, best of {rounds} (per message)",
        results,
        "append x100",
        "raw x100",
        n,
        1.5,
    )


def build_big(path: Path, n: int) -> None:
    msgs = workload_messages(min(n, 20_000), seed=2)
    with SQLiteDatabase(str(path)) as db:
        s = db.session("big", user_id="u")
        for start in range(0, n, 1000):
            batch = [
                m.replace(id=f"{m.id}-{start + i}")
                for i, m in enumerate(msgs[start % len(msgs) : start % len(msgs) + 1000])
            ]
            s.append(batch)


def raw_reopen(path: str) -> list[Message]:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        pk = conn.execute(
            "SELECT pk FROM convomem_sessions WHERE tenant = '' AND session_id = 'big'"
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT data FROM convomem_messages WHERE session_pk = ? ORDER BY seq DESC LIMIT 100",
            (pk,),
        ).fetchall()
        return [Message.from_dict(json.loads(d)) for (d,) in rows]
    finally:
        conn.close()


def own_reopen(path: str) -> list[Message]:
    with SQLiteDatabase(path) as db:
        entries, _ = db.session("big", user_id="u").entries(limit=100, newest_first=True)
        return [e.message for e in entries]


def bench_reopen(base: Path, n: int, rounds: int) -> None:
    path = base / "big.db"
    t0 = time.perf_counter()
    build_big(path, n)
    print(f"(built a {n:,}-message session in {time.perf_counter() - t0:.1f} s)")
    results: dict[str, list[tuple[float, float]]] = {}
    subjects: dict[str, Callable[[str], Any]] = {"raw": raw_reopen, "reopen": own_reopen}
    assert [m.id for m in raw_reopen(str(path))] == [m.id for m in own_reopen(str(path))]
    for _ in range(rounds):
        for name, fn in subjects.items():
            with timed(results, name):
                for _ in range(20):
                    fn(str(path))
    report(
        f"Reopen + newest 100 of a {n:,}-message session, best of {rounds} (per reopen)",
        results,
        "reopen",
        "raw",
        20,
        3.0,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--appends", type=int, default=2000)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="500 appends, a 20,000 session")
    ap.add_argument("--only", choices=("appends", "reopen"), default=None)
    args = ap.parse_args()
    if args.quick:
        args.appends, args.big, args.rounds = 500, 20_000, 3
    base = Path(tempfile.mkdtemp(dir=args.dir, prefix="convomem-bench-"))
    try:
        if args.only in (None, "appends"):
            bench_appends(base, args.appends, args.rounds)
        if args.only in (None, "reopen"):
            bench_reopen(base, args.big, args.rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
