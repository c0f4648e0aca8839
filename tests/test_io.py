import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from convomem._io import adrive, drive


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
