"""What is Redis's own in the Redis store: URLs, the key layout and hash tags, native
expiry, index repair by ``sweep``, durability across a ``kill -9`` with appendonly,
sessions spread over a real 3-node cluster, and failures mapped to typed errors. The
backend-neutral semantics are the conformance suite's (``test_conformance.py``), which
runs on a single server and on the cluster."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from _servers_redis import RedisServer, cli, free_port, url_of
from convomem.errors import (
    ConcurrentUpdate,
    ConfigError,
    MissingDependency,
    StoreError,
    TransientError,
)
from convomem.model import Message
from convomem.retry import RetryPolicy, retry_if, stop_after_attempt, wait_none
from convomem.session import ConversationMemory
from convomem.stores import _redis_lua as lua
from convomem.stores import aopen_store, open_store
from convomem.stores._redis_ops import index_keys, session_keys
from convomem.stores.redis_store import RedisDatabase

SCALE = float(os.environ.get("CONVOMEM_STORE_SCALE", "1"))


def msg(i: int | str) -> Message:
    return Message(f"m{i}", "user", content=f"text {i}")


# -- URLs and options -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, error, where",
    [
        ("redis://:hunter2@127.0.0.1:6379/db", ConfigError, "must be a database number"),
        ("redis+cluster://:hunter2@127.0.0.1:7000/3", ConfigError, "only database 0"),
        ("redis://127.0.0.1:6379/0?bogus=1", ConfigError, "unknown option 'bogus'"),
        ("redis://127.0.0.1:6379/0?prefix=a{b}", ConfigError, "prefix='a{b}'"),
        ("redis://127.0.0.1:6379/0?socket_timeout=0", ConfigError, "socket_timeout=0"),
        ("redis://127.0.0.1:6379/0?busy_timeout=1", ConfigError, "unknown option"),
    ],
)
def test_bad_urls_are_named_without_the_password(url: str, error: type, where: str) -> None:
    with pytest.raises(error, match=where) as err:
        open_store(url)
    assert "hunter2" not in str(err.value)
    with pytest.raises(error, match=where):
        asyncio.run(aopen_store(url))


def test_an_unreachable_server_is_transient_and_retried() -> None:
    """A closed port: every attempt of the policy is made, then a TransientError that
    names the server but never its password."""
    seen: list[BaseException] = []

    def count(error: BaseException) -> bool:
        seen.append(error)
        return isinstance(error, TransientError)

    policy = RetryPolicy(stop=stop_after_attempt(3), wait=wait_none(), retry=retry_if(count))
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(TransientError, match=r"127\.0\.0\.1") as err:
        open_store(url, retry=policy, socket_timeout=0.5)
    assert len(seen) == 3 and "hunter2" not in str(err.value)
    with pytest.raises(TransientError) as err:
        asyncio.run(aopen_store(url, retry=policy, socket_timeout=0.5))
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize(
    "error, transient",
    [
        ("ConnectionError", True),
        ("TimeoutError", True),
        ("BusyLoadingError", True),
        ("ClusterDownError", True),
        ("TryAgainError", True),
        ("MasterDownError", True),
        ("ReadOnlyError", True),
        ("ResponseError", False),
        ("AuthenticationError", False),
        ("OutOfMemoryError", False),
    ],
)
def test_failures_are_typed(error: str, transient: bool) -> None:
    """Failovers and lost connections are retryable; anything else is a StoreError."""
    import redis.exceptions as rx

    from convomem.stores._redis_calls import translate

    typed = translate(getattr(rx, error)("boom"), "redis redis://h:1/0")
    assert isinstance(typed, TransientError) is transient
    assert isinstance(typed, StoreError) is not transient
    assert "redis://h:1/0" in str(typed) and error in str(typed)


def test_the_extra_is_named_when_redis_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingDependency, match=r"convomem\[redis\]"):
        open_store("redis://127.0.0.1:6379/0")


def test_the_database_shows_no_password(redis_server: RedisServer) -> None:
    with open_store(f"redis://:@127.0.0.1:{redis_server.port}/2?prefix=shown") as db:
        assert db.url.startswith("redis://:***@127.0.0.1") and "***" in repr(db)
        db.session("s").append([msg(0)])
        assert cli(redis_server.port, "-n", "2", "EXISTS", session_keys("shown", "", "s")[0])
        assert db.delete_session("s")
    with pytest.raises(StoreError, match="closed"):
        db.session("s").get_items()


def test_tls_with_the_servers_ca(tmp_path: Path) -> None:
    """``rediss://`` verifies the server's certificate: against ``ssl_ca_certs`` it
    works; without it the failure is a StoreError at once (retrying cannot fix it)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    request = ("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1")
    names = ("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    subprocess.run(
        ["openssl", *request, "-keyout", str(key), "-out", str(cert), *names],
        check=True,
        capture_output=True,
    )
    tls_port = free_port()
    args = ("--tls-port", str(tls_port), "--tls-cert-file", str(cert))
    args += ("--tls-key-file", str(key), "--tls-auth-clients", "no")
    server = RedisServer(tmp_path / "tls", args=args).start()
    try:
        url = url_of(tls_port, "rediss", ssl_ca_certs=str(cert))
        with open_store(url) as db:
            db.session("s").append([msg(0)])
            assert db.session("s").get_items() == [msg(0)]
        with pytest.raises(StoreError, match="CERTIFICATE_VERIFY_FAILED") as err:
            open_store(url_of(tls_port, "rediss"))
        assert not isinstance(err.value, TransientError)
        with pytest.raises(ConfigError, match="rediss:// URLs only"):
            open_store(url_of(server.port, ssl_ca_certs=str(cert)))
    finally:
        server.stop()


def test_a_prefix_written_by_a_newer_layout_is_refused(redis_server: RedisServer) -> None:
    url = url_of(redis_server.port)
    with open_store(url) as db:
        assert cli(redis_server.port, "GET", f"{db.prefix}:layout") == "1"
        cli(redis_server.port, "SET", f"{db.prefix}:layout", "2")
    with pytest.raises(StoreError, match="layout 2, this version reads layout 1"):
        open_store(url)
    with pytest.raises(StoreError, match="layout 2"):
        asyncio.run(aopen_store(url))


# -- the key layout ---------------------------------------------------------------------

NAMES = ["s", "a{b}c", "}{", "x:y", "会話 1", "%7B", "_"]


@pytest.mark.parametrize("tenant", ["", "t", "a:b", "{t}", "_"])
def test_every_key_of_a_session_shares_one_slot(tenant: str) -> None:
    """One hash tag per session (whatever braces or colons its names hold), one per
    tenant for the indexes, and no two names that share keys."""
    seen: dict[str, tuple[str, str]] = {}
    for sid in NAMES:
        keys = session_keys("p", tenant, sid)
        assert len({key_slot(k.encode()) for k in keys}) == 1
        for k in keys:
            assert seen.setdefault(k, (tenant, sid)) == (tenant, sid)
    for user in (None, "u", "{u}"):
        keys = index_keys("p", tenant, user)
        assert len({key_slot(k.encode()) for k in keys}) == 1


def test_keys_expire_natively_with_the_session(redis_server: RedisServer) -> None:
    url = url_of(redis_server.port)
    with open_store(url, ttl=300) as db, open_store(url) as forever:
        s = db.session("s", user_id="u")
        s.append([msg(0)], counts={"m0": {"approx": 1}}, state={"a": 1}, expected_version=0)
        for key in session_keys(db.prefix, "", "s")[:4]:
            assert 290_000 < int(cli(redis_server.port, "PTTL", key)) <= 300_000
        forever.session("s").append([msg(1)])  # keeps its expiry, as on every backend
        assert int(cli(redis_server.port, "PTTL", session_keys(db.prefix, "", "s")[1])) > 290_000
        forever.session("p").append([msg(0)])  # created without TTL: its keys persist
        for key in session_keys(db.prefix, "", "p")[:3]:  # meta, log, data (no counts)
            assert cli(redis_server.port, "PTTL", key) == "-1"
        info = forever.session("p").info()
        assert info is not None and info.expires_at is None


def test_sweep_drops_the_entries_of_sessions_redis_expired(redis_server: RedisServer) -> None:
    """Redis removed a session (native expiry, here by hand): listings skip its entry at
    once; the first sweep leaves it (a creation may be in flight), the next drops it."""
    with open_store(url_of(redis_server.port)) as db:
        for sid in ("gone", "kept"):
            db.session(sid, user_id="u").append([msg(0)])
        cli(redis_server.port, "DEL", *session_keys(db.prefix, "", "gone")[:4])
        assert [i.session_id for i in db.sessions(user_id="u")[0]] == ["kept"]
        assert [i.session_id for i in db.sessions()[0]] == ["kept"]
        assert db.sweep() == 0
        db.session("new", user_id="u").append([msg(0)])
        assert db.sweep() == 1
        everyone, mine, _ = index_keys(db.prefix, "", "u")
        for index in (everyone, mine):
            assert cli(redis_server.port, "ZRANGE", index, "0", "-1").split() == ["kept", "new"]
        assert db.sweep() == 0


def test_a_listing_behind_many_gone_sessions_reads_in_few_round_trips(
    redis_server: RedisServer,
) -> None:
    with open_store(url_of(redis_server.port)) as db:
        db.session("old", user_id="u").append([msg(0)])
        for k in range(60):
            db.session(f"gone{k}", user_id="u").append([msg(k)])
            cli(redis_server.port, "DEL", session_keys(db.prefix, "", f"gone{k}")[0])
        before = db.stats().statements
        page, cursor = db.sessions(user_id="u", limit=1)
        assert [i.session_id for i in page] == ["old"] and cursor is None
        # One HMGET per entry (pipelined) and a few index reads, not one read per entry.
        assert db.stats().statements - before <= 61 + 8


def test_a_retry_after_a_lost_reply_applies_a_write_once(redis_server: RedisServer) -> None:
    """The connection drops after the server applied a pop or a state save, before
    the reply came back: the RetryPolicy's retry recognizes the call's token instead
    of popping a second message or reporting its own save as a conflict."""
    import redis.exceptions as rx

    policy = RetryPolicy(stop=stop_after_attempt(3), wait=wait_none())
    with open_store(url_of(redis_server.port), retry=policy) as db:
        s = db.session("s")
        s.append([msg(0), msg(1), msg(2)])
        lose = {lua.POP.sha: 1, lua.SAVE_STATE.sha: 1}
        real = db._client

        class LosingReplies:
            """The client, but a script's reply is lost once after it ran."""

            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def evalsha(self, sha: str, *args: Any) -> Any:
                return self.lost(sha, real.evalsha(sha, *args))

            def eval(self, source: str, *args: Any) -> Any:  # the script's first run
                return self.lost(lua.script("", source, writes=True).sha, real.eval(source, *args))

            def lost(self, sha: str, reply: Any) -> Any:
                if lose.get(sha) and reply[0] == b"ok":
                    lose[sha] -= 1
                    raise rx.ConnectionError("the reply was lost")
                return reply

        db._client = LosingReplies()
        assert s.pop_item() == msg(2)
        assert s.save_state({"a": 1}, expected_version=0) == 1
        assert set(lose.values()) == {0}
        assert s.get_items() == [msg(0), msg(1)]
        assert s.load_state() == ({"a": 1}, 1)
        with pytest.raises(ConcurrentUpdate):  # another call with the same version
            s.save_state({"a": 1}, expected_version=0)


def test_a_held_lock_fails_writes_only(redis_server: RedisServer) -> None:
    policy = RetryPolicy(stop=stop_after_attempt(2), wait=wait_none())
    with open_store(url_of(redis_server.port), retry=policy) as db:
        s = db.session("s", tenant="t")
        s.append([msg(0)])
        lock = session_keys(db.prefix, "t", "s")[4]
        cli(redis_server.port, "SET", lock, "maintenance", "PX", "60000")
        before = db.stats().statements
        with pytest.raises(TransientError, match="locked by another writer"):
            s.append([msg(1)])
        assert db.stats().statements == before + 2  # the policy's two attempts
        assert s.get_items() == [msg(0)]
        assert db.session("other", tenant="t").append([msg(1)]) == 1
        cli(redis_server.port, "DEL", lock)
        assert s.append([msg(1)]) == 2


# -- scale: reads cost the view, not the log ----------------------------------------------


def test_a_large_session_resumes_reading_only_its_view(redis_server: RedisServer) -> None:
    """100,000 messages: reopening and reading the newest 100 costs a fixed number of
    commands and 1 + 100 rows; ConversationMemory resumes from the store."""
    n = int(100_000 * SCALE)
    url = url_of(redis_server.port)
    with open_store(url) as db:
        s = db.session("big", user_id="u")
        step = 5_000
        for i in range(0, n, step):
            s.append([msg(k) for k in range(i, min(n, i + step))])
        assert s.last_seq() == n
    with open_store(url) as db:
        s = db.session("big", user_id="u")
        s.page(None, 1)  # the first call on a server may load the script (EVAL): once
        before = db.stats()
        newest, cursor = s.page(None, 100, newest_first=True)
        after = db.stats()
        assert [m.id for m in newest] == [f"m{k}" for k in range(n - 1, n - 101, -1)]
        assert cursor == f"b:{n - 99}"
        assert after.statements - before.statements == 1
        assert after.rows_read - before.rows_read == 1 + 101
        memory = ConversationMemory(1000, store=db.session("tail", user_id="u"))
        memory.add("user", "hello")
        again = ConversationMemory(1000, store=db.session("tail", user_id="u"))
        assert again.context("openai") == memory.context("openai")


# -- durability -----------------------------------------------------------------------------


def test_acknowledged_appends_survive_kill_9_with_appendonly(tmp_path: Path) -> None:
    """``appendonly yes`` with ``appendfsync always``: every append the store
    acknowledged is there after the server is killed (-9) and restarted."""
    args = ("--appendonly", "yes", "--appendfsync", "always")
    server = RedisServer(tmp_path / "aof", args=args).start()
    try:
        url = url_of(server.port)
        acknowledged: list[int] = []
        with open_store(url) as db:
            s = db.session("s", user_id="u")
            for i in range(60):
                acknowledged.append(
                    s.append([msg(f"{i}a"), msg(f"{i}b")], state={"i": i}, expected_version=i)
                )
            server.kill()
            with pytest.raises(TransientError):
                s.append([msg("lost")])
            server.start()  # the same database object reconnects
            entries, _ = s.entries(None, 1000)
            assert acknowledged == list(range(2, 121, 2))
            assert [e.seq for e in entries] == list(range(1, 121))
            assert s.load_state() == ({"i": 59}, 60)
            assert s.append([msg("after")], expected_seq=120) == 121
        with open_store(url) as db:
            assert db.session("s", user_id="u").last_seq() == 121
    finally:
        server.stop()


def test_raw_database_options(redis_server: RedisServer) -> None:
    with pytest.raises(ConfigError, match="retry=3"):
        RedisDatabase(url_of(redis_server.port), retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="also given in url"):
        open_store(url_of(redis_server.port), prefix="x")
    with pytest.raises(ConfigError, match="busy_timeout=2: not an option of the redis backend"):
        open_store(url_of(redis_server.port), busy_timeout=2)
    with pytest.raises(ConfigError, match="prefix='x': not an option of the sqlite backend"):
        open_store("sqlite://", prefix="x")
    with open_store(url_of(redis_server.port), ttl=5, ttl_refresh="read") as db:
        assert (db.ttl.seconds, db.ttl.refresh) == (5, "read")
