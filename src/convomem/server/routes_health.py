"""``/healthz`` (the process answers), ``/readyz`` (the stores answer and hold what the
service needs; 503 otherwise, saying what is missing) and ``/metrics`` (Prometheus
text). None needs an API key: they say nothing about any tenant; ``/metrics`` asks for
``Settings.metrics_key`` when one is set."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ..errors import ConvomemError
from .deps import get_services
from .problems import Problem

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
async def readyz(request: Request) -> Any:
    """Every store answers (the session store, the recall index's, the rate limit's)."""
    checks: dict[str, str] = {}
    try:
        svc = await get_services(request)
        await svc.db.sessions(tenant="convomem-readyz", limit=1)
        checks["store"] = "ok"
        if svc.limiter is not None and hasattr(svc.limiter, "ping"):
            await svc.limiter.ping()
            checks["rate_limit"] = "ok"
    except (ConvomemError, OSError) as exc:
        checks["error"] = f"{type(exc).__name__}: {exc}"
        return JSONResponse({"status": "unavailable", "checks": checks}, status_code=503)
    return {"status": "ready", "checks": checks}


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    """Counters and latencies in Prometheus' text format (with ``metrics_key`` set, for
    ``Authorization: Bearer <metrics_key>`` only)."""
    wanted = request.app.state.settings.metrics_key
    if wanted is not None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode("utf-8", "replace")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given, wanted.encode()):
            raise Problem(
                401,
                "unauthorized",
                "/metrics: send the metrics key as Authorization: Bearer <key>",
                headers={"WWW-Authenticate": 'Bearer realm="convomem-metrics"'},
            )
    svc = await get_services(request)
    return PlainTextResponse(
        svc.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
    )
