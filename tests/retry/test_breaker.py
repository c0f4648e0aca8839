"""CircuitBreaker: a stateful property test against a brute-force model that replays the
whole history on every question, a fake clock, and threads racing for the half-open
trials."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from convomem.errors import ConfigError
from convomem.retry import CircuitBreaker

EXAMPLES = int(os.environ.get("CONVOMEM_BREAKER_EXAMPLES", "60"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def model_state(
    log: list[tuple[float, str]], now: float, failures: int, reset_after: float, trials: int
) -> tuple[str, int]:
    """Replay every event from the start: the state at ``now`` and how many half-open
    trials are pending (granted, unreported, younger than ``reset_after``)."""
    state, opened_at, in_a_row = "closed", 0.0, 0
    granted: list[float] = []

    def at(t: float) -> str:
        if state == "open" and t - opened_at >= reset_after:
            return "half-open"
        return state

    for t, event in log:
        s = at(t)
        if event == "allow":
            pending = [g for g in granted if t - g < reset_after]
            if s == "half-open" and len(pending) < trials:
                granted.append(t)
        elif event == "success" and s != "open":
            state, in_a_row, granted = "closed", 0, []
        elif event == "failure" and s != "open":
            in_a_row += 1
            if s == "half-open" or in_a_row >= failures:
                state, opened_at, granted = "open", t, []
    return at(now), len([g for g in granted if now - g < reset_after])


class BreakerMachine(RuleBasedStateMachine):
    @initialize(
        failures=st.integers(1, 4),
        reset_after=st.sampled_from([0.0, 1.0, 5.0, 30.0]),
        trials=st.integers(1, 3),
    )
    def make(self, failures: int, reset_after: float, trials: int) -> None:
        self.clock = FakeClock()
        self.params = (failures, reset_after, trials)
        self.breaker = CircuitBreaker(failures, reset_after, trials, clock=self.clock)
        self.log: list[tuple[float, str]] = []

    def expected(self) -> tuple[str, int]:
        return model_state(self.log, self.clock.now, *self.params)

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 4.0, 5.0, 30.0, 31.0]))
    def advance(self, dt: float) -> None:
        self.clock.now += dt

    @rule()
    def allow(self) -> None:
        state, granted = self.expected()
        want = state == "closed" or (state == "half-open" and granted < self.params[2])
        assert self.breaker.allow() is want
        self.log.append((self.clock.now, "allow"))

    @rule()
    def success(self) -> None:
        self.breaker.record_success()
        self.log.append((self.clock.now, "success"))

    @rule()
    def failure(self) -> None:
        self.breaker.record_failure()
        self.log.append((self.clock.now, "failure"))

    @invariant()
    def same_state(self) -> None:
        if hasattr(self, "breaker"):
            assert self.breaker.state == self.expected()[0]


BreakerMachine.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=40)
test_breaker_matches_model = BreakerMachine.TestCase


def test_walkthrough() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failures=2, reset_after=10.0, half_open_calls=1, clock=clock)
    b.record_failure()
    b.record_success()  # resets the run of failures
    b.record_failure()
    assert b.state == "closed" and b.allow()
    b.record_failure()
    assert b.state == "open" and not b.allow()
    clock.now += 9.9
    assert not b.allow()
    clock.now += 0.1
    assert b.state == "half-open"
    assert b.allow() and not b.allow()  # one trial only
    b.record_failure()  # the trial failed: open for another 10 s
    assert b.state == "open"
    clock.now += 10
    assert b.allow()
    b.record_success()
    assert b.state == "closed" and b.allow() and b.consecutive_failures == 0


def test_a_trial_never_reported_frees_its_place() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failures=1, reset_after=10.0, clock=clock)
    b.record_failure()
    clock.now += 10
    assert b.allow()  # this trial's caller is cancelled and never reports
    clock.now += 9
    assert not b.allow()
    clock.now += 1
    assert b.allow()


def test_reports_while_open_change_nothing() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failures=1, reset_after=10.0, clock=clock)
    b.record_failure()
    clock.now += 5
    b.record_success()  # a call admitted before the breaker opened
    b.record_failure()  # does not restart the wait either
    assert b.state == "open"
    clock.now += 5
    assert b.state == "half-open"


def test_threads_open_it_once_and_share_the_trials() -> None:
    clock = FakeClock()
    n = 16
    b = CircuitBreaker(failures=n, reset_after=1.0, half_open_calls=3, clock=clock)
    barrier = threading.Barrier(n)

    def fail() -> None:
        barrier.wait()
        b.record_failure()

    threads = [threading.Thread(target=fail) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert b.state == "open"
    clock.now += 1
    granted: list[bool] = []

    def ask() -> None:
        barrier.wait()
        granted.append(b.allow())

    threads = [threading.Thread(target=ask) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(granted).count(True) == 3


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"failures": 0}, "failures"),
        ({"failures": True}, "failures"),
        ({"reset_after": -1}, "reset_after"),
        ({"reset_after": float("nan")}, "reset_after"),
        ({"half_open_calls": 0}, "half_open_calls"),
        ({"clock": 3}, "clock"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=f"^{field}="):
        CircuitBreaker(**options)  # type: ignore[arg-type]
