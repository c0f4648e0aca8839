"""The memory service: an HTTP API over the durable stores (extra ``server``).

``create_app(settings)`` gives the FastAPI application (``convomem serve`` runs it on
uvicorn); ``Settings`` configures it. FastAPI is imported only when the app is made, so
``Settings`` works without the extra and ``create_app`` without it raises
``MissingDependency`` naming ``pip install 'convomem[server]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .settings import DEFAULT_STORE, Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["DEFAULT_STORE", "Settings", "create_app"]


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service's FastAPI application (see ``convomem.server.app``)."""
    try:
        import fastapi  # noqa: F401
    except ImportError:
        from ..errors import MissingDependency

        raise MissingDependency("the memory service", "server", "fastapi") from None
    from .app import create_app as make

    return make(settings)
