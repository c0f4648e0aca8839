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

# (method, path template, body template); {s} is a session id, {u} a user id, {f} a fact
# id (of the user's current fact).
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
    ("GET", "/v1/users/{u}/facts?history=true", None),
    ("POST", "/v1/users/{u}/facts", {"attribute": "city", "value": "Faro"}),
    ("GET", "/v1/users/{u}/facts/{f}", None),
    ("PATCH", "/v1/users/{u}/facts/{f}", {"value": "Faro"}),
    ("DELETE", "/v1/users/{u}/facts/{f}", None),
    ("DELETE", "/v1/users/{u}", None),
]


NO_FACT = "f_00000000000000000000"


def _fill(value: Any, s: str, u: str, f: str = NO_FACT) -> Any:
    if isinstance(value, str):
        return value.replace("{s}", s).replace("{u}", u).replace("{f}", f)
    if isinstance(value, dict):
        return {k: _fill(v, s, u, f) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, s, u, f) for v in value]
    return value


def _call(
    client: TestClient,
    h: dict[str, str],
    route: tuple[str, str, Any],
    s: str,
    u: str,
    f: str = NO_FACT,
) -> Any:
    method, path, body = route
    r = client.request(method, _fill(path, s, u, f), json=_fill(body, s, u, f), headers=h)
    return r


def _fact(client: TestClient, h: dict[str, str], u: str) -> str:
    """The id of the user's current fact (the city ``_seed`` states)."""
    facts = client.get(f"/v1/users/{u}/facts", headers=h).json()["current"]
    return str(facts[0]["id"])


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
    facts = client.get(f"/v1/users/{u}/facts?history=true", headers=h).json()
    return info["message_count"], info["last_seq"], log, hits, facts


def test_every_api_route_is_in_the_table(client: TestClient) -> None:
    # From the OpenAPI document: FastAPI >= 0.165 includes routers lazily, so
    # ``app.routes`` no longer lists the routes of an included router.
    names = {"{s}": "{session_id}", "{u}": "{user_id}", "{f}": "{fact_id}"}
    listed = set()
    for m, p, _ in ROUTES:
        path = p.split("?")[0]
        for short, full in names.items():
            path = path.replace(short, full)
        listed.add((m, path))
    paths = client.app.openapi()["paths"]  # type: ignore[attr-defined]
    app_routes = {
        (method.upper(), path)
        for path, ops in paths.items()
        if path.startswith("/v1/")
        for method in ops
    }
    assert app_routes - listed == set(), "add these routes to ROUTES"
    assert listed - app_routes == set(), "ROUTES names routes the app does not have"


@pytest.mark.parametrize("route", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_another_tenants_names_are_answered_as_nowhere(
    route: tuple[str, str, Any], client: TestClient, make_key: Key
) -> None:
    a, b = make_key("tenant-a"), make_key("tenant-b")
    _seed(client, b, "sb", "ub", "porto")
    before = _state(client, b, "sb", "ub")
    fb = _fact(client, b, "ub")
    theirs = _call(client, a, route, "sb", "ub", fb)
    nowhere = _call(client, a, route, "zz", "uz")
    assert theirs.status_code == nowhere.status_code
    assert theirs.status_code < 500
    assert _blank(theirs.text, "sb", "ub", fb) == _blank(nowhere.text, "zz", "uz", NO_FACT)
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
    r = _call(client, a, route, "s", "u", _fact(client, b, "u"))  # B's fact id, A's user
    assert r.status_code < 500
    assert "secret-porto" not in r.text.lower()
    assert _state(client, b, "s", "u") == before
