"""``/v1/users/{id}/facts``: read, add, correct and delete a user's facts by id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from _server_support import create_key
from convomem.server.deps import Services
from convomem.summaries.keyed import KeyedFact
from convomem.summaries.supersession import HISTORY_HEADER

Key = Callable[[str], dict[str, str]]


def _seed(client: TestClient, h: dict[str, str], sid: str, user: str, texts: list[str]) -> None:
    r = client.post("/v1/sessions", json={"id": sid, "user_id": user}, headers=h)
    assert r.status_code == 201, r.text
    if texts:
        msgs = [{"role": "user", "content": t} for t in texts]
        r = client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs}, headers=h)
        assert r.status_code == 201, r.text


def _facts(client: TestClient, h: dict[str, str], user: str = "ana") -> dict[str, Any]:
    r = client.get(f"/v1/users/{user}/facts", params={"history": "true"}, headers=h)
    assert r.status_code == 200, r.text
    assert r.headers["etag"] == f'"{r.json()["version"]}"'
    out: dict[str, Any] = r.json()
    return out


def _current(client: TestClient, h: dict[str, str], user: str = "ana") -> dict[str, str]:
    return {f["attribute"]: f["value"] for f in _facts(client, h, user)["current"]}


def _key_id(client: TestClient, h: dict[str, str]) -> str:
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    record = client.portal.call(services.keys.verify, h["Authorization"][7:])  # type: ignore[union-attr]
    assert record is not None
    return str(record.key_id)


def test_get_lists_current_facts_and_the_history_on_request(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon.", "I moved to Porto."])
    plain = client.get("/v1/users/ana/facts", headers=h).json()
    assert plain["history"] is None
    assert [(f["attribute"], f["value"], f["current"]) for f in plain["current"]] == [
        ("city", "Porto", True)
    ]
    every = _facts(client, h)["history"]
    assert [(f["value"], f["current"]) for f in every] == [("Lisbon", False), ("Porto", True)]
    lisbon, porto = every
    assert lisbon["valid_to"] is not None and porto["valid_to"] is None
    assert not porto["manual"] and porto["set_by"] is None and porto["session_id"] == "s1"
    one = client.get(f"/v1/users/ana/facts/{lisbon['id']}", headers=h)
    assert one.status_code == 200 and one.json() == lisbon
    assert client.get("/v1/users/ana/facts/f_nope", headers=h).status_code == 404


def test_post_sets_a_fact_by_hand_with_its_evidence(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon."])
    r = client.post("/v1/users/ana/facts", json={"attribute": "city", "value": "Faro"}, headers=h)
    assert r.status_code == 201, r.text
    fact = r.json()
    assert fact["current"] and fact["manual"] and fact["set_by"] == _key_id(client, h)
    assert fact["message_id"] == f"manual:{fact['set_by']}" and fact["source_role"] == "user"
    assert r.headers["location"] == f"/v1/users/ana/facts/{fact['id']}"
    assert _current(client, h) == {"city": "Faro"}
    again = client.post(
        "/v1/users/ana/facts", json={"attribute": "City", "value": "faro"}, headers=h
    )
    assert again.status_code == 200 and again.json()["id"] == fact["id"]
    assert again.headers["etag"] == r.headers["etag"]  # nothing written
    other = client.post(
        "/v1/users/ana/facts",
        json={"attribute": "name", "value": "Rui", "subject": "brother"},
        headers=h,
    )
    assert other.status_code == 201 and other.json()["statement"] == "name: Rui"
    hits = client.post(
        "/v1/recall/search",
        json={"user_id": "ana", "query": "Faro", "kinds": ["fact"]},
        headers=h,
    ).json()["hits"]
    assert [(x["kind"], x["text"], x["message_id"]) for x in hits] == [
        ("fact", "city: Faro", f"fact:{fact['id']}")
    ]


def test_patch_corrects_and_the_old_value_is_superseded_not_lost(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["My email is ana@old.example"])
    (old,) = _facts(client, h)["current"]
    r = client.patch(
        f"/v1/users/ana/facts/{old['id']}", json={"value": "ana@new.example"}, headers=h
    )
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["value"] == "ana@new.example" and new["manual"] and new["id"] != old["id"]
    every = {f["id"]: f for f in _facts(client, h)["history"]}
    assert every[old["id"]]["value"] == "ana@old.example" and not every[old["id"]]["current"]
    assert every[old["id"]]["valid_to"] == new["valid_from"]
    assert _current(client, h) == {"email": "ana@new.example"}
    retried = client.patch(
        f"/v1/users/ana/facts/{old['id']}", json={"value": "ana@new.example"}, headers=h
    )
    assert retried.status_code == 200 and retried.json() == new  # a retry changes nothing
    stale = client.patch(f"/v1/users/ana/facts/{old['id']}", json={"value": "x@y.z"}, headers=h)
    assert stale.status_code == 409 and new["id"] in stale.json()["detail"]
    moved = client.patch(
        f"/v1/users/ana/facts/{new['id']}", json={"attribute": "work email"}, headers=h
    )
    assert moved.status_code == 200
    assert _current(client, h) == {"work email": "ana@new.example"}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "", {"attribute": "city"}, "value"),
        ("POST", "", {"attribute": "", "value": "x"}, "attribute"),
        ("POST", "", {"attribute": "city", "value": "   "}, "value"),
        ("POST", "", {"attribute": "verbatim:x", "value": "1"}, "attribute"),
        ("POST", "", {"attribute": "pref:", "value": "likes"}, "attribute"),
        ("POST", "", {"attribute": "city", "value": "a\nb"}, "value"),
        ("POST", "", {"attribute": "city", "value": "x", "color": "red"}, "color"),
        ("POST", "", {"attribute": "city", "value": "x" * 2001}, "value"),
        ("PATCH", "/{id}", {}, "value"),
        ("PATCH", "/{id}", {"value": ""}, "value"),
        ("PATCH", "/{id}", {"attribute": "verbatim:y"}, "attribute"),
        ("PATCH", "/{id}", {"value": 3}, "value"),
    ],
)
def test_bad_input_is_a_422_naming_the_field_and_writes_nothing(
    client: TestClient, make_key: Key, method: str, path: str, body: Any, field: str
) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon."])
    before = _facts(client, h)
    url = "/v1/users/ana/facts" + path.replace("{id}", before["current"][0]["id"])
    r = client.request(method, url, json=body, headers=h)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert _facts(client, h) == before


def test_delete_removes_a_version_and_unknown_ids_are_404(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon.", "I moved to Porto."])
    lisbon, porto = _facts(client, h)["history"]
    r = client.delete(f"/v1/users/ana/facts/{lisbon['id']}", headers=h)
    assert r.status_code == 204 and r.headers["etag"]
    assert [f["value"] for f in _facts(client, h)["history"]] == ["Porto"]
    assert client.delete(f"/v1/users/ana/facts/{lisbon['id']}", headers=h).status_code == 404
    assert client.delete(f"/v1/users/ana/facts/{porto['id']}", headers=h).status_code == 204
    assert _facts(client, h)["current"] == [] and _facts(client, h)["history"] == []
    for method in ("GET", "PATCH", "DELETE"):
        r = client.request(method, "/v1/users/ana/facts/f_nope", json={"value": "x"}, headers=h)
        assert r.status_code == 404 and r.json()["field"] == "fact"
        r = client.request(method, "/v1/users/nobody/facts/f_nope", json={"value": "x"}, headers=h)
        assert r.status_code == 404 and r.json()["field"] == "user"


def _facts_block(client: TestClient, h: dict[str, str], sid: str) -> str:
    """The facts the session's context renders (its tiers' system message)."""
    r = client.get(f"/v1/sessions/{sid}/context", headers=h)
    assert r.status_code == 200, r.text
    blocks = [m["content"] for m in r.json()["context"] if HISTORY_HEADER in str(m["content"])]
    return "\n".join(blocks)


def test_a_deleted_fact_is_unreadable_on_every_path(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    client = make_client(recall_deadline=None)
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["My email is ana@old.example", "I live in Lisbon."])
    _seed(client, h, "s2", "ana", ["hello"])
    assert "ana@old.example" in _facts_block(client, h, "s2")  # s2's memory is now cached
    secret = {"attribute": "locker code", "value": "zanzibar-77"}
    added = client.post("/v1/users/ana/facts", json=secret, headers=h).json()
    assert "zanzibar-77" in _facts_block(client, h, "s2")  # the cached memory was dropped
    search = {"user_id": "ana", "query": "locker code zanzibar-77"}
    hits = client.post("/v1/recall/search", json=search, headers=h).json()["hits"]
    assert any("zanzibar-77" in x["text"] for x in hits)
    (email,) = [f for f in _facts(client, h)["current"] if f["attribute"] == "email"]
    for fid in (added["id"], email["id"]):
        assert client.delete(f"/v1/users/ana/facts/{fid}", headers=h).status_code == 204
    facts = client.get("/v1/users/ana/facts?history=true", headers=h).text
    assert "zanzibar-77" not in facts and "ana@old.example" not in facts
    hits = client.post("/v1/recall/search", json=search, headers=h).json()["hits"]
    assert all("zanzibar-77" not in x["text"] for x in hits)
    for sid in ("s1", "s2"):
        block = _facts_block(client, h, sid)
        assert "Lisbon" in block and "zanzibar-77" not in block and "ana@old.example" not in block
        whole = client.get(f"/v1/sessions/{sid}/context", headers=h).text
        assert "zanzibar-77" not in whole
        page = client.get(f"/inspect/{sid}", headers=h).text
        assert "zanzibar-77" not in page
    # the sessions write their facts again (more messages, compactions): nothing comes back
    more = [{"role": "user", "content": f"note {i} about the weather " * 5} for i in range(40)]
    r = client.post("/v1/sessions/s1/messages", json={"messages": more}, headers=h)
    assert r.status_code == 201
    facts = client.get("/v1/users/ana/facts?history=true", headers=h).text
    assert "zanzibar-77" not in facts and "ana@old.example" not in facts


def test_an_edit_on_another_replica_reaches_a_cached_memory(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    h = make_key("acme")
    one, two = make_client(recall_deadline=None), make_client(recall_deadline=None)
    _seed(one, h, "s1", "ana", ["My email is ana@old.example", "I live in Lisbon."])
    assert "ana@old.example" in _facts_block(one, h, "s1")  # replica one caches s1's memory
    (email,) = [f for f in _facts(two, h)["current"] if f["attribute"] == "email"]
    assert two.delete(f"/v1/users/ana/facts/{email['id']}", headers=h).status_code == 204
    assert two.post(
        "/v1/users/ana/facts", json={"attribute": "job", "value": "nurse"}, headers=h
    ).is_success
    block = _facts_block(one, h, "s1")
    assert "ana@old.example" not in block and "job: nurse" in block
    cache = one.app.state.services.memories  # type: ignore[attr-defined]
    hits = cache.hits
    _facts_block(one, h, "s1")  # nothing moved since: the cached memory serves it
    assert cache.hits == hits + 1


def test_if_match_refuses_a_write_on_moved_facts(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon."])
    got = client.get("/v1/users/ana/facts", headers=h)
    etag = got.headers["etag"]
    body = {"attribute": "job", "value": "nurse"}
    ok = client.post("/v1/users/ana/facts", json=body, headers={**h, "If-Match": etag})
    assert ok.status_code == 201 and ok.headers["etag"] != etag
    stale = client.post(
        "/v1/users/ana/facts",
        json={"attribute": "job", "value": "pilot"},
        headers={**h, "If-Match": etag},
    )
    assert stale.status_code == 409 and stale.json()["type"].endswith("/precondition-failed")
    assert stale.headers["etag"] == ok.headers["etag"]
    assert _current(client, h)["job"] == "nurse"
    fid = ok.json()["id"]
    gone = client.delete(f"/v1/users/ana/facts/{fid}", headers={**h, "If-Match": etag})
    assert gone.status_code == 409 and _current(client, h)["job"] == "nurse"
    bad = client.delete(f"/v1/users/ana/facts/{fid}", headers={**h, "If-Match": "soon"})
    assert bad.status_code == 422 and bad.json()["field"] == "If-Match"
    done = client.delete(
        f"/v1/users/ana/facts/{fid}", headers={**h, "If-Match": stale.headers["etag"]}
    )
    assert done.status_code == 204 and "job" not in _current(client, h)


def test_a_lost_race_is_retried_on_a_fresh_read(
    client: TestClient, make_key: Key, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon."])
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    index = services.recall
    save = index.save_facts
    raced: list[int] = []

    async def racing(user_id: str, history: Any, **kw: Any) -> int:
        if not raced:  # another writer saves first: this save loses the race once
            fresh = await index.facts(user_id, tenant=kw["tenant"])
            fresh.put(KeyedFact("pet", "cat", source_role="user", valid_from=1.0))
            raced.append(await save(user_id, fresh, tenant=kw["tenant"]))
        return int(await save(user_id, history, **kw))

    monkeypatch.setattr(index, "save_facts", racing)
    r = client.post("/v1/users/ana/facts", json={"attribute": "job", "value": "nurse"}, headers=h)
    assert r.status_code == 201, r.text
    assert _current(client, h) == {"city": "Lisbon", "pet": "cat", "job": "nurse"}
    # with If-Match the race is the caller's to settle: no retry
    raced.clear()
    etag = client.get("/v1/users/ana/facts", headers=h).headers["etag"]
    body = {"attribute": "job", "value": "pilot"}
    r = client.post("/v1/users/ana/facts", json=body, headers={**h, "If-Match": etag})
    assert r.status_code == 409 and _current(client, h)["job"] == "nurse"


def test_ids_survive_a_restart(make_client: Callable[..., TestClient], make_key: Key) -> None:
    h = make_key("acme")
    first = make_client()
    _seed(first, h, "s1", "ana", ["I live in Lisbon."])
    added = first.post(
        "/v1/users/ana/facts", json={"attribute": "job", "value": "nurse"}, headers=h
    )
    before = _facts(first, h)
    second = make_client()
    assert _facts(second, h) == before
    r = second.patch(
        f"/v1/users/ana/facts/{added.json()['id']}", json={"value": "doctor"}, headers=h
    )
    assert r.status_code == 200 and _current(first, h)["job"] == "doctor"


def test_without_recall_the_facts_routes_are_400(
    make_client: Callable[..., TestClient], redis: object
) -> None:
    url = redis.fresh_url()  # type: ignore[attr-defined]
    client = make_client(store=url)
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    _seed(client, h, "s1", "ana", ["hello"])
    for method, path in (("GET", ""), ("POST", ""), ("PATCH", "/f_x"), ("DELETE", "/f_x")):
        body = {"attribute": "a", "value": "b"} if method == "POST" else {"value": "b"}
        r = client.request(method, f"/v1/users/ana/facts{path}", json=body, headers=h)
        assert r.status_code == 400 and r.json()["type"].endswith("/recall-off"), r.text
