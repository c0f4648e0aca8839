"""MCP over stdio (``convomem mcp --store URL``): one local client, one tenant.

There is no API key on a pipe: whoever starts the process can open the store anyway.
The tools act for one tenant, ``--tenant`` (default: none, the store's own scope, where
the library and the other ``convomem`` commands keep sessions created without a
tenant); the key id recorded on facts set by hand is ``"stdio"``. The services (store,
recall index) are opened as ``convomem serve`` opens them, from the same ``Settings``,
and closed when the client closes the pipe. Nothing but MCP messages is written to
stdout (the SDK logs to stderr).
"""

from __future__ import annotations

from ..server.deps import ApiKey, open_services
from ..server.metrics import Metrics
from ..server.settings import Settings
from ..stores.records import check_name
from .tools import Caller, build_server

__all__ = ["STDIO_KEY_ID", "serve_stdio"]

STDIO_KEY_ID = "stdio"


async def serve_stdio(
    settings: Settings, *, tenant: str | None = None, allow_erase: bool = False
) -> None:
    """Serve the MCP tools over stdin/stdout for ``tenant`` until the client closes the
    pipe (``erase_user`` only with ``allow_erase``)."""
    check_name("tenant", tenant, optional=True)
    services = await open_services(settings, Metrics())
    try:
        caller = Caller(services, ApiKey(tenant, STDIO_KEY_ID))
        server = build_server(lambda: caller, allow_erase=allow_erase)
        await server.run_stdio_async()
    finally:
        await services.aclose()
