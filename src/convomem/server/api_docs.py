"""``/docs``: Swagger UI with its script, style and icon served by the service itself, so
the page works on a machine with no internet access.

FastAPI's own page loads Swagger UI from a CDN: offline, ``/docs`` was a blank page. The
assets come from the ``fastapi-offline`` package (part of the ``server`` extra), whose
``static`` folder holds the bundle (Swagger UI 5, which reads the OpenAPI 3.1 schema
FastAPI writes); only that folder is used, not its app factory. ReDoc (``/redoc``) is
not served: its bundle fetches its logo from a CDN even when given every asset.
Without the package ``/docs`` answers a 501 problem naming the extra, and the rest of
the service (``/openapi.json`` included) is unaffected.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Final

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ..errors import MissingDependency

__all__ = ["ASSETS", "assets_dir", "install"]

ASSETS: Final = "/docs/assets"
"""Where the pages' scripts, styles and icon are served."""

_PACKAGE: Final = "fastapi_offline"


def assets_dir() -> Path | None:
    """The folder of Swagger UI's files, or None when the package is missing."""
    try:
        folder = importlib.resources.files(_PACKAGE) / "static"
    except ModuleNotFoundError:
        return None
    path = Path(str(folder))
    return path if (path / "swagger-ui-bundle.js").is_file() else None


def install(app: FastAPI, assets: Path | None) -> None:
    """Serve ``/docs`` and its assets (``assets``: ``assets_dir()``)."""
    if assets is not None:
        app.mount(ASSETS, StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger(request: Request) -> HTMLResponse:
        if assets is None:
            raise MissingDependency("the API docs page (/docs)", "server", "fastapi-offline")
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            oauth2_redirect_url=None,
        )
