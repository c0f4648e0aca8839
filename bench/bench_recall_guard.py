"""GuardedRecall: what the safety net costs on a healthy backend, and how fast it answers
when the backend is out.

Indexes ``--messages`` synthetic messages for one user (bench_recall's corpus, seeded;
HashingEmbedder(dim=256), SQLite in memory), then runs ``--queries`` searches (k=10) in
interleaved rounds through three subjects, each timed one search at a time (wall clock:
the guard's cost is a thread hand-off, which CPU time would not show):

- **bare**: ``RecallIndex.search`` (the reference, same run);
- **guarded**: ``GuardedRecall(index, deadline=--deadline).search``: the search runs on
  a worker thread and the caller waits on a future (the deadline is long by default, 10 s,
  so a loaded machine's slow search is measured, not cut; the timeouts are counted);
- **guarded inline**: ``GuardedRecall(index, deadline=None)``: the same checks, breaker
  and bookkeeping in the caller's thread (the guard's logic alone).

The search itself is noisy on a shared machine, so the guard's own cost is also measured
on an **instant** backend (returns ten fixed hits): guarded minus bare there is what the
guard adds to every search, reported in microseconds and as a share of the real bare
search. Then the outage paths: a search answered "open" by the breaker (no backend
call) and one answered "failed" (the backend raises at once), against the bare search.
Targets: guarded / bare <= 1.10 at the median; the guard's added cost <= 5% of a
search; an "open" answer <= 0.05x a search.

    .venv/bin/python bench/bench_recall_guard.py
    .venv/bin/python bench/bench_recall_guard.py --messages 100000 --queries 2000
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench_recall import corpus
from convomem.errors import TransientError
from convomem.model import Message
from convomem.recall import GuardedRecall, HashingEmbedder, Hit, RecallIndex
from convomem.retry import CircuitBreaker
from convomem.stores import open_store


class Instant:
    """A backend that answers at once with fixed hits."""

    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits

    def search(self, query: str, **kw: Any) -> list[Hit]:
        return self.hits


class Down:
    """A backend that raises at once (a refused connection)."""

    def search(self, query: str, **kw: Any) -> list[Hit]:
        raise TransientError("connection refused")


def timed(fn: Callable[[str], object], queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--deadline", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    logging.getLogger("convomem.recall").setLevel(logging.ERROR)  # the outage lines

    texts, queries = corpus(args.messages, seed=7)
    index = RecallIndex(open_store("sqlite://"), embedder=HashingEmbedder(dim=256))
    for i in range(0, len(texts), 1000):
        batch = [Message(f"m{j}", "user", content=t) for j, t in enumerate(texts[i : i + 1000], i)]
        index.add(batch, user_id="u", session_id="s")
    guarded = GuardedRecall(index, deadline=args.deadline)
    inline = GuardedRecall(index, deadline=None)
    subjects: dict[str, Callable[[str], object]] = {
        "bare": lambda q: index.search(q, user_id="u", k=10),
        "guarded": lambda q: guarded.search(q, user_id="u", k=10),
        "guarded inline": lambda q: inline.search(q, user_id="u", k=10),
    }
    for fn in subjects.values():  # warm-up: caches, the worker threads
        timed(fn, queries[:20])
    times: dict[str, list[float]] = {name: [] for name in subjects}
    per_round = max(1, args.queries // args.rounds)
    for r in range(args.rounds):
        chunk = queries[r * per_round : (r + 1) * per_round]
        for name, fn in subjects.items():
            times[name] += timed(fn, chunk)
    late = guarded.counts["timeout"]

    instant = Instant(index.search(queries[0], user_id="u", k=10))
    instant_guarded = GuardedRecall(instant, deadline=args.deadline)
    floor: dict[str, Callable[[str], object]] = {
        "instant bare": lambda q: instant.search(q, user_id="u", k=10),
        "instant guarded": lambda q: instant_guarded.search(q, user_id="u", k=10),
    }
    for name in floor:
        times[name] = []
    for _ in range(args.rounds):
        for name, fn in floor.items():
            times[name] += timed(fn, queries)

    opened = CircuitBreaker(failures=1, reset_after=3600)
    opened.record_failure()
    out_open = GuardedRecall(Down(), breaker=opened, deadline=None)
    failing = GuardedRecall(Down(), breaker=CircuitBreaker(failures=10**9), deadline=None)
    times["open (no call)"] = timed(lambda q: out_open.search(q, user_id="u"), queries)
    times["failed (raises)"] = timed(lambda q: failing.search(q, user_id="u"), queries)

    bare = statistics.median(times["bare"])
    print(f"{args.messages:,} messages, one user, {len(times['bare'])} searches, k=10")
    print(f"guarded searches past the {args.deadline} s deadline: {late}")
    print(f"{'subject':<18}{'median us':>11}{'p99 us':>10}{'/ bare':>9}")
    for name, ts in times.items():
        ts = sorted(ts)
        med, p99 = statistics.median(ts), ts[int(0.99 * (len(ts) - 1))]
        print(f"{name:<18}{med * 1e6:>11.1f}{p99 * 1e6:>10.1f}{med / bare:>9.3f}")
    g = statistics.median(times["guarded"]) / bare
    added = statistics.median(times["instant guarded"]) - statistics.median(times["instant bare"])
    share = added / bare
    print(
        f"the guard adds {added * 1e6:.1f} us per search = {share:.2%} of a bare search "
        f"(target <= 5%: {'met' if share <= 0.05 else 'MISSED'})"
    )
    o = statistics.median(times["open (no call)"]) / bare
    print(f"guarded / bare = {g:.3f} (target <= 1.10: {'met' if g <= 1.10 else 'MISSED'})")
    print(f"open / bare = {o:.4f} (target <= 0.05: {'met' if o <= 0.05 else 'MISSED'})")
    guarded.close()


if __name__ == "__main__":
    main()
