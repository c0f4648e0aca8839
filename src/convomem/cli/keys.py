"""``convomem keys create|list|revoke --store URL``: the service's API keys.

``create --tenant T`` prints the new key once, alone on its last line (only its hash is
stored); ``list`` shows key ids, tenants and states, never a secret; ``revoke KEY_ID``
stops a key at once on every replica.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import ConfigError
from .store_option import add_store_option, store_url

__all__ = ["add_parser"]

T = TypeVar("T")


def add_parser(sub: Any) -> None:
    help = "create, list and revoke API keys of the memory service (--store URL)"
    top: argparse.ArgumentParser = sub.add_parser("keys", help=help, description=help)
    cmds = top.add_subparsers(dest="keys_command", required=True, parser_class=type(top))

    def command(name: str, help: str, func: Callable[..., int]) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = cmds.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        add_store_option(p)
        return p

    p = command("create", "make a key of a tenant; prints it once, on the last line", cmd_create)
    p.add_argument("--tenant", required=True, help="the tenant the key acts for")
    p.add_argument("--name", default=None, help="a label for people")
    p = command("list", "key ids, tenants, creation and revocation times", cmd_list)
    p.add_argument("--tenant", default=None, help="only this tenant's keys")
    p = command("revoke", "revoke a key by its id (it stops working at once)", cmd_revoke)
    p.add_argument("key_id", help="the key id (the 12 hex digits after cm_)")


def _with_keys(args: argparse.Namespace, work: Callable[[Any], Awaitable[T]]) -> T:
    from ..server.keys import KeyStore
    from ..stores import aopen_store

    url = store_url(args)

    async def run() -> T:
        db = await aopen_store(url)
        try:
            return await work(KeyStore(db))
        finally:
            await db.aclose()

    return asyncio.run(run())


def cmd_create(args: argparse.Namespace, out: Any) -> int:
    new = _with_keys(args, lambda ks: ks.create(args.tenant, name=args.name))
    out.write(
        f"key {new.record.key_id} of tenant {new.record.tenant!r} (shown once; store it now):\n"
    )
    out.write(new.key + "\n")
    return 0


def cmd_list(args: argparse.Namespace, out: Any) -> int:
    import time

    records = _with_keys(args, lambda ks: ks.list(args.tenant))
    if not records:
        out.write("no keys\n")
        return 0
    out.write(f"{'key_id':<14}{'tenant':<24}{'created':<22}{'state':<10}name\n")
    for r in records:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.created_at))
        state = "live" if r.revoked_at is None else "revoked"
        out.write(f"{r.key_id:<14}{r.tenant:<24}{created:<22}{state:<10}{r.name or ''}\n")
    return 0


def cmd_revoke(args: argparse.Namespace, out: Any) -> int:
    if not _with_keys(args, lambda ks: ks.revoke(args.key_id)):
        raise ConfigError(f"key_id={args.key_id!r}: no such live key")
    out.write(f"revoked {args.key_id}\n")
    return 0
