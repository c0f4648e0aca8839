"""MCP over streamable HTTP at ``/mcp`` of the service, behind its API keys and tenants.

``mount(app)`` adds one route to a ``create_app`` application. Each HTTP request is
authenticated as ``/v1``'s are (``Authorization: Bearer <key>``, the key's rate limit;
a 401 or 429 problem otherwise), and its tools act for that key's tenant: the
``Caller`` travels in a context variable that the SDK carries to the tool with the
request's message. The transport is stateless (no ``Mcp-Session-Id`` kept in a
process): replicas share nothing but the store, so any replica answers any request,
and the tenant is the request's key's, never a session's. Answers are JSON (no
server-to-client requests: the tools need none).

DNS-rebinding protection (the SDK's ``Host`` / ``Origin`` allow-lists) is off: every
request needs a bearer key, which a rebound browser page does not have.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any, cast

from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ..errors import ConvomemError
from ..server.deps import get_services, require_key
from ..server.problems import MEDIA_TYPE, body_of, from_error
from .tools import Caller, build_server

__all__ = ["mount"]

_CALLER: ContextVar[Caller | None] = ContextVar("convomem_mcp_caller", default=None)


def _current() -> Caller:
    caller = _CALLER.get()
    if caller is None:  # a tool reached outside a request of this mount: a bug
        raise RuntimeError("no MCP caller in this context")
    return caller


class _Endpoint:
    """The ASGI app of the MCP route: the key first, then the SDK's transport."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            services = await get_services(request)
            key = await require_key(request)
        except ConvomemError as exc:
            p = from_error(exc)
            answer = JSONResponse(
                body_of(p), status_code=p.status, headers=p.headers, media_type=MEDIA_TYPE
            )
            await answer(scope, receive, send)
            return
        token = _CALLER.set(Caller(services, key))
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            _CALLER.reset(token)


def mount(app: FastAPI, *, path: str = "/mcp", allow_erase: bool = False) -> None:
    """Serve the MCP tools (``erase_user`` only with ``allow_erase``) at ``path`` of
    ``app``; the SDK's session manager runs with the app's lifespan."""
    server = build_server(_current, allow_erase=allow_erase)
    server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    # An ASGI app as the endpoint (Starlette serves it as is; its typing names handlers).
    app.add_route(path, cast(Any, _Endpoint(manager)), include_in_schema=False)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with manager.run(), inner(a) as state:
            yield state

    app.router.lifespan_context = lifespan
