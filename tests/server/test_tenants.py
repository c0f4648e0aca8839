"""Tenant isolation through every route: a key of tenant A cannot read, write, list,
search, erase or even confirm the existence of tenant B's sessions, users or facts.

For each route, tenant B holds session ``sb`` of user ``ub`` (messages, recall items);
tenant A asks for B's names and for names that exist nowhere: the two answers are the
same once the names are blanked out (a 404, or an empty page), and B's data is
unchanged afterwards. With the same ids in both tenants, each key sees only its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

Key = Callable[[str], dict[str, str]]

# (method, path template, body template); {s} is a session id, {u} a user id.
ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/sessions", {"id": "{s}", "user_id": "{u}"}),
    ("GET", "/v1/sessions?user_id={u}", None),
    ("GET", "/v1/sessions/{s}", None),
    ("DELETE", "/v1/sessions/{s}", None),
    ("POST", "/v1/sessions/{s}/messages", {"messages": [{"role": "user", "content": "x"}]}),
    ("GET", "/v1/sessions/{s}/messages", None),
    ("GET", "/v1/sessions/{s}/context?query=porto", None),
    ("POST", "/v1/sessions/{s}/chat", {"content": "hello"}),
    ("POST", "/v1/recall/search", {"user_id": "{u}", "query": "porto"}),
    ("GET", "/v1/users/{u}/facts", None),
    ("DELETE", "/v1/users/{u}", None),
]


def _fill(value: Any, s: str, u: str) -> Any:
    if isinstance(value, str):
        return value.replace("{s}", s).replace("{u}", u)
    if isinstance(value, dict):
        return {k: _fill(v, s, u) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, s, u) for v in value]
    return value


def _call(
    client: TestClient, h: dict[str, str], route: tuple[str, str, Any], s: str, u: str
) -> Any:
    method, path, body = route
    r = client.request(method, _fill(path, s, u), json=_fill(body, s, u), headers=h)
    return r


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    # An upstream that refuses connections: the chat route gets past its configuration
    # check to the session lookup, and fails (after the lookup) on the model call.
    return make_client(upstream_url="http://127.0.0.1:9/v1", upstream_model="m")


def _blank(text: str, *names: str) -> str:
    for n in names:
        text = text.replace(n, "<name>")
    return re.sub(r'"(created_at|updated_at)":[0-9.e+]+', r'"\1":0', text)


def _seed(client: TestClient, h: dict[str, str], s: str, u: str, words: str) -> None:
    assert client.post("/v1/sessions", json={"id": s, "user_id": u}, headers=h).status_code == 201
    msgs = [
        {"role": "user", "content": f"I live in {words} and my code is secret-{words}"},
        {"role": "assistant", "content": f"Noted: {words}."},
    ]
    r = client.post(f"/v1/sessions/{s}/messages", json={"messages": msgs}, headers=h)
    assert r.status_code == 201, r.text


def _state(client: TestClient, h: dict[str, str], s: str, u: str) -> Any:
    info = client.get(f"/v1/sessions/{s}", headers=h).json()
    log = client.get(f"/v1/sessions/{s}/messages", headers=h).json()
    found = client.post("/v1/recall/search", json={"user_id": u, "query": "porto"}, headers=h)
    # Hits by identity and text: FTS5's BM25 statistics span the table (every tenant), so
    # scores may shift with other tenants' writes; which items a user sees may not.
    hits = sorted((x["message_id"], x["text"]) for x in found.json()["hits"])
    return info["message_count"], info["last_seq"], log, hits


def test_every_api_route_is_in_the_table(client: TestClient) -> None:
    listed = {
        (m, p.split("?")[0].replace("{s}", "{session_id}").replace("{u}", "{user_id}"))
        for m, p, _ in ROUTES
    }
    app_routes = {
        (method, route.path)
        for route in client.app.routes  # type: ignore[attr-defined]
        if getattr(route, "path", "").startswith("/v1/")
        for method in getattr(route, "methods", ())
    }
    assert app_routes <= listed, f"add these routes to ROUTES: {app_routes - listed}"


@pytest.mark.parametrize("route", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_another_tenants_names_are_answered_as_nowhere(
    route: tuple[str, str, Any], client: TestClient, make_key: Key
) -> None:
    a, b = make_key("tenant-a"), make_key("tenant-b")
    _seed(client, b, "sb", "ub", "porto")
    before = _state(client, b, "sb", "ub")
    theirs = _call(client, a, route, "sb", "ub")
    nowhere = _call(client, a, route, "zz", "uz")
    assert theirs.status_code == nowhere.status_code
    assert theirs.status_code < 500
    assert _blank(theirs.text, "sb", "ub") == _blank(nowhere.text, "zz", "uz")
    assert {k: v for k, v in theirs.headers.items() if k not in ("content-length", "date")} == {
        k: v for k, v in nowhere.headers.items() if k not in ("content-length", "date")
    } or theirs.status_code == 201
    assert _state(client, b, "sb", "ub") == before


@pytest.mark.parametrize("route", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_the_same_ids_in_two_tenants_stay_apart(
    route: tuple[str, str, Any], client: TestClient, make_key: Key
) -> None:
    a, b = make_key("tenant-a"), make_key("tenant-b")
    _seed(client, a, "s", "u", "lisbon")
    _seed(client, b, "s", "u", "porto")
    before = _state(client, b, "s", "u")
    r = _call(client, a, route, "s", "u")
    assert r.status_code < 500
    assert "secret-porto" not in r.text.lower()
    assert _state(client, b, "s", "u") == before
