"""The per-process memory cache (server/_memory_cache.py): a request reuses its session's
open memory when the store shows it current, so its work (store rows, statements, state
resumes) is flat in the session's length; another replica's write, a delete or an
erasure is never hidden by it; one session's memory serves one request at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import count
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convomem.errors import ConfigError
from convomem.server import Settings
from convomem.server._memory_cache import MemoryCache
from convomem.session import ConversationMemory
from convomem.session.engine import SessionEngine
from convomem.stores.database import SessionInfo

Key = Callable[[str], dict[str, str]]


def _batch(serial: count[int], n: int) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{next(serial)} " + "w " * 30}
        for i in range(n)
    ]


@pytest.fixture
def resumes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts resumes from the store's derived state (one entry per engine load)."""
    calls: list[int] = []
    original = SessionEngine._load

    def counted(self: SessionEngine) -> Any:
        calls.append(1)
        return original(self)

    monkeypatch.setattr(SessionEngine, "_load", counted)
    return calls


def test_cached_requests_do_no_resume_and_flat_work(
    make_client: Callable[..., TestClient], make_key: Key, resumes: list[int]
) -> None:
    client = make_client(budget=1000, rate_per_second=0, use_recall=False)
    h = make_key("acme")
    client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    serial = count()
    stats = client.app.state.services.db.stats  # type: ignore[attr-defined]

    def grow_to(n: int) -> None:
        while client.get("/v1/sessions/s", headers=h).json()["last_seq"] < n:
            r = client.post(
                "/v1/sessions/s/messages", json={"messages": _batch(serial, 100)}, headers=h
            )
            assert r.status_code == 201

    def worst() -> tuple[int, ...]:
        """The most work of one append and one context over a compaction cycle."""
        out = [0, 0, 0, 0, 0]
        for _ in range(30):
            a, r0 = stats(), len(resumes)
            r = client.post(
                "/v1/sessions/s/messages", json={"messages": _batch(serial, 1)}, headers=h
            )
            assert r.status_code == 201
            b = stats()
            assert client.get("/v1/sessions/s/context", headers=h).status_code == 200
            c = stats()
            got = (
                b.rows_read - a.rows_read,
                b.statements - a.statements,
                c.rows_read - b.rows_read,
                c.statements - b.statements,
                len(resumes) - r0,
            )
            out = [max(x, y) for x, y in zip(out, got, strict=True)]
        return tuple(out)

    grow_to(200)
    short = worst()
    grow_to(2000)
    long = worst()
    assert long == short, (short, long)
    assert short[4] == 0  # no resume: every request reused the open memory
    assert short[2] <= 2  # a context reads the session's info, no log rows


def test_cache_off_resumes_every_request(
    make_client: Callable[..., TestClient], make_key: Key, resumes: list[int]
) -> None:
    client = make_client(budget=1000, rate_per_second=0, use_recall=False, memory_cache=0)
    h = make_key("acme")
    client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    client.post("/v1/sessions/s/messages", json={"messages": _batch(count(), 3)}, headers=h)
    before = len(resumes)
    for _ in range(3):
        assert client.get("/v1/sessions/s/context", headers=h).status_code == 200
    assert len(resumes) - before == 3


def test_another_replicas_writes_are_seen_and_logs_stay_gapless(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    a = make_client(budget=600, rate_per_second=0, use_recall=False)
    b = make_client(budget=600, rate_per_second=0, use_recall=False)
    h = make_key("acme")
    r = a.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    assert r.status_code == 201, r.text
    sent: list[str] = []
    for i in range(40):  # alternating replicas; compactions happen on both
        app = (a, b)[i % 2]
        text = f"turn {i} " + "w " * 20
        r = app.post(
            "/v1/sessions/s/messages",
            json={"messages": [{"role": "user", "content": text}]},
            headers=h,
        )
        assert r.status_code == 201, r.text
        assert r.json()["last_seq"] == i + 1
        sent.append(text)
        other = (b, a)[i % 2]
        ctx = other.get("/v1/sessions/s/context", headers=h).json()["context"]
        assert ctx[-1]["content"] == text  # the other replica's cached memory saw it
    log = a.get("/v1/sessions/s/messages?limit=1000", headers=h).json()["messages"]
    assert [m["seq"] for m in log] == list(range(1, 41))
    assert [m["content"] for m in log] == sent
    for app in (a, b):
        assert app.app.state.services.memories.hits > 0  # type: ignore[attr-defined]


def test_erasure_and_delete_evict(make_client: Callable[..., TestClient], make_key: Key) -> None:
    client = make_client(rate_per_second=0, use_recall=False)
    h = make_key("acme")
    for sid in ("s1", "s2"):
        client.post("/v1/sessions", json={"id": sid, "user_id": "u"}, headers=h)
        client.post(
            "/v1/sessions/" + sid + "/messages",
            json={"messages": [{"role": "user", "content": f"secret of {sid}"}]},
            headers=h,
        )
        assert client.get(f"/v1/sessions/{sid}/context", headers=h).status_code == 200
    client.post("/v1/sessions", json={"id": "other", "user_id": "v"}, headers=h)
    client.get("/v1/sessions/other/context", headers=h)
    cache: MemoryCache = client.app.state.services.memories  # type: ignore[attr-defined]
    assert len(cache) == 3
    assert client.delete("/v1/users/u", headers=h).status_code == 200
    assert len(cache) == 1  # only v's session is left
    # Recreated under the same ids, the sessions show nothing of the erased user.
    for sid in ("s1", "s2"):
        client.post("/v1/sessions", json={"id": sid, "user_id": "u"}, headers=h)
        ctx = client.get(f"/v1/sessions/{sid}/context", headers=h).json()["context"]
        assert "secret" not in str(ctx)
    assert client.delete("/v1/sessions/other", headers=h).status_code == 204
    assert len(cache) == 2


def _info(session_id: str, last_seq: int = 0) -> SessionInfo:
    return SessionInfo(session_id, None, "t", 1.0, 1.0, None, {}, 0, last_seq, 0)


def test_one_request_at_a_time_per_session_and_lru_bound() -> None:
    async def main() -> None:
        cache = MemoryCache(2)
        made: list[ConversationMemory] = []

        def make() -> ConversationMemory:
            made.append(ConversationMemory(budget=500))
            return made[-1]

        events: list[str] = []

        async def request(name: str, session: str) -> None:
            async with cache.use("t", _info(session), 500, make):
                events.append(f"{name} in")
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                events.append(f"{name} out")

        await asyncio.gather(request("a", "s"), request("b", "s"), request("c", "x"))
        # a and b share session s: b enters only after a left; c (another session) ran
        # beside them.
        assert events.index("b in") > events.index("a out")
        assert events.index("c in") < events.index("a out")
        assert (cache.hits, cache.misses) == (1, 2)  # b reused a's memory
        await request("d", "y")
        assert len(cache) == 2  # LRU: s, the least recently used, left
        await request("e", "s")
        assert cache.misses == 4

    asyncio.run(main())


def test_memory_cache_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match="memory_cache=-1"):
        Settings(memory_cache=-1)


def test_an_append_that_does_not_compact_writes_no_state(
    make_client: Callable[..., TestClient], make_key: Key, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The derived state grows with the session (facts, covered ids): rewriting it on
    every append made an append's cost grow with the session. Only a compaction (which
    changed it) saves it."""
    dumps: list[int] = []
    original = SessionEngine._dump

    def counted(self: SessionEngine) -> Any:
        dumps.append(1)
        return original(self)

    monkeypatch.setattr(SessionEngine, "_dump", counted)
    client = make_client(budget=100_000, rate_per_second=0, use_recall=False)
    h = make_key("acme")
    client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    serial = count()
    for _ in range(5):
        r = client.post("/v1/sessions/s/messages", json={"messages": _batch(serial, 2)}, headers=h)
        assert r.status_code == 201
    assert client.app.state.services.memories.hits == 4  # type: ignore[attr-defined]
    assert dumps == []
