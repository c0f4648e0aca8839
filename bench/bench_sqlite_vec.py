"""sqlite-vec against the embedded recall partition: why SQLite recall scans in numpy.

The issue asked for ``sqlite-vec`` where Python can load SQLite extensions. This
Python's ``sqlite3`` cannot; ``sqlean-py`` (a drop-in ``sqlite3`` that can) loads it, so
this script measures it beside ``RecallIndex`` on the same messages, in one run:

- **sqlite-vec**: a ``vec0`` table (``user_id text partition key``, ``float[dim]``) of
  each message's vector; a search is ``embedding MATCH ? AND k = 50 AND user_id = ?``
  (the index's candidate count), the vector half of a hybrid search only;
- **RecallIndex**: ``search(query, user_id=..., k=10)`` on a SQLite file: BM25 + the
  vector scan of the user's in-memory partition, fused, rows read (what users get).

The messages and queries are ``bench_recall``'s (synthetic, seeded), embedded by
HashingEmbedder(dim=256) or, with ``--embedder dense384``, random dense 384-dim vectors.
Needs the ``bench`` extra (``sqlean-py``, ``sqlite-vec``).

    .venv/bin/python bench/bench_sqlite_vec.py --messages 100000 --users 1000
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from bench_recall import Dense384, corpus, ingest, pct
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.stores import open_store

K_CANDIDATES = 50


def vec_table(path: str, vectors: Any, users: int) -> tuple[Any, float]:
    """A ``vec0`` table of ``vectors`` spread over ``users``; the connection and the
    insert time."""
    import sqlean  # type: ignore[import-not-found]
    import sqlite_vec  # type: ignore[import-not-found]

    db = sqlean.connect(path)
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.enable_load_extension(False)
    dim = vectors.shape[1]
    db.execute(
        f"CREATE VIRTUAL TABLE items USING vec0(user_id text partition key, embedding float[{dim}])"
    )
    per = len(vectors) // users
    start = time.perf_counter()
    for u in range(users):
        rows = vectors[u * per : (u + 1) * per]
        with db:
            db.executemany(
                "INSERT INTO items(user_id, embedding) VALUES (?, ?)",
                ((f"user{u}", r.tobytes()) for r in rows),
            )
    return db, time.perf_counter() - start


def timed(fn: Any, queries: list[Any], users: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    times = []
    for q in queries:
        user = f"user{rng.randrange(users)}"
        t0 = time.perf_counter()
        fn(q, user)
        times.append(time.perf_counter() - t0)
    return {"p50": pct(times, 50), "p99": pct(times, 99)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--embedder", choices=["hashing", "dense384"], default="hashing")
    a = p.parse_args()
    emb: Any = HashingEmbedder() if a.embedder == "hashing" else Dense384()
    texts, queries = corpus(a.messages, a.seed)
    queries = queries[: a.queries]
    vectors = np.asarray(emb.embed_batch(texts), dtype=np.float32)
    qvecs = np.asarray(emb.embed_batch(queries), dtype=np.float32)
    base = Path(tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        for users in (1, a.users):
            db, took = vec_table(str(base / f"vec{users}.db"), vectors, users)
            sql = (
                "SELECT rowid, distance FROM items "
                "WHERE embedding MATCH ? AND k = ? AND user_id = ?"
            )

            def knn(i: int, user: str, db: Any = db, sql: str = sql) -> Any:
                return db.execute(sql, (qvecs[i].tobytes(), K_CANDIDATES, user)).fetchall()

            for u in range(users):  # first reads of each user's pages
                knn(0, f"user{u}")
            vec = timed(knn, list(range(len(queries))), users, a.seed)
            db.close()
            store = open_store(f"sqlite:///{base}/recall{users}.db")
            idx = RecallIndex(store, embedder=emb, keys=["message"])
            ingest_s = ingest(idx, texts, users)
            for u in range(users):  # warm every partition, as bench_recall does
                idx.search(queries[0], user_id=f"user{u}", k=10)

            def search(i: int, user: str, idx: Any = idx) -> Any:
                return idx.search(queries[i], user_id=user, k=10)

            ours = timed(search, list(range(len(queries))), users, a.seed)
            idx.close()
            store.close()
            print(
                f"n={len(texts):>7} users={users:>5} {a.embedder:8}  "
                f"sqlite-vec knn k={K_CANDIDATES}: "
                f"insert {len(texts) / took:7.0f} msg/s, p50 {vec['p50'] * 1e3:7.2f} ms "
                f"p99 {vec['p99'] * 1e3:7.2f} ms | RecallIndex.search (hybrid): ingest "
                f"{len(texts) / ingest_s:7.0f} msg/s, p50 {ours['p50'] * 1e3:6.2f} ms "
                f"p99 {ours['p99'] * 1e3:6.2f} ms | sqlite-vec p50 / ours "
                f"x{vec['p50'] / ours['p50']:.1f}",
                flush=True,
            )

    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
