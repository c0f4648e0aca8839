"""The Redis store against the raw redis-py driver doing the same writes and reads.

Starts its own ``redis-server`` on a free loopback port (``--url`` to use another
server; its keys are namespaced by a fresh prefix and removed at the end). Measured in
the same run, interleaved, best of ``--repeats`` (the garbage collector off while
timing):

- **append, batches of 1 and of 100**: ``session.append(batch)`` (one Lua script: the
  idempotency check, seqs, the compare-and-sets, the log, data and counts) against the
  floor ``RPUSH key data...`` of the same messages serialized the same way
  (``json.dumps(m.to_dict())``), one command per batch. Target: within 1.5x.
- **peer: the OpenAI Agents SDK's RedisSession** (when ``openai-agents`` is installed):
  one agent turn at 10,000 messages, ``get_items()`` (the whole history, as the SDK's
  ``Runner`` reads it) then ``add_items`` of 2 items, through the SDK's ``RedisSession``
  and through the async convomem store (``aopen_store``); also with ``limit=100``.
- **reopen and read the newest 100 of a 100,000-message session**: ``open_store(url)``
  then ``page(None, 100, newest_first=True)`` (decoded ``Message`` s) against a new
  raw client, ``LRANGE key -100 -1`` and the same decoding. Target: within 3x.

    .venv/bin/python bench/bench_stores_redis.py
    .venv/bin/python bench/bench_stores_redis.py --repeats 7 --messages 100000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from convomem.model import Message
from convomem.stores import open_store


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    directory = tempfile.mkdtemp(prefix="convomem-bench-redis-")
    binary = shutil.which("redis-server") or "redis-server"
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory]
    proc = subprocess.Popen([*args, "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


def timed(fn: Callable[[], Any], results: list[float]) -> None:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        results.append(time.perf_counter() - start)
    finally:
        gc.enable()


def messages(tag: str, n: int) -> list[Message]:
    return [
        Message(f"{tag}-{i}", "user" if i % 2 else "assistant", content=f"message {i} " * 8)
        for i in range(n)
    ]


def server_usec(client: Any, command: str) -> float:
    """The server's own time per call of ``command`` since the last reset."""
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return float(stats.get("usec_per_call", 0.0))


def bench_appends(url: str, batch: int, total: int, repeats: int) -> tuple[float, ...]:
    ours: list[float] = []
    raw: list[float] = []
    client = redis.Redis.from_url(url)
    client.config_resetstat()
    with open_store(url, prefix=f"bench{uuid.uuid4().hex[:6]}") as db:
        for r in range(repeats):
            tag = f"r{r}"
            log = messages(tag, total)
            batches = [log[i : i + batch] for i in range(0, total, batch)]
            session = db.session(f"append-{batch}-{r}", user_id="u")
            session.append([Message("warm", "user", content="x")])
            key = f"benchraw:{uuid.uuid4().hex}"

            def store_loop(session: Any = session, batches: list[Any] = batches) -> None:
                for b in batches:
                    session.append(b)

            def raw_loop(key: str = key, batches: list[Any] = batches) -> None:
                for b in batches:
                    client.rpush(key, *[json.dumps(m.to_dict()) for m in b])

            timed(store_loop, ours)
            timed(raw_loop, raw)
            client.delete(key)
            db.delete_session(f"append-{batch}-{r}")
    on_server = server_usec(client, "evalsha") / batch, server_usec(client, "rpush") / batch
    client.close()
    return min(ours), min(raw), *on_server


def bench_reopen(url: str, n: int, repeats: int) -> tuple[float, float]:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    key = f"benchraw:{uuid.uuid4().hex}"
    client = redis.Redis.from_url(url)
    log = messages("big", n)
    with open_store(url, prefix=prefix) as db:
        s = db.session("big", user_id="u")
        for i in range(0, n, 5000):
            part = log[i : i + 5000]
            s.append(part)
            client.rpush(key, *[json.dumps(m.to_dict()) for m in part])
    client.close()
    expected = log[-100:]
    ours: list[float] = []
    raw: list[float] = []

    def store_read() -> None:
        with open_store(url, prefix=prefix) as db:
            page, _ = db.session("big", user_id="u").page(None, 100, newest_first=True)
        assert page[::-1] == expected

    def raw_read() -> None:
        c = redis.Redis.from_url(url)
        rows = c.lrange(key, -100, -1)
        page = [Message.from_dict(json.loads(r)) for r in rows]
        c.close()
        assert page == expected

    store_read()  # the script is loaded once per server, not per open
    for _ in range(repeats):
        timed(store_read, ours)
        timed(raw_read, raw)
    with open_store(url, prefix=prefix) as db:
        db.delete_session("big")
    c = redis.Redis.from_url(url)
    c.delete(key)
    c.close()
    return min(ours), min(raw)


async def bench_peer_turns(url: str, n: int, turns: int, limit: int | None) -> tuple[float, float]:
    """Seconds per turn: convomem's async store, the SDK's RedisSession."""
    from agents.extensions.memory.redis_session import RedisSession

    from convomem.stores import aopen_store

    items = [{"role": "user", "content": f"message {i} " * 8} for i in range(n + 2 * turns)]
    log = [Message(f"p-{i}", "user", content=it["content"]) for i, it in enumerate(items)]
    peer = RedisSession.from_url("peer", url=url, key_prefix=f"sdk{uuid.uuid4().hex[:6]}")
    db = await aopen_store(url, prefix=f"bench{uuid.uuid4().hex[:6]}")
    ours = db.session("turns", user_id="u")
    for i in range(0, n, 5000):
        await ours.append(log[i : min(n, i + 5000)])
        await peer.add_items(items[i : min(n, i + 5000)])
    await ours.get_items(1)  # load the scripts
    ours_times: list[float] = []
    peer_times: list[float] = []
    for t in range(turns):
        k = n + 2 * t
        start = time.perf_counter()
        got = await ours.get_items(limit)
        await ours.append(log[k : k + 2])
        ours_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        seen = await peer.get_items(limit)
        await peer.add_items(items[k : k + 2])
        peer_times.append(time.perf_counter() - start)
        assert len(got) == len(seen)
    await peer.clear_session()
    await peer.close()
    await db.delete_session("turns")
    await db.aclose()
    return min(ours_times), min(peer_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="a running server (default: start one)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=2_000, help="messages per append run")
    args = parser.parse_args()
    with server(args.url) as url:
        print(f"redis-server {redis.Redis.from_url(url).info()['redis_version']}, {url}")
        print(f"{'workload':44} {'convomem':>10} {'raw':>10} {'ratio':>7} {'target':>7}")
        rows = []
        notes: list[str] = []
        for batch in (1, 100):
            total = args.appends if batch == 1 else args.appends * 10
            ours, raw, ours_server, raw_server = bench_appends(url, batch, total, args.repeats)
            rows.append(
                (f"append {total} messages, batches of {batch}", ours / total, raw / total, 1.5)
            )
            notes.append(
                f"batches of {batch}: server time per message {ours_server:.1f}us (script) "
                f"vs {raw_server:.1f}us (RPUSH)"
            )
        try:
            import agents  # noqa: F401
        except ImportError:
            notes.append("openai-agents not installed: no SDK peer")
        else:
            for limit in (None, 100):
                ours, peer = asyncio.run(bench_peer_turns(url, 10_000, 20, limit))
                what = "all" if limit is None else f"newest {limit}"
                notes.append(
                    f"agent turn at 10,000 messages (get_items {what} + add 2): convomem "
                    f"{ours * 1e3:.2f}ms, SDK RedisSession {peer * 1e3:.2f}ms "
                    f"({ours / peer:.2f}x)"
                )
        ours, raw = bench_reopen(url, args.messages, args.repeats)
        rows.append((f"reopen + newest 100 of {args.messages:,}", ours, raw, 3.0))
        for name, a, b, target in rows:
            unit, scale = ("us/msg", 1e6) if name.startswith("append") else ("ms", 1e3)
            mark = "ok" if a / b <= target else "MISS"
            print(
                f"{name:44} {a * scale:8.1f}{unit[:2]} {b * scale:8.1f}{unit[:2]} "
                f"{a / b:6.2f}x {target:5.1f}x {mark}"
            )
        print("(append figures per message; reopen per open+read)")
        for note in notes:
            print(note)


if __name__ == "__main__":
    main()
