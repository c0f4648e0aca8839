"""The SQLite schema: connection settings and named, append-only migrations.

A plain schema anyone can query (``sqlite3 file.db``):

- ``convomem_sessions``: one row per session, named by ``(tenant, session_id)``
  (``tenant`` is ``''`` for none); owner, times, metadata (JSON), ``next_seq`` (the next
  seq to give), ``last_seq`` (the newest live seq), ``message_count`` and the version of
  the derived state, ``state_version`` (its column ``state`` is unused since 0002).
- ``convomem_states``: the derived state (JSON) of each session that has one, by
  ``session_pk`` (apart, so appends do not rewrite it; deleted with its session).
- ``convomem_messages``: one row per message: ``session_pk``, ``seq``, ``message_id``,
  ``data`` (``Message.to_dict()`` JSON) and ``counts`` (``{tokenizer: n}`` JSON), with
  ``UNIQUE (session_pk, seq)`` and ``UNIQUE (session_pk, message_id)``; deleting a
  session deletes its messages (``ON DELETE CASCADE``).
- ``convomem_migrations``: the name and time of every migration applied.

Migrations are a list of named functions, run in order, each once, inside one
``BEGIN IMMEDIATE`` transaction, so two processes opening an empty file at once both
succeed: the second waits, then finds everything applied. A database with a migration
this version does not know was written by a newer convomem: opening it is an error
rather than a guess. Add a migration by appending to ``MIGRATIONS``; never edit one that
shipped.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..errors import StoreError

__all__ = ["MIGRATIONS", "Migration", "configure", "migrate"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: a unique name and the statements that make it."""

    name: str
    apply: Callable[[sqlite3.Connection], None]


def _m0001_sessions_and_messages(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE convomem_sessions (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL,
            session_id TEXT NOT NULL,
            user_id TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL,
            metadata TEXT NOT NULL DEFAULT '{}',
            next_seq INTEGER NOT NULL DEFAULT 1,
            last_seq INTEGER NOT NULL DEFAULT 0,
            message_count INTEGER NOT NULL DEFAULT 0,
            state TEXT,
            state_version INTEGER NOT NULL DEFAULT 0,
            UNIQUE (tenant, session_id)
        )"""
    )
    conn.execute("CREATE INDEX convomem_sessions_by_tenant ON convomem_sessions (tenant, pk)")
    conn.execute(
        "CREATE INDEX convomem_sessions_by_user ON convomem_sessions (tenant, user_id, pk)"
    )
    conn.execute(
        "CREATE INDEX convomem_sessions_by_expiry ON convomem_sessions (expires_at) "
        "WHERE expires_at IS NOT NULL"
    )
    conn.execute(
        """CREATE TABLE convomem_messages (
            row INTEGER PRIMARY KEY,
            session_pk INTEGER NOT NULL
                REFERENCES convomem_sessions (pk) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            data TEXT NOT NULL,
            counts TEXT,
            UNIQUE (session_pk, seq),
            UNIQUE (session_pk, message_id)
        )"""
    )


def _m0002_states_apart(conn: sqlite3.Connection) -> None:
    # The derived state gets a table of its own: every append rewrites its session's
    # row, and a state of many kilobytes there was rewritten (to the WAL) with it.
    # ``convomem_sessions.state`` stays, always NULL (dropping a column needs SQLite
    # 3.35 and rewrites the table).
    conn.execute(
        """CREATE TABLE convomem_states (
            session_pk INTEGER PRIMARY KEY
                REFERENCES convomem_sessions (pk) ON DELETE CASCADE,
            state TEXT NOT NULL
        )"""
    )
    conn.execute(
        "INSERT INTO convomem_states (session_pk, state) "
        "SELECT pk, state FROM convomem_sessions WHERE state IS NOT NULL"
    )
    conn.execute("UPDATE convomem_sessions SET state = NULL WHERE state IS NOT NULL")


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration("0001_sessions_and_messages", _m0001_sessions_and_messages),
    Migration("0002_states_apart", _m0002_states_apart),
)

_SYNCHRONOUS: Final = {"normal": "NORMAL", "full": "FULL"}


def configure(
    conn: sqlite3.Connection, *, busy_timeout: float, synchronous: str, wal: bool
) -> None:
    """The settings every connection gets (the per-connection pragmas; WAL is a
    property of the file, set once and kept)."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    if wal:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            got = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(got).lower() != "wal":
                raise StoreError(f"SQLite refused WAL mode for this file (journal_mode={got!r})")
    conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[synchronous]}")
    conn.execute("PRAGMA foreign_keys = ON")
    # Deleted content is overwritten, so erase_user leaves no readable trace in the file.
    conn.execute("PRAGMA secure_delete = ON")


def _applied(conn: sqlite3.Connection) -> list[str] | None:
    """Names of the migrations applied, or None when the table does not exist yet."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'convomem_migrations'"
    ).fetchone()
    if exists is None:
        return None
    return [r[0] for r in conn.execute("SELECT name FROM convomem_migrations ORDER BY name")]


def _check_known(applied: list[str]) -> None:
    known = {m.name for m in MIGRATIONS}
    unknown = [n for n in applied if n not in known]
    if unknown:
        raise StoreError(
            f"the database has migrations this version of convomem does not know "
            f"({', '.join(unknown)}): it was written by a newer version; upgrade convomem"
        )


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the missing migrations, in order, in one transaction; return their names.

    A read first: when everything is applied (every open but the first) no write lock
    is taken. ``conn`` is in autocommit mode (``isolation_level=None``).
    """
    applied = _applied(conn)
    if applied is not None:
        _check_known(applied)
        if len(applied) == len(MIGRATIONS):
            return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS convomem_migrations "
            "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        done = set(_applied(conn) or ())
        _check_known(sorted(done))
        ran: list[str] = []
        for m in MIGRATIONS:
            if m.name not in done:
                m.apply(conn)
                conn.execute(
                    "INSERT INTO convomem_migrations (name, applied_at) VALUES (?, ?)",
                    (m.name, time.time()),
                )
                ran.append(m.name)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return ran
