"""``convomem mcp``: the MCP server over stdio, for a local client (extra ``mcp``).

A desktop client (Claude Desktop, Cursor) starts it as a subprocess and talks MCP over
its stdin/stdout; stdout carries nothing else. ``--store`` defaults to
``$CONVOMEM_STORE``, else the SQLite file ``convomem serve`` uses. ``--tenant`` is the
one tenant the tools act for (default: none, the scope of sessions the library and the
other commands create without a tenant); ``--allow-erase`` adds the ``erase_user`` tool.
The same tools are served over HTTP at ``/mcp`` by ``convomem serve`` (docs/mcp.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

__all__ = ["add_parser", "cmd_mcp"]


def add_parser(sub: Any) -> None:
    from ..recall.embedders import EMBEDDERS

    help = "serve the memory's MCP tools over stdio (Claude Desktop, Cursor...); extra 'mcp'"
    p: argparse.ArgumentParser = sub.add_parser("mcp", help=help, description=help)
    p.set_defaults(func=cmd_mcp)
    p.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="store URL (default: $CONVOMEM_STORE, else sqlite:///convomem.db)",
    )
    p.add_argument(
        "--recall",
        metavar="URL",
        default=None,
        help="recall index store URL (default: the store, when SQLite/PostgreSQL)",
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default=None,
        help="what recall embeds with: hashing (default, no dependency), minilm, e5",
    )
    p.add_argument("--budget", type=int, default=None, help="context budget of new sessions")
    p.add_argument(
        "--tenant",
        default=None,
        help="the tenant the tools act for (default: none, the store's own scope)",
    )
    p.add_argument(
        "--allow-erase",
        action="store_true",
        help="add the erase_user tool (erases everything of a user; off by default)",
    )


def settings_of(args: argparse.Namespace) -> Any:
    from ..server.settings import DEFAULT_STORE, Settings

    given: dict[str, Any] = {
        "store": args.store or os.environ.get("CONVOMEM_STORE") or DEFAULT_STORE,
        "recall": args.recall,
        "embedder": args.embedder,
        "budget": args.budget,
        "rate_per_second": 0.0,  # one local client: no key to limit
    }
    return Settings(**{k: v for k, v in given.items() if v is not None})


def cmd_mcp(args: argparse.Namespace, out: Any) -> int:
    from ..mcp import serve_stdio

    settings = settings_of(args)  # checked before the store is opened
    asyncio.run(serve_stdio(settings, tenant=args.tenant, allow_erase=args.allow_erase))
    return 0
