"""What is PostgreSQL's own in the PostgreSQL store (the shared semantics are held by
``test_conformance.py``): URLs and options, the schema and its migrations (two processes
migrating one empty database at once), one round trip per common call, no server-side
prepared statements (PgBouncer in transaction mode), dropped connections retried, and
the password never shown."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _servers_postgres import PostgresServer
from convomem.errors import ConfigError, StoreError, TransientError
from convomem.model import Message
from convomem.retry import RetryPolicy, stop_after_attempt, wait_none
from convomem.stores import aopen_store, open_store
from convomem.stores._pg_schema import MIGRATIONS
from convomem.stores.postgres import PostgresDatabase

SRC = str(Path(__file__).resolve().parents[2] / "src")


def msg(i: int | str) -> Message:
    return Message(f"m{i}", "user", content=f"text {i}")


def raw(server: PostgresServer) -> psycopg.Connection[Any]:
    return psycopg.connect(server.url(), autocommit=True)


def test_urls_and_options(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url() + "&lock_timeout=2&pool_size=3&application_name=chat"
    schema = url.split("schema=")[1].split("&")[0]
    with open_store(url.replace("postgresql://", "postgres://")) as db:
        assert isinstance(db, PostgresDatabase)
        assert db._settings.lock_ms == 2000 and db._settings.pool_size == 3
        db.session("s").append([msg(0)])
    with raw(postgres_server) as conn:
        names = conn.execute(
            f'SELECT name FROM "{schema}".convomem_migrations ORDER BY name'
        ).fetchall()
    assert [n for (n,) in names] == [m.name for m in MIGRATIONS]
    for bad, where in [
        ("&bogus=1", "unknown option 'bogus'"),
        ("&lock_timeout=0", "lock_timeout=0"),
        ("&pool_size=0", "pool_size=0"),
        ("&ttl=soon", "ttl='soon'"),
    ]:
        with pytest.raises(ConfigError, match=where):
            open_store(postgres_server.fresh_url() + bad)
    with pytest.raises(ConfigError, match="not an option of the postgresql backend"):
        open_store(postgres_server.fresh_url(), busy_timeout=1)
    with pytest.raises(ConfigError, match="not an option of the sqlite backend"):
        open_store("sqlite://", lock_timeout=1)
    with pytest.raises(ConfigError, match="schema=''"):
        open_store(postgres_server.url(schema=""))
    with pytest.raises(ConfigError, match="not a port"):
        open_store("postgresql://u@h:99999/db")
    with pytest.raises(ConfigError, match="the same as pool_size"):
        asyncio.run(aopen_store(postgres_server.fresh_url(), workers=2, pool_size=3))


@pytest.mark.parametrize(
    "url, parts",
    [
        ("postgresql://u:p%40ss@db.example:6432/app", ("db.example", 6432, "u", "p@ss", "app")),
        ("postgres://me@[::1]:5/d%20b", ("::1", 5, "me", None, "d b")),
        ("postgresql:///app?host=/run/postgresql", (None, None, None, None, "app")),
        ("postgresql://h", ("h", None, None, None, None)),
    ],
)
def test_postgres_urls_are_parsed(url: str, parts: tuple[Any, ...]) -> None:
    from convomem.stores.url import parse_store_url

    parsed = parse_store_url(url)
    assert (parsed.host, parsed.port, parsed.user, parsed.password, parsed.database) == parts
    assert "p@ss" not in repr(parsed) and "p%40ss" not in str(parsed)


def test_the_password_is_never_shown(postgres_server: PostgresServer) -> None:
    secret = "hunter2-s3cret"
    url = f"postgresql://postgres:{secret}@127.0.0.1:{postgres_server.port}/postgres?schema=pw"
    with open_store(url) as db:  # trust authentication: the password is not checked
        assert secret not in db.url and secret not in repr(db)
        assert secret not in repr(db.session("s"))
    nowhere = f"postgresql://me:{secret}@127.0.0.1:1/db?connect_timeout=1"
    policy = RetryPolicy(stop=stop_after_attempt(2), wait=wait_none())
    with pytest.raises(TransientError) as err:
        open_store(nowhere, retry=policy)
    assert secret not in str(err.value) and "127.0.0.1" in str(err.value)
    with pytest.raises(ConfigError) as bad:
        open_store(f"postgresql://me:{secret}@h/db?oops=1")
    assert secret not in str(bad.value)


def test_a_missing_database_is_a_store_error(postgres_server: PostgresServer) -> None:
    with pytest.raises(StoreError, match="nosuchdb") as err:
        open_store(postgres_server.url("nosuchdb"))
    assert not isinstance(err.value, TransientError)


def test_one_round_trip_per_common_call(postgres_server: PostgresServer) -> None:
    with open_store(postgres_server.fresh_url()) as db:
        s = db.session("s", user_id="u")
        s.append([msg(0)])
        for call in (
            lambda: s.append([msg(1)]),
            lambda: s.append([msg(i) for i in range(2, 102)]),
            lambda: s.get_items(10),
            lambda: s.page(None, 10, newest_first=True),
            lambda: s.last_seq(),
            lambda: s.load_state(),
        ):
            before = db.stats()
            call()
            after = db.stats()
            assert after.statements - before.statements == 1
        assert s.get_items() == [msg(i) for i in range(102)]
        before = db.stats()
        s.append([msg(5)])  # a replay: the careful path, in a transaction
        after = db.stats()
        assert after.transactions == before.transactions + 1
        assert after.statements - before.statements <= 5


def test_no_statement_is_prepared_on_the_server(postgres_server: PostgresServer) -> None:
    """PgBouncer in transaction mode hands each transaction to any server connection:
    a named prepared statement would be missing there."""
    with open_store(postgres_server.fresh_url(), pool_size=1) as db:
        s = db.session("s")
        for i in range(20):
            s.append([msg(i)])
            s.get_items(5)
        s.append([msg(3)])
        s.save_state({"x": 1}, expected_version=0)
        with db._connection() as conn:  # the connection that served every call
            assert conn.prepare_threshold is None
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert prepared == (0,)


def test_a_dropped_connection_is_retried(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url() + "&application_name=convomem-drop"
    with open_store(url, retry=RetryPolicy(wait=wait_none()), pool_size=1) as db:
        s = db.session("s")
        s.append([msg(0)])
        with raw(postgres_server) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'convomem-drop'"
            ).fetchone()
        assert killed == (1,)
        assert s.append([msg(1)]) == 2  # the pool's dead connection failed, the retry worked
        assert s.get_items() == [msg(0), msg(1)]


def test_a_newer_schema_is_refused(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    open_store(url).close()
    schema = url.split("schema=")[1]
    with raw(postgres_server) as conn:
        conn.execute(f'INSERT INTO "{schema}".convomem_migrations VALUES (%s, 0)', ("9999_future",))
    with pytest.raises(StoreError, match=r"9999_future.*newer version"):
        open_store(url)


_OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from convomem.model import Message
    from convomem.stores import open_store
    url, go, k = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    while not go.exists():
        time.sleep(0.005)
    with open_store(url) as db:
        db.session("s" + k).append([Message("m" + k, "user", content="hi")])
    print("ok")
    """
)


def test_processes_migrating_an_empty_database_at_once_all_succeed(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.fresh_url()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, url, str(go), str(k)],
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(3)
    ]
    go.touch()  # all start migrating together
    outcomes = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, out.strip()) for p, (out, _) in zip(procs, outcomes, strict=True)] == [
        (0, "ok")
    ] * 3, [err for _, err in outcomes]
    schema = url.split("schema=")[1]
    with raw(postgres_server) as conn:
        names = conn.execute(f'SELECT name FROM "{schema}".convomem_migrations').fetchall()
    assert sorted(n for (n,) in names) == [m.name for m in MIGRATIONS]  # each applied once
    with open_store(url) as db:
        assert sorted(i.session_id for i in db.sessions()[0]) == ["s0", "s1", "s2"]


def test_ids_holding_nul_round_trip(postgres_server: PostgresServer) -> None:
    """A text column cannot hold U+0000, which a message id may: such ids (and ids with
    the escape character U+FFFE) read back exactly, and match on replay and counts."""
    odd = ["a\x00b", "\ufffe0", "\ufffe\x00\ufffe\ufffe", "\x00", "plain"]
    with open_store(postgres_server.fresh_url()) as db:
        s = db.session("s")
        batch = [Message(i, "user", content=f"#{k}") for k, i in enumerate(odd)]
        assert s.append(batch[:1]) == 1 and s.append(batch[1:]) == 5
        assert s.append(batch) == 5  # a replay: every id found again
        s.set_counts({i: {"approx": k} for k, i in enumerate(odd)})
        assert s.get_counts([odd[1], odd[3]]) == {odd[1]: {"approx": 1}, odd[3]: {"approx": 3}}
        assert s.get_items() == batch and [e.counts["approx"] for e in s.entries()[0]] == [
            0,
            1,
            2,
            3,
            4,
        ]
        assert s.pop_item() == batch[-1]


def test_a_forked_child_gets_its_own_connections(postgres_server: PostgresServer) -> None:
    import os

    with open_store(postgres_server.fresh_url()) as db:
        s = db.session("s")
        s.append([msg(0)])
        pid = os.fork()
        if pid == 0:  # the child: its own pool; the parent's connections untouched
            code = 1
            try:
                s.append([msg(1)])
                code = 0 if s.get_items() == [msg(0), msg(1)] else 2
                db.close()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert s.append([msg(2)]) == 3  # the parent's pool still works
        assert s.get_items() == [msg(0), msg(1), msg(2)]


def test_through_pgbouncer_in_transaction_mode(pgbouncer: Any) -> None:
    """Every call works with its transactions spread over PgBouncer's 2 server
    connections: migrations, both append paths, state, reads, from threads, and async."""
    import threading

    url = pgbouncer.fresh_url()
    with open_store(url, pool_size=4) as db:
        s = db.session("shared", user_id="u")

        def writer(k: int) -> None:
            for i in range(15):
                s.append([msg(f"{k}-{i}")])
                if i % 5 == 0:
                    s.append([msg(f"{k}-{i}")])  # a replay: the careful path
                s.get_items(3)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        entries, _ = s.entries(None, 100)
        assert [e.seq for e in entries] == list(range(1, 61))
        for k in range(4):
            own = [e.message.id for e in entries if e.message.id.startswith(f"m{k}-")]
            assert own == [f"m{k}-{i}" for i in range(15)]
        assert s.save_state({"x": 1}, expected_version=0) == 1
        assert db.erase_user("u") == 1

    async def run() -> list[Message]:
        async with await aopen_store(url, workers=3) as adb:
            a = adb.session("async")
            await asyncio.gather(*(a.append([msg(f"a{k}")]) for k in range(6)))
            return await a.get_items()

    assert sorted(m.id for m in asyncio.run(run())) == [f"ma{k}" for k in range(6)]
