import asyncio
import threading
from collections.abc import Generator
from typing import Any

import pytest

from convomem._io import Call, Sleep, adrive, arun, call, drive, run
from convomem.errors import AsyncInSyncError, ConfigError


def plan(log: list[str]) -> Generator[str, Any, str]:
    a = yield "first"
    try:
        yield "boom"
    except ValueError as exc:
        log.append(f"recovered from {exc}")
    b = yield "last"
    return f"{a}+{b}"


def perform(step: str) -> str:
    if step == "boom":
        raise ValueError("boom")
    return step.upper()


async def aperform(step: str) -> str:
    await asyncio.sleep(0)
    return perform(step)


def test_results_are_sent_back_and_errors_thrown_in() -> None:
    log: list[str] = []
    assert drive(plan(log), perform) == "FIRST+LAST"
    assert log == ["recovered from boom"]


def test_async_twin_gives_the_same_result() -> None:
    log: list[str] = []
    assert asyncio.run(adrive(plan(log), aperform)) == "FIRST+LAST"
    assert log == ["recovered from boom"]


def test_passthrough_errors_close_the_generator_and_propagate() -> None:
    closed: list[bool] = []

    def gen() -> Generator[str, Any, None]:
        try:
            yield "boom"
        except ValueError:  # pragma: no cover - must not be thrown in
            closed.append(False)
        finally:
            closed.append(True)

    with pytest.raises(ValueError, match="boom"):
        drive(gen(), perform, passthrough=(ValueError,))
    assert closed == [True]
    closed.clear()
    with pytest.raises(ValueError, match="boom"):
        asyncio.run(adrive(gen(), aperform, passthrough=(ValueError,)))
    assert closed == [True]


# -- the request vocabulary: Call / Sleep driven by run / arun ---------------------------


def calls(log: list[Any]) -> Generator[Call | Sleep, Any, list[Any]]:
    got = [(yield call(str.upper, "a"))]
    yield Sleep(0)
    try:
        yield call(int, "not a number")
    except ValueError as exc:
        log.append(type(exc).__name__)
    return got


def test_run_and_arun_perform_the_same_calls() -> None:
    log: list[Any] = []
    assert run(calls(log)) == ["A"] == asyncio.run(arun(calls(log)))
    assert log == ["ValueError", "ValueError"]


async def _twin(x: str) -> str:
    await asyncio.sleep(0)
    return f"async {x}"


def test_arun_calls_the_async_twin_and_offloads_when_asked() -> None:
    threads: list[int] = []

    def where(x: str) -> str:
        threads.append(threading.get_ident())
        return x

    def gen() -> Generator[Call, Any, tuple[Any, ...]]:
        a = yield call(str.upper, "x", afn=_twin)
        b = yield Call(where, ("y",), offload=True)
        c = yield Call(where, ("z",))
        return a, b, c

    async def main() -> tuple[Any, ...]:
        result = await arun(gen())
        assert threads[0] != threading.get_ident() and threads[1] == threading.get_ident()
        return result

    assert asyncio.run(main()) == ("async x", "y", "z")
    assert run(gen())[0] == "X"  # the sync driver calls fn


def test_run_refuses_an_awaitable_in_the_caller_or_completes_it_outside_a_loop() -> None:
    seen: list[str] = []

    def gen() -> Generator[Call, Any, str]:
        try:
            return str((yield call(_twin, "x")))
        except AsyncInSyncError:  # pragma: no cover - a refusal is not thrown in
            seen.append("thrown in")
            raise

    with pytest.raises(AsyncInSyncError, match="_twin is async"):
        run(gen())
    assert seen == []
    assert run(gen(), complete=True) == "async x"

    async def inside() -> None:
        with pytest.raises(ConfigError, match="refused"):
            run(gen(), complete=True, refuse=lambda step: ConfigError("refused"))

    asyncio.run(inside())
