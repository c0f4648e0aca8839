"""The MCP server: a session's memory as tools and resources for agents (extra ``mcp``).

- ``build_server(caller, allow_erase=False)``: an ``MCPServer`` (the official SDK) whose
  tools call the HTTP service's own operations (``server.operations``,
  ``server.facts``) for the ``Caller`` (services + key) of each request.
- ``mount(app, allow_erase=False)``: serve it over streamable HTTP at ``/mcp`` of a
  ``create_app`` application, behind the same API keys and tenants as ``/v1``
  (``convomem serve`` does this).
- ``serve_stdio(settings, tenant=None, allow_erase=False)``: serve it over stdio on the
  store of ``settings`` (``convomem mcp --store URL``), for one tenant.

Nothing of the SDK is imported until one of these is called; without the extra they
raise ``MissingDependency`` naming it. See ``docs/mcp.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._sdk import require_sdk

if TYPE_CHECKING:
    from ..server.settings import Settings

__all__ = ["build_server", "mount", "serve_stdio"]


def build_server(caller: Any, *, allow_erase: bool = False) -> Any:
    """The MCP server whose tools act for ``caller()`` (a ``Caller``); see ``tools``."""
    require_sdk("convomem.mcp.build_server")
    from .tools import build_server as build

    return build(caller, allow_erase=allow_erase)


def mount(app: Any, *, path: str = "/mcp", allow_erase: bool = False) -> None:
    """Serve MCP over streamable HTTP at ``path`` of ``app`` (see ``http``)."""
    require_sdk("convomem.mcp.mount")
    from .http import mount as mount_http

    mount_http(app, path=path, allow_erase=allow_erase)


async def serve_stdio(
    settings: Settings, *, tenant: str | None = None, allow_erase: bool = False
) -> None:
    """Serve MCP over stdin/stdout until the client closes it (see ``stdio``)."""
    require_sdk("convomem.mcp.serve_stdio")
    from .stdio import serve_stdio as serve

    await serve(settings, tenant=tenant, allow_erase=allow_erase)
