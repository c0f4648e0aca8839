"""API keys (``server.keys``) on every store backend: shown once, stored hashed, bound to
a tenant, revocable; and the service running over each backend with them."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convomem.errors import ConfigError
from convomem.server.keys import KeyStore
from convomem.stores import aopen_store

BACKENDS = ["sqlite_file", "redis", "redis_cluster", "postgresql"]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest) -> str:
    backend: Any = request.getfixturevalue(request.param)
    made: str = backend.fresh_url()
    return made


def _run(url: str, work: Callable[[KeyStore], Any]) -> Any:
    async def go() -> Any:
        db = await aopen_store(url)
        try:
            return await work(KeyStore(db, clock=iter(range(1000, 2000)).__next__))
        finally:
            await db.aclose()

    return asyncio.run(go())


def test_keys_are_stored_hashed_bound_to_a_tenant_and_revocable(url: str) -> None:
    async def work(ks: KeyStore) -> None:
        a1 = await ks.create("acme", name="ci")
        a2 = await ks.create("acme")
        b1 = await ks.create("globex")
        assert a1.key.startswith(f"cm_{a1.record.key_id}_")
        assert a1.record.hash == hashlib.sha256(a1.key.encode()).hexdigest()
        assert a1.key not in repr(a1.record.public()) and "hash" not in a1.record.public()
        got = await ks.verify(a1.key)
        assert got is not None and got.tenant == "acme" and got.name == "ci"
        assert (await ks.verify(b1.key)).tenant == "globex"  # type: ignore[union-attr]
        wrong = a1.key[:-1] + ("A" if a1.key[-1] != "A" else "B")
        for bad in (wrong, "", "cm_", a1.key + "x", f"cm_{b1.record.key_id}_" + a1.key[-43:]):
            assert await ks.verify(bad) is None
        assert [r.key_id for r in await ks.list("acme")] == [a1.record.key_id, a2.record.key_id]
        assert len(await ks.list()) == 3
        assert await ks.revoke(a1.record.key_id) is True
        assert await ks.revoke(a1.record.key_id) is False
        assert await ks.revoke("000000000000") is False
        assert await ks.verify(a1.key) is None
        assert await ks.verify(a2.key) is not None
        assert (await ks.get(a1.record.key_id)).revoked_at is not None  # type: ignore[union-attr]

    _run(url, work)
    # a second handle (another replica) sees the same keys
    assert len(_run(url, lambda ks: ks.list())) == 3


def test_tenant_names_follow_the_one_id_rule(url: str) -> None:
    async def work(ks: KeyStore) -> None:
        for bad in ("", "a/b", "a\\b", ".", "..", "x" * 257, "a\x00", "\ud800"):
            with pytest.raises(ConfigError, match=r"tenant=.*an id must be"):
                await ks.create(bad)
        assert await ks.list() == []
        for good in ("a b", "é", "x" * 256, "...", "-x"):  # as a session or user id may be
            assert (await ks.create(good)).record.tenant == good

    _run(url, work)


def test_the_service_over_each_backend(url: str, make_client: Callable[..., TestClient]) -> None:
    key = _run(url, lambda ks: ks.create("acme")).key
    h = {"Authorization": f"Bearer {key}"}
    client = make_client(store=url)
    assert (
        client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h).status_code == 201
    )
    msgs = [{"role": "user", "content": f"turn {i}"} for i in range(5)]
    r = client.post("/v1/sessions/s/messages", json={"messages": msgs}, headers=h)
    assert r.status_code == 201 and r.json()["last_seq"] == 5
    ctx = client.get("/v1/sessions/s/context", headers=h).json()
    assert [m["content"] for m in ctx["context"]] == [f"turn {i}" for i in range(5)]
    assert client.get("/readyz").status_code == 200
    # idempotency records live in the same store (a hash per user with a TTL in Redis)
    idem = h | {"Idempotency-Key": "k"}
    one = {"messages": [{"id": "x", "role": "user", "content": "once"}]}
    first = client.post("/v1/sessions/s/messages", json=one, headers=idem)
    replay = client.post("/v1/sessions/s/messages", json=one, headers=idem)
    assert first.json() == replay.json() and first.json()["last_seq"] == 6
    other = {"messages": [{"id": "y", "role": "user", "content": "twice"}]}
    assert client.post("/v1/sessions/s/messages", json=other, headers=idem).status_code == 422
