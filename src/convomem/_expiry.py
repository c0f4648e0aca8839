"""The expiry rule of a session, as SQL and as the metadata key it reads: a room below
``stores`` and ``recall``, which both apply it inside the database (``stores.expiry`` is
the rule as a whole; this module is only what a query needs)."""

from __future__ import annotations

from typing import Final

TTL_KEY: Final = "convomem:ttl_seconds"
"""The metadata key holding a session's own TTL (keys starting ``convomem:`` are the
service's: refused in requests, left out of responses)."""


def expired_sessions_sql(dialect: str, sessions: str = "convomem_sessions") -> str:
    """A query of the ids of one user's expired sessions: parameters tenant, user id,
    now, now (``?`` for SQLite, ``%s`` for PostgreSQL); ``sessions`` is the table
    (schema-qualified for PostgreSQL)."""
    if dialect == "sqlite":
        path = f"'$.\"{TTL_KEY}\"'"
        own = (
            f"updated_at + CASE WHEN json_type(metadata, {path}) IN ('integer', 'real') "
            f"THEN json_extract(metadata, {path}) END <= ?"
        )
        mark = "?"
    else:
        own = (  # (CASE: the cast only of a number)
            f"updated_at + CASE WHEN jsonb_typeof(metadata::jsonb -> '{TTL_KEY}') = 'number' "
            f"THEN (metadata::jsonb ->> '{TTL_KEY}')::float8 END <= %s"
        )
        mark = "%s"
    return (
        f"SELECT session_id FROM {sessions} WHERE tenant = {mark} AND user_id = {mark} "
        f"AND ((expires_at IS NOT NULL AND expires_at <= {mark}) OR {own})"
    )
