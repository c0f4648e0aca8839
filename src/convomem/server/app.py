"""``create_app(settings)``: the FastAPI application of the memory service.

Routers are listed in one place (``_ROUTERS`` and the include lines below); each route
module owns its paths. Middleware, outermost first: request metrics (by route
template), the body size limit (413 before the body is read), then FastAPI's routing.
Every error leaves as a problem document (``problems``): ``ConvomemError`` s by
``problems.from_error``, request validation as a 422 naming the field, anything else as
a 500 problem (a bug: none is expected, and the suite checks for them).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from .._version import __version__
from ..errors import ConvomemError, StoreError, TransientError
from . import api_docs, routes_facts, routes_health, routes_messages, routes_sessions, routes_users
from .deps import new_state, open_at_start
from .inspect import routes as inspect_routes
from .models import ProblemOut, problem_responses
from .problems import MEDIA_TYPE, Problem, body_of, from_error, problem_body
from .routes_chat import router as chat_router
from .settings import Settings

__all__ = ["create_app"]


def _problem_response(p: Problem) -> JSONResponse:
    return JSONResponse(body_of(p), status_code=p.status, headers=p.headers, media_type=MEDIA_TYPE)


def _field(loc: tuple[Any, ...]) -> str:
    if len(loc) > 1 and loc[0] in ("body", "query", "path", "header", "cookie"):
        loc = loc[1:]
    parts = [str(x) for x in loc]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or ".".join(str(x) for x in loc)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service over ``settings.store`` (opened on first request, closed at shutdown)."""
    settings = Settings() if settings is None else settings

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await open_at_start(app.state)
        yield
        services = app.state.services
        app.state.services = None
        if services is not None:
            await services.aclose()

    app = FastAPI(
        title="convomem",
        version=__version__,
        description="The memory of conversational agents, as a service: sessions, their "
        "logs and contexts under budget, recall and facts, scoped to the API key's tenant.",
        lifespan=lifespan,
        docs_url=None,  # api_docs serves /docs with its assets: no CDN
        redoc_url=None,  # ReDoc's bundle fetches its logo from a CDN: not served
    )
    new_state(app.state, settings)

    api = problem_responses(400, 401, 404, 409, 413, 422, 429, 503)
    app.include_router(routes_health.router, responses=problem_responses(503))
    app.include_router(routes_sessions.router, responses=api)
    app.include_router(routes_messages.router, responses=api)
    app.include_router(routes_users.router, responses=api)
    app.include_router(routes_facts.router, responses=api)
    app.include_router(chat_router, responses={**api, **problem_responses(501)})
    app.include_router(inspect_routes.router)
    inspect_routes.redact_access_log()
    api_docs.install(app, api_docs.assets_dir())
    _register_problem_schema(app)

    _install_errors(app)
    _install_middleware(app, settings)
    return app


def _register_problem_schema(app: FastAPI) -> None:
    """Put ``ProblemOut`` in the OpenAPI components (the responses refer to it)."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemas = spec.setdefault("components", {}).setdefault("schemas", {})
            schemas["ProblemOut"] = ProblemOut.model_json_schema()
            for path in spec.get("paths", {}).values():  # FastAPI's own 422 body is not ours
                for op in path.values():
                    if isinstance(op, dict) and "422" in op.get("responses", {}):
                        op["responses"]["422"] = problem_responses(422)[422]
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def on_problem(request: Request, exc: Problem) -> Response:
        return _problem_response(exc)

    @app.exception_handler(ConvomemError)
    async def on_error(request: Request, exc: ConvomemError) -> Response:
        if isinstance(exc, StoreError | TransientError):
            request.app.state.metrics.add("store_errors")
        return _problem_response(from_error(exc))

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first: dict[str, Any] = dict(errors[0]) if errors else {}
        field = _field(tuple(first.get("loc") or ()))
        detail = f"{field}: {first.get('msg', 'invalid')}"
        if len(errors) > 1:
            detail += f" (and {len(errors) - 1} more problems)"
        body = problem_body(422, "bad-request", detail, field, first.get("input"))
        return JSONResponse(body, status_code=422, media_type=MEDIA_TYPE)

    @app.exception_handler(HTTPException)
    async def on_http(request: Request, exc: HTTPException) -> Response:
        if isinstance(exc.__cause__, Problem):  # raised while FastAPI read the body
            return _problem_response(exc.__cause__)
        slug = {404: "not-found", 405: "bad-request", 401: "unauthorized"}.get(
            exc.status_code, "bad-request"
        )
        body = problem_body(exc.status_code, slug, str(exc.detail))
        return JSONResponse(
            body, status_code=exc.status_code, headers=exc.headers, media_type=MEDIA_TYPE
        )

    @app.exception_handler(Exception)
    async def on_bug(request: Request, exc: Exception) -> Response:
        body = problem_body(500, "internal", f"{type(exc).__name__}: an internal error")
        return JSONResponse(body, status_code=500, media_type=MEDIA_TYPE)


class BodyLimit:
    """413 for a body over ``limit`` bytes: at once when ``Content-Length`` says so, else
    as soon as the bytes received pass it (a chunked body is never read whole)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                n = int(value)
                p = Problem(
                    413,
                    "too-large",
                    f"the body is {n} bytes; at most {limit}",
                    field="Content-Length",
                    value=n,
                )
                await _problem_response(p)(scope, receive, send)
                return
        seen = 0

        async def counted() -> Any:
            nonlocal seen
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise Problem(413, "too-large", f"the body is over {limit} bytes", field="body")
            return message

        await self.app(scope, counted, send)


def _install_middleware(app: FastAPI, settings: Settings) -> None:
    limit = settings.max_body_bytes

    app.add_middleware(BodyLimit, limit=limit)

    @app.middleware("http")
    async def count(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            request.app.state.metrics.request(
                template, request.method, status, time.perf_counter() - start
            )
