"""The backends every store test runs on, as fixtures (imported by ``tests/conftest.py``).

Adding a backend is one fixture returning a ``Backend`` (a fresh-database URL factory and
two fault hooks: ``corrupt`` writes raw bytes as a message's stored data, ``hold_lock``
makes writes fail transiently until released) and its name in ``BACKENDS``: the
conformance suite, the resume tests and the process tests then run on it. A backend
whose server cannot start fails its fixture; it never skips.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from _servers_redis import redis_cluster_nodes, redis_server  # noqa: F401 (re-exported fixtures)
from convomem.stores._sqlite_driver import SQLiteDriver
from convomem.stores.sqlite import SQLiteDatabase


@dataclass
class Backend:
    """What the suite needs of a backend beyond its public API."""

    fresh_url: Callable[[], str]
    """A URL of a fresh, empty database, each call."""
    corrupt: Callable[[Any, str | None, str, int, bytes], None]
    """``(db, tenant, session_id, seq, raw)``: store ``raw`` as that message's data."""
    hold_lock: Callable[[Any], contextlib.AbstractContextManager[Callable[[], None]]]
    """Make ``db``'s writes fail transiently until the ``release()`` it yields is called."""
    fast_fail: dict[str, Any] = field(default_factory=dict)
    """Options under which a held lock surfaces as a failure quickly."""


def _sqlite_driver(db: Any) -> SQLiteDriver:
    return (db if isinstance(db, SQLiteDatabase) else db.inner)._driver


def _sqlite_raw(db: Any) -> sqlite3.Connection:
    conns = _sqlite_driver(db).conns
    return sqlite3.connect(conns.target, uri=conns.memory, isolation_level=None, timeout=5)


def _sqlite_corrupt(db: Any, tenant: str | None, session_id: str, seq: int, raw: bytes) -> None:
    with contextlib.closing(_sqlite_raw(db)) as conn:
        done = conn.execute(
            "UPDATE convomem_messages SET data = CAST(? AS TEXT) WHERE seq = ? AND session_pk = "
            "(SELECT pk FROM convomem_sessions WHERE tenant = ? AND session_id = ?)",
            (raw, seq, tenant or "", session_id),
        ).rowcount
    assert done == 1


@contextlib.contextmanager
def _sqlite_hold_lock(db: Any) -> Iterator[Callable[[], None]]:
    raw = _sqlite_raw(db)
    raw.execute("BEGIN IMMEDIATE")

    def release() -> None:
        if raw.in_transaction:
            raw.execute("ROLLBACK")

    try:
        yield release
    finally:
        release()
        raw.close()


def _sqlite(fresh_url: Callable[[], str]) -> Backend:
    return Backend(fresh_url, _sqlite_corrupt, _sqlite_hold_lock, {"busy_timeout": 0.01})


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Backend]:
    # The suite opens hundreds of fresh files: on tmpfs when there is one, since making a
    # new file WAL costs an fsync on a disk. test_sqlite.py covers files on a disk.
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    n = itertools.count()
    yield _sqlite(lambda: f"sqlite:///{base}/db{next(n)}.sqlite")
    if base != tmp_path:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def sqlite_memory() -> Backend:
    return _sqlite(lambda: "sqlite://")


def _redis_raw(db: Any) -> Any:
    """A sync RedisDatabase on the same server and prefix as ``db`` (sync or async)."""
    from convomem.stores.redis_store import RedisDatabase

    inner = getattr(db, "inner", db)
    return RedisDatabase(inner.url, prefix=inner.prefix)


def _redis_corrupt(db: Any, tenant: str | None, session_id: str, seq: int, raw: bytes) -> None:
    from convomem.stores._redis_ops import session_keys

    with _redis_raw(db) as direct:
        _, log, data, _, _ = session_keys(direct.prefix, tenant or "", session_id)
        (message_id,) = direct._client.zrangebyscore(log, seq, seq)
        direct._client.hset(data, message_id, raw)


@contextlib.contextmanager
def _redis_hold_lock(db: Any) -> Iterator[Callable[[], None]]:
    """Hold the write lock of every session the test uses (``s``, no tenant)."""
    from convomem.stores._redis_ops import session_keys

    direct = _redis_raw(db)
    lock = session_keys(direct.prefix, "", "s")[4]
    direct._client.set(lock, "held by the test", px=60_000)

    def release() -> None:
        direct._client.delete(lock)

    try:
        yield release
    finally:
        release()
        direct.close()


def _pg_settings(db: Any) -> Any:
    inner = getattr(db, "inner", db)  # the async twin under the suite's SyncOverAsync
    return inner._settings


def _pg_connect(db: Any) -> Any:
    import psycopg

    return psycopg.connect(_pg_settings(db).conninfo, autocommit=True)


def _pg_corrupt(db: Any, tenant: str | None, session_id: str, seq: int, raw: bytes) -> None:
    # A text column holds only valid UTF-8: bytes that are not are written with their
    # bad bytes as \xNN escapes, which no JSON reader accepts either.
    schema = _pg_settings(db).schema
    with _pg_connect(db) as conn:
        done = conn.execute(
            f"UPDATE {schema}.convomem_messages SET data = %s WHERE seq = %s AND session_pk = "
            f"(SELECT pk FROM {schema}.convomem_sessions WHERE tenant = %s AND session_id = %s)",
            (raw.decode("utf-8", "backslashreplace"), seq, tenant or "", session_id),
        ).rowcount
    assert done == 1


@contextlib.contextmanager
def _pg_hold_lock(db: Any) -> Iterator[Callable[[], None]]:
    """Every writer locks its session's row first: a table lock that conflicts with
    row locks (not with plain reads) makes every write wait, then time out."""
    conn = _pg_connect(db)
    conn.execute("BEGIN")
    conn.execute(f"LOCK TABLE {_pg_settings(db).schema}.convomem_sessions IN EXCLUSIVE MODE")
    held = [True]

    def release() -> None:
        if held[0]:
            held[0] = False
            conn.execute("ROLLBACK")

    try:
        yield release
    finally:
        release()
        conn.close()


@pytest.fixture
def postgresql(postgres_server: Any) -> Backend:
    return Backend(postgres_server.fresh_url, _pg_corrupt, _pg_hold_lock, {"lock_timeout": 0.05})


@pytest.fixture
def redis(request: pytest.FixtureRequest) -> Backend:
    server = request.getfixturevalue("redis_server")
    n = itertools.count()
    run = uuid.uuid4().hex[:8]
    url = f"redis://127.0.0.1:{server.port}/0?prefix=t{run}-"
    return Backend(lambda: f"{url}{next(n)}", _redis_corrupt, _redis_hold_lock)


@pytest.fixture
def redis_cluster(request: pytest.FixtureRequest) -> Backend:
    nodes = request.getfixturevalue("redis_cluster_nodes")
    n = itertools.count()
    run = uuid.uuid4().hex[:8]
    url = f"redis+cluster://127.0.0.1:{nodes.port}?prefix=c{run}-"
    return Backend(lambda: f"{url}{next(n)}", _redis_corrupt, _redis_hold_lock)


BACKENDS = ["sqlite_file", "sqlite_memory", "redis", "redis_cluster", "postgresql"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.getfixturevalue(request.param)
    return b
