"""Fixtures of the service tests: an app over a temporary SQLite store, its client, and
API keys of any tenant (``make_key``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from _server_support import create_key
from convomem.server import Settings, create_app


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def make_client(store_url: str) -> Iterator[Callable[..., TestClient]]:
    """``make_client(**settings)``: a TestClient of a new app over the test's store."""
    clients: list[TestClient] = []

    def make(**options: Any) -> TestClient:
        options.setdefault("store", store_url)
        client = TestClient(create_app(Settings(**options)), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


@pytest.fixture
def make_key(store_url: str) -> Callable[[str], dict[str, str]]:
    """``make_key(tenant)``: the Authorization header of a new key of ``tenant``."""

    def make(tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {create_key(store_url, tenant)}"}

    return make
