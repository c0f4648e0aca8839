"""evict_conversations at 10^4, 10^5 and 10^6 mentions: linear growth, and references.

Workload: conversations of 1 to 20 mentions drawn from a pool of ids one fifth the
number of mentions (repeats within and across conversations), oldest first, with a cap
of a quarter of the distinct ids, so about three quarters of the conversations are
evicted. Ids are pre-built strings, as a caller's would be.

Measured in the same run, best of ``--repeats``:
- the growth ratio time(10^5) / time(10^4); the issue's target is at most 12x. The
  same ratio for ``floor`` shows what the machine's caches add: at 10^4 mentions the
  ids fit in L2, at 10^5 they do not. 10^6 / 10^5 shows the growth past that knee;
- ``floor``: ``dict.fromkeys`` over every mention, one C-level pass over the input;
- ``forward``: the issue's formulation with per-id mention counts (drop the oldest
  conversation, decrement its ids' counts, until the distinct total fits), inline;
- ``naive``: what one writes first, recounting the distinct ids of the kept
  conversations after each drop (quadratic); measured at 10^4 only.

    .venv/bin/python bench/bench_forgetting.py
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections import Counter
from collections.abc import Callable
from itertools import chain, pairwise

from convomem.stores.forgetting import evict_conversations

SIZES = (10_000, 100_000, 1_000_000)
TARGET = 12.0


def workload(mentions: int, seed: int = 0) -> tuple[list[list[str]], int]:
    rng = random.Random(seed)
    pool = [f"listing-{i}" for i in range(mentions // 5)]
    conversations: list[list[str]] = []
    left = mentions
    while left:
        size = min(left, rng.randint(1, 20))
        conversations.append([rng.choice(pool) for _ in range(size)])
        left -= size
    distinct = len(set(chain.from_iterable(conversations)))
    return conversations, distinct // 4


def naive(conversations: list[list[str]], cap: int) -> list[str]:
    start = 0
    while len(set(chain.from_iterable(conversations[start:]))) > cap:
        start += 1
    return list(dict.fromkeys(chain.from_iterable(conversations[start:])))


def forward(conversations: list[list[str]], cap: int) -> list[str]:
    counts = dict(Counter(chain.from_iterable(conversations)))
    distinct = len(counts)
    start = 0
    while distinct > cap:
        for id_ in conversations[start]:
            left = counts[id_] - 1
            counts[id_] = left
            if not left:
                distinct -= 1
        start += 1
    return list(dict.fromkeys(chain.from_iterable(conversations[start:])))


def floor(conversations: list[list[str]], cap: int) -> list[str]:
    return list(dict.fromkeys(chain.from_iterable(conversations)))


def best_of(repeats: int, case: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        case()
        best = min(best, time.perf_counter() - start)
        gc.enable()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    timings: dict[str, dict[int, float]] = {"lib": {}, "floor": {}, "forward": {}}
    for mentions in SIZES:
        conversations, cap = workload(mentions)
        result = evict_conversations(conversations, cap)
        assert result == forward(conversations, cap)
        if mentions == SIZES[0]:
            assert result == naive(conversations, cap)
        cases: dict[str, Callable[[], object]] = {
            "lib": lambda c=conversations, k=cap: evict_conversations(c, k),
            "floor": lambda c=conversations: floor(c, 0),
            "forward": lambda c=conversations, k=cap: forward(c, k),
        }
        for name, case in cases.items():
            timings[name][mentions] = best_of(args.repeats, case)
        t = {name: timings[name][mentions] for name in cases}
        print(
            f"{mentions:>9,} mentions, {len(conversations):,} conversations, cap {cap:,}, "
            f"{len(result):,} ids kept:"
        )
        print(
            f"    evict_conversations {t['lib'] * 1e3:8.2f} ms   "
            f"floor {t['floor'] * 1e3:7.2f} ms ({t['lib'] / t['floor']:.2f}x)   "
            f"forward {t['forward'] * 1e3:7.2f} ms ({t['forward'] / t['lib']:.1f}x slower)"
        )
        if mentions == SIZES[0]:
            t_naive = best_of(3, lambda c=conversations, k=cap: naive(c, k))
            print(f"    naive recount {t_naive * 1e3:8.2f} ms ({t_naive / t['lib']:.0f}x slower)")
    for small, big in pairwise(SIZES):
        growth = {name: timings[name][big] / timings[name][small] for name in timings}
        line = (
            f"time({big:,}) / time({small:,}): evict_conversations {growth['lib']:.2f}x, "
            f"floor {growth['floor']:.2f}x, forward {growth['forward']:.2f}x"
        )
        if small == 10_000:
            verdict = "meets" if growth["lib"] <= TARGET else "MISSES"
            line += f"  ({verdict} the {TARGET:g}x target)"
        print(line)


if __name__ == "__main__":
    main()
