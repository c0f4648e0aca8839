"""Load benchmark of the HTTP service: ``convomem serve`` against the seed's design.

The seed's production sketch (FastAPI + a Redis list per session, the whole history
reloaded and decoded on every request; ``bench/seed_reference/app.py``) and ``convomem
serve`` run side by side as real uvicorn processes on this machine, on one
``redis-server`` started here (the seed's store; ``--store postgresql`` puts convomem on
an embedded PostgreSQL instead, the deploy's store). Each gets a session of 1,000 and one
of 100,000 messages (``--sizes``) of the same agent conversation (``workload.py``: tool
calls and their results), written straight into the store (convomem: ``append`` in batches
through ``open_store``; the seed: ``RPUSH``), then one warm-up turn; the first convomem
turn of a prefilled session builds its derived state once, as a resumed session does.

A timed turn is what a chat request needs from its memory: ``POST
/v1/sessions/{id}/messages`` with the next message of the conversation, then ``GET
/v1/sessions/{id}/context?budget=8000``, each over one kept-alive HTTP connection; the two
services alternate turn by turn. Reported: p50 and p99 (wall ms) of the append, the context
and the whole turn per service and size, the ratios reference / convomem at each size
(target at 100,000: >= 50x on the p50 of the turn) and convomem's 100k / 1k (target:
flat, <= 1.5x), convomem's turn p99 / p50 at each size (target <= 3x: a compaction does
not stall a turn), and the size of each convomem session's derived state (what a
request reads to resume the session, and all of it).

A cache miss: a second ``convomem serve`` process (another replica on the same store)
reads the context after each of convomem's timed turns. The first replica's append moved
the session, so every such read resumes the session from the store, as the first
request of a replica (or of a session evicted from its memory cache) does: p50 / p99 of
that read (target at 100,000: <= 50 ms).

    .venv/bin/python bench/bench_service.py                       # 1k and 100k, 200 turns
    .venv/bin/python bench/bench_service.py --sizes 1000 20000 --rounds 50
    .venv/bin/python bench/bench_service.py --store postgresql --json service.json
    .venv/bin/python bench/bench_service.py --store sqlite --no-reference   # convomem only
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the embedded PostgreSQL of the test suite

from bench_stores_redis import server as redis_server  # noqa: E402
from convomem.model import Message  # noqa: E402
from convomem.stores import open_store  # noqa: E402
from workload import messages, openai_messages  # noqa: E402

TENANT = "bench"
USER = "bench-user"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def postgres_server() -> Iterator[str]:
    from _servers_postgres import start_postgres

    server = start_postgres()
    try:
        yield server.url(schema="bench")
    finally:
        server.stop()


@contextmanager
def process(command: list[str], port: int, *, env: dict[str, str], cwd: Path) -> Iterator[str]:
    """A server process, ready once ``/readyz`` answers 200; killed on exit."""
    fd, log_name = tempfile.mkstemp(prefix="convomem-bench-", suffix=".log")
    proc = subprocess.Popen(command, stdout=fd, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    os.close(fd)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start:\n{Path(log_name).read_text()}")
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        text = Path(log_name).read_text(errors="replace")
        if "Traceback" in text:  # a server error: show why
            print(f"--- {command[2:4]} log:\n{text[-3000:]}", file=sys.stderr)
        os.unlink(log_name)


def convomem(*args: str) -> list[str]:
    return [sys.executable, "-m", "convomem", *args]


def create_key(store_url: str) -> str:
    done = subprocess.run(
        convomem("keys", "create", "--tenant", TENANT, "--store", store_url),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1].strip()


def with_ids(dicts: list[dict[str, Any]], sequential: bool) -> list[dict[str, Any]]:
    """The dicts as a client sends them: without ids (the service derives them from the
    content), or with ids ``m0``, ``m1``... (``--ids sequential``)."""
    return [{**d, "id": f"m{i}"} for i, d in enumerate(dicts)] if sequential else dicts


def prefill_convomem(store_url: str, session_id: str, n: int, sequential: bool) -> None:
    log = messages(n)
    if sequential:
        log = [Message.from_dict({**m.to_dict(), "id": f"m{i}"}) for i, m in enumerate(log)]
    db = open_store(store_url)
    try:
        store = db.session(session_id, user_id=USER, tenant=TENANT)
        for start in range(0, n, 1000):
            store.append(log[start : start + 1000])
    finally:
        db.close()


def prefill_reference(redis_url: str, session_id: str, n: int) -> None:
    client = redis.Redis.from_url(redis_url)
    key = f"session:{USER}:{session_id}"
    dicts = openai_messages(n)
    with client.pipeline(transaction=False) as pipe:
        for start in range(0, n, 1000):
            pipe.rpush(key, *(json.dumps(d) for d in dicts[start : start + 1000]))
        pipe.expire(key, 86400)
        pipe.execute()
    client.close()


@dataclass
class Subject:
    """One service and one of its sessions, with the latencies of its timed turns."""

    name: str
    base: str
    session_id: str
    size: int
    headers: dict[str, str]
    client: httpx.Client = field(init=False)
    append_ms: list[float] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)
    turn_ms: list[float] = field(default_factory=list)
    miss_ms: list[float] = field(default_factory=list)
    context_messages: int = 0
    errors: list[str] = field(default_factory=list)

    def failed(self, what: str, timed: bool) -> None:
        """A failed request is counted and reported, not timed (a warm-up failure stops
        the run: nothing after it would mean anything)."""
        if not timed:
            raise RuntimeError(f"{self.name}: {what}")
        self.errors.append(what)
        print(f"{self.name} at {self.size:,}: {what}", file=sys.stderr)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.base, headers=self.headers, timeout=600)

    def turn(self, message: dict[str, Any], budget: int, *, timed: bool = True) -> None:
        path = f"/v1/sessions/{self.session_id}"
        t0 = time.perf_counter()
        r = self.client.post(f"{path}/messages", json={"messages": [message]})
        t1 = time.perf_counter()
        if r.status_code >= 300:
            self.failed(f"append {r.status_code} {r.text[:300]}", timed)
            return
        r = self.client.get(f"{path}/context", params={"budget": budget, "format": "openai"})
        t2 = time.perf_counter()
        if r.status_code >= 300:
            self.failed(f"context {r.status_code} {r.text[:300]}", timed)
            return
        body = r.json()
        self.context_messages = len(body["context"] if "context" in body else body["messages"])
        if timed:
            self.append_ms.append((t1 - t0) * 1e3)
            self.context_ms.append((t2 - t1) * 1e3)
            self.turn_ms.append((t2 - t0) * 1e3)


def read_miss(s: Subject, replica: httpx.Client, budget: int) -> None:
    """The context read on another replica after ``s``'s turn: a cache miss there."""
    t0 = time.perf_counter()
    r = replica.get(
        f"/v1/sessions/{s.session_id}/context", params={"budget": budget, "format": "openai"}
    )
    t1 = time.perf_counter()
    if r.status_code >= 300:
        s.failed(f"replica context {r.status_code} {r.text[:300]}", True)
        return
    s.miss_ms.append((t1 - t0) * 1e3)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(s: Subject) -> dict[str, Any]:
    out: dict[str, Any] = {"service": s.name, "size": s.size, "turns": len(s.turn_ms)}
    series = (("append", s.append_ms), ("context", s.context_ms), ("turn", s.turn_ms))
    for name, values in (*series, ("miss", s.miss_ms)):
        out[f"{name}_p50_ms"] = round(statistics.median(values), 3) if values else float("nan")
        out[f"{name}_p99_ms"] = round(pct(values, 0.99), 3) if values else float("nan")
    out["context_messages"] = s.context_messages
    out["errors"] = len(s.errors)
    return out


def state_sizes(store: Any) -> dict[str, float]:
    """The derived state's size: what a request reads (``load_state``) and, when the
    store keeps parts apart that only a compaction reads, all of it."""
    head, _ = store.load_state()
    out = {"head_kb": round(len(json.dumps(head)) / 1024, 1)}
    parts = getattr(store, "load_state_parts", None)
    total = len(json.dumps(head))
    if head is not None and callable(parts):
        loaded, _ = parts()
        total += len(json.dumps(loaded))
    out["state_kb"] = round(total / 1024, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--rounds", type=int, default=100, help="timed turns per subject")
    parser.add_argument(
        "--reference-rounds",
        type=int,
        default=30,
        help="timed turns of the reference at sizes over 10,000 (each reloads everything)",
    )
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--store", choices=("redis", "postgresql", "sqlite"), default="redis")
    parser.add_argument(
        "--ids",
        choices=("derived", "sequential"),
        default="derived",
        help="messages without ids (derived from their content; the default) or m0, m1...",
    )
    parser.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="measure convomem only (the seed's service is not run)",
    )
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in sys.path if p)}
    run = uuid.uuid4().hex[:6]
    with ExitStack() as stack:
        redis_url = stack.enter_context(redis_server(None))  # a fresh one
        if args.store == "redis":
            store_url = f"{redis_url}?prefix=cm{run}"
        elif args.store == "postgresql":
            store_url = stack.enter_context(postgres_server())
        else:
            directory = stack.enter_context(tempfile.TemporaryDirectory())
            store_url = f"sqlite:///{directory}/bench.db"
        key = create_key(store_url)
        port = free_port()
        ours = stack.enter_context(
            process(
                convomem(
                    "serve",
                    *("--store", store_url, "--budget", str(args.budget)),
                    *("--rate", "0", "--host", "127.0.0.1", "--port", str(port)),
                ),
                port,
                env=env,
                cwd=HERE.parent,
            )
        )
        port = free_port()
        replica_url = stack.enter_context(
            process(
                convomem(
                    "serve",
                    *("--store", store_url, "--budget", str(args.budget)),
                    *("--rate", "0", "--host", "127.0.0.1", "--port", str(port)),
                ),
                port,
                env=env,
                cwd=HERE.parent,
            )
        )
        replica = stack.enter_context(
            httpx.Client(
                base_url=replica_url, headers={"Authorization": f"Bearer {key}"}, timeout=600
            )
        )
        port = free_port()
        theirs = stack.enter_context(
            process(
                [sys.executable, "-m", "uvicorn", "seed_reference.app:app", "--port", str(port)],
                port,
                env={**env, "SEED_REDIS_URL": redis_url},
                cwd=HERE,
            )
        )
        pairs: list[tuple[Subject, Subject]] = []
        for size in args.sizes:
            sid = f"s{size}-{run}"
            auth = {"Authorization": f"Bearer {key}"}
            created = httpx.post(
                f"{ours}/v1/sessions", json={"id": sid, "user_id": USER}, headers=auth
            )
            if created.status_code >= 300:
                raise RuntimeError(f"create session: {created.status_code} {created.text}")
            t0 = time.perf_counter()
            prefill_convomem(store_url, sid, size, args.ids == "sequential")
            t1 = time.perf_counter()
            if args.reference:
                prefill_reference(redis_url, sid, size)
            t2 = time.perf_counter()
            print(f"prefill {size:,}: convomem {t1 - t0:.1f} s, reference {t2 - t1:.1f} s")
            pairs.append(
                (
                    Subject("convomem", ours, sid, size, auth),
                    Subject("reference", theirs, sid, size, {"X-User-Id": USER}),
                )
            )
        for ours_s, ref_s in pairs:
            everything = openai_messages(ours_s.size + args.rounds + 2)
            follow = with_ids(everything, args.ids == "sequential")[ours_s.size :]
            t0 = time.perf_counter()
            ours_s.turn(follow[0], args.budget, timed=False)
            t1 = time.perf_counter()
            if args.reference:
                ref_s.turn(follow[0], args.budget, timed=False)
            print(
                f"warm-up at {ours_s.size:,}: convomem {t1 - t0:.2f} s (builds the derived "
                f"state), reference {time.perf_counter() - t1:.2f} s"
            )
            ref_rounds = args.rounds if ours_s.size <= 10_000 else args.reference_rounds
            if not args.reference:
                ref_rounds = 0
            for i, message in enumerate(follow[1 : args.rounds + 1]):
                order = (ours_s, ref_s) if i % 2 == 0 else (ref_s, ours_s)
                for s in order:
                    if s is ref_s and i >= ref_rounds:
                        continue
                    s.turn(message, args.budget)
                    if s is ours_s:
                        read_miss(s, replica, args.budget)
        results = [summary(s) for pair in pairs for s in pair if s.turn_ms]
        db = open_store(store_url)
        for r in results:
            if r["service"] == "convomem":
                r.update(state_sizes(db.session(f"s{r['size']}-{run}", tenant=TENANT)))
        db.close()

    print(f"\nstore: {args.store}; ids: {args.ids}; budget {args.budget}; wall ms per request")
    header = f"{'service':10} {'size':>8} {'n':>4}"
    for name in ("append", "context", "turn", "miss"):
        header += f" {name + ' p50':>12} {name + ' p99':>12}"
    print(header + f" {'ctx msgs':>9} {'head KB':>8} {'state KB':>9} {'errors':>6}")
    for r in results:
        line = f"{r['service']:10} {r['size']:>8,} {r['turns']:>4}"
        for name in ("append", "context", "turn", "miss"):
            line += f" {r[name + '_p50_ms']:>12.2f} {r[name + '_p99_ms']:>12.2f}"
        line += f" {r['context_messages']:>9} {r.get('head_kb', ''):>8}"
        print(line + f" {r.get('state_kb', ''):>9} {r['errors']:>6}")
    print()
    by = {(r["service"], r["size"]): r for r in results}
    ratios: dict[str, float] = {}
    for size in args.sizes:
        ours_r = by["convomem", size]
        spread = ours_r["turn_p99_ms"] / ours_r["turn_p50_ms"]
        ratios[f"convomem p99/p50@{size}"] = round(spread, 2)
        verdict = "met" if spread <= 3 else "MISSED"
        print(f"turn p99 / p50, convomem at {size:,}: {spread:.2f}x (target <= 3x: {verdict})")
        miss = ours_r["miss_p50_ms"]
        verdict = "met" if miss <= 50 else "MISSED"
        print(
            f"cache miss (context on another replica) at {size:,}: p50 {miss:.1f} ms, "
            f"p99 {ours_r['miss_p99_ms']:.1f} ms (target <= 50 ms: {verdict})"
        )
        if ("reference", size) not in by:
            continue
        ratio = by["reference", size]["turn_p50_ms"] / by["convomem", size]["turn_p50_ms"]
        ratios[f"reference/convomem@{size}"] = round(ratio, 2)
        verdict = ""
        if size >= 100_000:
            verdict = " (target >= 50x: " + ("met)" if ratio >= 50 else "MISSED)")
        print(f"turn p50, reference / convomem at {size:,}: {ratio:.1f}x{verdict}")
    small, big = min(args.sizes), max(args.sizes)
    if small != big:
        flat = by["convomem", big]["turn_p50_ms"] / by["convomem", small]["turn_p50_ms"]
        ratios[f"convomem {big}/{small}"] = round(flat, 2)
        verdict = "met" if flat <= 1.5 else "MISSED"
        print(
            f"turn p50, convomem at {big:,} / at {small:,}: {flat:.2f}x (target <= 1.5x: {verdict})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    main()
