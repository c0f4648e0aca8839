"""load_history over 10^5 messages in 1,000 pages, against bare loops over the same store.

The fake store is a dict of pre-built pages behind a plain function, so what is timed
is the loader's own work. References, measured in the same run and interleaved with
the library calls (best of ``--repeats``, garbage collector off while timing):

- ``bare dedupe``: the same job written inline: follow the cursors until ``None`` or an
  empty page, keep each id once. The issue's target is load_history within 1.5x of it.
- ``bare extend``: follow the cursors and ``extend``, no duplicate check. A floor no
  loader that must return each id once can reach; shown for scale.

``aload_history`` is measured against the same bare dedupe loop written with an async
``fetch_page``.

    .venv/bin/python bench/bench_loading.py
    .venv/bin/python bench/bench_loading.py --repeats 50
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

from convomem.model import Message
from convomem.stores.loading import aload_history, iter_history, load_history

MESSAGES = 100_000
PAGES = 1_000
TARGET = 1.5

Result = tuple[list[Message], str | None]


def make_store() -> tuple[Callable[[str | None], Result], list[Message]]:
    per_page = MESSAGES // PAGES
    messages = [
        Message(f"msg-{i:06d}", "user" if i % 2 == 0 else "assistant", 12, content=f"m{i}")
        for i in range(MESSAGES)
    ]
    pages: dict[str | None, Result] = {}
    for p in range(PAGES):
        key = None if p == 0 else f"cursor-{p}"
        nxt = f"cursor-{p + 1}" if p + 1 < PAGES else None
        pages[key] = (messages[p * per_page : (p + 1) * per_page], nxt)

    def fetch_page(cursor: str | None) -> Result:
        return pages[cursor]

    return fetch_page, messages


def bare_extend(fetch_page: Callable[[str | None], Result]) -> list[Message]:
    out: list[Message] = []
    cursor: str | None = None
    while True:
        page, cursor = fetch_page(cursor)
        out.extend(page)
        if cursor is None or not page:
            return out


def bare_dedupe(fetch_page: Callable[[str | None], Result]) -> list[Message]:
    out: list[Message] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        page, cursor = fetch_page(cursor)
        for m in page:
            if m.id not in seen:
                seen.add(m.id)
                out.append(m)
        if cursor is None or not page:
            return out


def streamed(fetch_page: Callable[[str | None], Result]) -> list[Message]:
    out: list[Message] = []
    for page in iter_history(fetch_page):
        out.extend(page)
    return out


async def abare_dedupe(fetch_page: Callable[[str | None], Any]) -> list[Message]:
    out: list[Message] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        page, cursor = await fetch_page(cursor)
        for m in page:
            if m.id not in seen:
                seen.add(m.id)
                out.append(m)
        if cursor is None or not page:
            return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    fetch_page, messages = make_store()

    async def afetch_page(cursor: str | None) -> Result:
        return fetch_page(cursor)

    loop = asyncio.new_event_loop()
    cases: dict[str, Callable[[], list[Message]]] = {
        "bare extend": lambda: bare_extend(fetch_page),
        "bare dedupe": lambda: bare_dedupe(fetch_page),
        "load_history": lambda: load_history(fetch_page),
        "iter_history": lambda: streamed(fetch_page),
        "async bare dedupe": lambda: loop.run_until_complete(abare_dedupe(afetch_page)),
        "aload_history": lambda: loop.run_until_complete(aload_history(afetch_page)),
    }
    for name, case in cases.items():  # correctness, and a warm-up
        result = case()
        assert len(result) == MESSAGES and all(
            a is b for a, b in zip(result, messages, strict=True)
        ), name
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.repeats):
        for name, case in cases.items():
            gc.collect()
            gc.disable()
            start = time.perf_counter()
            case()
            elapsed = time.perf_counter() - start
            gc.enable()
            best[name] = min(best[name], elapsed)
    loop.close()

    print(f"{MESSAGES:,} messages in {PAGES:,} pages, best of {args.repeats}")
    for name, seconds in best.items():
        print(f"  {name:18s} {seconds * 1e3:8.2f} ms")
    ratio = best["load_history"] / best["bare dedupe"]
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"load_history / bare dedupe        = {ratio:.2f}x  ({verdict} the {TARGET}x target)")
    print(f"iter_history / bare dedupe        = {best['iter_history'] / best['bare dedupe']:.2f}x")
    print(
        f"aload_history / async bare dedupe = "
        f"{best['aload_history'] / best['async bare dedupe']:.2f}x"
    )
    print(f"load_history / bare extend        = {best['load_history'] / best['bare extend']:.2f}x")


if __name__ == "__main__":
    main()
