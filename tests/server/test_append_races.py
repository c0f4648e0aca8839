"""``POST /v1/sessions/{id}/messages`` under fire, against real ``convomem serve``
processes (issue 20 §2): concurrent appends with one ``If-Match`` (one process, and two
replicas over one store) store exactly one of them; a batch is all or nothing even when
the process is killed (SIGKILL) while appending it, and a retry with the request's
``Idempotency-Key`` completes it exactly once."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from _servers_app import Launcher, create_key, serve_app  # noqa: F401

WRITERS = 4
ROUNDS = 15
BATCH = 100


def _body(tag: str, n: int = 2, size: int = 20) -> dict[str, Any]:
    return {
        "messages": [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"{tag} {i} " + "words " * size,
            }
            for i in range(n)
        ]
    }


@pytest.mark.parametrize("replicas", [1, 2])
def test_one_if_match_lets_exactly_one_of_many_writers_in(
    serve_app: Launcher,  # noqa: F811
    tmp_path: Path,
    replicas: int,
) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    servers = serve_app(url, replicas, "--rate", "0")
    clients = [httpx.Client(base_url=s.url, timeout=60) for s in servers]
    try:
        assert clients[0].post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
        seq = 0
        for round_ in range(ROUNDS):
            gate = threading.Barrier(WRITERS)

            def write(
                i: int, round_: int = round_, seq: int = seq, gate: threading.Barrier = gate
            ) -> httpx.Response:
                gate.wait()
                for _ in range(5):  # a 503 (SQLite busy under load) is retried, as clients do
                    r = clients[i % replicas].post(
                        "/v1/sessions/s/messages",
                        json=_body(f"r{round_}w{i}"),
                        headers=h | {"If-Match": f'"{seq}"'},
                    )
                    if r.status_code != 503:
                        break
                    time.sleep(float(r.headers.get("retry-after", "1")))
                return r

            with ThreadPoolExecutor(WRITERS) as pool:
                answers = list(pool.map(write, range(WRITERS)))
            codes = sorted(r.status_code for r in answers)
            assert codes == [201] + [409] * (WRITERS - 1), [r.text for r in answers]
            won = next(r for r in answers if r.status_code == 201)
            seq += 2
            assert won.headers["etag"] == f'"{seq}"'
            assert all(r.headers["etag"] == f'"{seq}"' for r in answers if r.status_code == 409)
        page = clients[-1].get("/v1/sessions/s/messages", params={"limit": 1000}, headers=h)
        contents = [m["content"].split(" ")[0] for m in page.json()["messages"]]
        assert len(contents) == 2 * ROUNDS
        assert all(contents[2 * r] == contents[2 * r + 1] for r in range(ROUNDS))  # pairs whole
    finally:
        for c in clients:
            c.close()


def test_a_batch_is_all_or_nothing_when_the_process_is_killed(
    serve_app: Launcher,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'kill.db'}"
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    (server,) = serve_app(url, 1, "--rate", "0")
    http = httpx.Client(base_url=server.url, timeout=120)
    assert http.post("/v1/sessions", json={"id": "probe", "user_id": "u"}, headers=h)
    start = time.perf_counter()
    assert http.post("/v1/sessions/probe/messages", json=_body("p", BATCH, 200), headers=h)
    took = time.perf_counter() - start  # how long a batch takes here: where to aim the kills
    seen: list[int] = []
    for round_ in range(10):
        sid = f"k{round_}"
        assert http.post("/v1/sessions", json={"id": sid, "user_id": "u"}, headers=h)
        body = _body(sid, BATCH, 200)
        key = {"Idempotency-Key": f"batch-{round_}"}

        def send(
            sid: str = sid,
            body: dict[str, Any] = body,
            key: dict[str, str] = key,
            http: httpx.Client = http,
        ) -> None:
            with contextlib.suppress(httpx.TransportError):  # the process dies under it
                http.post(f"/v1/sessions/{sid}/messages", json=body, headers=h | key)

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(took * round_ / 10)  # from the first byte to the end of the batch
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(30)
        sender.join(60)
        http.close()
        (server,) = serve_app(url, 1, "--rate", "0")
        http = httpx.Client(base_url=server.url, timeout=120)
        count = http.get(f"/v1/sessions/{sid}", headers=h).json()["message_count"]
        assert count in (0, BATCH), f"round {round_}: {count} of {BATCH} messages stored"
        seen.append(count)
        again = http.post(f"/v1/sessions/{sid}/messages", json=body, headers=h | key)
        assert again.status_code == 201, again.text
        page = http.get(f"/v1/sessions/{sid}/messages", params={"limit": 1000}, headers=h)
        stored = [m["content"] for m in page.json()["messages"]]
        assert stored == [m["content"] for m in body["messages"]]  # once, whole, in order
    http.close()
    print(f"messages stored when killed: {seen}")
