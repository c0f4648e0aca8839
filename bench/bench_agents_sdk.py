"""Agent-loop benchmark: the OpenAI Agents SDK's own sessions vs ConvomemSession.

The workload of an agent run per turn, as the SDK's ``Runner`` does it: ``get_items()``
(the whole history goes to the model), then ``add_items(...)`` of the turn's new items
(the user message, a ``function_call`` and its ``function_call_output`` every third turn,
the assistant's output message, all in the SDK's own item shapes). Sessions are prefilled
to ``--sizes`` items (1,000 and 10,000) first; the subjects then run in interleaved
rounds (one turn each per round, the order rotated) so load on the machine hits them
alike. Figures are medians per turn, wall and CPU (``process_time``: every thread of the
process, so a worker thread's work is counted).

Subjects (columns):
- ``sdk_sqlite``: the SDK's ``SQLiteSession`` on a file (the peer);
- ``convomem_sqlite``: ``ConvomemSession`` over ``open_store("sqlite:///...")`` (sync
  database, called in a worker thread);
- ``convomem_asqlite``: ``ConvomemSession`` over ``aopen_store(...)``;
- ``convomem_bounded``: ``ConvomemSession(..., budget=--budget)`` over the same kind of
  store: ``get_items()`` is ``ConversationMemory``'s bounded view of the log (pins, a
  summary, the newest items that fit) instead of the whole history;
- with ``--redis URL``: ``sdk_redis`` (the SDK's ``RedisSession``) and ``convomem_redis``
  (``ConvomemSession`` over ``open_store(URL)``, when this tree has the Redis backend).

Resume: the first ``get_items()`` of a new session object on the prefilled log (after a
restart), best CPU: the SDK's ``SQLiteSession`` vs ``ConvomemSession`` (which decodes
every stored message into a ``Message`` once, where the SDK only ``json.loads`` rows).

Ratios: each convomem session / its SDK peer (lower is better; target: at most 1.5x),
``convomem_bounded`` / ``sdk_sqlite`` at each size (the bounded view should not grow with
the history).

    .venv/bin/python bench/bench_agents_sdk.py                     # 1,000 and 10,000 items
    .venv/bin/python bench/bench_agents_sdk.py --quick             # 1,000 and 3,000
    .venv/bin/python bench/bench_agents_sdk.py --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import SQLiteSession

from convomem import aopen_store, open_store
from convomem.errors import ConvomemError
from convomem.integrations.openai_agents import ConvomemSession

WORDS = [
    "the",
    "agent",
    "asked",
    "about",
    "weather",
    "prices",
    "dates",
    "names",
    "tools",
    "results",
    "and",
    "plans",
]


def text(t: int, n: int) -> str:
    return " ".join(WORDS[(t * 7 + i) % len(WORDS)] for i in range(n)) + f" #{t}"


def turn_items(t: int) -> list[dict[str, Any]]:
    """One turn's new items, as the SDK stores them."""
    items: list[dict[str, Any]] = [{"role": "user", "content": text(t, 20)}]
    if t % 3 == 0:
        call = f"call_{t}"
        args = json.dumps({"city": WORDS[t % len(WORDS)]}, separators=(",", ":"))
        items.append(
            {
                "arguments": args,
                "call_id": call,
                "name": "lookup",
                "type": "function_call",
                "id": f"fc_{t}",
            }
        )
        items.append({"call_id": call, "output": text(t, 60), "type": "function_call_output"})
    items.append(
        {
            "id": "__fake_id__",
            "content": [
                {"annotations": [], "text": text(t, 40), "type": "output_text", "logprobs": []}
            ],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        }
    )
    return items


def history(size: int) -> tuple[list[dict[str, Any]], int]:
    """At least ``size`` items of whole turns, and the next turn number."""
    items: list[dict[str, Any]] = []
    t = 0
    while len(items) < size:
        items += turn_items(t)
        t += 1
    return items, t


Turn = Callable[[list[dict[str, Any]]], Awaitable[int]]


async def session_turn(session: Any) -> Turn:
    async def turn(new: list[dict[str, Any]]) -> int:
        seen = await session.get_items()
        await session.add_items(new)
        return len(seen)

    return turn


async def prefill(session: Any, items: list[dict[str, Any]]) -> None:
    for i in range(0, len(items), 1000):
        await session.add_items(items[i : i + 1000])


async def subjects(
    size: int, base: Path, budget: int, redis: str | None
) -> tuple[dict[str, Turn], list[Any], list[str]]:
    items, _ = history(size)
    turns: dict[str, Turn] = {}
    closers: list[Any] = []
    misses: list[str] = []
    sdk = SQLiteSession(f"s{size}", str(base / f"sdk{size}.db"))
    await prefill(sdk, items)
    turns["sdk_sqlite"] = await session_turn(sdk)
    db = open_store(f"sqlite:///{base}/convomem{size}.db")
    closers.append(db)
    ours = ConvomemSession(f"s{size}", db)
    await prefill(ours, items)
    turns["convomem_sqlite"] = await session_turn(ours)
    adb = await aopen_store(f"sqlite:///{base}/aconvomem{size}.db")
    closers.append(adb)
    aours = ConvomemSession(f"s{size}", adb)
    await prefill(aours, items)
    turns["convomem_asqlite"] = await session_turn(aours)
    mdb = open_store(f"sqlite:///{base}/memory{size}.db")
    closers.append(mdb)
    await prefill(ConvomemSession(f"s{size}", mdb), items)
    turns["convomem_bounded"] = await session_turn(ConvomemSession(f"s{size}", mdb, budget=budget))
    if redis is not None:
        try:
            from agents.extensions.memory import RedisSession

            peer = RedisSession.from_url(f"bench-{size}-{os.getpid()}", url=redis)
            await peer.clear_session()
            await prefill(peer, items)
            turns["sdk_redis"] = await session_turn(peer)
        except Exception as exc:  # a missing client or server is reported, not fatal
            misses.append(f"sdk_redis: {type(exc).__name__}: {exc}")
        try:
            rdb = open_store(redis)
            closers.append(rdb)
            mine = ConvomemSession(f"bench-{size}-{os.getpid()}", rdb)
            await mine.clear_session()
            await prefill(mine, items)
            turns["convomem_redis"] = await session_turn(mine)
        except ConvomemError as exc:
            misses.append(f"convomem_redis: {type(exc).__name__}: {exc}")
    return turns, closers, misses


async def measure(turns: dict[str, Turn], start: int, rounds: int) -> dict[str, dict[str, float]]:
    wall: dict[str, list[float]] = {k: [] for k in turns}
    cpu: dict[str, list[float]] = {k: [] for k in turns}
    names = list(turns)
    for r in range(rounds):
        new = turn_items(start + r)
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            w, c = time.perf_counter(), time.process_time()
            await turns[name](new)
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)
    return {
        k: {"wall": statistics.median(wall[k]), "cpu": statistics.median(cpu[k])} for k in names
    }


async def cold_reads(size: int, base: Path, rounds: int) -> dict[str, float]:
    """A resumed session's first ``get_items()`` (a new session object, as after a
    restart), best CPU of ``rounds``: the SDK's SQLiteSession vs ConvomemSession."""
    items, _ = history(size)
    path = str(base / f"cold-sdk{size}.db")
    await prefill(SQLiteSession("cold", path), items)
    db = open_store(f"sqlite:///{base}/cold-convomem{size}.db")
    await prefill(ConvomemSession("cold", db), items)
    best = {"sdk_sqlite": float("inf"), "convomem_sqlite": float("inf")}
    for _ in range(rounds):
        for name in best:
            session = SQLiteSession("cold", path) if name == "sdk_sqlite" else None
            c = time.process_time()
            got = await (session or ConvomemSession("cold", db)).get_items()
            best[name] = min(best[name], time.process_time() - c)
            assert len(got) == len(items)
    db.close()
    return best


def ratio(figures: dict[str, dict[str, float]], a: str, b: str, key: str) -> float | None:
    if a not in figures or b not in figures or not figures[b][key]:
        return None
    return figures[a][key] / figures[b][key]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--redis", default=None, help="a Redis URL: adds the Redis subjects")
    parser.add_argument("--quick", action="store_true", help="sizes 1,000 and 3,000")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args()
    sizes = [1000, 3000] if args.quick else args.sizes
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            turns, closers, misses = await subjects(size, Path(tmp), args.budget, args.redis)
            _, start = history(size)
            figures = await measure(turns, start, args.rounds)
            for db in closers:
                await db.aclose() if hasattr(db, "aclose") else db.close()
            report[str(size)] = {"figures": figures, "misses": misses}
            print(f"\n{size:,} items, median per turn over {args.rounds} rounds")
            for name, f in figures.items():
                print(f"  {name:18} wall {f['wall'] * 1e3:8.2f} ms   cpu {f['cpu'] * 1e3:8.2f} ms")
            for a, b, target in (
                ("convomem_sqlite", "sdk_sqlite", 1.5),
                ("convomem_asqlite", "sdk_sqlite", 1.5),
                ("convomem_redis", "sdk_redis", 1.5),
                ("convomem_bounded", "sdk_sqlite", None),
            ):
                w, c = ratio(figures, a, b, "wall"), ratio(figures, a, b, "cpu")
                if w is None or c is None:
                    continue
                verdict = "" if target is None else ("  meets" if c <= target else "  MISSES")
                goal = "" if target is None else f" (target <= {target}x)"
                print(f"  {a} / {b}: wall {w:.2f}x, cpu {c:.2f}x{goal}{verdict}")
            for miss in misses:
                print(f"  not measured: {miss}")
            cold = await cold_reads(size, Path(tmp), max(3, args.rounds // 10))
            report[str(size)]["cold"] = cold
            sdk_cold, ours_cold = cold["sdk_sqlite"], cold["convomem_sqlite"]
            print(
                f"  resume (first get_items of a new session object, best cpu): sdk "
                f"{sdk_cold * 1e3:.2f} ms, convomem {ours_cold * 1e3:.2f} ms "
                f"({ours_cold / sdk_cold:.2f}x)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
