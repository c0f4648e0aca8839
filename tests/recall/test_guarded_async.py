"""AsyncGuardedRecall: the same fault injection over a real AsyncRecallIndex on SQLite.
A slow search waits on an asyncio.Event the test sets; one kind of backend even ignores
its cancellation, to show the answer never waits for a late search to stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from convomem.errors import ConfigError, TransientError
from convomem.model import Message
from convomem.recall import AsyncGuardedRecall, AsyncRecallIndex, HashingEmbedder, Hit
from convomem.retry import CircuitBreaker
from convomem.stores import aopen_store

LOGGER = "convomem.recall"
# Deadlines: one a healthy search never misses, even on a loaded CI machine, and one for
# tests where a blocked search must time out and a healthy one must then answer "ok".
HEALTHY = 60.0
LATE_THEN_OK = 1.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class AsyncFaulty:
    """An AsyncRecallIndex whose ``search`` fails as told (see test_guarded.Faulty);
    ``stubborn`` makes a blocked search ignore cancellation until the gate opens."""

    def __init__(self, index: AsyncRecallIndex) -> None:
        self.index = index
        self.calls = 0
        self.cancelled = 0
        self.fail_next = 0
        self.always: Exception | None = None
        self.gate: asyncio.Event | None = None
        self.stubborn = False

    async def search(self, query: str, **kw: Any) -> list[Hit]:
        self.calls += 1
        if self.gate is not None:
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                if not self.stubborn:
                    raise
                await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise TransientError("injected")
        if self.always is not None:
            raise self.always
        return await self.index.search(query, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


@pytest.fixture
async def index() -> AsyncIterator[AsyncRecallIndex]:
    db = await aopen_store("sqlite://")
    idx = AsyncRecallIndex(db, embedder=HashingEmbedder(dim=64))
    await idx.add(
        [Message("m0", "user", content="I am allergic to peanuts"),
         Message("m1", "user", content="my address is 12 Oak street")],
        user_id="maya", session_id="s1",
    )  # fmt: skip
    yield idx
    await idx.aclose()
    await db.aclose()


@pytest.fixture
def faulty(index: AsyncRecallIndex) -> AsyncFaulty:
    return AsyncFaulty(index)


def levels(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records if r.name == LOGGER]


async def idle(guard: AsyncGuardedRecall) -> None:
    # The released search finishes on the index's worker thread: wait for it, generously
    # (a bound only so a search that never ends fails the test instead of hanging it).
    for _ in range(6000):
        if guard.in_flight == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the late search never finished")


async def test_ok_then_transient_failures_then_recovery(
    index: AsyncRecallIndex, faulty: AsyncFaulty, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    guard = AsyncGuardedRecall(faulty, deadline=HEALTHY)
    out = await guard.search("peanuts", user_id="maya", k=1)
    assert out.ok and out.hits == await index.search("peanuts", user_id="maya", k=1)
    faulty.fail_next = 2
    statuses = [(await guard.search("peanuts", user_id="maya")).status for _ in range(3)]
    assert statuses == ["failed", "failed", "ok"] and faulty.calls == 4
    assert levels(caplog) == [logging.WARNING, logging.INFO]


async def test_a_late_search_is_cancelled_and_answers_timeout(faulty: AsyncFaulty) -> None:
    guard = AsyncGuardedRecall(faulty, deadline=0.02)
    faulty.gate = asyncio.Event()
    out = await guard.search("peanuts", user_id="maya")
    assert out.status == "timeout" and out.hits == [] and faulty.calls == 1
    await idle(guard)
    assert faulty.cancelled == 1


async def test_stuck_searches_fill_the_workers_then_answer_at_once(
    faulty: AsyncFaulty, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    guard = AsyncGuardedRecall(faulty, deadline=LATE_THEN_OK, max_late=1)
    faulty.gate, faulty.stubborn = asyncio.Event(), True
    assert (await guard.search("peanuts", user_id="maya")).status == "timeout"
    stuck = await guard.search("peanuts", user_id="maya")
    assert stuck.status == "timeout" and faulty.calls == 1 and guard.late == 1
    faulty.gate.set()
    await idle(guard)
    faulty.gate = None
    assert (await guard.search("peanuts", user_id="maya")).ok and faulty.calls == 2
    assert levels(caplog) == [logging.WARNING, logging.INFO]


async def test_the_breaker_stops_calls_and_recovers(faulty: AsyncFaulty) -> None:
    clock = FakeClock()
    guard = AsyncGuardedRecall(
        faulty, deadline=HEALTHY, breaker=CircuitBreaker(failures=2, reset_after=5.0, clock=clock)
    )
    faulty.always = TransientError("down")
    statuses = [(await guard.search("a", user_id="maya")).status for _ in range(4)]
    assert statuses == ["failed", "failed", "open", "open"] and faulty.calls == 2
    clock.now += 5
    faulty.always = None
    assert (await guard.search("a", user_id="maya")).ok and guard.breaker.state == "closed"
    assert guard.counts == {"ok": 1, "failed": 2, "timeout": 0, "open": 2}


async def test_a_cancelled_caller_cancels_its_search(faulty: AsyncFaulty) -> None:
    guard = AsyncGuardedRecall(faulty, deadline=None)
    faulty.gate = asyncio.Event()
    caller = asyncio.ensure_future(guard.search("peanuts", user_id="maya"))
    while faulty.calls == 0:
        await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await idle(guard)
    assert faulty.cancelled == 1 and guard.breaker.state == "closed"


async def test_caller_errors_raise_and_other_methods_pass_through(faulty: AsyncFaulty) -> None:
    guard = AsyncGuardedRecall(faulty, deadline=HEALTHY, breaker=CircuitBreaker(failures=1))
    with pytest.raises(ConfigError, match=r"^user_id="):
        await guard.search("q", user_id="")
    with pytest.raises(ConfigError, match=r"^kinds="):
        await guard.search("q", user_id="maya", kinds=[])
    assert faulty.calls == 1 and guard.breaker.state == "closed" and guard.in_flight == 0
    assert await guard.add([Message("n1", "user", content="my dog is Rex")], user_id="maya",
                           session_id="s2") == 1  # fmt: skip
    guard.submit([Message("n2", "user", content="my cat is Tom")], user_id="maya", session_id="s2")
    await guard.aflush()
    assert (await guard.search("cat Tom", user_id="maya", k=1)).hits[0].message_id == "n2"
    assert await guard.erase_user("maya") == 4
