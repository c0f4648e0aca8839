"""``Idempotency-Key`` (issue 20 §2): the key is bound to the body before anything is
written, so a reuse with another body is a 422 even while the first request runs and
never a second write (real processes racing, messages with ids and without); a refused
request frees its key; a delete or an erasure leaves no record, and a session made again
under an old id never replays the old one's answers. The records' semantics are held on
every backend (SQLite, Redis, Redis Cluster, PostgreSQL) with an injected clock."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from _servers_app import Launcher, create_key, serve_app  # noqa: F401
from convomem.server.idempotency import DAY, Earlier, Idempotency
from convomem.stores import aopen_store
from convomem.stores.database import SessionInfo

BACKENDS = ["sqlite_file", "redis", "redis_cluster", "postgresql"]
Key = Callable[[str], dict[str, str]]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest) -> str:
    backend: Any = request.getfixturevalue(request.param)
    made: str = backend.fresh_url()
    return made


def _info(sid: str, user: str, created: float = 1.0) -> SessionInfo:
    return SessionInfo(sid, user, "t", created, created, None, {}, 0, 0, 0)


def test_records_bind_answer_release_expire_and_are_forgotten(url: str) -> None:
    now = [1000.0]

    async def work() -> None:
        db = await aopen_store(url)
        try:
            idem = Idempotency(db, clock=lambda: now[0])
            a, b = _info("s-a", "ana"), _info("s-b", "ana")
            c = _info("s-c", "bob")
            assert await idem.claim("t", a, "k", "d1") is None
            assert await idem.claim("t", a, "k", "d2") == Earlier("d1", None)
            await idem.complete("t", a, "k", "d1", {"last_seq": 3})
            assert await idem.claim("t", a, "k", "d1") == Earlier("d1", {"last_seq": 3})
            # the same key elsewhere is another key: another session, incarnation, tenant
            assert await idem.claim("t", b, "k", "d9") is None
            assert await idem.claim("t", _info("s-a", "ana", created=2.0), "k", "d9") is None
            assert await idem.claim("u", a, "k", "d9") is None
            # a released key binds again, to another body
            assert await idem.claim("t", c, "k", "d1") is None
            await idem.release("t", c, "k")
            assert await idem.claim("t", c, "k", "d2") is None
            # a day later the record is gone, whatever the backend
            now[0] += DAY + 1
            assert await idem.claim("t", a, "k", "d5") is None
            # forgetting a session leaves the user's others; forgetting the user, none
            for key in ("x", "y"):
                for info in (a, b, c):
                    await idem.claim("t", info, key, "dx")
            assert await idem.forget("t", "ana", "s-a") >= 1
            assert await idem.claim("t", a, "x", "new") is None
            assert await idem.claim("t", b, "x", "new") == Earlier("dx", None)
            assert await idem.forget("t", "ana") >= 1
            assert await idem.claim("t", b, "x", "new") is None
            assert await idem.claim("t", c, "x", "new") == Earlier("dx", None)
        finally:
            await db.aclose()

    asyncio.run(work())


def _append(client: Any, h: dict[str, str], sid: str, body: dict[str, Any], **headers: str) -> Any:
    return client.post(f"/v1/sessions/{sid}/messages", json=body, headers=h | headers)


def test_a_refused_request_frees_its_key_and_old_keys_never_replay(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "u1"}, headers=h).is_success
    one = {"messages": [{"role": "user", "content": "one"}]}
    stale = _append(client, h, "s1", one, **{"Idempotency-Key": "k1", "If-Match": '"7"'})
    assert stale.status_code == 409
    fixed = {"messages": [{"role": "user", "content": "one, again"}]}
    r = _append(client, h, "s1", fixed, **{"Idempotency-Key": "k1", "If-Match": '"0"'})
    assert r.status_code == 201 and "idempotent-replayed" not in r.headers
    r = _append(client, h, "s1", one, **{"Idempotency-Key": "k1"})
    assert r.status_code == 422 and r.json()["type"].endswith("/idempotency-conflict")
    # deleted and made again: the old key binds anew and stores
    assert client.delete("/v1/sessions/s1", headers=h).status_code == 204
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "u1"}, headers=h).is_success
    r = _append(client, h, "s1", fixed, **{"Idempotency-Key": "k1"})
    assert r.status_code == 201 and "idempotent-replayed" not in r.headers
    assert client.get("/v1/sessions/s1", headers=h).json()["message_count"] == 1
    # erased and made again: the same
    assert client.delete("/v1/users/u1", headers=h).status_code == 200
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "u1"}, headers=h).is_success
    r = _append(client, h, "s1", fixed, **{"Idempotency-Key": "k1"})
    assert r.status_code == 201 and "idempotent-replayed" not in r.headers
    assert client.get("/v1/sessions/s1", headers=h).json()["message_count"] == 1


def test_delete_and_erase_leave_no_idempotency_record(
    client: TestClient, make_key: Key, store_url: str
) -> None:
    h = make_key("acme")
    for sid, user in (("s1", "ana"), ("s2", "ana"), ("s3", "bob")):
        assert client.post("/v1/sessions", json={"id": sid, "user_id": user}, headers=h)
        for k in ("k1", "k2"):
            body = {"messages": [{"role": "user", "content": f"{sid} {k}"}]}
            assert _append(client, h, sid, body, **{"Idempotency-Key": k}).status_code == 201
    path = store_url.removeprefix("sqlite:///")

    def rows() -> int:
        with sqlite3.connect(path) as conn:
            return int(conn.execute("SELECT count(*) FROM convomem_idempotency").fetchone()[0])

    assert rows() == 6
    assert client.delete("/v1/sessions/s1", headers=h).status_code == 204
    assert rows() == 4
    assert client.delete("/v1/users/ana", headers=h).status_code == 200
    assert rows() == 2  # bob's
    assert client.delete("/v1/users/bob", headers=h).status_code == 200
    assert rows() == 0


@pytest.fixture
def two_replicas(serve_app: Launcher, tmp_path: Path) -> Iterator[tuple[list[str], dict[str, str]]]:  # noqa: F811
    url = f"sqlite:///{tmp_path / 'idem.db'}"
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    replicas = serve_app(url, 2, "--rate", "0")
    yield [r.url for r in replicas], h


def test_racing_reuses_of_a_key_write_once(two_replicas: tuple[list[str], dict[str, str]]) -> None:
    """Rounds of 6 requests at once through two processes, one key, each its own body:
    exactly one is stored, the others are 422 (or, for its own copies, the same answer)."""
    urls, h = two_replicas
    clients = [httpx.Client(base_url=u, timeout=60) for u in urls]
    try:
        with_ids = [True, False]
        for round_ in range(8):
            sid = f"r{round_}"
            assert clients[0].post("/v1/sessions", json={"id": sid, "user_id": "u"}, headers=h)
            ids = with_ids[round_ % 2]

            def send(i: int, sid: str = sid, ids: bool = ids) -> httpx.Response:
                m: dict[str, Any] = {"role": "user", "content": f"body {i}"}
                if ids:
                    m["id"] = f"m-{i}"
                body = {"messages": [m, {"role": "assistant", "content": f"reply {i}"}]}
                for _ in range(5):  # a 503 (SQLite busy under load) is retried, as clients do
                    r = _append(clients[i % 2], h, sid, body, **{"Idempotency-Key": "shared"})
                    if r.status_code != 503:
                        break
                    time.sleep(float(r.headers.get("retry-after", "1")))
                return r

            with ThreadPoolExecutor(6) as pool:
                answers = list(pool.map(send, range(6)))
            codes = sorted(r.status_code for r in answers)
            assert codes == [201] + [422] * 5, [(r.status_code, r.text) for r in answers]
            page = clients[1].get(f"/v1/sessions/{sid}/messages", headers=h).json()["messages"]
            won = next(r for r in answers if r.status_code == 201).json()
            assert [m["id"] for m in page] == [m["id"] for m in won["messages"]]
            assert len(page) == 2 and page[0]["content"].startswith("body ")
    finally:
        for c in clients:
            c.close()
