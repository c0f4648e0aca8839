"""Fixtures of the client tests: the real app in-process (``service`` / ``asgi_app``)
and one real ``convomem serve`` process (``served``), each over a temporary SQLite
store with a key of tenant ``acme`` (and one of ``globex``), the chat route on the local
fake upstream."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from _fake_upstream import FakeUpstream, start
from _service_support import Service, keys_of, settings
from convomem.server import create_app

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    yield from start(FakeUpstream(reply="It left the depot on Monday.", pieces=3))


@pytest.fixture
def service(tmp_path: Path, fake: FakeUpstream) -> Iterator[Service]:
    """The app in-process, through Starlette's TestClient (an httpx client)."""
    store = f"sqlite:///{tmp_path / 'service.db'}"
    key, other = keys_of(store)
    with TestClient(create_app(settings(store, fake))) as http:
        yield Service("http://testserver", key, other, fake, http)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One real ``convomem serve`` process on a free port (FAILS when it cannot start)."""
    folder = tmp_path_factory.mktemp("served")
    store = f"sqlite:///{folder / 'service.db'}"
    key, other = keys_of(store)
    upstream = start(FakeUpstream(reply="It left the depot on Monday.", pieces=3))
    fake = next(upstream)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [
        sys.executable,
        "-m",
        "convomem",
        "serve",
        "--store",
        store,
        "--port",
        str(port),
        "--rate",
        "0",
        "--upstream-url",
        fake.url,
        "--upstream-model",
        "m",
    ]
    log = open(folder / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"convomem serve exited: {(folder / 'serve.log').read_text()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("convomem serve did not answer /healthz within 60 s")
            time.sleep(0.1)
        yield Service(url, key, other, fake)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        upstream.close()
