"""``convomem sessions list|show|export|import|delete|sweep --store URL``: durable
sessions from the command line.

Every command works on any URL ``open_store`` accepts (``sqlite:///chat.db``, and the
other backends as they are built), through the ``StoreDatabase`` and ``SessionStore``
protocols only. ``--store`` defaults as for every command (``store_option``). ``--tenant`` names the
scope (default: none); a listing or an export covers one tenant, and a listing that finds
nothing says how many sessions other tenants hold, by name. A URL is never shown
with its password. Commands that read refuse a SQLite file that does not exist rather
than create an empty one. The export format is ``convomem.sessions/1``
(``convomem.cli.transfer``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TextIO

from ..errors import ConfigError, StoreError
from ..stores.database import SessionInfo
from ..stores.expiry import expired
from .importing import cmd_import
from .render import SafeText, dump_json, plural, preview, table
from .store_option import add_store_option, opened
from .transfer import cmd_export

Out = TextIO | SafeText


# -- the parser -------------------------------------------------------------------------


def add_parser(
    sub: Any, count: Callable[[str], int], positive: Callable[[str], int]
) -> argparse.ArgumentParser:
    """Register ``sessions`` and its subcommands on the top-level subparsers ``sub``."""
    help = "list, show, export, import and delete stored sessions (--store URL)"
    top: argparse.ArgumentParser = sub.add_parser("sessions", help=help, description=help)
    cmds = top.add_subparsers(dest="sessions_command", required=True, parser_class=type(top))

    def command(
        name: str, help: str, func: Callable[..., int], tenant: str = "the tenant (default: none)"
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = cmds.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        add_store_option(p)
        p.add_argument("--tenant", default=None, help=tenant)
        return p

    p = command("list", "sessions, newest first, a page at a time", cmd_list)
    p.add_argument("--user", default=None, help="only this user's sessions")
    paging(p, positive, "sessions")
    p.add_argument("--all", action="store_true", help="every page")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")

    p = command("show", "a session's record and its messages, a page at a time", cmd_show)
    p.add_argument("session", help="session id")
    p.add_argument("--user", default=None, help="act for this user (the owner)")
    paging(p, positive, "messages")
    p.add_argument("--tail", type=count, metavar="N", help="the newest N messages")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.add_argument(
        "--format",
        choices=("native", "openai", "anthropic"),
        default=None,
        help="JSON with the messages in this format (implies --json; default: native, "
        "convomem's own lossless form)",
    )

    p = command("export", "sessions to JSONL (format convomem.sessions/1)", cmd_export)
    p.add_argument("session", nargs="*", help="session ids (or --user, or --all)")
    p.add_argument("--user", default=None, help="every session of this user")
    p.add_argument("--all", action="store_true", help="every session of the tenant")
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write FILE, whole or not at all, readable by you only (default: stdout)",
    )

    p = command(
        "import",
        "sessions from an export, exactly; idempotent",
        cmd_import,
        tenant="put every session in this tenant (default: the file's)",
    )
    p.add_argument("file", help="a convomem.sessions/1 JSONL file; - for stdin")
    p.add_argument("--renumber", action="store_true", help="store seqs with gaps at 1..n")

    p = command("delete", "delete a session, or erase every session of a user", cmd_delete)
    p.add_argument("session", nargs="?", help="session id (or --user)")
    p.add_argument("--user", default=None, help="erase every session of this user")
    p.add_argument("--yes", action="store_true", help="required: this cannot be undone")

    help = "delete the expired sessions (of every tenant), e.g. from cron"
    p = cmds.add_parser("sweep", help=help, description=help)
    p.set_defaults(func=cmd_sweep)
    add_store_option(p)
    return top


def paging(p: argparse.ArgumentParser, positive: Callable[[str], int], what: str) -> None:
    p.add_argument("--limit", type=positive, default=50, metavar="N", help=f"{what} per page")
    p.add_argument("--cursor", default=None, help="where the previous page ended")


def _when(t: float | None, never: str = "never") -> str:
    if t is None:
        return never
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))


def _info_dict(info: SessionInfo) -> dict[str, Any]:
    return asdict(info)


# -- list and show ----------------------------------------------------------------------


def cmd_list(args: argparse.Namespace, out: Out) -> int:
    """A table (or JSON) of sessions, newest first; the next page's cursor at the end."""
    found: list[SessionInfo] = []
    elsewhere: dict[str | None, int] = {}
    with opened(args) as db:
        cursor = args.cursor
        while True:
            page, cursor = db.sessions(
                user_id=args.user, tenant=args.tenant, cursor=cursor, limit=args.limit
            )
            found += [s for s in page if not expired(s)]  # past their own TTL: gone
            if not args.all or cursor is None:
                break
        if not found and args.cursor is None and not args.json:
            counts = db.tenant_counts(user_id=args.user)
            elsewhere = {t: n for t, n in counts.items() if t != args.tenant}
    if args.json:
        dump_json({"sessions": [_info_dict(s) for s in found], "next_cursor": cursor}, out)
        return 0
    rows = [
        (
            s.session_id,
            s.user_id or "-",
            s.message_count,
            s.last_seq,
            _when(s.created_at),
            _when(s.updated_at),
            _when(s.expires_at),
        )
        for s in found
    ]
    header = ("session", "user", "messages", "last seq", "created", "updated", "expires")
    table(rows, header, out)
    scope = "" if args.tenant is None else f" of tenant {args.tenant!r}"
    out.write(f"{plural(len(found), 'session')}{scope}{_elsewhere(elsewhere)}")
    out.write(f"; more: --cursor {cursor}\n" if cursor else "\n")
    return 0


def _elsewhere(counts: dict[str | None, int], shown: int = 10) -> str:
    """What an empty listing adds: how many sessions other tenants hold, by tenant name
    (names and counts only; ``--store`` reaches the whole database anyway)."""
    if not counts:
        return ""
    order = sorted(counts.items(), key=lambda kv: (kv[0] is not None, kv[0] or ""))
    names = [f"{'no tenant' if t is None else repr(t)} ({n})" for t, n in order[:shown]]
    if len(order) > shown:
        names.append(f"{len(order) - shown} more")
    total = plural(sum(counts.values()), "session")
    how = "drop --tenant to list them" if list(counts) == [None] else "--tenant NAME lists them"
    return f"; {total} under other tenants: {', '.join(names)} ({how})"


def cmd_show(args: argparse.Namespace, out: Out) -> int:
    """The session's record, then its messages: a page from ``--cursor``, or the tail."""
    if args.tail is not None and args.cursor is not None:
        raise ConfigError("--tail and --cursor: give one of them")
    with opened(args) as db:
        store = db.session(args.session, user_id=args.user, tenant=args.tenant)
        info = store.info()
        if info is None or expired(info):
            raise StoreError(f"session {args.session!r} (tenant {args.tenant!r}): not found")
        state, version = store.load_state()
        if args.tail is not None:
            entries, _ = store.entries(None, max(args.tail, 1), newest_first=True)
            entries = entries[: args.tail][::-1]
            cursor = None
        else:
            entries, cursor = store.entries(args.cursor, args.limit)
    if args.json or args.format is not None:
        messages = [e.message for e in entries]
        payload: dict[str, Any] = {"session": _info_dict(info)}
        if args.format in (None, "native"):
            payload["state"] = state
            payload["messages"] = [
                {"seq": e.seq, "message": e.message.to_dict(), "counts": e.counts} for e in entries
            ]
        elif args.format == "openai":
            from ..formats import to_openai

            payload["messages"] = to_openai(messages)
        else:
            from ..formats import to_anthropic

            system, turns = to_anthropic(messages)
            payload["system"], payload["messages"] = system, turns
        payload["next_cursor"] = cursor
        dump_json(payload, out)
        return 0
    seqs = f"{info.message_count} (last seq {info.last_seq})"
    size = len(json.dumps(state, ensure_ascii=False).encode()) if state is not None else 0
    fields = [
        ("session", info.session_id),
        ("user", info.user_id or "-"),
        ("tenant", info.tenant or "-"),
        ("messages", seqs),
        ("created", _when(info.created_at)),
        ("updated", _when(info.updated_at)),
        ("expires", _when(info.expires_at)),
        ("state", f"version {version}, {size:,} bytes" if state is not None else "none"),
        ("metadata", json.dumps(info.metadata, ensure_ascii=False, sort_keys=True)),
    ]
    for name, value in fields:
        out.write(f"{name:<9} {value}\n")
    out.write("\n")
    rows = [
        (
            e.seq,
            e.message.id,
            e.message.role,
            ", ".join(f"{k}={v}" for k, v in sorted(e.counts.items())) or "-",
            preview(e.message),
        )
        for e in entries
    ]
    table(rows, ("seq", "id", "role", "tokens", "preview"), out)
    if cursor:
        out.write(f"more: --cursor {cursor}\n")
    return 0


# -- export and import ------------------------------------------------------------------


# -- delete -----------------------------------------------------------------------------


def cmd_delete(args: argparse.Namespace, out: Out) -> int:
    """Delete one session, or erase a user (``--user``); ``--yes`` is required."""
    if (args.session is None) == (args.user is None):
        raise ConfigError("delete: give a session id or --user USER (one of them)")
    if not args.yes:
        raise ConfigError("--yes: required to delete (this cannot be undone)")
    with opened(args) as db:
        if args.user is not None:
            n = db.erase_user(args.user, tenant=args.tenant)
            out.write(f"erased user {args.user!r}: {plural(n, 'session')} deleted\n")
            return 0
        if not db.delete_session(args.session, tenant=args.tenant):
            raise StoreError(f"session {args.session!r} (tenant {args.tenant!r}): not found")
    out.write(f"deleted session {args.session!r}\n")
    return 0


def cmd_sweep(args: argparse.Namespace, out: Out) -> int:
    """``db.sweep()``: delete the sessions whose TTL ran out."""
    with opened(args) as db:
        n = db.sweep()
    out.write(f"swept {plural(n, 'expired session')}\n")
    return 0
