"""The inspector over HTTP: pages and data agree with the API, auth by header, cookie or
``?key=``, tenants see only their own sessions, and the data route follows the session.

Sessions are seeded through the API (``/v1/sessions``, ``/v1/sessions/{id}/messages``)
and compared with ``/v1/sessions/{id}/context``'s accounting and the log's pages.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from html.parser import HTMLParser
from typing import Any

from fastapi.testclient import TestClient

from convomem.server.inspect.routes import COOKIE

Headers = dict[str, str]
TEXT = "the parcel was delayed again and we talked about shipping options while support"


class Rows(HTMLParser):
    """The attributes of every start tag."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def having(self, attr: str) -> list[dict[str, str | None]]:
        return [a for _, a in self.tags if attr in a]


def parse(html: str) -> Rows:
    p = Rows()
    p.feed(html)
    return p


def seed(client: TestClient, key: Headers, sid: str, user: str, n: int, budget: int = 300) -> None:
    r = client.post(
        "/v1/sessions",
        json={"id": sid, "user_id": user, "metadata": {"budget": budget}},
        headers=key,
    )
    assert r.status_code in (200, 201), r.text
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(n):
        messages.append({"id": f"{sid}-u{i}", "role": "user", "content": f"{TEXT} {i}"})
        messages.append({"id": f"{sid}-a{i}", "role": "assistant", "content": f"ok {TEXT} {i}"})
    messages.append({"id": f"{sid}-u{n}", "role": "user", "content": "I live in Porto now."})
    r = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages}, headers=key)
    assert r.status_code == 201, r.text


def test_page_and_data_agree_with_the_api(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    key = make_key("acme")
    seed(client, key, "s1", "dana", 30)
    page = client.get("/inspect/s1", headers=key)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    rows = [a for a in parse(page.text).having("data-state") if "data-id" in a]

    log: list[str] = []
    texts: dict[str, Any] = {}
    cursor = None
    while True:
        params = {"limit": 100} if cursor is None else {"limit": 100, "cursor": cursor}
        r = client.get("/v1/sessions/s1/messages", params=params, headers=key).json()
        log += [m["id"] for m in r["messages"]]
        texts.update((m["id"], m["content"]) for m in r["messages"])
        cursor = r["next_cursor"]
        if cursor is None:
            break
    assert [a["data-id"] for a in rows] == log  # a partition of the log, in order

    acc = client.get("/v1/sessions/s1/context", headers=key).json()["accounting"]
    sent = {a["data-id"] for a in rows if a["data-state"] in ("pinned", "in_view", "compressed")}
    assert sent == set(acc["kept"])
    assert sum(1 for a in rows if a["data-state"] == "summarized") == acc["summarized"] > 0

    figures = {a["data-figure"]: a for a in parse(page.text).having("data-figure")}
    assert set(figures) >= {"log", "context-tokens"}
    data = client.get("/inspect/s1/data", headers=key).json()
    t = data["timeline"]
    split = t["stats"]["budget_split"] or {}
    assert split.get("total", t["stats"]["context_tokens"]) == acc["tokens"]
    assert figures["context-tokens"] is not None
    assert [h["message_id"] for h in (t["recall"] or {}).get("hits", [])] == [
        h["message_id"] for h in acc["recalled"]
    ]
    # each hit says what it found: the text the log holds for that message (issue 19 §6)
    assert acc["recalled"]
    for h in acc["recalled"]:
        assert h["text"] and h["text"] in str(texts[h["message_id"]]), h
        assert escape(h["text"][:300]) in page.text
    assert (t["budget"]["facts"], t["budget"]["recall"]) == (
        acc["split"].get("facts", 0),
        acc["split"].get("recall", 0),
    )
    assert t["stats"]["log_messages"] == acc["log_messages"] == len(log)
    assert [e["state"] for e in t["entries"]] == [a["data-state"] for a in rows]
    assert set(data["sections"]) >= {"sec-timeline", "sec-budget", "sec-plots", "sec-facts"}
    assert any(f["attribute"] == "city" and f["value"] == "Porto" for f in t["facts"])
    nonce = page.headers["content-security-policy"].split("'nonce-")[1].split("'")[0]
    assert f'<script nonce="{nonce}">' in page.text

    limited = client.get("/inspect/s1/data", params={"limit": 5}, headers=key).json()
    assert [e["id"] for e in limited["timeline"]["entries"]] == log[-5:]
    assert limited["timeline"]["older"] == len(log) - 5


def test_data_follows_the_session(client: TestClient, make_key: Callable[[str], Headers]) -> None:
    key = make_key("acme")
    seed(client, key, "s1", "dana", 3)
    first = client.get("/inspect/s1/data", headers=key).json()
    again = client.get("/inspect/s1/data", params={"since": first["version"]}, headers=key)
    assert again.json() == {"changed": False, "version": first["version"]}
    msg = {"id": "late", "role": "user", "content": "one more"}
    client.post("/v1/sessions/s1/messages", json={"messages": [msg]}, headers=key)
    moved = client.get("/inspect/s1/data", params={"since": first["version"]}, headers=key).json()
    assert moved["changed"] and moved["version"] != first["version"]
    assert moved["timeline"]["entries"][-1]["id"] == "late"
    assert 'data-id="late"' in moved["sections"]["sec-timeline"]


def test_auth_by_header_cookie_query_and_form(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    key = make_key("acme")
    token = key["Authorization"].split(" ", 1)[1]
    seed(client, key, "s1", "dana", 2)

    bare = client.get("/inspect/s1")
    assert bare.status_code == 401 and '<form class="login"' in bare.text
    assert client.get("/inspect/s1/data").status_code == 401  # the API's problem
    assert client.get("/inspect/s1/data").headers["content-type"] == "application/problem+json"

    hop = client.get("/inspect/s1", params={"key": token, "limit": 50}, follow_redirects=False)
    assert hop.status_code == 303 and hop.headers["location"] == "/inspect/s1?limit=50"
    cookie = hop.headers["set-cookie"]
    assert f"{COOKIE}={token}" in cookie and "HttpOnly" in cookie and "Path=/inspect" in cookie
    assert "samesite=strict" in cookie.lower()

    for junk in ("cm_000000000000_" + "x" * 43, "", "not a key"):  # checked, never stored
        refused = client.get("/inspect/s1", params={"key": junk}, follow_redirects=False)
        assert refused.status_code == 401 and "not valid" in refused.text
        assert "set-cookie" not in refused.headers
        assert not junk or junk not in refused.text  # nor echoed

    client.cookies.set(COOKIE, token)
    assert client.get("/inspect/s1").status_code == 200
    assert client.get("/inspect/s1/data").status_code == 200
    client.cookies.set(COOKIE, "cm_000000000000_wrong")
    wrong = client.get("/inspect/s1")
    assert wrong.status_code == 401 and "A valid API key is required" in wrong.text
    client.cookies.clear()

    bad = client.post("/inspect/login", data={"key": "nope", "next": "/inspect/s1"})
    assert bad.status_code == 401 and "not valid" in bad.text
    ok = client.post(
        "/inspect/login",
        data={"key": token, "next": "https://evil.example/"},
        follow_redirects=False,
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/inspect"  # no open redirect
    assert client.get("/inspect/login").status_code == 200


def test_tenants_see_only_their_sessions(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    a, b = make_key("acme"), make_key("globex")
    seed(client, a, "s1", "dana", 4)
    seed(client, a, "only-a", "dana", 1)
    seed(client, b, "s1", "dana", 1)  # the same session and user ids in the other tenant

    mine = client.get("/inspect", params={"user_id": "dana"}, headers=a).text
    theirs = client.get("/inspect", params={"user_id": "dana"}, headers=b).text
    assert {x["data-session"] for x in parse(mine).having("data-session")} == {"s1", "only-a"}
    assert {x["data-session"] for x in parse(theirs).having("data-session")} == {"s1"}

    for path in ("/inspect/only-a", "/inspect/only-a/data", "/inspect/missing/data"):
        r = client.get(path, headers=b)
        assert r.status_code == 404, path
    missing = client.get("/inspect/missing", headers=b)
    hidden = client.get("/inspect/only-a", headers=b)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"].replace("only-a", "X") == missing.json()["detail"].replace(
        "missing", "X"
    )

    def ids(key: Headers) -> list[str]:
        t = client.get("/inspect/s1/data", headers=key).json()["timeline"]
        return [e["id"] for e in t["entries"]]

    ids_a, ids_b = ids(a), ids(b)
    assert len(ids_b) == 4 and len(ids_a) == 10 and "s1-u3" not in ids_b


def test_bad_input_is_a_4xx(client: TestClient, make_key: Callable[[str], Headers]) -> None:
    key = make_key("acme")
    seed(client, key, "s1", "dana", 1)
    for params in ({"limit": 0}, {"limit": "x"}, {"interval": 1}):
        r = client.get("/inspect/s1", params=params, headers=key)
        assert r.status_code == 422, (params, r.status_code)
    assert client.get("/inspect/s1/data", params={"limit": 10**6}, headers=key).status_code == 422
    assert client.get("/inspect", headers=key).status_code == 200  # the form asking for a user
