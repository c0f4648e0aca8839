"""``/healthz``, ``/readyz`` (503 when a store does not answer) and ``/metrics``."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from _servers_app import Launcher, convomem_command, create_key, serve_app  # noqa: F401
from _servers_postgres import PostgresServer, install_without, start_postgres
from _servers_redis import free_port
from convomem.server import Settings, create_app

Key = Callable[[str], dict[str, str]]


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"]["store"] == "ok"


def test_readyz_is_503_when_the_store_does_not_answer(
    make_client: Callable[..., TestClient],
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0?socket_timeout=0.2"
    client = make_client(store=dead)
    assert client.get("/healthz").status_code == 200
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "unavailable"
    api = client.get("/v1/sessions", headers={"Authorization": "Bearer x"})
    assert api.status_code == 503
    assert api.headers["content-type"] == "application/problem+json"


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = "^" + re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)"
    m = re.search(pattern, text, re.MULTILINE)
    assert m is not None, f"{name}{{{want}}} not in metrics"
    return float(m.group(1))


def test_metrics_count_requests_latencies_and_compactions(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    for i in range(6):
        msgs = [{"role": "user", "content": f"turn {i}.{j} " + "words " * 80} for j in range(10)]
        client.post("/v1/sessions/s/messages", json={"messages": msgs}, headers=h)
    client.get("/v1/sessions/nope", headers=h)
    client.get("/v1/sessions", headers={"Authorization": "Bearer bad"})
    text = client.get("/metrics").text
    route = "/v1/sessions/{session_id}/messages"
    assert _sample(text, "convomem_requests_total", route=route, method="POST", status="201") == 6
    assert (
        _sample(
            text,
            "convomem_requests_total",
            route="/v1/sessions/{session_id}",
            method="GET",
            status="404",
        )
        == 1
    )
    assert _sample(text, "convomem_request_seconds_count", route=route) == 6
    assert _sample(text, "convomem_request_seconds_bucket", route=route, le="+Inf") == 6
    assert _sample(text, "convomem_compactions_total") >= 1
    assert _sample(text, "convomem_summarizer_calls_total") >= 1
    assert "nope" not in text  # ids never become labels


def test_metrics_can_require_a_key(make_client: Callable[..., TestClient]) -> None:
    client = make_client(metrics_key="m" * 20)
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = client.get("/metrics", headers={"Authorization": f"Bearer {'m' * 20}"})
    assert r.status_code == 200 and "convomem_requests_total" in r.text
    assert client.get("/healthz").status_code == 200  # the probes stay open


def test_invented_methods_add_no_series(client: TestClient) -> None:
    for i in range(300):
        client.request(f"X{i}", "/v1/sessions")
    text = client.get("/metrics").text
    assert "X1" not in text
    labels = {"route": "/v1/sessions", "method": "other", "status": "405"}
    assert _sample(text, "convomem_requests_total", **labels) == 300


@pytest.fixture(scope="module")
def postgres_without_pgvector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = start_postgres(install_without("vector", tmp_path_factory.mktemp("pg-install")))
    yield server
    server.stop()


def test_postgresql_without_pgvector_fails_the_start_and_readyz(
    postgres_without_pgvector: PostgresServer,
    serve_app: Launcher,  # noqa: F811
) -> None:
    url = postgres_without_pgvector.fresh_url()
    create_key(url, "acme")  # the store itself is fine
    started = subprocess.run(
        convomem_command("serve", "--store", url, "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = started.stdout + started.stderr
    assert started.returncode != 0, out
    assert "pgvector" in out and "--no-recall" in out, out
    # an app made without starting (no lifespan) says the same on /readyz
    client = TestClient(create_app(Settings(store=url)), raise_server_exceptions=False)
    r = client.get("/readyz")
    assert r.status_code == 503 and "pgvector" in r.json()["checks"]["error"]
    # and without recall the service runs: appends are 201, not 503
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    (replica,) = serve_app(url, 1, "--no-recall")
    with httpx.Client(base_url=replica.url, timeout=30) as http:
        assert http.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
        msg = {"messages": [{"role": "user", "content": "hello"}]}
        for _ in range(3):  # a 503 under load is retried, as the API asks of its clients
            r = http.post("/v1/sessions/s/messages", json=msg, headers=h)
            if r.status_code != 503:  # (before the fix every append was a 503)
                break
            time.sleep(float(r.headers.get("retry-after", "1")))
        assert r.status_code == 201, r.text
        assert http.get("/readyz").status_code == 200


def test_an_inspector_key_never_reaches_the_access_log(
    serve_app: Launcher,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    token = create_key(url, "acme")
    (replica,) = serve_app(url, 1, "--log-level", "info")
    with httpx.Client(base_url=replica.url, timeout=30) as http:
        good = http.get("/inspect", params={"key": token, "user_id": "u"})
        assert good.status_code in (200, 303)
        bad = http.get("/inspect/s1", params={"limit": 5, "key": "cm_123456789abc_guessed-secret"})
        assert bad.status_code == 401
        for _ in range(50):  # the access log is written after the response
            if "guessed-secret" in replica.log_tail(10**6) or "[redacted]" in replica.log_tail(
                10**6
            ):
                break
            time.sleep(0.1)
    replica.stop()
    log = replica.log.read_text(errors="replace")
    assert "/inspect?" in log and "[redacted]" in log
    assert token not in log and token.split("_")[2] not in log and "guessed-secret" not in log
