"""``/v1/recall/search``, ``/v1/users/{id}/facts`` and ``DELETE /v1/users/{id}``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from _server_support import create_key
from convomem.errors import ConfigError
from convomem.server.settings import Settings

Key = Callable[[str], dict[str, str]]


def _seed(client: TestClient, h: dict[str, str], sid: str, user: str, texts: list[str]) -> None:
    r = client.post("/v1/sessions", json={"id": sid, "user_id": user}, headers=h)
    assert r.status_code == 201
    if not texts:
        return
    msgs = [{"role": "user", "content": t} for t in texts]
    assert (
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs}, headers=h).status_code
        == 201
    )


def test_search_finds_the_users_own_past_messages(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["my parcel number is 4471", "I like green tea"])
    _seed(client, h, "s2", "ana", ["the weather in Porto is mild"])
    _seed(client, h, "s3", "bob", ["my parcel number is 9999"])
    r = client.post(
        "/v1/recall/search", json={"user_id": "ana", "query": "parcel number"}, headers=h
    )
    assert r.status_code == 200
    hits = r.json()["hits"]
    assert hits[0]["text"] == "my parcel number is 4471" and hits[0]["session_id"] == "s1"
    assert all("9999" not in x["text"] for x in hits)
    one = client.post(
        "/v1/recall/search", json={"user_id": "ana", "query": "tea", "k": 1}, headers=h
    )
    assert len(one.json()["hits"]) == 1
    bad = client.post("/v1/recall/search", json={"user_id": "ana", "query": ""}, headers=h)
    assert bad.status_code == 422 and bad.json()["field"] == "query"
    nobody = client.post("/v1/recall/search", json={"user_id": "zed", "query": "x"}, headers=h)
    assert nobody.status_code == 404


def test_erasing_a_user_removes_sessions_and_recall_items(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["my parcel number is 4471"])
    _seed(client, h, "s2", "ana", ["I like green tea"])
    _seed(client, h, "s3", "bob", ["my parcel number is 9999"])
    r = client.delete("/v1/users/ana", headers=h)
    assert r.status_code == 200 and r.json()["sessions"] == 2 and r.json()["items"] >= 2
    assert client.get("/v1/sessions/s1", headers=h).status_code == 404
    assert client.get("/v1/sessions", params={"user_id": "ana"}, headers=h).json()["sessions"] == []
    gone = client.post("/v1/recall/search", json={"user_id": "ana", "query": "parcel"}, headers=h)
    assert gone.status_code == 404
    assert client.delete("/v1/users/ana", headers=h).status_code == 404
    bob = client.post("/v1/recall/search", json={"user_id": "bob", "query": "parcel"}, headers=h)
    assert [x["text"] for x in bob.json()["hits"]] == ["my parcel number is 9999"]
    # a new session of the erased user starts from nothing
    _seed(client, h, "s1", "ana", ["hello again"])
    again = client.post("/v1/recall/search", json={"user_id": "ana", "query": "parcel"}, headers=h)
    assert again.json()["hits"] == [] or all("4471" not in x["text"] for x in again.json()["hits"])


def test_without_recall_search_and_facts_are_400_problems(
    make_client: Callable[..., TestClient], make_key: Key, redis: object
) -> None:
    url = redis.fresh_url()  # type: ignore[attr-defined]
    client = make_client(store=url)
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    _seed(client, h, "s1", "ana", ["hello"])
    r = client.post("/v1/recall/search", json={"user_id": "ana", "query": "hello"}, headers=h)
    assert r.status_code == 400 and r.json()["type"].endswith("/recall-off")
    assert client.get("/v1/users/ana/facts", headers=h).status_code == 400
    erased = client.delete("/v1/users/ana", headers=h)
    assert erased.status_code == 200 and erased.json()["sessions"] == 1


def test_facts_current_and_history_and_recall_in_a_context(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    client = make_client(budget=600, recall_deadline=None)
    h = make_key("acme")
    first = [{"role": "user", "content": "I live in Lisbon. I am allergic to peanuts."}]
    filler = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"filler {i} weather " * 6}
        for i in range(30)
    ]
    _seed(client, h, "s1", "ana", [])
    msgs = {"messages": [*first, *filler, {"role": "user", "content": "I moved to Porto."}]}
    assert client.post("/v1/sessions/s1/messages", json=msgs, headers=h).status_code == 201
    facts = client.get("/v1/users/ana/facts", params={"history": "true"}, headers=h).json()
    current = {f["attribute"]: f["value"] for f in facts["current"]}
    assert current["city"] == "Porto" and current["allergy:peanuts"] == "yes"
    cities = [f["value"] for f in facts["history"] if f["attribute"] == "city"]
    assert cities == ["Lisbon", "Porto"]
    _seed(client, h, "s2", "ana", ["what about my allergy?"])
    r = client.get("/v1/sessions/s2/context", params={"query": "peanuts allergy"}, headers=h)
    ctx, acc = r.json()["context"], r.json()["accounting"]
    assert "allergic to: peanuts" in ctx[0]["content"]  # the facts tier
    assert acc["recall_status"] == "ok" and acc["recalled"][0]["session_id"] == "s1"
    assert acc["tokens"] == acc["split"]["total"] <= acc["budget"]
    shown = sum(1 for x in acc["recalled"] if x["shown"])
    assert f"convomem_recall_hits_total {shown}\n" in client.get("/metrics").text
    assert acc["kept"] == [
        client.get("/v1/sessions/s2/messages", headers=h).json()["messages"][0]["id"]
    ]


def test_a_recall_index_in_another_database_is_erased_too(
    make_client: Callable[..., TestClient], make_key: Key, tmp_path: Path
) -> None:
    client = make_client(recall=f"sqlite:///{tmp_path / 'recall.db'}", recall_deadline=None)
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["my parcel number is 4471"])
    _seed(client, h, "s2", "ana", ["my parcel is late"])
    search = {"user_id": "ana", "query": "parcel"}
    hits = client.post("/v1/recall/search", json=search, headers=h).json()["hits"]
    assert {x["session_id"] for x in hits} == {"s1", "s2"}
    assert client.delete("/v1/sessions/s1", headers=h).status_code == 204
    hits = client.post("/v1/recall/search", json=search, headers=h).json()["hits"]
    assert {x["session_id"] for x in hits} == {"s2"}
    assert client.delete("/v1/users/ana", headers=h).json()["items"] >= 1
    _seed(client, h, "s3", "ana", ["hello"])
    hits = client.post("/v1/recall/search", json=search, headers=h).json()["hits"]
    assert {x["session_id"] for x in hits} <= {"s3"}  # what is new only (by vector)


def test_the_embedder_setting_chooses_what_recall_embeds_with(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    with pytest.raises(ConfigError, match="embedder='bert'"):
        Settings(embedder="bert")
    client = make_client(embedder="e5")
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["Ich kann keine Erdnüsse essen", "the weather in Porto is mild"])
    query = {"user_id": "ana", "query": "food allergy"}  # no word, no n-gram in common
    hits = client.post("/v1/recall/search", json=query, headers=h).json()["hits"]
    assert hits[0]["text"] == "Ich kann keine Erdnüsse essen"


def _age(store_url: str, session_id: str, seconds: float) -> None:
    """Move a session's last write ``seconds`` into the past (its own TTL then runs out
    as if that time had passed; nothing else is touched)."""
    with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
        done = conn.execute(
            "UPDATE convomem_sessions SET updated_at = updated_at - ? WHERE session_id = ?",
            (seconds, session_id),
        ).rowcount
    assert done == 1


def test_an_expired_session_is_unreadable_on_every_path_at_once(
    make_client: Callable[..., TestClient], make_key: Key, store_url: str
) -> None:
    """A session past its own ``ttl_seconds``, never touched since: its messages are not
    found by recall, its facts are not served nor put in the user's other contexts, the
    inspector does not list it; the live session's are. Nothing swept it."""
    client = make_client(budget=2000, recall_deadline=None)
    h = make_key("acme")
    old = {"id": "old", "user_id": "ana", "ttl_seconds": 3600}
    assert client.post("/v1/sessions", json=old, headers=h).status_code == 201
    said = [{"role": "user", "content": "I live in Lisbon. My parcel number is 4471."}]
    assert client.post("/v1/sessions/old/messages", json={"messages": said}, headers=h)
    _seed(client, h, "new", "ana", ["my parcel is the blue one"])
    search = {"user_id": "ana", "query": "parcel number"}

    def found() -> set[str]:
        hits = client.post("/v1/recall/search", json=search, headers=h).json()["hits"]
        return {x["session_id"] for x in hits}

    def cities() -> list[str]:
        facts = client.get("/v1/users/ana/facts", params={"history": "true"}, headers=h)
        return [f["value"] for f in facts.json()["history"] if f["attribute"] == "city"]

    def context() -> str:
        r = client.get("/v1/sessions/new/context", params={"query": "parcel"}, headers=h)
        assert r.status_code == 200
        return str(r.json()["context"])

    def listed() -> str:
        return client.get("/inspect", params={"user_id": "ana"}, headers=h).text

    assert found() == {"old", "new"} and cities() == ["Lisbon"]
    assert "4471" in context() and "Lisbon" in context() and "/inspect/old" in listed()
    _age(store_url, "old", 3601)
    assert found() == {"new"} and cities() == []
    assert "4471" not in context() and "Lisbon" not in context()
    assert "/inspect/old" not in listed() and "/inspect/new" in listed()
    listing = client.get("/v1/sessions", params={"user_id": "ana"}, headers=h).json()
    assert [s["id"] for s in listing["sessions"]] == ["new"]
    assert client.get("/v1/sessions/old", headers=h).status_code == 404


def test_deleting_a_session_deletes_the_facts_said_in_it(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _seed(client, h, "s1", "ana", ["I live in Lisbon."])
    _seed(client, h, "s2", "ana", ["I moved to Porto. I am allergic to peanuts."])

    def current() -> dict[str, str]:
        facts = client.get("/v1/users/ana/facts", headers=h).json()["current"]
        return {f["attribute"]: f["value"] for f in facts}

    assert current() == {"city": "Porto", "allergy:peanuts": "yes"}
    assert client.delete("/v1/sessions/s2", headers=h).status_code == 204
    assert current() == {"city": "Lisbon"}
