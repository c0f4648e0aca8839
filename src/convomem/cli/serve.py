"""``convomem serve``: the memory service on uvicorn (extra ``server``).

``--store`` defaults as for every command: ``$CONVOMEM_STORE``, else a SQLite file
(``convomem.db``), so the command works with nothing else installed. It writes one line to
stderr as it starts (the address, the store, recall and its embedder, the inspector's and
the API docs' URLs; not under ``--log-level error`` or ``critical``); uvicorn's own lines
follow ``--log-level`` (default ``warning``: none but problems). With ``--workers N``
uvicorn runs N processes; each builds the app from the settings passed in
``$CONVOMEM_SERVE_SETTINGS`` (JSON).

The MCP tools are served at ``/mcp`` too (``convomem.mcp.mount``: the same keys and
tenants) when the ``mcp`` extra is installed, unless ``--no-mcp``; ``--mcp-allow-erase``
adds the ``erase_user`` tool. Their choice travels in ``Settings.extra["mcp"]``.

``--summarizer`` / ``--extractor`` / ``--embedder`` take a model spec (``openai:MODEL``
for an OpenAI-compatible endpoint); API keys come from the environment only
(``CONVOMEM_LLM_API_KEY``, ``CONVOMEM_EMBEDDING_API_KEY``, ``OPENAI_API_KEY``), never
from the command line, where other users of the machine could read them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

from ..errors import ConfigError, MissingDependency
from ..stores.url import parse_store_url, redact_url
from .store_option import add_store_option, store_url

__all__ = ["add_parser", "app_from_env", "cmd_serve"]

ENV_SETTINGS = "CONVOMEM_SERVE_SETTINGS"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def add_parser(sub: Any) -> None:
    help = "run the memory service (HTTP API) on uvicorn; extra 'server'"
    p: argparse.ArgumentParser = sub.add_parser("serve", help=help, description=help)
    p.set_defaults(func=cmd_serve)
    add_store_option(p)
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
        metavar="SPEC",
        default=None,
        help="what recall embeds with: hashing (default, no dependency), minilm, e5, "
        "openai:MODEL (an OpenAI-compatible /embeddings)",
    )
    p.add_argument(
        "--summarizer",
        metavar="SPEC",
        default=None,
        help="extractive (default, offline) or openai:MODEL (an OpenAI-compatible chat "
        "model; falls back to extractive, marked degraded, when it fails)",
    )
    p.add_argument(
        "--extractor",
        metavar="SPEC",
        default=None,
        help="what reads the user's facts: offline (default) or openai:MODEL (falls back "
        "to offline when it fails)",
    )
    p.add_argument(
        "--llm-base-url",
        metavar="URL",
        default=None,
        help="base URL of the openai:MODEL summarizer and extractor (default: "
        "$CONVOMEM_LLM_BASE_URL, else api.openai.com); key: $CONVOMEM_LLM_API_KEY or "
        "$OPENAI_API_KEY",
    )
    p.add_argument(
        "--embedding-base-url",
        metavar="URL",
        default=None,
        help="base URL of the openai:MODEL embedder (default: $CONVOMEM_EMBEDDING_BASE_URL, "
        "else api.openai.com); key: $CONVOMEM_EMBEDDING_API_KEY or $OPENAI_API_KEY",
    )
    p.add_argument(
        "--llm-timeout", type=float, default=None, help="seconds a chat model call may take"
    )
    p.add_argument(
        "--embedding-timeout",
        type=float,
        default=None,
        help="seconds an embeddings request may take",
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
    p.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="warning",
        help="uvicorn's log level (default: warning); error and critical also hide the start line",
    )
    p.add_argument("--no-mcp", action="store_true", help="do not serve the MCP tools at /mcp")
    p.add_argument(
        "--mcp-allow-erase",
        action="store_true",
        help="add the erase_user tool to /mcp (erases everything of a user; off by default)",
    )


def settings_of(args: argparse.Namespace) -> Any:
    from ..server.settings import Settings

    given: dict[str, Any] = {
        "store": store_url(args),
        "recall": args.recall,
        "embedder": args.embedder,
        "summarizer": args.summarizer,
        "extractor": args.extractor,
        "llm_base_url": args.llm_base_url,
        "embedding_base_url": args.embedding_base_url,
        "llm_timeout": args.llm_timeout,
        "embedding_timeout": args.embedding_timeout,
        "redis_url": args.redis,
        "budget": args.budget,
        "rate_per_second": args.rate,
        "burst": args.burst,
        "upstream_url": args.upstream_url,
        "upstream_model": args.upstream_model,
        "upstream_api_key": os.environ.get("CONVOMEM_UPSTREAM_API_KEY"),
        "metrics_key": os.environ.get("CONVOMEM_METRICS_KEY") or None,
        "use_recall": False if args.no_recall else None,
        "extra": {"mcp": {"enabled": not args.no_mcp, "allow_erase": args.mcp_allow_erase}},
    }
    return Settings(**{k: v for k, v in given.items() if v is not None})


def start_line(settings: Any, host: str, port: int, workers: int) -> str:
    """What ``convomem serve`` says as it starts: where, over what, and the pages to open."""
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    if not settings.use_recall:
        recall = "recall off"
    elif settings.recall is not None:
        recall = f"recall {redact_url(settings.recall)} (embedder {settings.embedder})"
    elif parse_store_url(settings.store).scheme in ("sqlite", "postgresql", "postgres"):
        recall = f"recall in the store (embedder {settings.embedder})"
    else:
        recall = "recall off (the store has no search: --recall URL)"
    processes = f"{workers} worker{'s' if workers != 1 else ''}"
    return (
        f"convomem serve: {base} ({processes}), store {redact_url(settings.store)}, {recall}; "
        f"inspector {base}/inspect, API docs {base}/docs"
    )


def build_app(settings: Any) -> Any:
    """The service's app, with MCP at ``/mcp`` when ``settings.extra["mcp"]`` asks and the
    extra is installed (a note on stderr when it is not)."""
    from ..server import create_app

    app = create_app(settings)
    part = settings.extra.get("mcp")
    if isinstance(part, dict) and part.get("enabled"):
        from ..mcp import mount

        try:
            mount(app, allow_erase=bool(part.get("allow_erase")))
        except MissingDependency as exc:
            sys.stderr.write(f"convomem serve: /mcp is off: {exc}\n")
    return app


def app_from_env() -> Any:
    """The app of one uvicorn worker process (``--workers N``): settings from the env."""
    from ..server.settings import Settings

    data = json.loads(os.environ[ENV_SETTINGS])
    return build_app(Settings(**data))


def cmd_serve(args: argparse.Namespace, out: Any) -> int:
    try:
        import uvicorn
    except ImportError:
        raise MissingDependency("convomem serve", "server", "uvicorn") from None
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: must be 1-65535")
    if args.workers < 1:
        raise ConfigError(f"--workers {args.workers}: must be at least 1")
    settings = settings_of(args)
    app = build_app(settings)  # checks the extra and the settings before binding
    if args.log_level not in ("error", "critical"):
        sys.stderr.write(start_line(settings, args.host, args.port, args.workers) + "\n")
        sys.stderr.flush()
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
