"""``POST /v1/sessions/{id}/chat`` against the local fake upstream: the reply streams as
events and is stored once complete; an upstream failure, a client that leaves and bad
input store nothing of a reply."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from _fake_upstream import FakeUpstream, start
from convomem._sse import EventParser
from convomem.client import (
    AsyncClient,
    Client,
    NotFound,
    RequestInvalid,
    ServiceError,
    ServiceUnavailable,
)
from convomem.server import Settings, create_app
from convomem.server.keys import KeyStore
from convomem.session.turn_records import turn_rows
from convomem.stores import aopen_store, open_store
from convomem.views.budget import REPLY_PRIMING_TOKENS

Key = Callable[[str], dict[str, str]]


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    yield from start(FakeUpstream(reply="Your parcel left the Lyon depot on Monday.", pieces=4))


@pytest.fixture
def app_client(make_client: Callable[..., TestClient], fake: FakeUpstream) -> TestClient:
    return make_client(upstream_url=fake.url, upstream_model="fake-model", upstream_api_key="sk-up")


async def akey(store: str, tenant: str) -> str:
    """A new key of ``tenant`` (``make_key`` runs its own loop; these tests have one)."""
    db = await aopen_store(store)
    try:
        return (await KeyStore(db).create(tenant)).key
    finally:
        await db.aclose()


def client_of(tc: TestClient, header: dict[str, str]) -> Client:
    key = header["Authorization"].removeprefix("Bearer ")
    return Client("http://testserver", key, http=tc)


def log(c: Client, sid: str = "s1") -> list[dict[str, Any]]:
    return list(c.iter_messages(sid))


def test_a_turn_streams_the_reply_and_stores_it(
    app_client: TestClient, make_key: Key, fake: FakeUpstream
) -> None:
    c = client_of(app_client, make_key("acme"))
    c.create_session("u1", id="s1")
    c.append("s1", [{"role": "system", "content": "You track parcels."}])
    stream = c.chat("s1", "Where is my parcel?")
    assert list(stream) == fake.deltas()
    assert stream.text == fake.reply and stream.message_id is not None
    assert stream.usage == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    stored = log(c)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("system", "You track parcels."),
        ("user", "Where is my parcel?"),
        ("assistant", fake.reply),
    ]
    assert stored[-1]["id"] == stream.message_id and stream.reply.done is not None
    assert stream.reply.done["seq"] == 3 and stream.reply.done["user_message_id"] == stored[1]["id"]
    (sent,) = fake.requests
    assert sent["model"] == "fake-model" and sent["stream"] is True
    assert sent["messages"] == [
        {"role": "system", "content": "You track parcels."},
        {"role": "user", "content": "Where is my parcel?"},
    ]
    assert fake.headers[0]["authorization"] == "Bearer sk-up"
    # the next turn's context holds the stored reply
    again = c.chat("s1", "Thanks!")
    assert "".join(again) == fake.reply
    assert fake.requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": fake.reply},
        {"role": "user", "content": "Thanks!"},
    ]


@pytest.mark.parametrize("mode", ["status", "cut", "error"])
def test_an_upstream_failure_is_an_error_event_and_stores_no_reply(
    app_client: TestClient, make_key: Key, fake: FakeUpstream, mode: str
) -> None:
    c = client_of(app_client, make_key("acme"))
    c.create_session("u1", id="s1")
    fake.mode = mode
    stream = c.chat("s1", "Where is my parcel?")
    got: list[str] = []
    with pytest.raises(ServiceUnavailable) as info:
        got.extend(stream)
    assert info.value.type.endswith("/upstream-failed") and info.value.status == 502
    assert "".join(got) == fake.deltas()[0] if mode != "status" else got == []
    # the user's message is kept (it was said); nothing of the reply is
    assert [m["role"] for m in log(c)] == ["user"]


def test_the_raw_stream_is_server_sent_events(
    app_client: TestClient, make_key: Key, fake: FakeUpstream
) -> None:
    h = make_key("acme")
    client_of(app_client, h).create_session("u1", id="s1")
    r = app_client.post("/v1/sessions/s1/chat", json={"content": "hi"}, headers=h)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = EventParser().feed(r.text)
    assert [e.event for e in events] == ["delta"] * len(fake.deltas()) + ["done"]
    assert [e.json()["content"] for e in events[:-1]] == fake.deltas()


def test_a_message_with_an_id_makes_the_turn_idempotent(
    app_client: TestClient, make_key: Key
) -> None:
    c = client_of(app_client, make_key("acme"))
    c.create_session("u1", id="s1")
    turn = {"role": "user", "content": "Where is it?", "id": "turn-1"}
    list(c.chat("s1", message=turn))
    list(c.chat("s1", message=turn))  # a retried turn: the question is stored once
    assert [(m["role"], m["id"] == "turn-1") for m in log(c)] == [
        ("user", True),
        ("assistant", False),
        ("assistant", False),
    ]


def test_bad_input_unknown_sessions_and_other_tenants_write_nothing(
    app_client: TestClient, make_key: Key, fake: FakeUpstream
) -> None:
    c = client_of(app_client, make_key("acme"))
    other = client_of(app_client, make_key("globex"))
    c.create_session("u1", id="s1")
    bad: list[dict[str, Any]] = [
        {"content": "a", "message": {"role": "user", "content": "b"}},
        {},
        {"message": {"role": "assistant", "content": "I am the model"}},
        {"message": {"role": "user"}},
        {"content": "hi", "budget": 0},
        {"content": "hi", "extra": 1},
    ]
    for body in bad:
        r = app_client.post(
            "/v1/sessions/s1/chat",
            json=body,
            headers={"Authorization": f"Bearer {c._config.api_key}"},
        )
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["field"], r.json()
    with pytest.raises(RequestInvalid) as info:
        list(c.chat("s1", message={"role": "tool", "content": "x", "tool_call_id": "c1"}))
    assert info.value.field == "message.role"
    with pytest.raises(NotFound):
        list(c.chat("nope", "hi"))
    with pytest.raises(NotFound):  # another tenant's session is not found either
        list(other.chat("s1", "hi"))
    assert log(c) == [] and fake.requests == []


def test_without_an_upstream_the_route_says_so(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    c = client_of(make_client(), make_key("acme"))
    c.create_session("u1", id="s1")
    with pytest.raises(ServiceError) as info:
        list(c.chat("s1", "hi"))
    assert info.value.status == 501 and "upstream_url" in info.value.detail
    assert log(c) == []


def test_a_smaller_budget_sends_a_smaller_context(
    app_client: TestClient, make_key: Key, fake: FakeUpstream
) -> None:
    c = client_of(app_client, make_key("acme"))
    c.create_session("u1", id="s1")
    c.append(
        "s1", [{"role": "user", "content": f"Question {i} about the parcel."} for i in range(30)]
    )
    list(c.chat("s1", "And now?"))
    list(c.chat("s1", "And now?", budget=60))
    full, small = (len(r["messages"]) for r in fake.requests)
    assert small < full and fake.requests[1]["messages"][-1]["content"] == "And now?"


async def test_the_async_client_streams_in_process(store_url: str, fake: FakeUpstream) -> None:
    app = create_app(Settings(store=store_url, upstream_url=fake.url, upstream_model="m"))
    key = await akey(store_url, "acme")
    transport = httpx.ASGITransport(app=app)
    try:
        async with AsyncClient("http://svc", key, transport=transport) as c:
            await c.create_session("u1", id="s1")
            stream = c.chat("s1", "Where?")
            assert [d async for d in stream] == fake.deltas()
            assert [m["role"] async for m in c.iter_messages("s1", page_size=1)] == [
                "user",
                "assistant",
            ]
            assert stream.message_id is not None
    finally:
        if app.state.services is not None:
            await app.state.services.aclose()


async def test_a_client_that_leaves_mid_stream_stores_no_reply(
    store_url: str, fake: FakeUpstream
) -> None:
    """The ASGI app driven directly: the client disconnects after the first delta while
    the upstream is still writing; the turn ends and only the question is stored."""
    fake.hold = threading.Event()
    app = create_app(Settings(store=store_url, upstream_url=fake.url, upstream_model="m"))
    key = await akey(store_url, "acme")
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://svc", key, transport=transport) as c:
        await c.create_session("u1", id="s1")
    body = json.dumps({"content": "Where?"}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/sessions/s1/chat",
        "raw_path": b"/v1/sessions/s1/chat",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"svc"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("svc", 80),
        "state": {},
    }
    left = asyncio.Event()
    requested = False
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            chunks.append(message["body"])
            if b"event: delta" in message["body"]:
                left.set()

    try:
        await asyncio.wait_for(app(scope, receive, send), 30)
        assert b"".join(chunks).count(b"event: delta") == 1 and b"done" not in b"".join(chunks)
        fake.hold.set()
        async with AsyncClient("http://svc", key, transport=transport) as c:
            assert [m["role"] async for m in c.iter_messages("s1")] == ["user"]
    finally:
        fake.hold.set()
        if app.state.services is not None:
            await app.state.services.aclose()


def test_the_turn_context_is_the_tiered_memory_with_recall(
    app_client: TestClient, make_key: Key, fake: FakeUpstream
) -> None:
    """What the user said in another session reaches the model through the facts and
    recall tiers (the turn's text is the recall query)."""
    c = client_of(app_client, make_key("acme"))
    c.create_session("u1", id="old")
    c.append("old", [{"role": "user", "content": "I am allergic to peanuts, remember that."}])
    c.create_session("u1", id="new")
    list(c.chat("new", "Which snacks should I avoid given my allergy to peanuts?"))
    sent = json.dumps(fake.requests[-1]["messages"])
    assert sent.count("allergic to peanuts") >= 1, sent


def test_a_turn_is_recorded_on_the_reply_for_the_inspector(
    app_client: TestClient, make_key: Key, store_url: str
) -> None:
    header = make_key("acme")
    c = client_of(app_client, header)
    c.create_session("u1", id="s1")
    c.append("s1", [{"role": "system", "content": "You track parcels."}])
    for question in ("Where is my parcel?", "And when will it arrive?"):
        stream = c.chat("s1", question)
        list(stream)
    ctx = app_client.get("/v1/sessions/s1/context", headers=header).json()
    # the record rides on the stored reply, never in what is sent to a model
    assert ctx["context"][-1] == {"role": "assistant", "content": stream.text}
    db = open_store(store_url)
    try:
        stored = db.session("s1", tenant="acme").get_items()
    finally:
        db.close()
    rows = turn_rows(stored)
    assert [r.message_id for r in rows] == [m.id for m in stored if m.role == "assistant"]
    first, second = rows
    assert first.context_tokens > 0 and first.completion_tokens == 4  # the upstream's usage
    assert second.context_tokens > first.context_tokens
    # no compaction in between: the whole previous request is a cacheable prefix
    assert second.prefix_tokens == first.context_tokens - REPLY_PRIMING_TOKENS


def test_the_chat_route_caps_sizes_as_messages_does_and_cuts_a_long_reply(
    make_client: Callable[..., TestClient], make_key: Key, fake: FakeUpstream
) -> None:
    fake.reply = "word " * 300 + "\ud800 the end"  # over the cap, and a lone surrogate
    tc = make_client(upstream_url=fake.url, upstream_model="fake-model", max_message_chars=500)
    h = make_key("acme")
    c = client_of(tc, h)
    c.create_session("u1", id="s1")
    for body, field in (
        ({"content": "x" * 600}, "content"),
        ({"message": {"role": "user", "content": "y" * 600}}, "message"),
        ({"message": {"role": "user", "content": "z" * 400, "name": "n" * 100}}, "message"),
    ):
        r = tc.post("/v1/sessions/s1/chat", json=body, headers=h)
        assert r.status_code == 413 and r.json()["field"] == field, r.text
    assert fake.requests == [] and log(c) == []  # refused before anything
    stream = c.chat("s1", "tell me everything")
    assert "".join(stream) == fake.reply.replace("\ud800", "\ufffd")  # the client sees it all
    assert stream.reply.done is not None and stream.reply.done["truncated"] is True
    user, reply = log(c)
    assert user["content"] == "tell me everything"
    stored = {"role": "assistant", "content": reply["content"]}
    assert len(json.dumps(stored, ensure_ascii=False)) <= 500
    assert reply["content"].startswith("word word") and reply["content"].endswith(
        "[... the reply was cut here: it was over 500 characters]"
    )
    fake.reply = "short \ud83d reply"
    again = c.chat("s1", "and briefly?")
    assert "".join(again) == "short \ufffd reply"
    assert again.reply.done is not None and again.reply.done["truncated"] is False
    assert log(c)[-1]["content"] == "short \ufffd reply"
