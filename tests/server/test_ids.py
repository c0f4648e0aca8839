"""Ids and values at the edge of the API (issue 20 §2): one id rule for session ids,
user ids and tenants, checked at creation with a 422 naming the rule; every id accepted
is reachable by every route (in process, and through a real ``convomem serve``, whose
server decodes paths itself); values JSON can carry but no store can (lone surrogates,
NaN, infinities) and cursors out of range are 4xx problems that write nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _servers_app import Launcher, create_key, serve_app  # noqa: F401
from convomem.stores.records import ID_RULE

Key = Callable[[str], dict[str, str]]

TRICKY = [
    "a b",
    "100%",
    "%2F",
    "q?x=1",
    "frag#1",
    "...",
    ".hidden",
    "x.",
    "~user+tag@example.com",
    "é🙂中",
    " lead",
    "semi;colon=1",
    "a" * 256,
]
"""Ids that must be reachable: each trips some decoder or normaliser if not quoted."""


def _every_route(call: Callable[..., Any], h: dict[str, str], sid: str, uid: str) -> None:
    """Create the session of ``uid``, then reach it (and its user) by every route."""
    s, u = quote(sid, safe=""), quote(uid, safe="")
    made = call("POST", "/v1/sessions", json={"id": sid, "user_id": uid}, headers=h)
    assert made.status_code == 201, made.text
    assert made.json()["id"] == sid and made.json()["user_id"] == uid
    msg = {"messages": [{"role": "user", "content": "my parcel number is 4471"}]}
    assert call("POST", f"/v1/sessions/{s}/messages", json=msg, headers=h).status_code == 201
    got = call("GET", f"/v1/sessions/{s}", headers=h)
    assert got.status_code == 200 and got.json()["id"] == sid
    page = call("GET", f"/v1/sessions/{s}/messages", headers=h).json()["messages"]
    assert [m["content"] for m in page] == ["my parcel number is 4471"]
    assert call("GET", f"/v1/sessions/{s}/context", headers=h).status_code == 200
    listed = call("GET", "/v1/sessions", params={"user_id": uid}, headers=h).json()["sessions"]
    assert [x["id"] for x in listed] == [sid]
    hits = call(
        "POST", "/v1/recall/search", json={"user_id": uid, "query": "parcel"}, headers=h
    ).json()["hits"]
    assert hits and hits[0]["session_id"] == sid
    assert call("GET", f"/v1/users/{u}/facts", headers=h).status_code == 200
    assert call("DELETE", f"/v1/sessions/{s}", headers=h).status_code == 204
    assert call("GET", f"/v1/sessions/{s}", headers=h).status_code == 404
    again = call("POST", "/v1/sessions", json={"id": sid, "user_id": uid}, headers=h)
    assert again.status_code == 201
    erased = call("DELETE", f"/v1/users/{u}", headers=h)
    assert erased.status_code == 200 and erased.json()["sessions"] == 1
    assert call("GET", f"/v1/sessions/{s}", headers=h).status_code == 404


def _allowed(value: str) -> bool:
    if not 1 <= len(value) <= 256 or value in (".", ".."):
        return False
    return not any(ord(c) < 0x20 or ord(c) == 0x7F or c in "/\\" for c in value)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.text(
        alphabet=st.one_of(st.sampled_from("./\\%?#+ ~;=&é\x00\x7f"), st.characters()),
        min_size=0,
        max_size=6,
    ).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))
)
def test_an_id_is_refused_at_creation_or_reachable_everywhere(
    client: TestClient, make_key: Key, value: str
) -> None:
    h = make_key("acme")
    for field in ("id", "user_id"):
        body = {"id": value, "user_id": "u"} if field == "id" else {"user_id": value}
        if _allowed(value):
            continue
        r = client.post("/v1/sessions", json=body, headers=h)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field and ID_RULE in r.json()["detail"]
    if _allowed(value):
        _every_route(client.request, h, value, value)
    assert client.get("/v1/sessions", headers=h).json()["sessions"] == []


def test_tricky_ids_are_reachable_through_a_real_server(
    serve_app: Launcher,  # noqa: F811
    tmp_path: Any,
) -> None:
    url = f"sqlite:///{tmp_path / 'ids.db'}"
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    (replica,) = serve_app(url, 1, "--rate", "0")
    with httpx.Client(base_url=replica.url, timeout=30) as http:
        for i, tricky in enumerate(TRICKY):
            _every_route(http.request, h, tricky, f"{i}-{tricky}"[:256])


BAD_BODIES = [
    ("/v1/sessions", '{"user_id": "u\\ud800"}', "user_id"),
    ("/v1/sessions", '{"user_id": "u", "metadata": {"\\udc00": 1}}', "metadata"),
    ("/v1/sessions", '{"user_id": "u", "ttl_seconds": Infinity}', "ttl_seconds"),
    ("/v1/sessions", '{"user_id": "u", "metadata": {"x": NaN}}', "['x']"),
    (
        "/v1/sessions/s1/messages",
        '{"messages": [{"role": "user", "content": "a\\ud83d"}]}',
        "content",
    ),
    (
        "/v1/sessions/s1/messages",
        '{"messages": [{"role": "user", "content": "a", "metadata": {"n": -Infinity}}]}',
        "['n']",
    ),
    (
        "/v1/sessions/s1/messages",
        '{"messages": [{"role": "user", "content": "a", "metadata": {"n": 1e999}}]}',
        "['n']",
    ),
    ("/v1/recall/search", '{"user_id": "u1", "query": "\\udfff"}', "query"),
    ("/v1/sessions/s1/chat", '{"content": "hi \\ud800"}', "content"),
]


def test_values_json_carries_but_no_store_can_are_422_problems(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "u1"}, headers=h).is_success
    raw = h | {"Content-Type": "application/json"}
    for path, text, where in BAD_BODIES:
        r = client.post(path, content=text.encode(), headers=raw)
        assert r.status_code == 422, (path, text, r.status_code, r.text)
        problem = r.json()  # itself valid JSON in UTF-8, the culprit named
        assert where in problem["detail"], problem
    info = client.get("/v1/sessions/s1", headers=h).json()
    assert info["message_count"] == 0
    assert [s["id"] for s in client.get("/v1/sessions", headers=h).json()["sessions"]] == ["s1"]


def test_cursors_out_of_range_are_422_problems(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "u1"}, headers=h).is_success
    for cursor in (f"f:{2**63}", "f:9999999999999999999"):
        r = client.get("/v1/sessions/s1/messages", params={"cursor": cursor}, headers=h)
        assert r.status_code == 422 and "out of range" in r.json()["detail"]
    r = client.get("/v1/sessions", params={"cursor": f"s:{2**63}"}, headers=h)
    assert r.status_code == 422 and "out of range" in r.json()["detail"]
