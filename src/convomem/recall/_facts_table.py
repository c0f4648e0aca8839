"""The long-term facts of each user, kept in the recall index's database.

One row per ``(tenant, user_id)`` in ``convomem_user_facts``: the user's ``FactHistory``
as JSON (every version of every key, and the ids of the messages already extracted, so
no session re-reads a message another one read), and a ``version`` for compare-and-set
saves: two sessions of one user that save at once never overwrite each other's facts
silently (the loser gets ``ConcurrentUpdate``, re-reads, merges and saves again).

Erasure: ``RecallIndex.erase_user`` deletes the row; the store's ``erase_user`` (and any
deletion that removes a user's *last* session: ``delete_session``, a TTL sweep) deletes
it too, by a trigger on the sessions table, in the same transaction.

The operations are generators of ``Q`` statements, run by the store database
(``run_statements``) like the recall backends'.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Generator
from typing import Any, Final

from ..errors import ConcurrentUpdate, StoreError
from ..stores.statements import Q
from ..summaries.keyed import KeyedFact
from ..summaries.supersession import FactHistory
from ._backend import Scope

Op = Generator[Q, Any, Any]

TABLE: Final = "convomem_user_facts"


class UserFacts(FactHistory):
    """A user's ``FactHistory`` as read from the index (``RecallIndex.facts``):
    ``version`` is the stored version to pass back as ``save_facts(expected_version=)``
    (0: nothing stored yet)."""

    version: int = 0
    user_id: str = ""
    tenant: str | None = None


class FactsTable:
    """The SQL of the facts table in one dialect (``"sqlite"`` or ``"postgresql"``)."""

    def __init__(self, dialect: str, schema: str | None = None) -> None:
        self.dialect = dialect
        self.pg = dialect == "postgresql"
        self.table = f"{schema}.{TABLE}" if self.pg and schema else TABLE
        self.schema = schema
        self.p = "%s" if self.pg else "?"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.p)

    def migrate(self) -> Op:
        """Create the table and the erasure trigger (idempotent)."""
        t = self.table
        yield Q.run(
            f"""CREATE TABLE IF NOT EXISTS {t} (
                tenant TEXT NOT NULL,
                user_id TEXT NOT NULL,
                version BIGINT NOT NULL,
                state TEXT NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (tenant, user_id)
            )"""
        )
        if not self.pg:
            yield Q.run(
                f"""CREATE TRIGGER IF NOT EXISTS convomem_user_facts_gone
                AFTER DELETE ON convomem_sessions
                WHEN NOT EXISTS (SELECT 1 FROM convomem_sessions
                                 WHERE tenant = old.tenant AND user_id = old.user_id)
                BEGIN
                    DELETE FROM {t} WHERE tenant = old.tenant AND user_id = old.user_id;
                END"""
            )
            return
        s = self.schema
        yield Q.run("SELECT pg_advisory_xact_lock(hashtext('convomem_user_facts_migrate'))")
        yield Q.run(
            f"""CREATE OR REPLACE FUNCTION {s}.convomem_user_facts_gone() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                IF OLD.user_id IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM {s}.convomem_sessions
                    WHERE tenant = OLD.tenant AND user_id = OLD.user_id) THEN
                    DELETE FROM {t} WHERE tenant = OLD.tenant AND user_id = OLD.user_id;
                END IF;
                RETURN NULL;
            END $$"""
        )
        yield Q.run(
            "CREATE OR REPLACE TRIGGER convomem_user_facts_gone AFTER DELETE ON "
            f"{s}.convomem_sessions FOR EACH ROW EXECUTE FUNCTION {s}.convomem_user_facts_gone()"
        )

    def load(self, scope: Scope) -> Op:
        """``(version, state)`` of the user (``(0, None)``: nothing stored)."""
        row = yield Q.one(
            self._sql(f"SELECT version, state FROM {self.table} WHERE tenant = ? AND user_id = ?"),
            (scope.tenant, scope.user_id),
        )
        if row is None:
            return 0, None
        try:
            return int(row[0]), json.loads(row[1])
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"{self.table} row of user {scope.user_id!r}: the facts are not JSON ({exc})"
            ) from None

    def version(self, scope: Scope) -> Op:
        """The user's stored version (0: nothing stored), without the state."""
        row = yield Q.one(
            self._sql(f"SELECT version FROM {self.table} WHERE tenant = ? AND user_id = ?"),
            (scope.tenant, scope.user_id),
        )
        return 0 if row is None else int(row[0])

    def save(self, scope: Scope, state: str, expected: int | None, now: float) -> Op:
        """Store ``state``; the new version. With ``expected``, only over that version
        (0: only when nothing is stored), else ``ConcurrentUpdate``."""
        key = (scope.tenant, scope.user_id)
        if expected is None:
            row = yield Q.one(
                self._sql(
                    f"INSERT INTO {self.table} (tenant, user_id, version, state, updated_at) "
                    "VALUES (?, ?, 1, ?, ?) ON CONFLICT (tenant, user_id) DO UPDATE SET "
                    f"version = {self.table}.version + 1, state = excluded.state, "
                    "updated_at = excluded.updated_at RETURNING version"
                ),
                (*key, state, now),
            )
            return int(row[0])
        if expected == 0:
            n = yield Q.run(
                self._sql(
                    f"INSERT INTO {self.table} (tenant, user_id, version, state, updated_at) "
                    "VALUES (?, ?, 1, ?, ?) ON CONFLICT (tenant, user_id) DO NOTHING"
                ),
                (*key, state, now),
            )
        else:
            n = yield Q.run(
                self._sql(
                    f"UPDATE {self.table} SET version = version + 1, state = ?, updated_at = ? "
                    "WHERE tenant = ? AND user_id = ? AND version = ?"
                ),
                (state, now, *key, expected),
            )
        if n != 1:
            row = yield Q.one(
                self._sql(f"SELECT version FROM {self.table} WHERE tenant = ? AND user_id = ?"),
                key,
            )
            actual = 0 if row is None else int(row[0])
            raise ConcurrentUpdate(
                f"facts of user {scope.user_id}", "facts_version", expected, actual
            )
        return expected + 1

    def delete(self, scope: Scope) -> Op:
        """Delete the user's facts; how many rows (0 or 1)."""
        n = yield Q.run(
            self._sql(f"DELETE FROM {self.table} WHERE tenant = ? AND user_id = ?"),
            (scope.tenant, scope.user_id),
        )
        return int(n)


def history_of(
    loaded: tuple[int, Any],
    scope: Scope,
    tenant: str | None,
    hidden: Collection[str] = (),
    **options: Any,
) -> UserFacts:
    """The ``UserFacts`` of a loaded row (an empty history when nothing is stored),
    without the facts said in the sessions ``hidden`` (expired ones: ``without``)."""
    version, state = loaded
    if state is not None and hidden:
        state = without(state, hidden)
    h = UserFacts(**options) if state is None else UserFacts.from_state(state, **options)
    assert isinstance(h, UserFacts)
    h.version, h.user_id, h.tenant = version, scope.user_id, tenant
    return h


def without(state: Any, sessions: Collection[str]) -> Any:
    """A ``FactHistory`` state without the facts said in ``sessions``: the others are
    filed again in their order, so a value only those sessions had superseded is
    current again (what the user said there is as if never said)."""
    rows = state.get("facts") if isinstance(state, dict) and "version" in state else None
    if not isinstance(rows, list):
        return state  # a state of an earlier format: its facts name no session
    facts = [KeyedFact.from_dict(r, f"state['facts'][{i}]") for i, r in enumerate(rows)]
    if not any(f.session_id in sessions for f in facts):
        return state
    kept = sorted((f for f in facts if f.session_id not in sessions), key=lambda f: f.seq or 0)
    refiled = FactHistory()
    refiled.add(kept)  # numbers its input 1, 2, ... in order: the i-th is kept[i - 1]
    fresh = refiled.state()
    rows = []
    for row in fresh["facts"]:  # each version keeps its seq, so its fact_id stays
        rows.append({**row, "seq": kept[int(row["seq"]) - 1].seq})
    return {**state, "facts": rows, "confirmed": fresh["confirmed"]}


def dump(history: FactHistory) -> str:
    """The JSON text stored for ``history``."""
    return json.dumps(history.state(), separators=(",", ":"), allow_nan=False)
