"""``/healthz`` (the process answers), ``/readyz`` (the stores answer; 503 otherwise) and
``/metrics`` (Prometheus text). None needs a key: they say nothing about any tenant."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ..errors import ConvomemError
from .deps import Services, get_services

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
async def metrics(svc: Annotated[Services, Depends(get_services)]) -> PlainTextResponse:
    """Counters and latencies in Prometheus' text format."""
    return PlainTextResponse(
        svc.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
    )
