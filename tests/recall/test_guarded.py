"""GuardedRecall: fault injection over a real RecallIndex on SQLite (HashingEmbedder).

A proxy in front of the index raises TransientError a number of times, raises on every
call, or blocks on a threading.Event the test releases (a search past the deadline).
The tests count backend calls, statuses and log records; nothing asserts a duration.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, StoreError, TransientError
from convomem.model import Message
from convomem.recall import GuardedRecall, HashingEmbedder, Hit, RecallIndex
from convomem.retry import CircuitBreaker
from convomem.stores import open_store

EXAMPLES = int(os.environ.get("CONVOMEM_GUARD_EXAMPLES", "25"))
LOGGER = "convomem.recall"
# Deadlines: one a healthy search never misses, even on a loaded CI machine, and one for
# tests where a blocked search must time out and a healthy one must then answer "ok".
HEALTHY = 60.0
LATE_THEN_OK = 1.0
TEXTS = [
    "I am allergic to peanuts",
    "my address is 12 Oak street",
    "the invoice total was 45 dollars",
    "we took the train to Paris",
]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Faulty:
    """A RecallIndex whose ``search`` fails as told: ``fail_next`` TransientErrors,
    then ``always`` on every call (when set); ``gate`` blocks each search until set."""

    def __init__(self, index: RecallIndex) -> None:
        self.index = index
        self.calls = 0
        self.fail_next = 0
        self.always: Exception | None = None
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def search(self, query: str, **kw: Any) -> list[Hit]:
        self.calls += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30), "the test never released the search"
        if self.fail_next:
            self.fail_next -= 1
            raise TransientError("injected: connection reset")
        if self.always is not None:
            raise self.always
        return self.index.search(query, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


@pytest.fixture
def index() -> Iterator[RecallIndex]:
    idx = RecallIndex(open_store("sqlite://"), embedder=HashingEmbedder(dim=64))
    idx.add(
        [Message(f"m{i}", "user", content=t) for i, t in enumerate(TEXTS)],
        user_id="maya",
        session_id="s1",
    )
    idx.add([Message("x1", "user", content="I love peanuts")], user_id="leo", session_id="s9")
    yield idx
    idx.close()
    idx.db.close()


@pytest.fixture
def faulty(index: RecallIndex) -> Faulty:
    return Faulty(index)


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_ok_gives_the_index_answer(index: RecallIndex, faulty: Faulty) -> None:
    guard = GuardedRecall(faulty, deadline=HEALTHY)
    out = guard.search("peanuts allergy", user_id="maya", k=2)
    assert out.status == "ok" and out.ok and out.error is None and out.elapsed >= 0
    assert out.hits == index.search("peanuts allergy", user_id="maya", k=2)
    assert out.hits[0].message_id == "m0" and faulty.calls == 1
    assert guard.counts == {"ok": 1, "failed": 0, "timeout": 0, "open": 0}
    guard.close()


def test_transient_errors_answer_failed_then_recover_logging_once(
    faulty: Faulty, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    guard = GuardedRecall(faulty, deadline=HEALTHY, breaker=CircuitBreaker(failures=5))
    faulty.fail_next = 3
    outs = [guard.search("peanuts", user_id="maya") for _ in range(4)]
    assert [o.status for o in outs] == ["failed", "failed", "failed", "ok"]
    assert all(o.hits == [] for o in outs[:3]) and outs[3].hits
    assert outs[0].error == "TransientError: injected: connection reset"
    assert faulty.calls == 4 and guard.breaker.state == "closed" and guard.available
    [warning] = records(caplog, logging.WARNING)
    assert "answering without recall" in warning.getMessage()
    [info] = records(caplog, logging.INFO)
    assert "recovered: 3 search(es)" in info.getMessage()


def test_a_backend_down_opens_the_breaker_which_recovers_after_reset(
    faulty: Faulty, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = FakeClock()
    breaker = CircuitBreaker(failures=3, reset_after=10.0, clock=clock)
    guard = GuardedRecall(faulty, deadline=HEALTHY, breaker=breaker)
    faulty.always = StoreError("database is gone")
    statuses = [guard.search("peanuts", user_id="maya").status for _ in range(6)]
    assert statuses == ["failed"] * 3 + ["open"] * 3
    assert faulty.calls == 3  # no call while open
    assert guard.search("x", user_id="maya").error == "circuit breaker open: recall skipped"
    clock.now += 10  # half-open: one trial, still down
    assert guard.search("peanuts", user_id="maya").status == "failed"
    assert faulty.calls == 4 and breaker.state == "open"
    assert guard.search("peanuts", user_id="maya").status == "open"
    clock.now += 10
    faulty.always = None  # the backend is back: the trial closes the breaker
    assert guard.search("peanuts", user_id="maya").status == "ok"
    assert breaker.state == "closed" and faulty.calls == 5
    assert guard.search("peanuts", user_id="maya").status == "ok"
    assert len(records(caplog, logging.WARNING)) == 1  # one outage, one warning
    [info] = records(caplog, logging.INFO)
    assert "recovered: 9 search(es)" in info.getMessage()


def wait_idle(guard: GuardedRecall) -> None:
    for _ in range(10_000):  # a wait, not an assertion on time
        if guard.in_flight == 0:
            return
        time.sleep(0.001)
    raise AssertionError("the late search never finished")


def test_a_slow_search_times_out_and_stuck_workers_answer_at_once(
    faulty: Faulty, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    guard = GuardedRecall(faulty, deadline=LATE_THEN_OK, max_late=1)
    faulty.gate = threading.Event()
    late = guard.search("peanuts", user_id="maya")
    assert late.status == "timeout" and late.hits == [] and faulty.calls == 1
    assert late.error == "no answer within 1.0 s"
    assert guard.in_flight == guard.late == 1  # the abandoned search still runs
    stuck = guard.search("peanuts", user_id="maya")
    assert stuck.status == "timeout" and faulty.calls == 1  # no call: the backend is stuck
    assert stuck.error == "1 late search(es) still running: the backend is stuck"
    faulty.gate.set()  # the late search finishes; its result is discarded
    wait_idle(guard)
    faulty.gate = None
    again = guard.search("peanuts", user_id="maya")
    assert again.status == "ok" and again.hits[0].message_id == "m0" and faulty.calls == 2
    assert guard.counts == {"ok": 1, "failed": 0, "timeout": 2, "open": 0}
    assert len(records(caplog, logging.WARNING)) == 1
    assert len(records(caplog, logging.INFO)) == 1
    guard.close()


def test_concurrent_healthy_searches_all_answer_and_reuse_threads(faulty: Faulty) -> None:
    """``max_late`` bounds abandoned searches, not callers: six searches in flight at once
    (the backend answers only when all six are inside) all answer "ok"."""
    guard = GuardedRecall(faulty, deadline=HEALTHY, max_late=1)
    barrier = threading.Barrier(6)
    search = faulty.index.search

    def together(*a: Any, **kw: Any) -> list[Hit]:
        barrier.wait(30)
        return search(*a, **kw)

    faulty.index.search = together  # type: ignore[method-assign]
    outs: list[str] = []

    def call() -> None:
        outs.append(guard.search("oak", user_id="maya").status)

    for _ in range(2):
        callers = [threading.Thread(target=call) for _ in range(6)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
    assert outs == ["ok"] * 12
    assert guard._workers.threads == 6  # the second round reused the first one's threads
    guard.close()


def test_timeouts_count_as_failures_for_the_breaker(faulty: Faulty) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failures=2, reset_after=5.0, clock=clock)
    guard = GuardedRecall(faulty, deadline=0.02, max_late=4, breaker=breaker)
    faulty.gate = threading.Event()
    assert [guard.search("a", user_id="maya").status for _ in range(3)] == [
        "timeout",
        "timeout",
        "open",
    ]
    assert faulty.calls == 2
    faulty.gate.set()
    wait_idle(guard)


def test_deadline_none_runs_in_the_callers_thread(faulty: Faulty) -> None:
    guard = GuardedRecall(faulty, deadline=None)
    seen: list[threading.Thread] = []
    search = faulty.index.search
    faulty.index.search = lambda *a, **kw: (
        seen.append(threading.current_thread())
        or search(  # type: ignore[method-assign]
            *a, **kw
        )
    )
    assert guard.search("peanuts", user_id="maya").ok
    assert seen == [threading.current_thread()]
    faulty.fail_next = 1
    assert guard.search("peanuts", user_id="maya").status == "failed"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"query": 3, "user_id": "maya"}, "query"),
        ({"query": "q", "user_id": ""}, "user_id"),
        ({"query": "q", "user_id": "maya", "tenant": 7}, "tenant"),
        ({"query": "q", "user_id": "maya", "k": 0}, "k"),
    ],
)
def test_bad_input_raises_and_calls_nothing(
    faulty: Faulty, call: dict[str, Any], field: str
) -> None:
    clock = FakeClock()
    guard = GuardedRecall(faulty, deadline=HEALTHY, breaker=CircuitBreaker(failures=1, clock=clock))
    with pytest.raises(ConfigError, match=f"^{field}="):
        guard.search(**call)
    assert faulty.calls == 0 and guard.breaker.state == "closed" and guard.available


def test_the_backends_other_errors_propagate_and_do_not_open_the_breaker(
    faulty: Faulty,
) -> None:
    guard = GuardedRecall(faulty, deadline=HEALTHY, breaker=CircuitBreaker(failures=1))
    with pytest.raises(ConfigError, match=r"^kinds="):
        guard.search("peanuts", user_id="maya", kinds=[])  # the index's own check
    faulty.always = RuntimeError("a bug in the backend")
    with pytest.raises(RuntimeError, match="a bug"):
        guard.search("peanuts", user_id="maya")
    assert guard.breaker.state == "closed" and guard.in_flight == 0
    faulty.always = None
    assert guard.search("peanuts", user_id="maya", kinds=["user"]).ok


def test_other_methods_pass_through(faulty: Faulty) -> None:
    guard = GuardedRecall(faulty, deadline=HEALTHY)
    assert guard.add([Message("n1", "user", content="my cat is Tom")], user_id="maya",
                     session_id="s2") == 1  # fmt: skip
    guard.submit([Message("n2", "user", content="my dog is Rex")], user_id="maya", session_id="s2")
    guard.flush()
    assert guard.search("dog Rex", user_id="maya", k=1).hits[0].message_id == "n2"
    assert guard.delete(user_id="maya", session_id="s2") == 2
    assert guard.erase_user("leo") == 1
    assert guard.embedded == faulty.index.embedded
    with pytest.raises(AttributeError):
        guard.no_such_method  # noqa: B018


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"deadline": 0}, "deadline"),
        ({"deadline": float("inf")}, "deadline"),
        ({"breaker": object()}, "breaker"),
        ({"logger": "convomem"}, "logger"),
        ({"max_late": 0}, "max_late"),
        ({"clock": 1}, "clock"),
    ],
)
def test_bad_options_name_the_field(faulty: Faulty, options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=f"^{field}="):
        GuardedRecall(faulty, **options)
    with pytest.raises(ConfigError, match=r"^index="):
        GuardedRecall(object())  # type: ignore[arg-type]


BEHAVIOUR = st.sampled_from(["ok", "ok", "transient", "store", "tick"])


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(BEHAVIOUR, min_size=1, max_size=30), failures=st.integers(1, 4))
def test_outcomes_calls_and_log_lines_follow_the_script(
    index: RecallIndex, script: list[str], failures: int
) -> None:
    """Against a brute-force reading of the outcomes: a backend call for every "ok" and
    "failed" answer (none for "open"); "ok" hits are the bare index's; one WARNING per run
    of answers without recall, one INFO per run that ends in an "ok"."""
    faulty = Faulty(index)
    clock = FakeClock()
    logger = logging.getLogger(f"{LOGGER}.test.{id(script)}")
    logger.propagate = False
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    guard = GuardedRecall(
        faulty, deadline=None, logger=logger, breaker=CircuitBreaker(failures, 3.0, clock=clock)
    )
    statuses = []
    for step in script:
        if step == "tick":
            clock.now += 2.0
            continue
        faulty.always = {"ok": None, "transient": TransientError("t"), "store": StoreError("s")}[
            step
        ]
        out = guard.search("peanuts", user_id="maya", k=3)
        statuses.append(out.status)
        if out.status == "ok":
            assert step == "ok" and out.hits == index.search("peanuts", user_id="maya", k=3)
        else:
            assert out.hits == [] and out.status in ("failed", "open")
            assert out.status == "open" or step != "ok"
    assert faulty.calls == sum(s != "open" for s in statuses)
    runs = "".join("o" if s == "ok" else "x" for s in statuses)
    down_runs = [r for r in runs.split("o") if r]
    recoveries = runs.count("xo")
    assert [r.levelno for r in seen].count(logging.WARNING) == len(down_runs)
    assert [r.levelno for r in seen].count(logging.INFO) == recoveries
    logger.removeHandler(handler)
