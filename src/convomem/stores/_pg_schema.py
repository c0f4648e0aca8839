"""The PostgreSQL schema: named, append-only migrations, guarded by an advisory lock.

A plain schema anyone can query with ``psql``, the same shape as SQLite's
(``convomem.stores.sqlite_schema``), in the schema the URL names (``?schema=``, default
``public``):

- ``convomem_sessions``: one row per session, named by ``(tenant, session_id)``
  (``tenant`` is ``''`` for none); owner, times (epoch seconds), metadata (JSON text),
  ``next_seq``, ``last_seq``, ``message_count``, the derived ``state`` (JSON text) and
  its ``state_version``.
- ``convomem_messages``: one row per message, ``PRIMARY KEY (session_pk, seq)`` and
  ``UNIQUE (session_pk, message_id)``; ``data`` is ``Message.to_dict()`` as JSON text
  (text, not ``jsonb``: it keeps the exact bytes written and a ``\\u0000`` that
  ``jsonb`` refuses; ``data::jsonb`` queries it); deleting a session deletes its messages.
- ``convomem_append(...)``: the common append (every message new, the expectations met)
  as one statement, so an append costs one round trip; anything else returns -1 and the
  client takes the careful path in a transaction. ``convomem_append_one``: the same for
  one message, given as scalars.
- ``convomem_migrations``: the name and time of every migration applied.

Migrations run in one transaction holding ``pg_advisory_xact_lock`` keyed by the schema,
so two processes opening an empty database at once both succeed: the second waits, then
finds everything applied. Add a migration by appending to ``MIGRATIONS``; never edit one
that shipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigError, StoreError
from ._pg_ops import Q

__all__ = ["MIGRATIONS", "Migration", "migrate", "quote_schema"]


def quote_schema(name: object) -> str:
    """``name`` as a quoted SQL identifier; ``ConfigError`` for a name PostgreSQL would
    not keep as given."""
    if not isinstance(name, str) or not name or len(name.encode()) > 63 or "\x00" in name:
        raise ConfigError(f"schema={name!r}: must be a name of 1 to 63 bytes")
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: a unique name and its statements for a (quoted) schema."""

    name: str
    statements: Callable[[str], list[str]]


def _m0001_sessions_and_messages(s: str) -> list[str]:
    return [
        f"""CREATE TABLE {s}.convomem_sessions (
            pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant text NOT NULL,
            session_id text NOT NULL,
            user_id text,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            expires_at double precision,
            metadata text NOT NULL DEFAULT '{{}}',
            next_seq bigint NOT NULL DEFAULT 1,
            last_seq bigint NOT NULL DEFAULT 0,
            message_count bigint NOT NULL DEFAULT 0,
            state text,
            state_version bigint NOT NULL DEFAULT 0,
            UNIQUE (tenant, session_id)
        )""",
        f"CREATE INDEX convomem_sessions_by_tenant ON {s}.convomem_sessions (tenant, pk)",
        f"CREATE INDEX convomem_sessions_by_user ON {s}.convomem_sessions (tenant, user_id, pk)",
        f"CREATE INDEX convomem_sessions_by_expiry ON {s}.convomem_sessions (expires_at) "
        "WHERE expires_at IS NOT NULL",
        f"""CREATE TABLE {s}.convomem_messages (
            session_pk bigint NOT NULL
                REFERENCES {s}.convomem_sessions (pk) ON DELETE CASCADE,
            seq bigint NOT NULL,
            message_id text NOT NULL,
            data text NOT NULL,
            counts text,
            PRIMARY KEY (session_pk, seq),
            UNIQUE (session_pk, message_id)
        )""",
    ]


_APPEND: Final = """CREATE FUNCTION {s}.{name}(
    p_tenant text, p_session text, p_user text, p_now double precision,
    p_expires double precision, p_refresh boolean, p_lock_timeout text,
    p_ids text{arr}, p_data text{arr}, p_counts text{arr},
    p_expected_seq bigint, p_has_state boolean, p_state text, p_expected_version bigint
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    r record;
    n bigint := {n};
BEGIN
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    UPDATE {s}.convomem_sessions SET
        next_seq = next_seq + n,
        last_seq = next_seq + n - 1,
        message_count = message_count + n,
        updated_at = p_now,
        expires_at = CASE WHEN p_refresh THEN p_expires ELSE expires_at END,
        state = CASE WHEN p_has_state THEN p_state ELSE state END,
        state_version = state_version + CASE WHEN p_has_state THEN 1 ELSE 0 END
     WHERE tenant = p_tenant AND session_id = p_session
       AND (expires_at IS NULL OR expires_at > p_now)
       AND (p_user IS NULL OR user_id = p_user)
       AND (p_expected_seq IS NULL OR last_seq = p_expected_seq)
       AND (p_expected_version IS NULL OR state_version = p_expected_version)
    RETURNING pk, next_seq - n AS start INTO r;
    IF NOT FOUND THEN
        -- A new session, or one this call must not write (expired, another owner, a
        -- missed expectation): the latter conflicts below and the client decides.
        IF coalesce(p_expected_seq, 0) <> 0 OR coalesce(p_expected_version, 0) <> 0
        THEN RETURN -1; END IF;
        INSERT INTO {s}.convomem_sessions (tenant, session_id, user_id, created_at,
               updated_at, expires_at, next_seq, last_seq, message_count, state,
               state_version)
        VALUES (p_tenant, p_session, p_user, p_now, p_now, p_expires, 1 + n, n, n,
               CASE WHEN p_has_state THEN p_state END,
               CASE WHEN p_has_state THEN 1 ELSE 0 END)
        ON CONFLICT (tenant, session_id) DO NOTHING
        RETURNING pk, 1::bigint AS start INTO r;
        IF NOT FOUND THEN RETURN -1; END IF;
    END IF;
    {insert};
    RETURN r.start + n - 1;
END
$fn$"""


def _m0002_append_function(s: str) -> list[str]:
    # The UPDATE of the session's row decides (the expectations in its WHERE, which READ
    # COMMITTED re-checks on the newest row version) and locks it: every writer locks
    # that row first, so no other one inserts into this session meanwhile. A re-sent id
    # makes the INSERT fail on UNIQUE (session_pk, message_id): the whole statement rolls
    # back and the client takes the careful path (cheaper than probing every id first).
    # The one-message twin takes scalars: psycopg adapts a Python list in Python, which
    # would cost as much as the server's work.
    insert = f"INSERT INTO {s}.convomem_messages (session_pk, seq, message_id, data, counts) "
    return [
        _APPEND.format(
            s=s,
            name="convomem_append",
            arr="[]",
            n="cardinality(p_ids)",
            insert=insert + "SELECT r.pk, r.start + b.o - 1, b.i, b.d, b.c "
            "FROM unnest(p_ids, p_data, p_counts) WITH ORDINALITY AS b (i, d, c, o)",
        ),
        _APPEND.format(
            s=s,
            name="convomem_append_one",
            arr="",
            n="1",
            insert=insert + "VALUES (r.pk, r.start, p_ids, p_data, p_counts)",
        ),
    ]


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration("0001_sessions_and_messages", _m0001_sessions_and_messages),
    Migration("0002_append_function", _m0002_append_function),
)


def _check_known(applied: list[str]) -> None:
    known = {m.name for m in MIGRATIONS}
    unknown = [n for n in applied if n not in known]
    if unknown:
        raise StoreError(
            f"the database has migrations this version of convomem does not know "
            f"({', '.join(unknown)}): it was written by a newer version; upgrade convomem"
        )


def migrate(schema: str, name: str) -> Generator[Q, Any, list[str]]:
    """Apply the missing migrations to the quoted ``schema`` (plain ``name``), in order,
    in one transaction; return their names. Reads first: when everything is applied
    (every open but the first) no lock is taken."""
    table = f"{schema}.convomem_migrations"
    exists = yield Q.one("SELECT to_regclass(%s) IS NOT NULL", (table,))
    if exists[0]:
        applied = [r[0] for r in (yield Q.all(f"SELECT name FROM {table}"))]
        _check_known(applied)
        if len(applied) == len(MIGRATIONS):
            return []
    yield Q.run("BEGIN")
    yield Q.run("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"convomem:{name}",))
    yield Q.run(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    yield Q.run(
        f"CREATE TABLE IF NOT EXISTS {table} "
        "(name text PRIMARY KEY, applied_at double precision NOT NULL)"
    )
    done = [r[0] for r in (yield Q.all(f"SELECT name FROM {table}"))]
    _check_known(done)
    ran: list[str] = []
    for m in MIGRATIONS:
        if m.name not in done:
            for statement in m.statements(schema):
                yield Q.run(statement)
            yield Q.run(
                f"INSERT INTO {table} (name, applied_at) VALUES (%s, %s)", (m.name, time.time())
            )
            ran.append(m.name)
    yield Q.run("COMMIT")
    return ran
