"""Fixtures of the service tests: an app over a temporary SQLite store, its client, API
keys of any tenant (``make_key``), and Debian's chromium driven by Playwright
(``browser``)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

from _server_support import create_key
from convomem.server import Settings, create_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless chromium (``scripts/ensure-chromium.sh`` installs it when missing; a
    browser that cannot start FAILS the test)."""
    from playwright.sync_api import sync_playwright

    done = subprocess.run(
        ["sh", str(ROOT / "scripts" / "ensure-chromium.sh")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-background-networking"]
        )
        yield b
        b.close()


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
