"""``convomem sessions list|show|export|import|delete --store URL``: durable sessions from
the command line.

Every command works on any URL ``open_store`` accepts (``sqlite:///chat.db``, and the
other backends as they are built), through the ``StoreDatabase`` and ``SessionStore``
protocols only. ``--store`` defaults to ``$CONVOMEM_STORE``. ``--tenant`` names the
scope (default: none); a listing or an export covers one tenant. A URL is never shown
with its password. Commands that read refuse a SQLite file that does not exist rather
than create an empty one. The export format is ``convomem.sessions/1``
(``convomem.cli.transfer``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from typing import IO, Any, TextIO
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError, ConvomemError, InputError, StoreError
from ..stores.database import SessionInfo, StoreDatabase
from ..stores.url import parse_store_url, redact_url
from . import importing, transfer
from .render import SafeText, dump_json, preview, table

Out = TextIO | SafeText
ENV_STORE = "CONVOMEM_STORE"


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
        p.add_argument(
            "--store",
            metavar="URL",
            default=None,
            help=f"store URL, e.g. sqlite:///sessions.db (default: ${ENV_STORE})",
        )
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
        default="native",
        help="message format of --json (default: native, convomem's own lossless form)",
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
    return top


def paging(p: argparse.ArgumentParser, positive: Callable[[str], int], what: str) -> None:
    p.add_argument("--limit", type=positive, default=50, metavar="N", help=f"{what} per page")
    p.add_argument("--cursor", default=None, help="where the previous page ended")


# -- opening the store ------------------------------------------------------------------


@contextlib.contextmanager
def opened(args: argparse.Namespace, *, create: bool = False) -> Iterator[StoreDatabase]:
    """The database ``--store`` names, closed afterwards. An error that repeats the
    URL's password (a driver's message may) has it hidden."""
    from ..stores import open_store

    url: str | None = args.store or os.environ.get(ENV_STORE) or None
    if url is None:
        raise ConfigError(
            f"--store: required (a store URL such as sqlite:///sessions.db), or set ${ENV_STORE}"
        )
    try:
        parsed = parse_store_url(url)
        path = parsed.path if parsed.scheme == "sqlite" else None
        if not create and path is not None and not os.path.exists(path):
            raise ConfigError(
                f"--store {redact_url(url)!r}: no such database file ({os.path.abspath(path)!r})"
            )
        db = open_store(url)
        try:
            yield db
        finally:
            db.close()
    except ConvomemError as exc:
        secrets = _secrets(url)
        text = str(exc)
        if any(s in text for s in secrets):
            for s in secrets:
                text = text.replace(s, "***")
            raise StoreError(text) from None
        raise


def _secrets(url: str) -> list[str]:
    """The password of ``url`` as written and decoded (none: empty)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    if not password:
        return []
    return sorted({password, unquote(password)}, key=len, reverse=True)


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
    with opened(args) as db:
        cursor = args.cursor
        while True:
            page, cursor = db.sessions(
                user_id=args.user, tenant=args.tenant, cursor=cursor, limit=args.limit
            )
            found += page
            if not args.all or cursor is None:
                break
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
    out.write(f"{len(found)} sessions{scope}")
    out.write(f"; more: --cursor {cursor}\n" if cursor else "\n")
    return 0


def cmd_show(args: argparse.Namespace, out: Out) -> int:
    """The session's record, then its messages: a page from ``--cursor``, or the tail."""
    if args.tail is not None and args.cursor is not None:
        raise ConfigError("--tail and --cursor: give one of them")
    with opened(args) as db:
        store = db.session(args.session, user_id=args.user, tenant=args.tenant)
        info = store.info()
        if info is None:
            raise StoreError(f"session {args.session!r} (tenant {args.tenant!r}): not found")
        state, version = store.load_state()
        if args.tail is not None:
            entries, _ = store.entries(None, max(args.tail, 1), newest_first=True)
            entries = entries[: args.tail][::-1]
            cursor = None
        else:
            entries, cursor = store.entries(args.cursor, args.limit)
    if args.json:
        messages = [e.message for e in entries]
        payload: dict[str, Any] = {"session": _info_dict(info)}
        if args.format == "native":
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


def _targets(db: StoreDatabase, args: argparse.Namespace) -> list[str]:
    """The session ids to export: given, or every one of the user or tenant, oldest
    first (so an import creates them in the same order)."""
    chosen = sum([bool(args.session), args.user is not None, args.all])
    if chosen != 1:
        raise ConfigError("export: give session ids, or --user USER, or --all (one of them)")
    if args.session:
        for sid in args.session:  # before anything is written
            if db.session(sid, user_id=args.user, tenant=args.tenant).info() is None:
                raise StoreError(f"session {sid!r} (tenant {args.tenant!r}): not found")
        return list(args.session)
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = db.sessions(user_id=args.user, tenant=args.tenant, cursor=cursor, limit=500)
        ids += [s.session_id for s in page]
        if cursor is None:
            return ids[::-1]


def _ascii_if_needed(line: str, encoding: str) -> str:
    """``line``, or the same JSON with ASCII escapes when the output cannot encode it
    (a backslash replacement would not be JSON)."""
    try:
        line.encode(encoding)
        return line
    except (UnicodeEncodeError, LookupError):
        return json.dumps(json.loads(line), ensure_ascii=True, separators=(",", ":"))


def cmd_export(args: argparse.Namespace, out: Out) -> int:
    """JSONL on stdout or in ``--output``: written whole or not at all (a temporary file
    renamed at the end), with mode 0600 since it holds conversations."""
    with opened(args) as db:
        ids = _targets(db, args)
        handle: str | None = args.user
        if args.output:
            return _export_to_file(db, ids, handle, args)
        encoding = getattr(out, "encoding", None) or "utf-8"
        n = m = 0
        for sid in ids:
            store = db.session(sid, user_id=handle, tenant=args.tenant)
            for line in transfer.export_lines(store):
                m += line.startswith('{"type":"message"')
                out.write(_ascii_if_needed(line, encoding) + "\n")
            n += 1
    SafeText(sys.stderr).write(f"exported {n} sessions, {m} messages\n")
    return 0


def _export_to_file(
    db: StoreDatabase, ids: list[str], user: str | None, args: argparse.Namespace
) -> int:
    path: str = args.output
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".convomem-export-", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"--output {path!r}: cannot write there: {exc.strerror}") from None
    n = m = 0
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for sid in ids:
                store = db.session(sid, user_id=user, tenant=args.tenant)
                for line in transfer.export_lines(store):
                    m += line.startswith('{"type":"message"')
                    f.write(line + "\n")
                n += 1
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ConfigError(f"--output {path!r}: cannot write: {exc.strerror}") from None
        raise
    SafeText(sys.stderr).write(f"exported {n} sessions, {m} messages to {path}\n")
    return 0


@contextlib.contextmanager
def _lines(path: str) -> Iterator[IO[str]]:
    """The file (or stdin, spooled so it can be read twice) as UTF-8 text."""
    try:
        if path == "-":
            with tempfile.TemporaryFile("w+b") as spool:
                source = getattr(sys.stdin, "buffer", None)
                if source is not None:
                    spool.write(source.read())
                else:
                    spool.write(sys.stdin.read().encode("utf-8", "surrogatepass"))
                spool.seek(0)
                with open(spool.fileno(), encoding="utf-8-sig", closefd=False) as f:
                    yield f
        else:
            with open(path, encoding="utf-8-sig") as f:
                yield f
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _check_file(f: IO[str], label: str) -> int:
    """Read the whole file once; how many sessions it holds (nothing is written)."""
    try:
        return sum(1 for _ in transfer.read_records(f, label))
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte {exc.start})") from None


def cmd_import(args: argparse.Namespace, out: Out) -> int:
    """Check the whole file, then write it session by session."""
    label = "<stdin>" if args.file == "-" else args.file
    tally = dict.fromkeys(("created", "extended", "updated", "unchanged"), 0)
    written = 0
    err = SafeText(sys.stderr)
    with _lines(args.file) as f, opened(args, create=True) as db:
        _check_file(f, label)
        f.seek(0)
        for rec in transfer.read_records(f, label):
            if args.tenant is not None:
                rec = replace(rec, tenant=args.tenant)
            if args.renumber and not rec.gapless():
                rec = importing.renumbered(rec)
                err.write(
                    f"note: session {rec.session_id!r}: seqs renumbered 1..n; its derived "
                    "state was left out (it named the old seqs)\n"
                )
            try:
                outcome, n = importing.import_session(db, rec)
            except ConvomemError as exc:
                done = sum(tally.values())
                if not done:
                    raise
                raise InputError(
                    f"{exc} ({done} sessions before it were imported; a re-run skips them)"
                ) from None
            tally[outcome] += 1
            written += n
    parts = ", ".join(f"{v} {k}" for k, v in tally.items())
    out.write(f"imported {sum(tally.values())} sessions ({parts}), {written} messages written\n")
    return 0


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
            out.write(f"erased user {args.user!r}: {n} sessions deleted\n")
            return 0
        if not db.delete_session(args.session, tenant=args.tenant):
            raise StoreError(f"session {args.session!r} (tenant {args.tenant!r}): not found")
    out.write(f"deleted session {args.session!r}\n")
    return 0
