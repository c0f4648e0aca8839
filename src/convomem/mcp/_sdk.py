"""The one place the MCP room checks its extra: the official ``mcp`` SDK (2.x) and the
service's FastAPI (the tools call the service's operations)."""

from __future__ import annotations

from ..errors import MissingDependency


def require_sdk(what: str = "convomem.mcp") -> None:
    """Raise ``MissingDependency`` naming the ``mcp`` extra when a part is missing."""
    for module in ("mcp", "fastapi"):
        try:
            __import__(module)
        except ImportError:
            raise MissingDependency(what, "mcp", module) from None
