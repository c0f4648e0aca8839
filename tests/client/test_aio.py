"""``AsyncClient`` against the real app in-process (httpx's ASGITransport): the same
operations as ``Client`` awaited, async pagination, conflict retries under concurrent
tasks, typed errors and the chat stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from _fake_upstream import FakeUpstream
from _service_support import settings
from convomem.client import (
    AsyncClient,
    NotFound,
    RequestInvalid,
    ServiceUnavailable,
    SessionMoved,
)
from convomem.server import create_app
from convomem.server.keys import KeyStore
from convomem.stores import aopen_store


@pytest.fixture
async def client(tmp_path: Path, fake: FakeUpstream) -> AsyncIterator[AsyncClient]:
    store = f"sqlite:///{tmp_path / 'service.db'}"
    db = await aopen_store(store)
    try:
        key = (await KeyStore(db).create("acme")).key
    finally:
        await db.aclose()
    app = create_app(settings(store, fake))
    try:
        async with AsyncClient("http://svc", key, transport=httpx.ASGITransport(app=app)) as c:
            yield c
    finally:  # no lifespan through ASGITransport: close what the app opened
        if app.state.services is not None:
            await app.state.services.aclose()


async def test_round_trip_with_async_pages(client: AsyncClient) -> None:
    for i in range(3):
        await client.create_session("u1", id=f"s{i}")
    assert sorted([s["id"] async for s in client.iter_sessions("u1", page_size=2)]) == [
        "s0",
        "s1",
        "s2",
    ]
    await client.append("s0", [{"role": "user", "content": f"q{i}"} for i in range(5)])
    assert [m["content"] async for m in client.iter_messages("s0", page_size=2)] == [
        f"q{i}" for i in range(5)
    ]
    assert (await client.context("s0"))["context"][-1]["content"] == "q4"
    await client.delete_session("s1")
    with pytest.raises(NotFound):
        await client.session("s1")
    with pytest.raises(RequestInvalid) as info:
        await client.append("s0", [{"role": "user", "content": 3}])
    assert info.value.field.startswith("messages[0]")


async def test_concurrent_tasks_retry_their_conflicts(client: AsyncClient) -> None:
    await client.create_session("u1", id="s")

    async def writer(w: int) -> None:
        for i in range(10):
            seen = (await client.session("s"))["last_seq"]
            msg = {"role": "user", "content": f"{w}.{i}", "id": f"{w}-{i}"}
            await client.append("s", [msg], if_match=seen, retry_conflicts=100)

    await asyncio.gather(*(writer(w) for w in range(3)))
    log = [m async for m in client.iter_messages("s")]
    assert [m["seq"] for m in log] == list(range(1, 31))
    assert sorted(m["id"] for m in log) == sorted(f"{w}-{i}" for w in range(3) for i in range(10))
    with pytest.raises(SessionMoved) as info:
        await client.append("s", [{"role": "user", "content": "late"}], if_match=3)
    assert info.value.actual == 30


async def test_chat_deltas_and_a_failed_upstream(client: AsyncClient, fake: FakeUpstream) -> None:
    await client.create_session("u1", id="s")
    stream = client.chat("s", "Where?")
    assert [d async for d in stream] == fake.deltas() and stream.message_id is not None
    fake.mode = "cut"
    failed = client.chat("s", "And now?")
    with pytest.raises(ServiceUnavailable, match="upstream"):
        async for _ in failed:
            pass
    assert [m["role"] async for m in client.iter_messages("s")] == ["user", "assistant", "user"]


async def test_facts_by_id_in_the_async_twin(client: AsyncClient) -> None:
    await client.create_session("u1", id="s")
    await client.append("s", [{"role": "user", "content": "I live in Lisbon."}])
    (city,) = (await client.facts("u1"))["current"]
    fixed = await client.update_fact("u1", city["id"], value="Porto")
    assert (await client.fact("u1", city["id"]))["current"] is False
    job = await client.add_fact("u1", "job", "nurse", subject="user")
    current = {f["attribute"]: f["value"] for f in (await client.facts("u1"))["current"]}
    assert current == {"city": "Porto", "job": "nurse"}
    await client.delete_fact("u1", job["id"])
    every = await client.facts("u1", history=True)
    assert [f["id"] for f in every["history"]] == [city["id"], fixed["id"]]
    with pytest.raises(SessionMoved):
        await client.delete_fact("u1", fixed["id"], if_match=every["version"] - 1)
    with pytest.raises(NotFound):
        await client.update_fact("u1", job["id"], value="pilot")
