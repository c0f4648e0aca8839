"""What a caller's own operation yields to a store database: the statement vocabulary.

A store database runs its sessions' operations through its own driver. What else lives
in the same database (the recall index's tables, the service's API keys and idempotency
records) runs through the same driver with ``db.run_statements(op, write=...)`` (a
method of the ``StoreDatabase`` / ``AsyncStoreDatabase`` protocols, awaited on the
async one): the database's retry policy, its mapping of driver errors to
``TransientError`` / ``StoreError``, and its work counts (``db.stats()``) come with it.

``op`` is a function that makes a generator: it yields what the backend executes and
receives each answer, and its return value is the call's. A retried call makes a fresh
generator, so an operation must not keep state across attempts. What it yields is
backend-specific; ``db.kind`` says which:

- ``"sqlite"`` and ``"postgresql"``: ``Q`` statements (SQLite's placeholders are ``?``,
  PostgreSQL's ``%s``). A PostgreSQL table is named in the database's schema,
  ``f"{db.schema}.name"``. With ``write=True`` the statements run in one transaction
  (``BEGIN IMMEDIATE`` / ``BEGIN; SET LOCAL lock_timeout``), rolled back when the
  generator raises; else each runs on its own.
- ``"redis"``: ``Command``, ``Pipeline`` and ``Eval`` (a Lua ``Script`` made by
  ``script``), with keys under the database's prefix, ``f"{db.prefix}:name"``. Each
  command and script is atomic on its own; ``write`` changes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeAlias

__all__ = ["Command", "Eval", "Fetch", "Pipeline", "Q", "Request", "Script", "script"]

Fetch: TypeAlias = Literal["run", "one", "all", "many", "one_or_conflict", "committed"]


class Q(NamedTuple):
    """One SQL statement and what its answer is: ``run`` the row count, ``one`` a row
    or None, ``all`` the rows, ``many`` runs it once per row of ``params`` (the row
    count); PostgreSQL only: ``one_or_conflict`` and ``committed`` (see their
    constructors)."""

    sql: str
    params: Any
    """The statement's parameters (a sequence; for ``many``, an iterable of them)."""
    fetch: Fetch

    @classmethod
    def run(cls, sql: str, params: Sequence[Any] = ()) -> Q:
        return cls(sql, params, "run")

    @classmethod
    def one(cls, sql: str, params: Sequence[Any] = ()) -> Q:
        return cls(sql, params, "one")

    @classmethod
    def all(cls, sql: str, params: Sequence[Any] = ()) -> Q:
        return cls(sql, params, "all")

    @classmethod
    def many(cls, sql: str, rows: Iterable[Sequence[Any]]) -> Q:
        return cls(sql, rows, "many")

    @classmethod
    def one_or_conflict(cls, sql: str, params: Sequence[Any] = ()) -> Q:
        """``one``, or None when the statement broke a unique constraint (and so, in
        autocommit, changed nothing)."""
        return cls(sql, params, "one_or_conflict")

    @classmethod
    def committed(cls) -> Q:
        """No statement: tells the driver a write committed on its own (autocommit)."""
        return cls("", (), "committed")


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script's name, source and SHA-1 (sent as ``EVALSHA``, then ``EVAL`` when
    the server does not know it yet); ``writes``: whether it writes."""

    name: str
    source: str
    sha: str
    writes: bool


def script(name: str, source: str, *, writes: bool) -> Script:
    """A ``Script`` of ``source`` (its SHA-1 computed once, here)."""
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest(), writes)


@dataclass(frozen=True, slots=True)
class Eval:
    """Run ``script`` with ``keys`` and ``args``; the answer is the script's reply."""

    script: Script
    keys: tuple[str, ...]
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Command:
    """One Redis command (``("HGET", key, field)``); the answer is its reply."""

    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Several commands sent at once (not a transaction); the answer is their replies."""

    commands: tuple[tuple[Any, ...], ...]


Request: TypeAlias = Eval | Command | Pipeline
"""What a Redis operation yields."""
