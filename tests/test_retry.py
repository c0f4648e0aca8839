"""The retry policy: composable stop / wait / retry parts, sans-I/O, sync and async callers.

The schedules are checked against a simple oracle: the formulas of the documentation,
evaluated directly, with a fake clock and a replayed random generator.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, ConvomemError, TransientError
from convomem.retry import (
    RetryDecision,
    RetryPolicy,
    RetryState,
    retry_always,
    retry_if,
    retry_if_exception_type,
    retry_if_not_exception_type,
    retry_never,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_exponential,
    wait_fixed,
    wait_full_jitter,
    wait_none,
    wait_random,
)


class Clock:
    """A fake monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def state(attempt: int, elapsed: float = 0.0, rng: Any = None) -> RetryState:
    return RetryState(attempt, elapsed, TransientError("x"), rng or random.Random(0))


def decisions(policy: RetryPolicy, errors: list[BaseException]) -> list[RetryDecision]:
    """Feed failures to one operation until the policy gives up or the errors run out."""
    attempts = policy.attempts()
    out: list[RetryDecision] = []
    for e in errors:
        d = attempts.failed(e)
        out.append(d)
        if not d.retry:
            break
    return out


# -- waits against their formulas --------------------------------------------------------

finite = st.floats(min_value=0.0, max_value=50.0)


@settings(max_examples=100)
@given(
    multiplier=finite,
    cap=st.one_of(finite, st.just(math.inf)),
    base=st.floats(min_value=1.0, max_value=4.0),
    low=st.floats(min_value=0.0, max_value=5.0),
    n=st.integers(1, 40),
)
def test_wait_exponential_matches_its_formula(
    multiplier: float, cap: float, base: float, low: float, n: int
) -> None:
    low = min(low, cap)
    w = wait_exponential(multiplier=multiplier, max=cap, exp_base=base, min=low)
    for attempt in range(1, n + 1):
        expected = max(low, min(cap, multiplier * base ** (attempt - 1)))
        assert w(state(attempt)) == pytest.approx(expected)


@settings(max_examples=100)
@given(
    multiplier=finite,
    cap=finite,
    seed=st.integers(0, 2**32),
    n=st.integers(1, 30),
)
def test_full_jitter_is_uniform_below_the_capped_exponential(
    multiplier: float, cap: float, seed: int, n: int
) -> None:
    w = wait_full_jitter(multiplier, max=cap)
    rng, replay = random.Random(seed), random.Random(seed)
    for attempt in range(1, n + 1):
        ceiling = min(cap, multiplier * 2.0 ** (attempt - 1))
        got = w(state(attempt, rng=rng))
        assert got == replay.uniform(0.0, ceiling)
        assert 0.0 <= got <= ceiling


def test_waits_do_not_overflow_after_many_attempts() -> None:
    assert wait_exponential(1.0, max=3.0)(state(5000)) == 3.0
    assert wait_full_jitter(1.0, max=3.0)(state(5000)) <= 3.0
    assert wait_exponential(0.0)(state(5000)) == 0.0


@settings(max_examples=60)
@given(a=finite, b=finite, lo=finite, width=finite, seed=st.integers(0, 2**32))
def test_waits_add_up(a: float, b: float, lo: float, width: float, seed: int) -> None:
    w = wait_fixed(a) + wait_exponential(b) + wait_random(lo, lo + width) + wait_none()
    rng, replay = random.Random(seed), random.Random(seed)
    for attempt in (1, 2, 3):
        expected = a + b * 2 ** (attempt - 1) + replay.uniform(lo, lo + width)
        assert w(state(attempt, rng=rng)) == pytest.approx(expected)
    assert "wait_fixed" in repr(w)


# -- stop conditions ---------------------------------------------------------------------


@settings(max_examples=60)
@given(n=st.integers(1, 12), failures=st.integers(1, 20))
def test_stop_after_attempt_allows_exactly_n_attempts(n: int, failures: int) -> None:
    policy = RetryPolicy(stop=stop_after_attempt(n), wait=wait_none())
    out = decisions(policy, [TransientError(str(i)) for i in range(failures)])
    retried = [d for d in out if d.retry]
    assert len(retried) == min(n - 1, failures)
    assert [d.attempt for d in out] == list(range(1, len(out) + 1))
    if failures >= n:
        assert not out[-1].retry and out[-1].attempt == n
        assert out[-1].reason == f"stopped by stop_after_attempt({n})"


@settings(max_examples=60)
@given(
    limit=st.floats(min_value=0.0, max_value=20.0),
    steps=st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=15),
    n=st.integers(1, 10),
    combine=st.sampled_from(["or", "and"]),
)
def test_stop_conditions_combine_like_the_oracle(
    limit: float, steps: list[float], n: int, combine: str
) -> None:
    clock = Clock()
    stops = stop_after_attempt(n) | stop_after_delay(limit)
    if combine == "and":
        stops = stop_after_attempt(n) & stop_after_delay(limit)
    policy = RetryPolicy(stop=stops, wait=wait_none(), clock=clock)
    attempts = policy.attempts()
    start = clock.now
    for i, step in enumerate(steps, start=1):
        clock.now += step
        by_count, by_time = i >= n, clock.now - start >= limit
        expect_stop = (by_count or by_time) if combine == "or" else (by_count and by_time)
        d = attempts.failed(TransientError("x"))
        assert d.retry is not expect_stop
        if expect_stop:
            break


def test_stop_never_and_a_plain_callable() -> None:
    policy = RetryPolicy(stop=stop_never(), wait=wait_none())
    assert all(d.retry for d in decisions(policy, [TransientError("x")] * 200))
    policy = RetryPolicy(stop=lambda s: s.attempt >= 2, wait=lambda s: 0.25)
    out = decisions(policy, [TransientError("x")] * 5)
    assert [(d.retry, d.delay) for d in out] == [(True, 0.25), (False, 0.0)]


# -- retry predicates --------------------------------------------------------------------


class Boom(ConvomemError):
    pass


class Slow(TransientError):
    pass


@pytest.mark.parametrize(
    ("retry", "error", "expected"),
    [
        (None, TransientError("x"), True),
        (None, Slow("x"), True),  # subclasses count
        (None, ValueError("x"), False),
        (None, Boom("x"), False),
        (retry_if_exception_type(ValueError, KeyError), KeyError("k"), True),
        (retry_if_not_exception_type(ValueError), KeyError("k"), True),
        (retry_if_not_exception_type(ValueError), ValueError("v"), False),
        (retry_if(lambda e: "again" in str(e)), RuntimeError("try again"), True),
        (retry_if(lambda e: "again" in str(e)), RuntimeError("no"), False),
        (retry_if_exception_type(ValueError) | retry_if_exception_type(KeyError), KeyError(), True),
        (
            retry_if_exception_type(LookupError) & retry_if_exception_type(KeyError),
            IndexError(),
            False,
        ),
        (retry_always(), RuntimeError(), True),
        (retry_never(), TransientError("x"), False),
        (ValueError, ValueError(), True),  # an exception class is a shorthand
        ((KeyError, ValueError), ValueError(), True),
    ],
)
def test_retry_predicates(retry: Any, error: BaseException, expected: bool) -> None:
    policy = RetryPolicy(retry=retry, wait=wait_none())
    (d,) = decisions(policy, [error])
    assert d.retry is expected
    if not expected:
        assert d.reason == f"not retryable: {type(error).__name__}"


def test_a_non_retryable_error_gives_up_before_the_stop_and_wait_are_asked() -> None:
    asked: list[str] = []

    def stop(s: RetryState) -> bool:
        asked.append("stop")
        return False

    def wait(s: RetryState) -> float:
        asked.append("wait")
        return 0.0

    (d,) = decisions(RetryPolicy(stop=stop, wait=wait), [ValueError("x")])
    assert not d.retry and asked == []


# -- the default policy ------------------------------------------------------------------


def test_default_policy_three_attempts_with_capped_full_jitter() -> None:
    rng, replay = random.Random(3), random.Random(3)
    policy = RetryPolicy(rng=rng)
    out = decisions(policy, [TransientError("x")] * 5)
    assert [d.retry for d in out] == [True, True, False]
    assert [d.delay for d in out[:2]] == [replay.uniform(0, 0.05), replay.uniform(0, 0.1)]
    no = decisions(RetryPolicy.no_retry(), [TransientError("x")])
    assert [d.retry for d in no] == [False]


def test_each_operation_starts_afresh() -> None:
    clock = Clock()
    policy = RetryPolicy(stop=stop_after_attempt(2), wait=wait_fixed(1.0), clock=clock)
    first = policy.attempts()
    assert first.failed(TransientError("a")).retry
    assert not first.failed(TransientError("b")).retry
    clock.now += 1000
    second = policy.attempts()
    d = second.failed(TransientError("c"))
    assert d.retry and d.attempt == 1
    assert "1 failed" in repr(second)


# -- the ready-made loops ----------------------------------------------------------------


class Flaky:
    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.error = error or TransientError("busy")

    def __call__(self, x: int) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return x * 2


def test_call_retries_then_succeeds_or_raises_the_last_error() -> None:
    slept: list[float] = []
    policy = RetryPolicy(stop=stop_after_attempt(4), wait=wait_exponential(0.5))
    f = Flaky(3)
    assert policy.call(f, 21, sleep=slept.append) == 42
    assert f.calls == 4 and slept == [0.5, 1.0, 2.0]
    f = Flaky(10)
    with pytest.raises(TransientError, match="busy"):
        policy.call(f, 1, sleep=slept.append)
    assert f.calls == 4
    f = Flaky(1, ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        policy.call(f, 1, sleep=slept.append)
    assert f.calls == 1


async def test_acall_is_the_async_twin() -> None:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    flaky = Flaky(2)

    async def fn(x: int) -> int:
        await asyncio.sleep(0)
        return flaky(x)

    policy = RetryPolicy(stop=stop_after_attempt(3), wait=wait_fixed(0.2))
    assert await policy.acall(fn, 5, sleep=sleep) == 10
    assert slept == [0.2, 0.2]
    flaky = Flaky(9)
    with pytest.raises(TransientError):
        await policy.acall(fn, 5, sleep=sleep)
    assert flaky.calls == 3


# -- bad options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: stop_after_attempt(0), "attempts=0"),
        (lambda: stop_after_attempt(True), "attempts=True"),
        (lambda: stop_after_delay(-1), "seconds=-1"),
        (lambda: wait_fixed(float("nan")), "seconds=nan"),
        (lambda: wait_exponential(multiplier=-1), "multiplier=-1"),
        (lambda: wait_exponential(exp_base=0.5), "exp_base=0.5"),
        (lambda: wait_exponential(min=3, max=1), "min=3"),
        (lambda: wait_full_jitter(max=-2), "max=-2"),
        (lambda: wait_random(2, 1), "max=1"),
        (lambda: retry_if_exception_type(int), "types=<class 'int'>"),  # type: ignore[arg-type]
        (lambda: retry_if_not_exception_type(), "types=()"),
        (lambda: retry_if(3), "predicate=3"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(stop=3), "stop=3"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(wait="x"), "wait='x'"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(retry=5), "retry=5"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(rng=42), "rng=42"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(clock=None), "clock=None"),  # type: ignore[arg-type]
    ],
)
def test_bad_parts_are_config_errors_naming_the_option(make: Any, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    assert str(info.value).startswith(name), str(info.value)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1", True])
def test_a_wait_returning_nonsense_is_a_config_error(bad: Any) -> None:
    policy = RetryPolicy(wait=lambda s: bad)
    with pytest.raises(ConfigError, match="must be a finite number"):
        policy.attempts().failed(TransientError("x"))


def test_reprs_name_the_parts() -> None:
    policy = RetryPolicy(
        stop=stop_after_attempt(3) | stop_after_delay(5.0),
        wait=wait_full_jitter(0.1, max=2.0),
        retry=retry_if_exception_type(TransientError, TimeoutError),
    )
    text = repr(policy)
    for part in (
        "stop_after_attempt(3)",
        "stop_after_delay(5.0)",
        "wait_full_jitter",
        "TimeoutError",
    ):
        assert part in text
    assert retry_if_exception_type() == retry_if_exception_type(TransientError)
    assert hash(retry_if_exception_type()) == hash(retry_if_exception_type(TransientError))
