"""``/docs`` works offline: the page loads only the service's own assets, Swagger UI
renders every operation of the schema in Debian's chromium with the network closed to
anything but localhost, and without the assets' package the page answers a problem
naming the extra (the API is unaffected)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Route

from _servers_app import spawn_replicas, wait_ready
from convomem.server import Settings, api_docs, create_app

WAIT_MS = 30_000  # a cold chromium parses 1.5 MB of Swagger UI on a busy core
LOCAL = {"127.0.0.1", "localhost"}


def _assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_the_page_loads_only_the_service_s_own_assets(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(store=f"sqlite:///{tmp_path / 'd.db'}"))) as c:
        r = c.get("/docs")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assets = _assets(r.text)
        assert assets and all(a.startswith(api_docs.ASSETS + "/") for a in assets), assets
        for a in assets:
            got = c.get(a)
            assert got.status_code == 200 and len(got.content) > 1000, a
        assert "cdn" not in r.text
        assert c.get("/redoc").status_code == 404  # its bundle would fetch a logo online


def test_without_the_assets_package_the_page_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_docs, "assets_dir", lambda: None)
    with TestClient(create_app(Settings(store=f"sqlite:///{tmp_path / 'd.db'}"))) as c:
        r = c.get("/docs")
        assert r.status_code == 501, r.text
        detail = r.json()["detail"]
        assert "fastapi-offline" in detail and "pip install 'convomem[server]'" in detail
        assert c.get(f"{api_docs.ASSETS}/swagger-ui-bundle.js").status_code == 404
        assert "/v1/sessions" in c.get("/openapi.json").json()["paths"]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    """A ``convomem serve`` process: its base URL."""
    (replica,) = spawn_replicas(f"sqlite:///{tmp_path / 'docs.db'}", 1, directory=tmp_path)
    try:
        wait_ready([replica])
        yield replica.url
    finally:
        replica.stop()


def test_swagger_ui_renders_every_operation_with_no_network_but_localhost(
    browser: Browser, service: str
) -> None:
    import httpx

    spec = httpx.get(f"{service}/openapi.json").json()
    operations = {
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert len(operations) >= 10
    blocked: list[str] = []

    def local_only(route: Route) -> None:
        if urlsplit(route.request.url).hostname in LOCAL:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("internetdisconnected")

    context = browser.new_context()
    try:
        context.route("**/*", local_only)
        page = context.new_page()
        page.goto(f"{service}/docs")
        page.wait_for_function(
            f"document.querySelectorAll('.opblock').length >= {len(operations)}", timeout=WAIT_MS
        )
        shown = page.eval_on_selector_all(
            ".opblock",
            "els => els.map(e => [e.querySelector('.opblock-summary-method').textContent,"
            " e.querySelector('.opblock-summary-path').dataset.path])",
        )
        assert {(m, p) for m, p in shown} == operations
        assert page.title() == "convomem API"
        assert page.locator(".info .title").inner_text().startswith("convomem")
        page.locator(".opblock-summary-path[data-path='/v1/sessions/{session_id}/context']").click()
        page.wait_for_selector(".opblock.is-open .parameters", timeout=WAIT_MS)
        assert "budget" in page.locator(".opblock.is-open .parameters").inner_text()
    finally:
        context.close()
    assert blocked == []
