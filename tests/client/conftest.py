"""Fixtures of the client tests: the real app in-process (``service`` / ``asgi_app``)
and one real ``convomem serve`` process (``served``), each over a temporary SQLite
store with a key of tenant ``acme`` (and one of ``globex``), the chat route on the local
fake upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from _fake_upstream import FakeUpstream, start
from _servers_app import spawn_replicas, wait_ready
from _service_support import Service, keys_of, settings
from convomem.server import create_app


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


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One real ``convomem serve`` process on a free port (FAILS when it cannot start)."""
    folder = tmp_path_factory.mktemp("served")
    store = f"sqlite:///{folder / 'service.db'}"
    key, other = keys_of(store)
    upstream = start(FakeUpstream(reply="It left the depot on Monday.", pieces=3))
    fake = next(upstream)
    args = ("--rate", "0", "--upstream-url", fake.url, "--upstream-model", "m")
    (replica,) = spawn_replicas(store, 1, *args, directory=folder)
    try:
        wait_ready([replica])
        yield Service(replica.url, key, other, fake)
    finally:
        replica.stop()
        upstream.close()
