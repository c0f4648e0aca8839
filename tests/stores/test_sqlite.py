"""What is SQLite's own (the shared semantics are in test_conformance.py): URLs, the file's
settings, migrations, in-memory sharing, real processes (8 writers, two openers racing on
an empty file, a writer killed with SIGKILL in the middle of a batch), erasure that leaves
no bytes behind, and the cost of reads on a 100,000-message session.

Every file here is on a disk (tmp_path), as in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from convomem.errors import ConfigError, StoreError
from convomem.model import Message
from convomem.stores import aopen_store, open_store
from convomem.stores.sqlite import SQLiteDatabase
from convomem.stores.sqlite_schema import MIGRATIONS
from convomem.stores.url import parse_store_url, redact_url

# Fresh interpreters for the writers, never forks of this process (which holds SQLite
# connections): by default forked from a clean forkserver with convomem preloaded (8
# spawned interpreters importing convomem take ~7 s on 2 busy cores, forks of the server
# under 1 s); CONVOMEM_STORE_MP_START=spawn spawns each.
START = os.environ.get("CONVOMEM_STORE_MP_START", "forkserver")
CTX = multiprocessing.get_context(START)
if START == "forkserver":
    CTX.set_forkserver_preload(["convomem.stores"])


def msg(i: int | str) -> Message:
    return Message(f"m{i}", "user", content=f"text {i}")


def raw_conn(db: SQLiteDatabase) -> sqlite3.Connection:
    """This thread's connection of ``db`` (to look at its settings)."""
    return db._driver.conns.get().raw


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "chat.db")


# -- URLs and options -------------------------------------------------------------------


def test_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_store_url("sqlite://").path is None
    assert parse_store_url("sqlite:///:memory:").path is None
    assert parse_store_url("sqlite:////abs/a%20b.db").path == "/abs/a b.db"
    assert parse_store_url("SQLite:///rel.db?ttl=5").options == {"ttl": "5"}
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///relative.db") as db:
        db.session("s").append([msg(0)])
    assert (tmp_path / "relative.db").exists()
    with open_store(f"sqlite:///{tmp_path}/abs.db?ttl=60&busy_timeout=0.5") as db:
        assert (
            db.ttl.seconds == 60
            and db.url == f"sqlite:///{tmp_path}/abs.db?ttl=60&busy_timeout=0.5"
        )
        assert raw_conn(db).execute("PRAGMA busy_timeout").fetchone()[0] == 500


@pytest.mark.parametrize(
    "url, where",
    [
        ("mysql://x", "unknown scheme 'mysql'"),
        ("chat.db", "not a store URL"),
        ("sqlite://host/chat.db", "has no host"),
        ("sqlite://u:hunter2@host/chat.db", "has no host"),
        ("sqlite:///a.db#frag", "no #fragment"),
        ("sqlite:///a.db?ttl=5&ttl=6", "given twice"),
        ("sqlite:///a.db?bogus=1", "unknown option 'bogus'"),
        ("sqlite:///a.db?ttl=soon", "ttl='soon' is not valid"),
        ("sqlite:///a.db?synchronous=off", "synchronous='off'"),
    ],
)
def test_bad_urls_are_named(url: str, where: str) -> None:
    with pytest.raises(ConfigError, match=where) as err:
        open_store(url)
    assert "hunter2" not in str(err.value) and "pw@" not in str(err.value)
    if "not built" in where or "unknown scheme" in where:
        assert "supported schemes: sqlite" in str(err.value)


def test_paths_and_conflicting_options(path: str) -> None:
    with pytest.raises(ConfigError, match="a path"):
        open_store(Path(path))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="also given in url"):
        open_store(f"sqlite:///{path}?ttl=5", ttl=6)
    with pytest.raises(StoreError, match="does its directory exist"):
        open_store(f"sqlite:///{path}/missing/dir.db")
    assert redact_url("postgresql://me:secret@h/db") == "postgresql://me:***@h/db"
    with pytest.raises(ConfigError, match="workers=0"):
        asyncio.run(aopen_store(f"sqlite:///{path}", workers=0))
    db = asyncio.run(aopen_store(f"sqlite:///{path}", workers=1))
    db.close()  # the blocking close, from synchronous code
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(db.session("s").get_items())


def test_the_file_settings(path: str) -> None:
    with open_store(f"sqlite:///{path}", busy_timeout=2.5, synchronous="full") as db:
        c = raw_conn(db)
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert c.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert c.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert c.execute("PRAGMA secure_delete").fetchone()[0] == 1
    with open_store(f"sqlite:///{path}") as db:
        assert raw_conn(db).execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_not_a_database(path: str) -> None:
    Path(path).write_bytes(b"this is not a database, just some bytes" * 100)
    with pytest.raises(StoreError, match="not a database"):
        open_store(f"sqlite:///{path}")


# -- connections and memory -------------------------------------------------------------


def test_one_connection_per_thread_sharing_one_memory_database() -> None:
    db = open_store("sqlite://")
    assert isinstance(db, SQLiteDatabase)
    db.session("s").append([msg(0)])
    seen: list[Any] = []

    def reader() -> None:
        seen.append((db.session("s").get_items(), id(db._driver.conns.get())))
        db.session("s").append([msg(1)])

    t = threading.Thread(target=reader)
    t.start()
    t.join()
    assert seen[0][0] == [msg(0)] and seen[0][1] != id(db._driver.conns.get())
    assert db.session("s").get_items() == [msg(0), msg(1)]
    with open_store("sqlite:///:memory:") as other:
        assert other.session("s").get_items() == []  # private to its database object
    db.close()
    with pytest.raises(StoreError, match="closed"):
        db.session("s").get_items()
    with open_store("sqlite://") as fresh:
        assert fresh.session("s").get_items() == []  # gone with its database


def test_data_survives_reopening(path: str) -> None:
    url = f"sqlite:///{path}"
    with open_store(url) as db:
        s = db.session("s", user_id="u", tenant="t")
        s.append(
            [msg(0), msg(1)], counts={"m0": {"approx": 4}}, state={"k": [1]}, expected_version=0
        )
        s.pop_item()
        s.set_metadata({"title": "x"})
    with open_store(url) as db:
        s = db.session("s", user_id="u", tenant="t")
        assert s.get_items() == [msg(0)] and s.get_counts() == {"m0": {"approx": 4}}
        assert s.load_state() == ({"k": [1]}, 1)
        assert s.append([msg(2)]) == 3  # seq 2 was given once: never again
        info = s.info()
        assert info is not None and info.metadata == {"title": "x"}


# -- migrations -------------------------------------------------------------------------


def test_migrations_are_named_tracked_and_run_once(path: str) -> None:
    with open_store(f"sqlite:///{path}"):
        pass
    with contextlib.closing(sqlite3.connect(path)) as c:
        rows = c.execute("SELECT name FROM convomem_migrations").fetchall()
    assert [r[0] for r in rows] == [m.name for m in MIGRATIONS]
    with open_store(f"sqlite:///{path}") as db:
        assert db.stats().transactions == 0  # nothing to migrate: not even a write lock
    with contextlib.closing(sqlite3.connect(path)) as c:
        assert c.execute("SELECT count(*) FROM convomem_migrations").fetchone()[0] == len(
            MIGRATIONS
        )
        c.execute("INSERT INTO convomem_migrations VALUES ('9999_from_the_future', 0)")
        c.commit()
    with pytest.raises(StoreError, match=r"9999_from_the_future.*newer version"):
        open_store(f"sqlite:///{path}")


# -- real processes ---------------------------------------------------------------------

WORKER = """
import os, time
from convomem.model import Message
from convomem.stores import aopen_store, open_store


def appender(url, k, n, barrier, results):
    barrier.wait()  # all open the (empty) file at once: each must succeed
    db = open_store(url, busy_timeout=30)
    shared, own = db.session("shared"), db.session(f"own-{k}")
    start = time.perf_counter()
    for i in range(n):
        m = Message(f"p{k}-{i}", "user", content=f"{k}:{i}")
        shared.append([m])
        own.append([m])
    results.put(time.perf_counter() - start)
    db.close()


def killed_mid_batch(url, inside):
    db = open_store(url)
    s = db.session("victim")
    s.append([Message("before", "user", content="committed")])
    rows = 0

    def trace(statement):
        nonlocal rows
        if statement.startswith("INSERT INTO convomem_messages"):
            rows += 1
            if rows == 1500:  # well inside the batch, pages already spilled to the WAL
                inside.set()
                time.sleep(60)

    db._driver.conns.get().raw.set_trace_callback(trace)
    s.append([Message(f"b{i}", "user", content="x" * 2000) for i in range(3000)])
"""


def start(call: str, **names: Any) -> Any:
    """A process running ``WORKER`` then ``call`` with ``names`` as its globals (no module
    of the tests to import in the child)."""
    p = CTX.Process(target=exec, args=(f"{WORKER}\n{call}\n", names), daemon=True)
    p.start()
    return p


def run_all(processes: list[Any]) -> None:
    for p in processes:
        p.join(120)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_eight_processes_on_an_empty_file_lose_and_duplicate_nothing(path: str) -> None:
    """8 processes open an empty file at the same moment (all must migrate it or find it
    migrated), then each appends 200 messages one at a time to a shared session and to
    its own: none lost, none duplicated, seqs gapless, each process's messages in order."""
    k, n = 8, 200
    url = f"sqlite:///{path}"
    barrier, results = CTX.Barrier(k), CTX.Queue()
    call = "appender(url, k, n, barrier, results)"
    run_all([start(call, url=url, k=j, n=n, barrier=barrier, results=results) for j in range(k)])
    assert len([results.get(timeout=10) for _ in range(k)]) == k
    with open_store(url) as db:
        entries, _ = db.session("shared").entries(None, k * n + 1)
        assert [e.seq for e in entries] == list(range(1, k * n + 1))  # gapless, none lost
        ids = [e.message.id for e in entries]
        assert len(set(ids)) == k * n  # none duplicated
        for j in range(k):
            assert [i for i in ids if i.startswith(f"p{j}-")] == [f"p{j}-{i}" for i in range(n)]
            own = db.session(f"own-{j}").entries(None, n + 1)[0]
            assert [(e.seq, e.message.id) for e in own] == [(i + 1, f"p{j}-{i}") for i in range(n)]
    with contextlib.closing(sqlite3.connect(path)) as c:
        assert c.execute("SELECT count(*) FROM convomem_migrations").fetchone()[0] == len(
            MIGRATIONS
        )


def test_a_writer_killed_mid_batch_leaves_all_or_nothing(path: str) -> None:
    url = f"sqlite:///{path}"
    inside = CTX.Event()
    p = start("killed_mid_batch(url, inside)", url=url, inside=inside)
    try:
        assert inside.wait(60), "the writer never reached the middle of its batch"
        assert os.path.getsize(path + "-wal") > 1_000_000  # uncommitted pages in the WAL
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.join(30)
    assert p.exitcode == -signal.SIGKILL
    with open_store(url) as db:
        s = db.session("victim")
        assert s.get_items() == [Message("before", "user", content="committed")]
        assert s.last_seq() == 1
        assert raw_conn(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert s.append([msg("after")]) == 2  # the dead writer's lock is gone


# -- erasure ----------------------------------------------------------------------------


def test_erased_users_leave_no_bytes_in_the_files(path: str) -> None:
    secret = "SECRET-7f3a9c-" * 40
    with open_store(f"sqlite:///{path}") as db:
        for k in range(3):
            db.session(f"s{k}", user_id="gone").append(
                [Message(f"x{k}-{i}", "user", content=secret) for i in range(30)],
                state={"summary": secret},
                expected_version=0,
            )
        db.session("keep", user_id="stays").append([msg(0)])
        assert db.erase_user("gone") == 3
        on_disk = b"".join(p.read_bytes() for p in Path(path).parent.glob("chat.db*"))
        assert secret[:14].encode() not in on_disk
        assert db.session("keep").get_items() == [msg(0)]


# -- scale ------------------------------------------------------------------------------


def _fill(db: SQLiteDatabase, session_id: str, n: int) -> None:
    """``n`` messages written straight in SQL (fast; the appends are tested elsewhere)."""
    db.session(session_id).set_metadata({})
    c = raw_conn(db)
    pk = c.execute(
        "SELECT pk FROM convomem_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    c.execute("BEGIN IMMEDIATE")
    c.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO convomem_messages (session_pk, seq, message_id, data) "
        "SELECT ?, i, 'm' || (i - 1), json_object('id', 'm' || (i - 1), 'role', 'user', "
        "'content', 'text ' || (i - 1)) FROM n",
        (n, pk),
    )
    c.execute(
        "UPDATE convomem_sessions SET next_seq = ?, last_seq = ?, message_count = ? WHERE pk = ?",
        (n + 1, n, n, pk),
    )
    c.execute("COMMIT")


def test_reads_on_a_100000_message_session_do_not_grow_with_it(path: str) -> None:
    """get_items(limit=10) reads the session row and 10 message rows, and SQLite runs the
    same number of VM steps for it on 100,000 messages as on 1,000."""
    with open_store(f"sqlite:///{path}") as db:
        assert isinstance(db, SQLiteDatabase)
        _fill(db, "big", 100_000)
        _fill(db, "small", 1_000)
        steps: dict[str, int] = {}
        for name in ("big", "small"):
            counter = [0]
            raw_conn(db).set_progress_handler(lambda c=counter: c.__setitem__(0, c[0] + 1), 1)
            before = db.stats()
            assert db.session(name).get_items(10)[-1] == msg(99_999 if name == "big" else 999)
            after = db.stats()
            raw_conn(db).set_progress_handler(None, 1)
            assert after.rows_read - before.rows_read == 11
            assert after.statements - before.statements == 2
            steps[name] = counter[0]
        assert steps["big"] == steps["small"]
    with open_store(f"sqlite:///{path}") as db:  # reopen: O(view) rows read
        assert db.session("big").get_items(100) == [msg(i) for i in range(99_900, 100_000)]
        assert db.stats().rows_read <= 110


def test_ten_thousand_sessions_per_user(path: str) -> None:
    with open_store(f"sqlite:///{path}") as db:
        c = raw_conn(db)
        c.execute("BEGIN IMMEDIATE")
        c.executemany(
            "INSERT INTO convomem_sessions (tenant, session_id, user_id, created_at, updated_at) "
            "VALUES ('', ?, 'u', 0, 0)",
            [(f"chat-{k}",) for k in range(10_000)],
        )
        c.execute("COMMIT")
        db.session("chat-9999", user_id="u").append([msg(0)])
        db.session("mine", user_id="other").append([msg(0)])
        seen: list[str] = []
        cursor = None
        while True:
            before = db.stats().rows_read
            page, cursor = db.sessions(user_id="u", cursor=cursor, limit=500)
            assert db.stats().rows_read - before <= 501  # O(page), not O(sessions)
            seen += [i.session_id for i in page]
            if cursor is None:
                break
        assert seen == [f"chat-{k}" for k in range(9_999, -1, -1)]


# -- the derived state apart ------------------------------------------------------------


def test_an_append_does_not_rewrite_a_big_derived_state(path: str) -> None:
    """The state has its own table: an append after a 200 KB state writes the pages of
    its message and its session's row to the WAL, not the state's (it did, in the
    session's row, before migration 0002)."""
    big = {"segments": ["x" * 200] * 1000}
    with open_store(f"sqlite:///{path}") as db:
        s = db.session("s", user_id="u")
        s.append([msg(0)], state=big, expected_version=0)
        raw_conn(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        for i in range(1, 11):
            s.append([msg(i)])
        pages = os.path.getsize(path + "-wal") // (4096 + 24)
        assert pages <= 10 * 6, pages  # a few pages per append, not the state's ~50
        assert s.load_state() == (big, 1)
        s.append([msg(11)], state={"small": 1}, expected_version=1)
        assert s.load_state() == ({"small": 1}, 2)
        s.clear_session()
        assert s.load_state() == (None, 3)


def test_migration_0002_moves_a_stored_state_to_its_table(path: str) -> None:
    """A file written before 0002 (the state in the session's row) opens with its state."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as c:
        MIGRATIONS[0].apply(c)
        c.execute("CREATE TABLE convomem_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        c.execute("INSERT INTO convomem_migrations VALUES ('0001_sessions_and_messages', 0)")
        c.execute(
            "INSERT INTO convomem_sessions (tenant, session_id, user_id, created_at, "
            "updated_at, state, state_version) VALUES ('', 's', 'u', 0, 0, '{\"a\": 1}', 4)"
        )
    with open_store(f"sqlite:///{path}") as db:
        s = db.session("s", user_id="u")
        assert s.load_state() == ({"a": 1}, 4)
        assert raw_conn(db).execute("SELECT state FROM convomem_sessions").fetchall() == [(None,)]
        assert s.save_state(None, expected_version=4) == 5
        assert s.load_state() == (None, 5)
        assert db.delete_session("s")
        assert raw_conn(db).execute("SELECT count(*) FROM convomem_states").fetchone()[0] == 0


def test_close_waits_for_an_operation_running_in_another_thread(tmp_path: Path) -> None:
    """Closing the database under a running statement crashed the sqlite3 module (a
    RecallIndex worker indexing while the application closed the database): close()
    waits for the operation, and what comes after it gets StoreError."""
    from convomem.stores._sqlite_calls import SQLiteCall

    db = open_store(f"sqlite:///{tmp_path}/c.db")
    running, release = threading.Event(), threading.Event()
    results: list[Any] = []

    def slow(tx: Any) -> Any:
        running.set()
        release.wait(10)
        return tx.conn.one("SELECT count(*) FROM convomem_sessions")

    worker = threading.Thread(target=lambda: results.append(db._run(SQLiteCall(slow, False))))
    worker.start()
    assert running.wait(10)
    closer = threading.Thread(target=db.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # blocked on the running operation's connection
    release.set()
    worker.join(10)
    closer.join(10)
    assert results == [(0,)] and not closer.is_alive()
    with pytest.raises(StoreError, match="closed"):
        db.sessions()
