"""Real ``convomem serve`` processes for the tests: N replicas of the HTTP service on free
loopback ports over one store URL (and optionally one Redis for the shared rate limits),
each started as ``python -m convomem serve`` (the same interpreter and ``PYTHONPATH`` as
the tests, so a worktree's source is what runs) and ready once ``GET /readyz`` answers
200. A replica that exits or is not ready in time FAILS the test with the tail of its
log, never skips. Teardown kills every process it started (its own pids, nothing else).

    def test_x(serve_app, postgresql, redis_server):
        url = postgresql.fresh_url()
        key = create_key(url, "acme")
        replicas = serve_app(url, 2, "--redis", redis_url)
        more = serve_app.spawn(url, 2); serve_app.ready(more)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def convomem_command(*args: str) -> list[str]:
    """The command line of ``convomem ARGS`` run by this interpreter."""
    return [sys.executable, "-m", "convomem", *args]


def create_key(store_url: str, tenant: str) -> str:
    """A new API key of ``tenant`` made by ``convomem keys create`` (its last line)."""
    done = subprocess.run(
        convomem_command("keys", "create", "--tenant", tenant, "--store", store_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.fail(f"convomem keys create failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    return done.stdout.strip().splitlines()[-1].strip()


@dataclass
class Replica:
    """One ``convomem serve`` process listening on 127.0.0.1:``port``."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def spawn_replicas(store_url: str, count: int, *args: str, directory: Path) -> list[Replica]:
    """Start ``count`` replicas of ``convomem serve --store store_url ARGS`` (not waited
    for: ``wait_ready``)."""
    replicas: list[Replica] = []
    for _ in range(count):
        port = _free_port()
        log = directory / f"serve-{port}.log"
        command = convomem_command(
            "serve", "--store", store_url, "--host", "127.0.0.1", "--port", str(port), *args
        )
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy()
            )
        replicas.append(Replica(port, process, log))
    return replicas


def wait_ready(replicas: list[Replica], timeout: float = 90.0) -> None:
    """Wait until each replica answers ``/readyz`` with 200; on failure stop them all and
    fail the test with their logs."""
    try:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=5.0) as client:
            for replica in replicas:
                while True:
                    if replica.process.poll() is not None:
                        raise RuntimeError(f"exited with {replica.process.returncode}")
                    try:
                        if client.get(f"{replica.url}/readyz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"not ready after {timeout:.0f} s")
                    time.sleep(0.1)
    except RuntimeError as exc:
        detail = "\n".join(f"--- {r.url}\n{r.log_tail()}" for r in replicas)
        for replica in replicas:
            replica.stop()
        pytest.fail(f"convomem serve did not start: {exc}\n{detail}", pytrace=False)


class Launcher:
    """What the ``serve_app`` fixture gives: ``launcher(store_url, count, *args)`` starts
    replicas and waits for them; ``spawn`` + ``ready`` start several groups at once (a
    process takes seconds to import its app on a busy machine)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Replica] = []

    def spawn(self, store_url: str, count: int = 1, *args: str) -> list[Replica]:
        replicas = spawn_replicas(store_url, count, *args, directory=self.directory)
        self.started.extend(replicas)
        return replicas

    def ready(self, *groups: list[Replica]) -> None:
        wait_ready([r for group in groups for r in group])

    def __call__(self, store_url: str, count: int = 1, *args: str) -> list[Replica]:
        replicas = self.spawn(store_url, count, *args)
        self.ready(replicas)
        return replicas

    def stop(self) -> None:
        for replica in self.started:
            replica.stop()


@pytest.fixture
def serve_app() -> Iterator[Launcher]:
    """Replicas of ``convomem serve`` started for this test only (see ``Launcher``)."""
    directory = Path(tempfile.mkdtemp(prefix="convomem-serve-"))
    launcher = Launcher(directory)
    yield launcher
    launcher.stop()
    shutil.rmtree(directory, ignore_errors=True)
