"""Retry-After hints: parsing a response's header, the wait and the stop that read the hint
off the error, the policy the model clients use, and a refused call's error."""

from __future__ import annotations

import email.message
import random

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from convomem.errors import ConfigError, SummarizerError, TransientError
from convomem.retry import (
    CircuitBreaker,
    RetryPolicy,
    RetryState,
    breaker_open,
    hinted_policy,
    parse_retry_after,
    retry_after_of,
    stop_after_attempt,
    stop_when_retry_after_exceeds,
    wait_fixed,
    wait_retry_after,
)


def hinted(seconds: float | None) -> TransientError:
    error = TransientError("429")
    error.retry_after = seconds
    return error


def state(error: BaseException, attempt: int = 1) -> RetryState:
    return RetryState(attempt, 0.0, error, random.Random(0))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"Retry-After-Ms": "1500", "Retry-After": "9"}, 1.5),  # milliseconds first
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # a date: no hint
        ({"Retry-After": "-1"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "nan"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after_reads_httpx_and_urllib_headers(
    headers: dict[str, str], expected: float | None
) -> None:
    assert parse_retry_after(httpx.Headers(headers)) == expected
    message = email.message.Message()  # what urllib's HTTPError.headers is
    for name, value in headers.items():
        message[name] = value
    assert parse_retry_after(message) == expected
    assert parse_retry_after(None) is None


@given(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), st.integers(1, 5))
def test_wait_retry_after_waits_the_hint_capped_else_the_fallback(
    hint: float | None, attempt: int
) -> None:
    wait = wait_retry_after(wait_fixed(0.7), max=4.0)
    delay = wait(state(hinted(hint), attempt))
    usable = hint is not None and hint == hint and hint not in (float("inf"), float("-inf"))
    assert delay == (min(max(0.0, hint), 4.0) if usable and hint is not None else 0.7)


def test_the_hint_is_read_off_any_error_that_carries_one() -> None:
    assert retry_after_of(hinted(2.5)) == 2.5
    assert retry_after_of(TransientError("no hint")) is None
    assert retry_after_of(ValueError("x")) is None
    bogus = TransientError("x")
    bogus.retry_after = True  # type: ignore[assignment]
    assert retry_after_of(bogus) is None


def test_a_long_hint_stops_the_retries_at_once() -> None:
    policy = RetryPolicy(
        stop=stop_after_attempt(5) | stop_when_retry_after_exceeds(5.0), wait=wait_retry_after()
    )
    assert not policy.attempts().failed(hinted(6.0)).retry
    decision = policy.attempts().failed(hinted(5.0))
    assert decision.retry and decision.delay == 5.0
    assert repr(stop_when_retry_after_exceeds(5.0)) == "stop_when_retry_after_exceeds(5.0)"


def test_hinted_policy_retries_transient_errors_only() -> None:
    policy = hinted_policy(attempts=3, max_wait=2.0)
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise hinted(0.0)
        return "ok"

    assert policy.call(flaky, sleep=lambda s: None) == "ok" and len(calls) == 3
    assert not policy.attempts().failed(SummarizerError("malformed")).retry
    assert not policy.attempts().failed(hinted(2.5)).retry  # asks for more than max_wait
    attempts = policy.attempts()
    assert attempts.failed(hinted(None)).retry and attempts.failed(hinted(None)).retry
    assert not attempts.failed(hinted(None)).retry  # the third attempt was the last


def test_max_delay_ends_the_retries_once_that_long_has_gone() -> None:
    now = [0.0]
    policy = hinted_policy(attempts=5, max_delay=10.0)
    policy = RetryPolicy(
        stop=policy.stop, wait=policy.wait, retry=policy.retry, clock=lambda: now[0]
    )
    attempts = policy.attempts()
    now[0] = 9.9
    assert attempts.failed(hinted(None)).retry
    now[0] = 10.0  # a call that timed out after the whole budget is not tried again
    assert not attempts.failed(hinted(None)).retry


def test_bad_parts_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="max="):
        wait_retry_after(max=-1)
    with pytest.raises(ConfigError, match="seconds="):
        stop_when_retry_after_exceeds(-1)
    with pytest.raises(ConfigError, match="attempts="):
        hinted_policy(attempts=0)
    with pytest.raises(ConfigError, match="max_delay="):
        hinted_policy(max_delay=-1)


def test_a_refused_call_is_transient_with_the_breakers_reset_as_its_hint() -> None:
    breaker = CircuitBreaker(failures=2, reset_after=30.0)
    breaker.record_failure()
    breaker.record_failure()
    error = breaker_open("llm:m", breaker)
    assert isinstance(error, TransientError) and error.retry_after == 30.0
    assert "llm:m" in str(error) and "2 failures" in str(error)
    assert not hinted_policy().attempts().failed(error).retry  # the fallback answers now
