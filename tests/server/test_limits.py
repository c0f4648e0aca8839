"""Per-key rate limits (token buckets, in-process and in Redis across replicas) and
request size limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

from fastapi.testclient import TestClient

from convomem.server.limits import LocalBuckets

Key = Callable[[str], dict[str, str]]


def test_local_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    b = LocalBuckets(2.0, 3, clock=lambda: now[0])

    def take(key: str = "k") -> tuple[bool, float]:
        return asyncio.run(b.take(key))

    assert [take()[0] for _ in range(4)] == [True, True, True, False]
    assert take()[1] == 0.5  # one token at 2/s
    assert take("other")[0] is True
    now[0] += 0.5
    assert take() == (True, 0.0)
    assert take()[0] is False
    now[0] += 100.0
    assert [take()[0] for _ in range(4)] == [True, True, True, False]  # capped at the burst


def test_a_key_over_its_rate_gets_429_with_retry_after(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    client = make_client(rate_per_second=0.01, burst=3)
    a, b = make_key("acme"), make_key("acme")
    assert [client.get("/v1/sessions", headers=a).status_code for _ in range(3)] == [200] * 3
    r = client.get("/v1/sessions", headers=a)
    assert r.status_code == 429 and r.json()["type"].endswith("/rate-limited")
    assert int(r.headers["retry-after"]) >= 1
    assert client.get("/v1/sessions", headers=b).status_code == 200  # per key
    assert client.get("/healthz").status_code == 200  # operations routes are not limited


def test_redis_buckets_hold_across_replicas(
    make_client: Callable[..., TestClient], make_key: Key, redis_server: Any
) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    one = make_client(rate_per_second=0.01, burst=4, redis_url=url)
    two = make_client(rate_per_second=0.01, burst=4, redis_url=url)
    h = make_key("acme")
    codes = [c.get("/v1/sessions", headers=h).status_code for c in (one, two, one, two, one, two)]
    assert codes == [200, 200, 200, 200, 429, 429]
    other = make_key("acme")
    assert two.get("/v1/sessions", headers=other).status_code == 200


def test_bodies_over_the_limit_are_413_chunked_or_not(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    client = make_client(max_body_bytes=2000)
    h = make_key("acme") | {"Content-Type": "application/json"}
    client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    big = json.dumps({"messages": [{"role": "user", "content": "a" * 5000}]}).encode()

    def chunks(data: bytes) -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(data), 500):
            yield data[i : i + 500]

    for sent in (big, chunks(big)):
        r = client.post("/v1/sessions/s/messages", content=sent, headers=h)
        assert r.status_code == 413 and r.json()["type"].endswith("/too-large")
    small = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    assert (
        client.post("/v1/sessions/s/messages", content=chunks(small), headers=h).status_code == 201
    )
    assert client.get("/v1/sessions/s", headers=h).json()["message_count"] == 1
