"""``/v1/sessions``: create, read, list with cursors, delete; keys required."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

PROBLEM = "application/problem+json"


def test_a_request_without_a_valid_key_is_a_401_problem(
    client: TestClient, make_key: Callable[[str], dict[str, str]]
) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        r = client.get("/v1/sessions", headers=headers)
        assert r.status_code == 401
        assert r.headers["content-type"] == PROBLEM
        assert r.json()["type"] == "https://convomem.dev/problems/unauthorized"
    good = make_key("acme")["Authorization"]
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert client.get("/v1/sessions", headers={"Authorization": forged}).status_code == 401
    assert client.get("/v1/sessions", headers={"Authorization": good}).status_code == 200


def test_create_get_list_delete(
    client: TestClient, make_key: Callable[..., dict[str, str]]
) -> None:
    h = make_key("acme")
    r = client.post(
        "/v1/sessions", json={"id": "s1", "user_id": "u1", "metadata": {"a": 1}}, headers=h
    )
    assert r.status_code == 201, r.text
    assert r.json()["id"] == "s1" and r.json()["user_id"] == "u1"
    assert r.headers["etag"] == '"0"'
    again = client.post(
        "/v1/sessions", json={"id": "s1", "user_id": "u1", "metadata": {"a": 1}}, headers=h
    )
    assert again.status_code == 200
    other = client.post("/v1/sessions", json={"id": "s1", "user_id": "u2"}, headers=h)
    assert other.status_code == 409
    made = client.post("/v1/sessions", json={"user_id": "u1"}, headers=h).json()
    assert len(made["id"]) == 32
    for i in range(3):
        client.post("/v1/sessions", json={"id": f"x{i}", "user_id": "u2"}, headers=h)
    assert client.get("/v1/sessions/s1", headers=h).json()["metadata"] == {"a": 1}
    seen, cursor = [], None
    while True:
        params = {"user_id": "u2", "limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/sessions", params=params, headers=h).json()
        seen += [s["id"] for s in page["sessions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["x0", "x1", "x2"]
    assert client.delete("/v1/sessions/s1", headers=h).status_code == 204
    gone = client.get("/v1/sessions/s1", headers=h)
    assert gone.status_code == 404 and gone.json()["type"].endswith("/not-found")
    assert client.delete("/v1/sessions/s1", headers=h).status_code == 404


def test_bad_bodies_are_422_problems_naming_the_field(
    client: TestClient, make_key: Callable[..., dict[str, str]]
) -> None:
    h = make_key("acme")
    r = client.post("/v1/sessions", json={"id": "s"}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "user_id"
    r = client.post("/v1/sessions", json={"user_id": "u", "extra": 1}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "extra"
    r = client.post("/v1/sessions", json={"user_id": "u", "metadata": {"budget": "x"}}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "metadata.budget"
    assert client.get("/v1/sessions", headers=h).json()["sessions"] == []


def test_a_sessions_own_ttl(client: TestClient, make_key: Callable[..., dict[str, str]]) -> None:
    h = make_key("acme")
    body = {"id": "long", "user_id": "u", "metadata": {"a": 1}, "ttl_seconds": 3600}
    made = client.post("/v1/sessions", json=body, headers=h).json()
    assert made["ttl_seconds"] == 3600 and made["metadata"] == {"a": 1}
    assert made["expires_at"] == made["updated_at"] + 3600
    assert client.post("/v1/sessions", json=body, headers=h).status_code == 200
    # a TTL of a microsecond has passed by the next request: the session is gone
    short = {"id": "short", "user_id": "u", "ttl_seconds": 1e-6}
    assert client.post("/v1/sessions", json=short, headers=h).status_code == 201
    assert client.get("/v1/sessions/short", headers=h).status_code == 404
    listed = client.get("/v1/sessions", headers=h).json()["sessions"]
    assert [s["id"] for s in listed] == ["long"]
    msg = {"messages": [{"role": "user", "content": "x"}]}
    assert client.post("/v1/sessions/short/messages", json=msg, headers=h).status_code == 404
    r = client.post("/v1/sessions", json={"user_id": "u", "metadata": {"convomem:x": 1}}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "metadata.convomem:x"
    assert (
        client.post("/v1/sessions", json={"user_id": "u", "ttl_seconds": 0}, headers=h).status_code
        == 422
    )
