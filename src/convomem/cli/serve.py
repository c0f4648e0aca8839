"""``convomem serve``: the memory service on uvicorn (extra ``server``).

``--store`` defaults to ``$CONVOMEM_STORE``, else a SQLite file (``convomem.db``), so the
command works with nothing else installed. With ``--workers N`` uvicorn runs N processes;
each builds the app from the settings passed in ``$CONVOMEM_SERVE_SETTINGS`` (JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

from ..errors import ConfigError, MissingDependency

__all__ = ["add_parser", "app_from_env", "cmd_serve"]

ENV_SETTINGS = "CONVOMEM_SERVE_SETTINGS"


def add_parser(sub: Any) -> None:
    from ..recall.embedders import EMBEDDERS

    help = "run the memory service (HTTP API) on uvicorn; extra 'server'"
    p: argparse.ArgumentParser = sub.add_parser("serve", help=help, description=help)
    p.set_defaults(func=cmd_serve)
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
        "--no-recall",
        action="store_true",
        help="run without recall (no index, no facts): e.g. on PostgreSQL without pgvector",
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default=None,
        help="what recall embeds with: hashing (default, no dependency), minilm, e5",
    )
    p.add_argument(
        "--redis",
        metavar="URL",
        default=None,
        help="Redis for rate limits shared by replicas (default: in-process)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--workers", type=int, default=1, help="processes (default: 1)")
    p.add_argument("--budget", type=int, default=None, help="context budget of new sessions")
    p.add_argument("--rate", type=float, default=None, help="requests per second per key")
    p.add_argument("--burst", type=int, default=None, help="burst of requests per key")
    p.add_argument("--upstream-url", default=None, help="OpenAI-compatible base URL (chat)")
    p.add_argument("--upstream-model", default=None, help="the model the chat route calls")
    p.add_argument("--log-level", default="warning")


def settings_of(args: argparse.Namespace) -> Any:
    from ..server.settings import DEFAULT_STORE, Settings

    given: dict[str, Any] = {
        "store": args.store or os.environ.get("CONVOMEM_STORE") or DEFAULT_STORE,
        "recall": args.recall,
        "embedder": args.embedder,
        "redis_url": args.redis,
        "budget": args.budget,
        "rate_per_second": args.rate,
        "burst": args.burst,
        "upstream_url": args.upstream_url,
        "upstream_model": args.upstream_model,
        "upstream_api_key": os.environ.get("CONVOMEM_UPSTREAM_API_KEY"),
        "metrics_key": os.environ.get("CONVOMEM_METRICS_KEY") or None,
        "use_recall": False if args.no_recall else None,
    }
    return Settings(**{k: v for k, v in given.items() if v is not None})


def app_from_env() -> Any:
    """The app of one uvicorn worker process (``--workers N``): settings from the env."""
    from ..server import create_app
    from ..server.settings import Settings

    data = json.loads(os.environ[ENV_SETTINGS])
    return create_app(Settings(**data))


def cmd_serve(args: argparse.Namespace, out: Any) -> int:
    try:
        import uvicorn
    except ImportError:
        raise MissingDependency("convomem serve", "server", "uvicorn") from None
    from ..server import create_app

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: must be 1-65535")
    if args.workers < 1:
        raise ConfigError(f"--workers {args.workers}: must be at least 1")
    settings = settings_of(args)
    app = create_app(settings)  # checks the extra and the settings before binding
    if args.workers == 1:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
        return 0
    os.environ[ENV_SETTINGS] = json.dumps(dataclasses.asdict(settings))
    uvicorn.run(
        "convomem.cli.serve:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
    )
    return 0
