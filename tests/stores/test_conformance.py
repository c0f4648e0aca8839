"""The one conformance suite of durable stores (issue 9 s3), every backend, sync and async.

Each test runs once per backend and mode: ``sync`` drives ``open_store(url)``, ``async``
drives ``aopen_store(url)`` through ``SyncOverAsync`` (every coroutine run to completion
on a loop of its own), so both twins are held to the same properties by the same code.

Adding a backend is one fixture: return a ``Backend`` (a fresh-database URL factory and
two fault hooks: ``corrupt`` writes raw bytes as a message's stored data, ``hold_lock``
makes writes fail transiently until released) from a fixture and add its name to
``BACKENDS``. Every test then runs on it, sync and async. A backend whose server cannot
start must fail its fixture, never skip. The suite relies on ``db.stats()`` counting
what the backend reads (``rows_read``: the session record plus one per message row), so
"O(limit)" is checked as work, not time.

Sizes are modest by default; ``CONVOMEM_STORE_EXAMPLES`` sets the hypothesis examples and
``CONVOMEM_STORE_SCALE`` multiplies the large-session and many-sessions sizes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import itertools
import json
import os
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from _store_backends import BACKENDS, Backend
from convomem.errors import (
    ConcurrentUpdate,
    ConfigError,
    ConvomemError,
    CorruptRecord,
    InvalidMessage,
    MessageConflict,
    SessionOwnerMismatch,
    StoreError,
    TransientError,
)
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from convomem.retry import RetryPolicy, retry_if, stop_after_attempt, wait_none
from convomem.session import ConversationMemory
from convomem.stores import (
    AsyncSessionStore,
    AsyncStore,
    AsyncStoreDatabase,
    SessionStore,
    Store,
    StoreDatabase,
    StoreStats,
    TTLPolicy,
    aload_history,
    aopen_store,
    load_history,
    open_store,
)
from convomem.stores.statements import Command, Eval, Pipeline, Q, script

EXAMPLES = int(os.environ.get("CONVOMEM_STORE_EXAMPLES", "6"))
SCALE = float(os.environ.get("CONVOMEM_STORE_SCALE", "1"))
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- backends: tests/_store_backends.py -------------------------------------------------


class SyncOverAsync:
    """An async database driven synchronously: each coroutine runs on a private loop."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.inner: Any = self.loop.run_until_complete(aopen_store(url, **options))
        self.url, self.ttl = self.inner.url, self.inner.ttl

    def run(self, value: Any) -> Any:
        return self.loop.run_until_complete(value) if inspect.isawaitable(value) else value

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr
        return lambda *a, **k: self.run(attr(*a, **k))

    def session(self, *args: Any, **kwargs: Any) -> Any:
        return _SessionOverAsync(self, self.inner.session(*args, **kwargs))

    def close(self) -> None:
        if not self.loop.is_closed():
            self.run(self.inner.aclose())
            self.loop.close()

    def __enter__(self) -> SyncOverAsync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SessionOverAsync:
    def __init__(self, db: SyncOverAsync, inner: Any) -> None:
        self.db, self.inner = db, inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self.db.run(attr(*a, **k))
        return attr


@dataclass
class Opener:
    backend: Backend
    mode: str
    opened: list[Any] = field(default_factory=list, repr=False)

    def __call__(self, url: str | None = None, **options: Any) -> Any:
        url = url or self.backend.fresh_url()
        db = open_store(url, **options) if self.mode == "sync" else SyncOverAsync(url, options)
        self.opened.append(db)
        return db


@pytest.fixture(
    params=[(b, m) for b in BACKENDS for m in ("sync", "async")], ids=lambda p: "-".join(p)
)
def open_db(request: pytest.FixtureRequest) -> Iterator[Opener]:
    backend_name, mode = request.param
    opener = Opener(request.getfixturevalue(backend_name), mode)
    yield opener
    for db in opener.opened:
        db.close()


@pytest.fixture
def db(open_db: Opener) -> Any:
    return open_db()


# -- helpers ----------------------------------------------------------------------------


def msg(i: int | str, text: str | None = None, role: str = "user") -> Message:
    return Message(f"m{i}", role, content=f"text {i}" if text is None else text)


def batch(a: int, b: int) -> list[Message]:
    return [msg(i) for i in range(a, b)]


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def walk(session: Any, limit: int, newest_first: bool = False) -> list[Message]:
    out: list[Message] = []
    cursor = None
    while True:
        page, cursor = session.page(cursor, limit, newest_first=newest_first)
        out += page
        if cursor is None:
            return out


@contextlib.contextmanager
def writes_nothing(db: Any) -> Iterator[None]:
    """The block does no I/O at all: bad input is rejected before the database."""
    before = db.stats().statements
    yield
    assert db.stats().statements == before


# -- the protocol -----------------------------------------------------------------------


def test_databases_and_sessions_implement_the_protocols(db: Any, open_db: Opener) -> None:
    if open_db.mode == "sync":
        assert isinstance(db, StoreDatabase)
        s = db.session("s1")
        assert isinstance(s, SessionStore) and isinstance(s, Store)
    else:
        assert isinstance(db.inner, AsyncStoreDatabase)
        s = db.inner.session("s1")
        assert isinstance(s, AsyncSessionStore) and isinstance(s, AsyncStore)
    assert (s.session_id, s.user_id, s.tenant) == ("s1", None, None)


text_st = st.text(max_size=40)
json_st = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text_st,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_st, inner, max_size=3),
    max_leaves=8,
)
block_st = st.one_of(
    st.builds(TextBlock, text_st),
    st.builds(ImageBlock, st.text(min_size=1, max_size=20), st.none() | st.just("image/png")),
    st.builds(
        ToolUseBlock, st.text(min_size=1), st.text(min_size=1), st.dictionaries(text_st, json_st)
    ),
    st.builds(
        ToolResultBlock,
        st.text(min_size=1),
        text_st | st.lists(st.builds(TextBlock, text_st), max_size=2).map(tuple),
        st.booleans(),
    ),
    st.builds(
        OpaqueBlock, st.sampled_from(["openai", "anthropic"]), st.dictionaries(text_st, json_st)
    ),
)


@st.composite
def rich_messages(draw: st.DrawFn, i: int) -> Message:
    return Message(
        f"id-{i}-{draw(st.text(max_size=6))}",
        draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        draw(st.none() | st.integers(0, 10**6)),
        content=draw(text_st | st.lists(block_st, max_size=3)),
        name=draw(st.none() | text_st),
        metadata=draw(st.dictionaries(text_st, json_st, max_size=3)),
        created_at=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
        priority=draw(st.sampled_from([0, 1, 2])),
    )


@FAST
@given(data=st.data())
def test_messages_round_trip_exactly(open_db: Opener, data: st.DataObject) -> None:
    """Every field, block kind, Unicode string and JSON value reads back equal."""
    messages = [data.draw(rich_messages(i)) for i in range(data.draw(st.integers(1, 3)))]
    with open_db() as db:
        s = db.session(data.draw(st.text(min_size=1, max_size=8).filter(str.isprintable)))
        assert s.append(messages) == len(messages)
        got = s.get_items()
        assert got == messages
        assert [m.to_dict() for m in got] == [m.to_dict() for m in messages]


def test_large_and_unicode_messages(db: Any) -> None:
    big = Message("big", "user", content="é😀中" * 350_000)  # over 1 MB of UTF-8
    odd = Message("🙂-id", "assistant", content="\u200f\u0301עברית\x00nul", name="名前")
    s = db.session("会話-1", user_id="ユーザー", tenant="テナント")
    s.append([big, odd])
    assert s.get_items() == [big, odd]
    assert s.page(None, 1, newest_first=True)[0] == [odd]


# -- the log ----------------------------------------------------------------------------


@FAST
@given(n=st.integers(0, 30), limit=st.none() | st.integers(0, 35), page=st.integers(1, 8))
def test_reads_match_the_log(open_db: Opener, n: int, limit: int | None, page: int) -> None:
    """get_items(limit) is the newest ``limit`` oldest-first; paging either way walks the
    whole log exactly once; entries carry gapless seqs 1..n."""
    log = batch(0, n)
    with open_db() as db:
        s = db.session("s")
        for i in range(0, n, 7):
            s.append(log[i : i + 7])
        expected = log if limit is None else log[max(0, n - limit) :] if limit else []
        assert s.get_items(limit) == expected
        assert walk(s, page) == log
        assert walk(s, page, newest_first=True) == log[::-1]
        assert load_history(lambda c: s.page(c, page)) == log
        seqs: list[int] = []
        cursor = None
        while True:
            entries, cursor = s.entries(cursor, page)
            seqs += [e.seq for e in entries]
            if cursor is None:
                break
        assert seqs == list(range(1, n + 1))
        assert s.last_seq() == n


def test_append_returns_the_last_seq_and_is_atomic(db: Any) -> None:
    s = db.session("s")
    assert s.append(batch(0, 3)) == 3
    assert s.append([]) == 3
    with pytest.raises(InvalidMessage, match=r"items\[2\]"), writes_nothing(db):
        s.append([msg(3), msg(4), "not a message"])
    with pytest.raises(MessageConflict, match="'m1'") as err:
        s.append([msg(3), msg(4), msg(1, "other content")])
    assert (err.value.message_id, err.value.seq, err.value.session_id) == ("m1", 2, "s")
    assert s.get_items() == batch(0, 3) and s.last_seq() == 3


def test_appends_are_idempotent(db: Any) -> None:
    s = db.session("s")
    s.append(batch(0, 3))
    s.append(batch(3, 5))
    assert s.append(batch(0, 3)) == 3  # a retried request: no-op, its seq
    assert s.append(batch(3, 5), expected_seq=3) == 5  # even with the stale expectation
    assert s.append(batch(3, 7)) == 7  # a re-sent batch whose head was stored
    assert s.get_items() == batch(0, 7)
    same = Message("m0", "user", content="text 0", metadata={})
    assert s.append([same]) == 1
    with pytest.raises(MessageConflict, match="after 'm9'"):
        s.append([msg(9), msg(2)])  # a stored message after a new one
    with pytest.raises(InvalidMessage, match="twice"), writes_nothing(db):
        s.append([msg(8), msg(8)])
    assert s.get_items() == batch(0, 7)


def test_expected_seq_is_a_compare_and_set(db: Any) -> None:
    s = db.session("s")
    assert s.append(batch(0, 2), expected_seq=0) == 2
    with pytest.raises(ConcurrentUpdate) as err:
        s.append([msg(2)], expected_seq=1)
    assert (err.value.field, err.value.expected, err.value.actual) == ("seq", 1, 2)
    assert s.append([msg(2)], expected_seq=2) == 3
    s.pop_item()  # a tail removal moves the session too
    with pytest.raises(ConcurrentUpdate):
        s.append([msg(3)], expected_seq=3)
    assert s.append([msg(3)], expected_seq=2) == 4  # seq 3 is never given again
    assert [e.seq for e in s.entries()[0]] == [1, 2, 4]
    with pytest.raises(ConcurrentUpdate):
        db.session("new").append([msg(0)], expected_seq=5)
    assert db.session("new").info() is None  # a failed write creates nothing


def test_threads_lose_nothing(backend: Backend) -> None:
    """Threads appending to one session (sync twin); two racing the same expected_seq."""
    with open_store(backend.fresh_url()) as db:
        s = db.session("shared")

        def writer(k: int) -> None:
            for i in range(25):
                s.append([msg(f"{k}-{i}")])

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        entries, _ = s.entries(None, 1000)
        assert [e.seq for e in entries] == list(range(1, 101))
        for k in range(4):
            own = [e.message.id for e in entries if e.message.id.startswith(f"m{k}-")]
            assert own == [f"m{k}-{i}" for i in range(25)]
        wins = []
        for k in range(2):
            with contextlib.suppress(ConcurrentUpdate):
                wins.append(s.append([msg(f"race{k}")], expected_seq=100))
        assert wins == [101]


async def test_tasks_lose_nothing(backend: Backend) -> None:
    """The async twin under asyncio.gather: the same guarantees, and aload_history."""
    async with await aopen_store(backend.fresh_url(), workers=3) as db:
        s = db.session("shared")

        async def writer(k: int) -> None:
            for i in range(20):
                await s.append([msg(f"{k}-{i}")])

        await asyncio.gather(*(writer(k) for k in range(4)))
        entries, _ = await s.entries(None, 1000)
        assert [e.seq for e in entries] == list(range(1, 81))
        for k in range(4):
            own = [e.message.id for e in entries if e.message.id.startswith(f"m{k}-")]
            assert own == [f"m{k}-{i}" for i in range(20)]
        results = await asyncio.gather(
            *(s.append([msg(f"race{k}")], expected_seq=80) for k in range(3)),
            return_exceptions=True,
        )
        assert [r for r in results if not isinstance(r, BaseException)] == [81]
        assert sum(isinstance(r, ConcurrentUpdate) for r in results) == 2
        loaded = await aload_history(lambda c: s.page(c, 7))
        assert loaded == [e.message for e in entries] + (await s.get_items(1))


def test_pop_truncate_and_clear(db: Any) -> None:
    s = db.session("s")
    assert s.pop_item() is None
    s.append(batch(0, 6))
    s.save_state({"summary": "x"}, expected_version=0)
    assert s.pop_item() == msg(5)
    s.truncate(3)
    assert s.get_items() == batch(0, 3) and s.last_seq() == 3
    s.truncate(10)
    assert s.get_items() == batch(0, 3)
    with pytest.raises(ConfigError, match="keep=-1"), writes_nothing(db):
        s.truncate(-1)
    assert s.load_state() == ({"summary": "x"}, 1)  # truncation keeps the derived state
    s.clear_session()
    assert s.get_items() == [] and s.last_seq() == 0
    assert s.load_state() == (None, 2)  # clearing drops it, with a new version
    assert s.append([msg(9)]) == 7  # seqs are never reused
    info = s.info()
    assert info is not None and (info.message_count, info.last_seq) == (1, 7)


# -- derived state and counts -----------------------------------------------------------


def test_state_is_versioned(db: Any) -> None:
    s = db.session("s")
    assert s.load_state() == (None, 0)
    state = {"segments": [{"range": [1, 40], "text": "résumé ✓"}], "n": 1.5, "ok": True}
    assert s.save_state(state, expected_version=0) == 1
    with pytest.raises(ConcurrentUpdate) as err:
        s.save_state({"other": 1}, expected_version=0)
    assert (err.value.field, err.value.actual) == ("state_version", 1)
    assert s.load_state() == (state, 1)
    for bad, where in [
        ({"a": (1, 2)}, r"state\['a'\]"),
        ({"a": float("nan")}, "nan"),
        ({1: "x"}, "key 1"),
        (["x"], "JSON object"),
        ({"a": {"b": {1, 2}}}, "set"),
    ]:
        with pytest.raises(ConfigError, match=where), writes_nothing(db):
            s.save_state(bad, expected_version=1)  # type: ignore[arg-type]
    assert s.save_state(None, expected_version=1) == 2
    assert s.load_state() == (None, 2)


def test_append_writes_messages_and_state_in_one_transaction(db: Any) -> None:
    s = db.session("s")
    assert s.append(batch(0, 2), state={"covers": [1, 2]}, expected_version=0) == 2
    assert s.load_state() == ({"covers": [1, 2]}, 1)
    with pytest.raises(ConcurrentUpdate):  # stale state: the messages are not written
        s.append([msg(2)], state={"covers": [1, 3]}, expected_version=0)
    with pytest.raises(MessageConflict):  # a conflicting message: the state is not written
        s.append([msg(0, "changed")], state={"covers": [9]}, expected_version=1)
    assert s.get_items() == batch(0, 2) and s.load_state() == ({"covers": [1, 2]}, 1)
    # A replay of the same request succeeds without writing.
    assert s.append(batch(0, 2), state={"covers": [1, 2]}, expected_version=0) == 2
    with pytest.raises(ConfigError, match="expected_version"), writes_nothing(db):
        s.append([msg(2)], state={"a": 1})


def test_token_counts_persist(db: Any) -> None:
    s = db.session("s")
    s.append(batch(0, 3), counts={"m0": {"tiktoken:cl100k_base": 7}})
    s.set_counts({"m0": {"approx": 5}, "m1": {"approx": 4}})
    assert s.get_counts(["m0", "m1", "m2", "nope"]) == {
        "m0": {"tiktoken:cl100k_base": 7, "approx": 5},
        "m1": {"approx": 4},
        "m2": {},
    }
    assert [e.counts for e in s.entries()[0]] == [
        {"tiktoken:cl100k_base": 7, "approx": 5},
        {"approx": 4},
        {},
    ]
    with pytest.raises(ConfigError, match="'nope'"):
        s.set_counts({"m2": {"approx": 1}, "nope": {"approx": 1}})
    assert s.get_counts(["m2"]) == {"m2": {}}  # all or nothing
    for bad, where in [
        ({"m0": {"approx": -1}}, "-1"),
        ({"m0": {"approx": True}}, "True"),
        ({"m0": 3}, "m0"),
        ({"m0": {"": 1}}, "tokenizer name"),
    ]:
        with pytest.raises(ConfigError, match=where), writes_nothing(db):
            s.set_counts(bad)
    with pytest.raises(ConfigError, match="not a message of this batch"), writes_nothing(db):
        s.append([msg(3)], counts={"m0": {"approx": 1}})


# -- TTL --------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("refresh", ["write", "read", "never"])
def test_ttl_policies(open_db: Opener, refresh: str) -> None:
    clock = Clock()
    db = open_db(ttl=100, ttl_refresh=refresh, clock=clock)
    assert db.ttl == TTLPolicy(100, refresh)  # type: ignore[arg-type]
    s, other = db.session("s", user_id="u"), db.session("o", user_id="u")
    s.append([msg(0)])
    other.append([msg(0)])
    info = s.info()
    assert info is not None and info.expires_at == clock.now + 100
    assert info.created_at == info.updated_at == clock.now
    clock.now += 60
    s.append([msg(1)])  # a write
    info = s.info()
    assert info is not None and info.updated_at == clock.now != info.created_at
    clock.now += 60
    s.get_items()  # a read (120 s after creation, 60 s after the write)
    if refresh == "read":
        info = s.info()
        assert info is not None and info.expires_at == clock.now + 100
    if refresh == "never":
        assert s.get_items() == [] and s.info() is None
    else:
        assert s.get_items() == [msg(0), msg(1)]
    clock.now += 90  # 90 s after the read, 150 s after the write
    assert (s.get_items() != []) == (refresh == "read")
    assert other.get_items() == [] and other.info() is None  # expired: invisible at once
    assert other.load_state() == (None, 0) and other.last_seq() == 0
    listed = {i.session_id for i in db.sessions(user_id="u")[0]}
    assert listed == ({"s"} if refresh == "read" else set())
    assert db.tenant_counts(user_id="u") == ({None: 1} if refresh == "read" else {})
    assert db.tenant_counts() == db.tenant_counts(user_id="u")
    assert db.tenant_counts(user_id="nobody") == {}
    other.append([msg(5)])  # writing to an expired session starts a fresh one
    assert other.get_items() == [msg(5)] and other.entries()[0][0].seq == 1
    assert db.sweep() == (0 if refresh == "read" else 1)
    assert db.sweep() == 0


def test_no_ttl_never_expires(db: Any) -> None:
    s = db.session("s")
    s.append([msg(0)])
    info = s.info()
    assert info is not None and info.expires_at is None
    assert db.sweep() == 0


@pytest.mark.parametrize(
    "options, where",
    [
        ({"ttl": 0}, "ttl=0"),
        ({"ttl": -5}, "ttl=-5"),
        ({"ttl": 10, "ttl_refresh": "sometimes"}, "ttl_refresh='sometimes'"),
        ({"retry": 3}, "retry=3"),
        ({"clock": 5}, "clock=5"),
        ({"ttl": TTLPolicy(5), "ttl_refresh": "read"}, "ttl_refresh='read'"),
    ],
)
def test_bad_options_are_named(backend: Backend, options: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        open_store(backend.fresh_url(), **options)
    with pytest.raises(ConfigError, match=where):
        asyncio.run(aopen_store(backend.fresh_url(), **options))


# -- faults -----------------------------------------------------------------------------

CORRUPTIONS = {
    "not json": b"{not json",
    "not a message": b'{"role": "user", "bogus": 1}',
    "another id": json.dumps({"id": "someone-else", "role": "user"}).encode(),
    "a list": b"[1, 2]",
    "not utf-8": b'{"id": "m2", "role": "user", "content": "\xff\xfe"}',
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupt_row_is_named_and_hides_nothing(db: Any, open_db: Opener, kind: str) -> None:
    s = db.session("s", tenant="t")
    s.append(batch(0, 6))
    open_db.backend.corrupt(db, "t", "s", 3, CORRUPTIONS[kind])
    good = batch(0, 2) + batch(3, 6)
    with pytest.raises(CorruptRecord, match=r"'s'.*seq 3") as err:
        s.get_items()
    assert (err.value.session_id, err.value.seq, err.value.seqs) == ("s", 3, [3])
    assert err.value.messages == good
    assert s.get_items(3) == batch(3, 6)  # reads that miss the row are unaffected
    with pytest.raises(CorruptRecord) as err:
        s.page("f:1", 2)  # seqs 2 and 3
    assert err.value.messages == [msg(1)] and err.value.cursor == "f:3"
    assert s.page(err.value.cursor, 10) == (batch(3, 6), None)  # resume past it
    with pytest.raises(CorruptRecord) as err:
        s.page(None, 4, newest_first=True)
    assert err.value.messages == batch(3, 6)[::-1]
    with pytest.raises(CorruptRecord):
        load_history(lambda c: s.page(c, 2))  # never a silently shorter history
    s.truncate(3)
    with pytest.raises(CorruptRecord):
        s.pop_item()  # the newest is unreadable: reported, and not removed
    assert s.page(None, 2) == (batch(0, 2), "f:2") and s.last_seq() == 3


def test_transient_failures_are_retried(open_db: Opener) -> None:
    backend = open_db.backend
    failures: list[BaseException] = []
    release: list[Callable[[], None]] = []

    def retryable(error: BaseException) -> bool:
        failures.append(error)
        release[0]()  # the lock goes away before the retry
        return isinstance(error, TransientError)

    policy = RetryPolicy(stop=stop_after_attempt(3), wait=wait_none(), retry=retry_if(retryable))
    db = open_db(retry=policy, **backend.fast_fail)
    s = db.session("s")
    s.append([msg(0)])
    with backend.hold_lock(db) as free:
        release.append(free)
        assert s.append([msg(1)]) == 2
    assert len(failures) == 1 and isinstance(failures[0], TransientError)
    assert s.get_items() == batch(0, 2)


def test_transient_failures_surface_after_the_policy_gives_up(open_db: Opener) -> None:
    backend = open_db.backend
    policy = RetryPolicy(stop=stop_after_attempt(2), wait=wait_none())
    db = open_db(retry=policy, **backend.fast_fail)
    s = db.session("s")
    s.append([msg(0)])
    with backend.hold_lock(db), pytest.raises(TransientError, match="locked"):
        s.append([msg(1)], state={"x": 1}, expected_version=0)
    assert s.get_items() == [msg(0)] and s.load_state() == (None, 0)
    assert s.append([msg(1)]) == 2  # a retry afterwards works


# -- statements of one's own (run_statements) ----------------------------------------------


def _own_sql(db: Any) -> Callable[[str], str]:
    """SQL spelled for ``db``: ``{t}`` is a table of the caller's, ``?`` a placeholder."""
    table = "convomem_test_own"
    if db.kind == "postgresql":
        return lambda sql: sql.replace("{t}", f"{db.schema}.{table}").replace("?", "%s")
    return lambda sql: sql.replace("{t}", table)


def _work(db: Any, before: StoreStats) -> tuple[int, int, int]:
    after = db.stats()
    return (
        after.statements - before.statements,
        after.transactions - before.transactions,
        after.rows_read - before.rows_read,
    )


def test_statements_of_ones_own_run_through_the_database(db: Any, open_db: Opener) -> None:
    """``run_statements``: the caller's statements, counted as the database's own work;
    a write is one transaction, rolled back when the operation raises."""
    assert db.kind in ("sqlite", "postgresql", "redis")
    assert (db.schema is not None) == (db.kind == "postgresql")
    assert (db.prefix is not None) == (db.kind == "redis")
    if db.kind == "redis":
        key = f"{db.prefix}:own"
        count = script("test_own_count", "return redis.call('HLEN', KEYS[1])", writes=False)

        def write() -> Generator[Any, Any, Any]:
            added = yield Command(("HSET", key, "a", "1"))
            replies = yield Pipeline((("HSET", key, "b", "2"), ("HGET", key, "a")))
            n = yield Eval(count, (key,), ())
            return added, replies, n

        assert db.run_statements(write, write=True) == (1, [1, b"1"], 2)
        before = db.stats()  # the script is known to the server now: one EVALSHA
        assert db.run_statements(write) == (0, [0, b"1"], 2)
        assert _work(db, before) == (4, 0, 0)
        return
    sql = _own_sql(db)
    create = "CREATE TABLE {t} (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"
    db.run_statements(lambda: (yield Q.run(sql(create))), write=True)

    def fill() -> Generator[Q, Any, tuple[int, int]]:
        n = yield Q.many(sql("INSERT INTO {t} VALUES (?, ?)"), [("a", 1), ("b", 2), ("c", 3)])
        m = yield Q.run(sql("UPDATE {t} SET v = v + 10 WHERE k = ?"), ("a",))
        return n, m

    def read() -> Generator[Q, Any, Any]:
        one = yield Q.one(sql("SELECT v FROM {t} WHERE k = ?"), ("a",))
        rows = yield Q.all(sql("SELECT k, v FROM {t} ORDER BY k"))
        return tuple(one), [tuple(r) for r in rows]

    before = db.stats()
    assert db.run_statements(fill, write=True) == (3, 1)
    assert _work(db, before) == (4, 1, 0)  # BEGIN, the two, COMMIT
    before = db.stats()
    assert db.run_statements(read) == ((11,), [("a", 11), ("b", 2), ("c", 3)])
    assert _work(db, before) == (2, 0, 4)

    def half() -> Generator[Q, Any, None]:
        yield Q.run(sql("DELETE FROM {t}"))
        raise ValueError("changed my mind")

    with pytest.raises(ValueError, match="changed my mind"):
        db.run_statements(half, write=True)
    assert db.run_statements(read)[1] == [("a", 11), ("b", 2), ("c", 3)]  # rolled back
    with pytest.raises(StoreError):  # the driver's error, mapped
        db.run_statements(lambda: (yield Q.all(sql("SELECT nothing FROM {t}"))))
    if db.kind == "sqlite":
        with pytest.raises(ConfigError, match="PostgreSQL's only"):
            db.run_statements(lambda: (yield Q.one_or_conflict(sql("SELECT 1"))))


def test_statements_of_ones_own_are_retried_each_from_a_fresh_generator(open_db: Opener) -> None:
    db = open_db(retry=RetryPolicy(stop=stop_after_attempt(3), wait=wait_none()))
    made: list[int] = []

    def flaky(fail: int) -> Callable[[], Generator[Any, Any, str]]:
        def op() -> Generator[Any, Any, str]:
            made.append(1)
            if len(made) <= fail:
                raise TransientError("not yet")
            yield from ()
            return "done"

        return op

    assert db.run_statements(flaky(2)) == "done" and len(made) == 3
    made.clear()
    with pytest.raises(TransientError, match="not yet"):
        db.run_statements(flaky(5), write=True)
    assert len(made) == 3  # the policy's three attempts, then the error as it was
    with writes_nothing(db):
        with pytest.raises(ConfigError, match="op="):
            db.run_statements("SELECT 1")
        with pytest.raises(ConfigError, match="write="):
            db.run_statements(flaky(0), write="yes")


def test_a_held_lock_fails_statements_of_ones_own_transiently(open_db: Opener) -> None:
    backend = open_db.backend
    policy = RetryPolicy(stop=stop_after_attempt(2), wait=wait_none())
    db = open_db(retry=policy, **backend.fast_fail)
    s = db.session("s")
    s.append([msg(0)])
    if db.kind == "redis":  # a caller's own keys have no lock; a command's error is kept
        key = f"{db.prefix}:own"
        db.run_statements(lambda: (yield Command(("SET", key, "x"))))
        before = db.stats()
        with pytest.raises(StoreError, match="not an integer"):
            db.run_statements(lambda: (yield Command(("INCR", key))))
        assert _work(db, before) == (1, 0, 0)  # not retried
        return
    table = f"{db.schema}.convomem_sessions" if db.kind == "postgresql" else "convomem_sessions"
    touch = Q.run(f"UPDATE {table} SET metadata = metadata WHERE 1 = 0")
    with backend.hold_lock(db), pytest.raises(TransientError, match="lock"):
        db.run_statements(lambda: (yield touch), write=True)
    assert db.run_statements(lambda: (yield touch), write=True) == 0  # released: it runs


# -- bad input --------------------------------------------------------------------------

BAD_NAMES = ["", 3, None, "a\x00b", "tab\there", "x" * 257, "\ud800"]


def test_bad_input_is_rejected_before_any_io(db: Any) -> None:
    s = db.session("s")
    s.append([msg(0)])
    with writes_nothing(db):
        for name in BAD_NAMES:
            if name is not None:
                with pytest.raises(ConfigError, match="session_id="):
                    db.session(name)
            with pytest.raises(ConfigError, match="user_id="):
                db.erase_user(name)
            if name is not None:
                with pytest.raises(ConfigError, match="tenant="):
                    db.session("s", tenant=name)
                with pytest.raises(ConfigError, match="user_id="):
                    db.sessions(user_id=name)
        bad_calls: list[tuple[Callable[[], Any], type[ConvomemError], str]] = [
            (lambda: s.append(msg(1)), InvalidMessage, "items"),
            (lambda: s.append(["x"]), InvalidMessage, r"items\[0\]"),
            (lambda: s.add_items([msg(1), {"id": "m2"}]), InvalidMessage, r"items\[1\]"),
            (lambda: s.append([msg(1)], expected_seq=-1), ConfigError, "expected_seq=-1"),
            (lambda: s.append([msg(1)], expected_seq=True), ConfigError, "expected_seq=True"),
            (lambda: s.get_items(-1), ConfigError, "limit=-1"),
            (lambda: s.get_items(1.5), ConfigError, "limit=1.5"),
            (lambda: s.page(None, 0), ConfigError, "limit=0"),
            (lambda: s.page("zz", 5), ConfigError, "cursor='zz'"),
            (lambda: s.page("b:3", 5), ConfigError, "cursor='b:3'"),
            (lambda: s.page("f:3", 5, newest_first=True), ConfigError, "cursor='f:3'"),
            (lambda: s.page(3, 5), ConfigError, "cursor=3"),
            (lambda: s.page(f"f:{2**63}", 5), ConfigError, "out of range"),
            (lambda: s.page("b:9999999999999999999", 5, True), ConfigError, "out of range"),
            (lambda: s.page(None, 5, newest_first="yes"), ConfigError, "newest_first"),
            (lambda: s.get_counts("m0"), ConfigError, "message_ids"),
            (lambda: s.set_metadata({"a": (1,)}), ConfigError, "metadata"),
            (lambda: s.save_state({}, expected_version=None), ConfigError, "expected_version"),
            (lambda: db.sessions(cursor="f:1"), ConfigError, "cursor="),
            (lambda: db.sessions(cursor=f"s:{2**63}"), ConfigError, "out of range"),
            (lambda: db.sessions(limit=0), ConfigError, "limit=0"),
            (lambda: db.delete_session(""), ConfigError, "session_id="),
        ]
        for call, error, where in bad_calls:
            with pytest.raises(error, match=where):
                call()
    assert s.get_items() == [msg(0)]


# -- scope: tenants and users -----------------------------------------------------------


@FAST
@given(
    writes=st.lists(
        st.tuples(
            st.sampled_from([None, "A", "B"]), st.sampled_from(["s1", "s2"]), st.integers(1, 3)
        ),
        max_size=8,
    )
)
def test_tenants_never_see_each_other(open_db: Opener, writes: list[Any]) -> None:
    """The same session ids in different tenants are different sessions; no query for one
    tenant returns another's messages, state or sessions."""
    model: dict[tuple[str | None, str], list[Message]] = {}
    serial = itertools.count()
    with open_db() as db:
        for tenant, sid, n in writes:
            s = db.session(sid, tenant=tenant)
            new = [msg(f"{tenant}-{sid}-{next(serial)}") for _ in range(n)]
            if (tenant, sid) in model:
                s.append(new)
            else:
                s.append(new, state={"t": tenant}, expected_version=0)
            model.setdefault((tenant, sid), []).extend(new)
        # counts per tenant, and nothing else of the other tenants
        assert db.tenant_counts() == dict(collections.Counter(t for t, _ in model))
        for tenant in (None, "A", "B"):
            listed = sorted(i.session_id for i in walk_sessions(db, tenant=tenant))
            assert listed == sorted(sid for t, sid in model if t == tenant)
            for sid in ("s1", "s2"):
                s = db.session(sid, tenant=tenant)
                assert s.get_items() == model.get((tenant, sid), [])
                state = {"t": tenant} if (tenant, sid) in model else None
                assert s.load_state()[0] == state


def walk_sessions(db: Any, **query: Any) -> list[Any]:
    out: list[Any] = []
    cursor = None
    while True:
        page, cursor = db.sessions(cursor=cursor, limit=3, **query)
        out += page
        if cursor is None:
            return out


def test_owners(db: Any) -> None:
    mine = db.session("s", user_id="u1", tenant="t")
    mine.append([msg(0)])
    theirs = db.session("s", user_id="u2", tenant="t")
    for call in (
        lambda: theirs.get_items(),
        lambda: theirs.append([msg(1)]),
        lambda: theirs.page(),
        lambda: theirs.clear_session(),
        lambda: theirs.load_state(),
        lambda: theirs.info(),
        lambda: db.delete_session("s", user_id="u2", tenant="t"),
    ):
        with pytest.raises(SessionOwnerMismatch, match="user_id='u2'"):
            call()
    assert db.session("s", tenant="t").get_items() == [msg(0)]  # the admin handle
    assert db.session("s", user_id="u2").get_items() == []  # another tenant's "s"
    info = mine.info()
    assert info is not None and (info.user_id, info.tenant) == ("u1", "t")


def test_listing_and_deleting(db: Any) -> None:
    for k in range(7):
        db.session(f"s{k}", user_id="u1" if k % 2 else "u2").append([msg(k)])
    db.session("s3", user_id="u1").set_metadata({"title": "three ✓"})
    listed = walk_sessions(db, user_id="u1")
    assert [i.session_id for i in listed] == ["s5", "s3", "s1"]  # newest created first
    assert listed[1].metadata == {"title": "three ✓"} and listed[1].message_count == 1
    page, cursor = db.sessions(limit=4)
    db.session("late").append([msg("late")])  # created while paging: cursors are stable
    rest, _ = db.sessions(cursor=cursor, limit=10)
    assert [i.session_id for i in page + rest] == [f"s{k}" for k in range(6, -1, -1)]
    assert db.delete_session("s3") is True and db.delete_session("s3") is False
    s3 = db.session("s3", user_id="u1")
    assert s3.get_items() == [] and s3.load_state() == (None, 0) and s3.get_counts() == {}
    assert s3.append([msg(3)]) == 1  # a new session: seqs start again


def test_erase_user_removes_every_trace(db: Any) -> None:
    for tenant in (None, "t"):
        for user in ("u1", "u2"):
            s = db.session(f"{user}-chat", user_id=user, tenant=tenant)
            s.append(batch(0, 3), counts={"m0": {"approx": 3}}, state={"x": 1}, expected_version=0)
    assert db.erase_user("u1", tenant="t") == 1
    gone = db.session("u1-chat", tenant="t")
    assert gone.get_items() == [] and gone.load_state() == (None, 0) and gone.info() is None
    assert gone.get_counts() == {}
    assert [i.session_id for i in walk_sessions(db, tenant="t")] == ["u2-chat"]
    assert db.session("u1-chat").get_items() == batch(0, 3)  # another tenant's u1
    assert db.erase_user("nobody") == 0


# -- the model: a stateful test against an in-memory oracle ------------------------------


@dataclass
class Model:
    """One session as the contract says it should be."""

    owner: str | None
    created: int
    log: list[tuple[int, Message]] = field(default_factory=list)
    next_seq: int = 1
    state: dict[str, Any] | None = None
    version: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> int:
        return self.log[-1][0] if self.log else 0

    def append(self, batch: list[Message], expected: int | None, state: Any, version: Any) -> int:
        stored = {m.id: (seq, m) for seq, m in self.log}
        new: list[Message] = []
        for m in batch:
            if m.id not in stored:
                new.append(m)
            elif stored[m.id][1] != m or new:
                raise MessageConflict("", m.id, 0, "")
        if not new and (state is None or state == self.state):
            return stored[batch[-1].id][0]
        if expected is not None and expected != self.last:
            raise ConcurrentUpdate("", "seq", 0, 0)
        if state is not None and version != self.version:
            raise ConcurrentUpdate("", "state_version", 0, 0)
        for m in new:
            self.log.append((self.next_seq, m))
            self.counts[m.id] = {}
            self.next_seq += 1
        if state is not None:
            self.state, self.version = state, self.version + 1
        return self.last

    def remove_tail(self, keep: int) -> None:
        for _, m in self.log[keep:]:
            del self.counts[m.id]
        del self.log[keep:]


TENANTS = st.sampled_from([None, "A"])
SIDS = st.sampled_from(["s1", "s2"])
USERS = st.sampled_from([None, "u1", "u1", "u1", "u2"])  # mostly the owner


class StoreMachine(RuleBasedStateMachine):
    """Random sequences of every write, from owners, strangers and admin handles, over
    two tenants sharing session ids; after each step every session reads back exactly
    as the model says (log, seqs, counts, state, info, listings)."""

    opener: Opener

    def __init__(self) -> None:
        super().__init__()
        self.db = self.opener()
        self.model: dict[tuple[str | None, str], Model] = {}
        self.serial = itertools.count()

    def teardown(self) -> None:
        self.db.close()

    def apply(
        self,
        tenant: str | None,
        sid: str,
        user: str | None,
        creates: bool,
        model_op: Callable[[Model], Any],
        real_op: Callable[[Any], Any],
    ) -> None:
        key = (tenant, sid)
        current = self.model.get(key)
        expected_error: type[BaseException] | None = None
        work = Model(user, next(self.serial)) if current is None else None
        if current is not None and user is not None and current.owner != user:
            expected_error = SessionOwnerMismatch
        else:
            import copy

            work = work or copy.deepcopy(current)
            try:
                expected = model_op(work) if current is not None or creates else None
            except (MessageConflict, ConcurrentUpdate, ConfigError) as exc:
                expected_error = type(exc)
        handle = self.db.session(sid, user_id=user, tenant=tenant)
        event(f"{real_op.__qualname__.split('.')[-3]}: {getattr(expected_error, '__name__', 'ok')}")
        if expected_error is not None:
            with pytest.raises(expected_error):
                real_op(handle)
            return
        assert real_op(handle) == expected
        if current is not None or creates:
            assert work is not None
            self.model[key] = work

    @rule(
        tenant=TENANTS,
        sid=SIDS,
        user=USERS,
        n=st.integers(0, 3),
        resend=st.integers(0, 2),
        expect=st.sampled_from(["none", "right", "stale_seq", "stale_version", "state"]),
    )
    def append(self, tenant: Any, sid: str, user: Any, n: int, resend: int, expect: str) -> None:
        current = self.model.get((tenant, sid))
        old = [m for _, m in current.log[len(current.log) - resend :]] if current and resend else []
        new = [msg(f"{next(self.serial)}", "héllo ✓") for _ in range(n or (0 if old else 1))]
        last = current.last if current else 0
        version = current.version if current else 0
        seq = {"right": last, "stale_seq": last + 1}.get(expect)
        state = {"v": next(self.serial)} if expect in ("stale_version", "state") else None
        ver = version + (expect == "stale_version") if state is not None else None
        self.apply(
            tenant,
            sid,
            user,
            True,
            lambda m: m.append(old + new, seq, state, ver),
            lambda s: s.append(old + new, expected_seq=seq, state=state, expected_version=ver),
        )

    @rule(tenant=TENANTS, sid=SIDS, user=USERS, n=st.integers(1, 4))
    def append_plain(self, tenant: Any, sid: str, user: Any, n: int) -> None:
        """Plain appends too, so logs grow long enough for the other rules to matter."""
        self.append(tenant, sid, user, n, 0, "none")

    @rule(tenant=TENANTS, sid=SIDS, user=USERS, data=st.data())
    def conflict(self, tenant: Any, sid: str, user: Any, data: st.DataObject) -> None:
        current = self.model.get((tenant, sid))
        if current is None or not current.log:
            return
        _, stored = data.draw(st.sampled_from(current.log))
        changed = stored.replace(content="changed")
        self.apply(
            tenant,
            sid,
            user,
            False,
            lambda m: m.append([changed], None, None, None),
            lambda s: s.append([changed]),
        )

    @rule(tenant=TENANTS, sid=SIDS, user=USERS)
    def pop(self, tenant: Any, sid: str, user: Any) -> None:
        def model_pop(m: Model) -> Message | None:
            if not m.log:
                return None
            top = m.log[-1][1]
            m.remove_tail(len(m.log) - 1)
            return top

        self.apply(tenant, sid, user, False, model_pop, lambda s: s.pop_item())

    @rule(tenant=TENANTS, sid=SIDS, user=USERS, keep=st.integers(0, 4))
    def truncate(self, tenant: Any, sid: str, user: Any, keep: int) -> None:
        self.apply(
            tenant, sid, user, False, lambda m: m.remove_tail(keep), lambda s: s.truncate(keep)
        )

    @rule(tenant=TENANTS, sid=SIDS, user=USERS)
    def clear(self, tenant: Any, sid: str, user: Any) -> None:
        def model_clear(m: Model) -> None:
            m.remove_tail(0)
            m.version += m.state is not None
            m.state = None

        self.apply(tenant, sid, user, False, model_clear, lambda s: s.clear_session())

    @rule(tenant=TENANTS, sid=SIDS, user=USERS, stale=st.booleans(), empty=st.booleans())
    def save_state(self, tenant: Any, sid: str, user: Any, stale: bool, empty: bool) -> None:
        current = self.model.get((tenant, sid))
        version = (current.version if current else 0) + stale
        state = None if empty else {"s": next(self.serial), "nested": [1, {"é": None}]}

        def model_save(m: Model) -> int:
            if m.version != version:
                raise ConcurrentUpdate("", "state_version", 0, 0)
            m.state, m.version = state, m.version + 1
            return m.version

        self.apply(
            tenant,
            sid,
            user,
            True,
            model_save,
            lambda s: s.save_state(state, expected_version=version),
        )

    @rule(tenant=TENANTS, sid=SIDS, user=USERS, data=st.data())
    def set_counts(self, tenant: Any, sid: str, user: Any, data: st.DataObject) -> None:
        current = self.model.get((tenant, sid))
        known = [m.id for _, m in current.log] if current else []
        mid = data.draw(st.sampled_from([*known, "missing"]))
        counts = {mid: {data.draw(st.sampled_from(["a", "b"])): data.draw(st.integers(0, 9))}}

        def model_counts(m: Model) -> None:
            if mid not in m.counts:
                raise ConfigError("")
            m.counts[mid] = m.counts[mid] | counts[mid]

        real = lambda s: s.set_counts(counts)  # noqa: E731
        if current is None:  # no session, no message: an error and nothing created
            with pytest.raises((ConfigError, SessionOwnerMismatch)):
                real(self.db.session(sid, user_id=user, tenant=tenant))
            return
        self.apply(tenant, sid, user, False, model_counts, real)

    @rule(tenant=TENANTS, sid=SIDS, user=USERS)
    def metadata(self, tenant: Any, sid: str, user: Any) -> None:
        meta = {"title": f"t{next(self.serial)}"}

        def model_meta(m: Model) -> None:
            m.metadata = meta

        self.apply(tenant, sid, user, True, model_meta, lambda s: s.set_metadata(meta))

    @rule(tenant=TENANTS, sid=SIDS, user=USERS)
    def delete(self, tenant: Any, sid: str, user: Any) -> None:
        current = self.model.get((tenant, sid))
        if current is not None and user is not None and current.owner != user:
            with pytest.raises(SessionOwnerMismatch):
                self.db.delete_session(sid, user_id=user, tenant=tenant)
            return
        assert self.db.delete_session(sid, user_id=user, tenant=tenant) is (current is not None)
        self.model.pop((tenant, sid), None)

    @rule(tenant=TENANTS, user=st.sampled_from(["u1", "u2"]))
    def erase(self, tenant: Any, user: str) -> None:
        doomed = [k for k, m in self.model.items() if k[0] == tenant and m.owner == user]
        assert self.db.erase_user(user, tenant=tenant) == len(doomed)
        for k in doomed:
            del self.model[k]

    @invariant()
    def everything_reads_back(self) -> None:
        for tenant in (None, "A"):
            listed = [
                (i.session_id, i.user_id, i.message_count, i.last_seq, i.state_version, i.metadata)
                for i in walk_sessions(self.db, tenant=tenant)
            ]
            mine = sorted(
                ((k, m) for k, m in self.model.items() if k[0] == tenant),
                key=lambda km: -km[1].created,
            )
            assert listed == [
                (k[1], m.owner, len(m.log), m.last, m.version, m.metadata) for k, m in mine
            ]
            for sid in ("s1", "s2"):
                s = self.db.session(sid, tenant=tenant)
                m = self.model.get((tenant, sid)) or Model(None, 0)
                entries, _ = s.entries(None, 1000)
                assert [(e.seq, e.message, e.counts) for e in entries] == [
                    (seq, x, m.counts[x.id]) for seq, x in m.log
                ]
                assert s.get_items(2) == [x for _, x in m.log[-2:]]
                assert s.load_state() == (m.state, m.version)


def test_the_store_behaves_like_its_model(open_db: Opener) -> None:
    StoreMachine.opener = open_db
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# -- scale ------------------------------------------------------------------------------


def test_reads_cost_the_rows_they_return(db: Any) -> None:
    """get_items(limit=10) and a page read O(limit) rows whatever the session's length."""
    n = int(3_000 * SCALE)
    big, small = db.session("big"), db.session("small")
    for i in range(0, n, 1000):
        big.append(batch(i, min(n, i + 1000)))
    small.append(batch(0, 20))
    # Redis runs a script by its hash and sends it once per server (a NOSCRIPT reply
    # costs one more statement; in a cluster the two sessions may live on two servers):
    # the first read of each kind on each session is not measured.
    for s in (big, small):
        s.get_items(10), s.page(None, 10, newest_first=True), s.page("f:5", 10)
    work: dict[int, list[tuple[int, int]]] = {}
    for s, size in ((big, n), (small, 20)):
        work[size] = []
        for read in (
            lambda s=s: s.get_items(10),
            lambda s=s: s.page(None, 10, newest_first=True),
            lambda s=s, size=size: s.page(f"f:{size - 15}", 10),
        ):
            before = db.stats()
            got = read()
            after = db.stats()
            assert len(got if isinstance(got, list) else got[0]) == 10
            rows, calls = after.rows_read - before.rows_read, after.statements - before.statements
            assert rows <= 12  # the session's record, the page (and one to see if there is more)
            work[size].append((rows, calls))
    assert work[n] == work[20]  # the same work at 20 messages and at 3,000
    assert big.get_items(10) == batch(n - 10, n)
    before = db.stats().transactions
    big.append([msg("one more")])
    assert db.stats().transactions == before + 1


def test_many_sessions_per_user(db: Any) -> None:
    n = int(200 * SCALE)
    for k in range(n):
        db.session(f"chat-{k}", user_id="u").append([msg(k)])
    db.session("other", user_id="v").append([msg(0)])
    listed = walk_sessions(db, user_id="u")
    assert [i.session_id for i in listed] == [f"chat-{k}" for k in range(n - 1, -1, -1)]
    page, _ = db.sessions(user_id="u", limit=5)
    assert [i.message_count for i in page] == [1] * 5


# -- ConversationMemory on a durable store -----------------------------------------------


def test_conversation_memory_persists_through_the_store(backend: Backend) -> None:
    url = backend.fresh_url()
    with open_store(url) as db:
        store = db.session("chat", user_id="u1")
        memory = ConversationMemory(1000, store=store)
        memory.add("system", "be brief")
        memory.add("user", "hello")
        memory.clear(keep_system=True)  # uses the store's atomic truncate
        memory.add("user", "hello again")
        again = ConversationMemory(1000, store=db.session("chat", user_id="u1"))
        assert [m.text() for m in again.messages()] == ["be brief", "hello again"]
        assert again.context("openai") == memory.context("openai")


async def test_async_conversation_memory(backend: Backend) -> None:
    async with await aopen_store(backend.fresh_url()) as db:
        memory = ConversationMemory(1000, store=db.session("chat", user_id="u1"))
        await memory.aadd("user", "hello")
        await memory.aadd("assistant", "hi")
        again = ConversationMemory(1000, store=db.session("chat", user_id="u1"))
        assert [m.text() for m in await again.amessages()] == ["hello", "hi"]
