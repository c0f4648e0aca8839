"""RecallIndex: search latency and ingest throughput, against brute-force floors.

Indexes ``--messages`` synthetic conversational messages (seeded; 8-20 words from a
2,000-word vocabulary in 1-3 sentences, user and assistant messages alternating,
HashingEmbedder(dim=256); each message embedded under ``--keys``, by default the
embedder's ``recall_keys``: HashingEmbedder's the text alone, ``--keys
message,sentences,exchange,facts`` adds its sentences, the exchange a reply answers and
the facts a user message states; random words state few) in two
layouts: **one user** holding
them all, and **spread** over ``--users`` users (same total). Then ``--queries``
searches (3-6 words; k=10), each for a random user of the layout, timed one by one
(p50/p99, after one warm-up search per user measured separately as "cold"); then, on
SQLite, a new index on the same file times its first search ("after a restart": the
partition from its snapshot, ``recall._snapshot``, or from the rows).

Floors measured in the same run:

- **search**: the exact vector scan alone, in numpy, on a float32 matrix of one vector
  per message of the user, already in memory (``mat @ q`` + ``argpartition``): what any
  exact message-level vector search pays; the index adds its other keys, BM25, fusion
  and reading the hits' rows.
- **ingest**: embedding the same texts with the same embedder plus a raw
  ``executemany`` of (text, vector blob) rows into a bare SQLite table.

Backends: SQLite (a file in /dev/shm when there is one) and PostgreSQL + pgvector (an
embedded server started here; ``--pg-messages`` sets its size, 0 skips it;
``--pg-build-after`` drops the HNSW indexes after the first batch and builds them once
the ingest is done, as one loads a big table: how 10^6 rows load in minutes rather than
the hour that keeping the graph up to date row by row takes).
``--embedder minilm`` embeds with MiniLMEmbedder (384 dims; the ``minilm`` extra and the
weights package) instead, ``--embedder e5`` with E5Embedder (384 dims; the ``e5``
extra): use them with a small ``--messages`` for their ingest rate;
``--embedder dense384`` gives random dense unit vectors of the same dimension (MiniLM's
search cost, its keys and fusion weight, without its forward pass).

    .venv/bin/python bench/bench_recall.py
    .venv/bin/python bench/bench_recall.py --messages 100000 --users 1000 --pg-messages 100000
    .venv/bin/python bench/bench_recall.py --messages 2000 --users 10 --pg-messages 0 \
        --embedder minilm
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall.embedders import EMBEDDERS, embedder_named
from convomem.recall.keys import KINDS as KEY_KINDS
from convomem.stores import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


ROLES = ("user", "assistant")


def vocabulary(rng: random.Random, size: int = 2000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)}
    return sorted(words)


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    weights = [1.0 / (i + 1) for i in range(len(vocab))]  # Zipf-like, as in conversation
    cum = list(itertools.accumulate(weights))  # the same draws as weights=, made once
    texts = []
    for _ in range(n):
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(8, 20))
        cuts = sorted(rng.sample(range(3, len(words) - 2), rng.randint(0, 2)))
        parts = [words[a:b] for a, b in zip([0, *cuts], [*cuts, len(words)], strict=True)]
        texts.append(". ".join(" ".join(p) for p in parts) + ".")
    queries = [
        " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(3, 6))) for _ in range(2000)
    ]
    return texts, queries


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ingest(
    idx: RecallIndex,
    texts: list[str],
    users: int,
    batch: int = 1000,
    after_first: Any = None,
) -> float:
    """Seconds to add ``texts`` spread over ``users``; ``after_first()`` runs (untimed)
    after the first batch."""
    per = len(texts) // users
    start = time.perf_counter()
    for u in range(users):
        mine = texts[u * per : (u + 1) * per]
        for i in range(0, len(mine), batch):
            msgs = [
                Message(f"m{u}-{i + j}", ROLES[j % 2], content=t, created_at=float(i + j))
                for j, t in enumerate(mine[i : i + batch])
            ]
            idx.add(msgs, user_id=f"user{u}", session_id=f"s{u}-{i // 5000}")
            if after_first is not None:
                paused = time.perf_counter()
                after_first()
                after_first = None
                start += time.perf_counter() - paused
    return time.perf_counter() - start


HNSW = ("convomem_recall_hnsw", "convomem_recall_keys_hnsw")


class HnswAfter:
    """``--pg-build-after``: drop the HNSW indexes after the first batch (when the index
    has made them), build them again after the ingest and ANALYZE the tables, as one
    loads a big table; each index's definition is read from the catalog, so it is the
    index's own DDL."""

    def __init__(self, db: Any) -> None:
        import psycopg

        self.conn = psycopg.connect(db._settings.conninfo, autocommit=True)
        self.schema = db._settings.schema_name
        self.ddl: list[str] = []

    def drop(self) -> None:
        for name in HNSW:
            row = self.conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                (self.schema, name),
            ).fetchone()
            if row is not None:
                self.ddl.append(row[0])
                self.conn.execute(f'DROP INDEX "{self.schema}".{name}')

    def build(self) -> float:
        start = time.perf_counter()
        self.conn.execute("SET maintenance_work_mem = '4GB'")
        for ddl in self.ddl:
            self.conn.execute(ddl)
        for table in ("convomem_recall_items", "convomem_recall_keys"):
            self.conn.execute(f'ANALYZE "{self.schema}".{table}')
        self.conn.close()
        return time.perf_counter() - start


class Dense384:
    """Random dense unit vectors of MiniLM's dimension, fixed by each text's hash: the
    search cost of a trained 384-dimension embedder without its forward pass. Declares
    MiniLM's fusion weight and keys (every kind)."""

    fusion_weight = 4.0

    def embed_batch(self, texts: list[str]) -> Any:
        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(384) for t in texts]
        mat = np.asarray(rows, dtype=np.float32)
        return mat / np.linalg.norm(mat, axis=1, keepdims=True)

    def embed(self, text: str) -> Any:
        return self.embed_batch([text])[0]


def make_embedder(name: str) -> Any:
    if name == "dense384":
        return Dense384()
    if name == "hashing":
        return HashingEmbedder(dim=256)
    return embedder_named(name)


def ingest_floor(texts: list[str], path: str, emb: Any, batch: int = 1000) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT, vec BLOB)")
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        chunk = texts[i : i + batch]
        mat = np.asarray(emb.embed_batch(chunk), dtype=np.float32)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO t (text, vec) VALUES (?, ?)",
            [(t, row.tobytes()) for t, row in zip(chunk, mat, strict=True)],
        )
        conn.execute("COMMIT")
    took = time.perf_counter() - start
    conn.close()
    return took


def searches(idx: RecallIndex, queries: list[str], users: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    cold = []
    for u in range(min(users, 50)):  # first search of a user loads its partition
        t0 = time.perf_counter()
        idx.search(queries[u], user_id=f"user{u}", k=10)
        cold.append(time.perf_counter() - t0)
    for u in range(50, users):
        idx.search(queries[u % len(queries)], user_id=f"user{u}", k=10)
    times = []
    gc.disable()
    try:
        for q in queries:
            u = rng.randrange(users)
            t0 = time.perf_counter()
            hits = idx.search(q, user_id=f"user{u}", k=10)
            times.append(time.perf_counter() - t0)
            assert hits, q
    finally:
        gc.enable()
    return {
        "p50": pct(times, 50),
        "p99": pct(times, 99),
        "mean": statistics.fmean(times),
        "cold": statistics.median(cold),
    }


def vector_floor(
    texts: list[str], queries: list[str], users: int, seed: int, emb: Any
) -> dict[str, Any]:
    per = len(texts) // users
    mat = np.asarray(emb.embed_batch(texts[: per * users]), dtype=np.float32)
    parts = [mat[u * per : (u + 1) * per] for u in range(users)]
    rng = random.Random(seed)
    qs = np.asarray(emb.embed_batch(queries), dtype=np.float32)
    times = []
    for q in qs:
        part = parts[rng.randrange(users)]
        t0 = time.perf_counter()
        sims = part @ q
        top = np.argpartition(-sims, 9)[:10]
        top[np.argsort(-sims[top])].tolist()
        times.append(time.perf_counter() - t0)
    return {"p50": pct(times, 50), "p99": pct(times, 99)}


def run_backend(name: str, url: str, texts: list[str], queries: list[str], args: Any) -> None:
    for users in args.layouts:
        db = open_store(url)
        idx = RecallIndex(db, embedder=args.emb, keys=args.keys)
        after = HnswAfter(db) if name == "postgresql" and args.pg_build_after else None
        took = ingest(idx, texts, users, after_first=None if after is None else after.drop)
        rate = len(texts) / took
        if after is not None:
            print(f"{name:10} HNSW built after the ingest in {after.build():.0f} s", flush=True)
        s = searches(idx, queries[: args.queries], users, args.seed)
        floor = vector_floor(texts, queries[: args.queries], users, args.seed, args.emb)
        print(
            f"{name:10} n={len(texts):>7} users={users:>5}  ingest {rate:8.0f} msg/s   "
            f"search p50 {s['p50'] * 1e3:6.2f} ms  p99 {s['p99'] * 1e3:6.2f} ms  "
            f"(cold {s['cold'] * 1e3:7.1f} ms)   vector floor p50 {floor['p50'] * 1e3:5.2f} ms "
            f"p99 {floor['p99'] * 1e3:5.2f} ms  -> p50 x{s['p50'] / floor['p50']:.1f}",
            flush=True,
        )
        idx.close()
        db.close()
        if name == "sqlite":  # a new process's first search: the snapshot or the rows
            again = RecallIndex(url, embedder=args.emb, keys=args.keys)
            t0 = time.perf_counter()
            again.search(queries[0], user_id="user0", k=10)
            restart = time.perf_counter() - t0
            print(
                f"{name:10} users={users:>5}  first search after a restart "
                f"{restart * 1e3:7.1f} ms (rows read {again.backend.loaded_rows})",
                flush=True,
            )
            again.close()
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        url = args.next_url(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--pg-messages", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-sqlite", dest="sqlite", action="store_false")
    parser.add_argument(
        "--pg-build-after",
        action="store_true",
        help="PostgreSQL: drop the HNSW indexes for the ingest, build them after (10^6)",
    )
    parser.add_argument("--embedder", choices=[*EMBEDDERS, "dense384"], default="hashing")
    parser.add_argument(
        "--keys",
        default=None,
        help=f"RecallIndex(keys=...), comma-separated of {','.join(KEY_KINDS)} "
        "(default: the embedder's recall_keys)",
    )
    parser.add_argument(
        "--layouts", default="one,spread", help="one (a single user), spread (--users users)"
    )
    args = parser.parse_args()
    args.emb = make_embedder(args.embedder)
    args.keys = None if args.keys is None else args.keys.split(",")
    args.layouts = [1 if name == "one" else args.users for name in args.layouts.split(",")]
    texts, queries = corpus(args.messages, args.seed)
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else None, prefix="convomem-recall-"))
    counter = iter(range(1000))
    server: Any = None

    def next_url(name: str) -> str:
        if name == "sqlite":
            return f"sqlite:///{base}/recall{next(counter)}.db"
        assert server is not None
        return str(server.fresh_url())

    args.next_url = next_url
    try:
        floor = ingest_floor(texts, f"{base}/floor.db", args.emb)
        print(f"ingest floor (embed + raw executemany): {len(texts) / floor:8.0f} msg/s")
        Path(f"{base}/floor.db").unlink()
        if args.sqlite:
            run_backend("sqlite", next_url("sqlite"), texts, queries, args)
        if args.pg_messages:
            from _servers_postgres import start_postgres

            server = start_postgres()
            try:
                pg_texts = texts[: args.pg_messages]
                run_backend("postgresql", next_url("postgresql"), pg_texts, queries, args)
            finally:
                server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
