"""The service with its summarizer, extractor and embedder on a local fake
OpenAI-compatible server (``_fake_openai``): what the models give when they answer, and
when they fail, appends that all succeed, the summary's and the facts' fallbacks
recorded in the context's accounting, recall answering "failed", and appended messages
the embedder could not index waiting until it answers again (never indexed again once
their session or user is erased)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from _fake_openai import FakeOpenAI, start

Key = Callable[[str], dict[str, str]]
TURNS = [
    "Hi, I'm Ana. My name is Ana. codeword: falcon",
    "The parcel 4471 went to Lisbon instead of Porto, can you check the courier?",
    "Please send it on to Porto then, the street is Rua das Flores 12.",
    "Also my dentist appointment moved to Friday, remind me about it later.",
    "And my locker code at the gym is 5512, keep it for me please.",
    "One more thing: the invoice 88-301 was charged twice this month.",
]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from start(FakeOpenAI())


@pytest.fixture
def service(
    fake: FakeOpenAI, make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., TestClient]:
    for name in ("OPENAI_API_KEY", "CONVOMEM_LLM_API_KEY", "CONVOMEM_EMBEDDING_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def make(**options: Any) -> TestClient:
        settings: dict[str, Any] = {
            "summarizer": "openai:chat",
            "extractor": "openai:chat",
            "embedder": "openai:emb",
            "llm_base_url": fake.url,
            "embedding_base_url": fake.url,
            "llm_timeout": 0.15,  # the fake's "timeout" answers wait 2 s
            "embedding_timeout": 0.15,
            "recall_deadline": 10.0,
            "budget": 400,
        }
        return make_client(**(settings | options))

    return make


def converse(client: TestClient, h: dict[str, str], sid: str, user: str = "ana") -> None:
    assert (
        client.post("/v1/sessions", json={"id": sid, "user_id": user}, headers=h).status_code == 201
    )
    for text in TURNS:
        turn = [
            {"role": "user", "content": text},
            {"role": "assistant", "content": "Noted: " + text},
        ]
        r = client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn}, headers=h)
        assert r.status_code == 201, r.text


def context(client: TestClient, h: dict[str, str], sid: str, query: str) -> dict[str, Any]:
    r = client.get(f"/v1/sessions/{sid}/context", params={"query": query}, headers=h)
    assert r.status_code == 200, r.text
    accounting: dict[str, Any] = r.json()["accounting"]
    return accounting


def search(client: TestClient, h: dict[str, str], user: str, query: str) -> Any:
    return client.post("/v1/recall/search", json={"user_id": user, "query": query}, headers=h)


def facts(client: TestClient, h: dict[str, str], user: str) -> dict[str, str]:
    r = client.get(f"/v1/users/{user}/facts", headers=h)
    assert r.status_code == 200, r.text
    return {f["attribute"]: f["value"] for f in r.json()["current"]}


def test_with_the_models_answering_the_service_uses_them(
    fake: FakeOpenAI, service: Callable[..., TestClient], make_key: Key
) -> None:
    client, h = service(llm_timeout=10.0, embedding_timeout=10.0), make_key("acme")
    converse(client, h, "s1")
    acc = context(client, h, "s1", "which locker code did I give?")
    assert acc["summary"] is not None and not acc["summary"]["degraded"]
    assert acc["facts"] is not None and not acc["facts"]["degraded"]
    assert acc["recall_status"] == "ok"
    assert "failed" not in acc["why"]["summarized"] and "offline" not in acc["why"]["facts"]
    assert facts(client, h, "ana")["codeword"] == "falcon"  # only the model reads codewords
    found = search(client, h, "ana", "locker code at the gym")
    assert found.status_code == 200 and "5512" in found.json()["hits"][0]["text"]
    assert fake.count("chat") > 0 and fake.count("embeddings") > 0


@pytest.mark.parametrize("mode", ["timeout", "429", "500", "malformed", "garbage"])
def test_with_every_model_failing_appends_succeed_and_the_fallbacks_are_recorded(
    fake: FakeOpenAI, service: Callable[..., TestClient], make_key: Key, mode: str
) -> None:
    client, h = service(), make_key("acme")
    fake.retry_after = "0"
    fake.fail("all", mode)
    converse(client, h, "s1")
    log = client.get("/v1/sessions/s1/messages", params={"limit": 100}, headers=h).json()
    assert len(log["messages"]) == 2 * len(TURNS)  # every message stored
    acc = context(client, h, "s1", "which locker code did I give?")
    assert acc["compactions"] >= 1 and acc["summary"]["degraded"]
    assert "MODEL SUMMARY" not in acc["summary"]["text"]
    assert acc["facts"]["degraded"] and acc["recall_status"] == "failed"
    assert "failed" in acc["why"]["recalled"]
    assert "summarizer failed" in acc["why"]["summarized"]
    assert "offline rules" in acc["why"]["facts"]
    known = facts(client, h, "ana")
    assert known["name"] == "Ana" and "codeword" not in known  # the offline extractor's
    metrics = client.get("/metrics").text
    assert "convomem_recall_ingest_failures_total 0" not in metrics
    r = search(client, h, "ana", "locker code")  # the embedder's breaker is open by now
    assert r.status_code == 503 and "circuit breaker is open" in r.json()["detail"]


def test_messages_the_embedder_could_not_index_are_indexed_once_it_answers(
    fake: FakeOpenAI, service: Callable[..., TestClient], make_key: Key
) -> None:
    client, h = service(budget=4000), make_key("acme")  # no compaction: one embedding a turn
    assert (
        client.post("/v1/sessions", json={"id": "s1", "user_id": "ana"}, headers=h).status_code
        == 201
    )
    fake.retry_after = "60"  # longer than the policy waits: one request, no retry
    fake.fail("embeddings", "429", times=2)
    for text in TURNS[3:5]:
        r = client.post(
            "/v1/sessions/s1/messages",
            json={"messages": [{"role": "user", "content": text}]},
            headers=h,
        )
        assert r.status_code == 201
    assert "convomem_recall_ingest_failures_total 2" in client.get("/metrics").text
    assert search(client, h, "ana", "locker code gym").json()["hits"] == []  # not indexed yet
    r = client.post(
        "/v1/sessions/s1/messages",
        json={"messages": [{"role": "user", "content": TURNS[5]}]},
        headers=h,
    )
    assert r.status_code == 201  # indexes its own message, then the two that waited
    hits = search(client, h, "ana", "locker code gym").json()["hits"]
    assert hits and "5512" in hits[0]["text"]
    texts = {hit["text"] for hit in search(client, h, "ana", "dentist Friday").json()["hits"]}
    assert TURNS[3] in texts
    # the messages that waited were indexed with the seqs the log gave them
    log = client.get("/v1/sessions/s1/messages", headers=h).json()["messages"]
    hits = search(client, h, "ana", "locker dentist invoice").json()["hits"]
    assert {x["message_id"]: x["seq"] for x in hits} == {m["id"]: m["seq"] for m in log}


@pytest.mark.parametrize("erase", ["session", "user"])
def test_waiting_messages_of_an_erased_session_or_user_are_never_indexed(
    fake: FakeOpenAI, service: Callable[..., TestClient], make_key: Key, erase: str
) -> None:
    client, h = service(budget=4000), make_key("acme")
    for sid, user in (("s1", "ana"), ("s2", "bob")):
        r = client.post("/v1/sessions", json={"id": sid, "user_id": user}, headers=h)
        assert r.status_code == 201
    fake.retry_after = "60"
    fake.fail("embeddings", "429", times=1)
    secret = [{"role": "user", "content": "my locker code at the gym is 5512"}]
    assert (
        client.post("/v1/sessions/s1/messages", json={"messages": secret}, headers=h).status_code
        == 201
    )
    gone = client.delete("/v1/sessions/s1" if erase == "session" else "/v1/users/ana", headers=h)
    assert gone.status_code in (200, 204)
    bob = [{"role": "user", "content": "my locker is number 7"}]
    assert (
        client.post("/v1/sessions/s2/messages", json={"messages": bob}, headers=h).status_code
        == 201
    )
    again = client.post("/v1/sessions", json={"id": "s3", "user_id": "ana"}, headers=h)
    assert again.status_code == 201
    assert search(client, h, "ana", "locker code gym 5512").json()["hits"] == []
