"""``/healthz``, ``/readyz`` (503 when a store does not answer) and ``/metrics``."""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient

from _servers_redis import free_port

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
