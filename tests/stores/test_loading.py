"""Paginated loading: load_history / iter_history and their async twins.

Every behaviour is checked in all four forms ("sync", "async", "iter", "aiter") through
one helper, so the twins are held to the same cases. No test sleeps: the sleep function
is injected and records the delays it was asked for.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from convomem.errors import ConfigError, ConvomemError, HistoryLoadError, TransientError
from convomem.model import Message
from convomem.retry import RetryPolicy, stop_after_attempt, stop_after_delay, wait_fixed
from convomem.stores.loading import (
    InvalidPage,
    LoadProgress,
    _Loader,
    aiter_history,
    aload_history,
    iter_history,
    load_history,
)

MODES = ["sync", "async", "iter", "aiter"]
Result = tuple[list[Message], str | None]


def msg(id_: str, note: str = "") -> Message:
    return Message(id_, "user", 1, content=note or id_)


@dataclass
class Store:
    """A fake paginated store: ``pages[cursor] -> (messages, next_cursor)``.

    ``failures[cursor]`` transient failures happen before the page is served; ``raise_at``
    raises a given exception instead of serving a cursor.
    """

    pages: dict[str | None, Any]
    failures: dict[str | None, int] = field(default_factory=dict)
    raise_at: dict[str | None, BaseException] = field(default_factory=dict)
    calls: list[str | None] = field(default_factory=list)
    errors: list[TransientError] = field(default_factory=list)

    def __call__(self, cursor: str | None) -> Any:
        self.calls.append(cursor)
        if cursor in self.raise_at:
            raise self.raise_at[cursor]
        if self.failures.get(cursor, 0) > 0:
            self.failures[cursor] -= 1
            error = TransientError(f"store busy at {cursor!r} (call {len(self.calls)})")
            self.errors.append(error)
            raise error
        return self.pages[cursor]


@dataclass
class Run:
    """What one load produced: the messages (or the error), the pages streamed, sleeps."""

    messages: list[Message]
    pages: list[list[Message]]
    sleeps: list[float]
    error: BaseException | None


def run(mode: str, fetch: Callable[[str | None], Any], **options: Any) -> Run:
    """Load with ``fetch`` in one of the four forms; never raises, records the error."""
    sleeps: list[float] = []
    pages: list[list[Message]] = []
    messages: list[Message] = []
    error: BaseException | None = None

    async def afetch(cursor: str | None) -> Any:
        return fetch(cursor)

    async def asleep(delay: float) -> None:
        sleeps.append(delay)

    # A "sleep" option given by the test replaces the recorder (to test its validation).
    options.setdefault("sleep", sleeps.append if mode in ("sync", "iter") else asleep)
    try:
        if mode == "sync":
            messages = load_history(fetch, **options)
        elif mode == "iter":
            for page in iter_history(fetch, **options):
                pages.append(page)
        elif mode == "async":
            messages = asyncio.run(aload_history(afetch, **options))
        else:

            async def consume() -> None:
                async for page in aiter_history(afetch, **options):
                    pages.append(page)

            asyncio.run(consume())
    except BaseException as exc:  # the tests inspect it
        error = exc
    if mode in ("iter", "aiter"):
        messages = [m for page in pages for m in page]
    return Run(messages, pages, sleeps, error)


def ok(mode: str, fetch: Callable[[str | None], Any], **options: Any) -> list[Message]:
    result = run(mode, fetch, **options)
    if result.error is not None:
        raise result.error
    return result.messages


def seed_store() -> tuple[Store, list[Message]]:
    m1, m2, m3 = msg("m1"), msg("m2"), msg("m3")
    return Store({None: ([m1, m2], "c1"), "c1": ([m3], "c2"), "c2": ([], None)}), [m1, m2, m3]


class Top:
    """An rng that always picks the top of the range, recording each range."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.ranges.append((a, b))
        return b


# -- the seed ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_seed_example_in_exactly_three_calls(mode: str) -> None:
    store, (m1, m2, m3) = seed_store()
    result = run(mode, store)
    assert result.error is None
    assert result.messages == [m1, m2, m3]
    assert all(a is b for a, b in zip(result.messages, [m1, m2, m3], strict=True))
    assert store.calls == [None, "c1", "c2"]
    assert result.sleeps == []
    if mode in ("iter", "aiter"):
        assert result.pages == [[m1, m2], [m3]]  # the empty last page yields nothing


def test_iter_history_streams_one_page_per_step() -> None:
    store, (m1, m2, m3) = seed_store()
    pages = iter_history(store)
    assert store.calls == []  # nothing is fetched before the first step
    assert next(pages) == [m1, m2]
    assert store.calls == [None]
    assert next(pages) == [m3]
    assert store.calls == [None, "c1"]
    assert list(pages) == []
    assert store.calls == [None, "c1", "c2"]


async def test_aiter_history_streams_one_page_per_step() -> None:
    store, (m1, m2, m3) = seed_store()

    async def afetch(cursor: str | None) -> Any:
        return store(cursor)

    pages = aiter_history(afetch)
    assert store.calls == []
    assert await anext(pages) == [m1, m2]
    assert store.calls == [None]
    assert [page async for page in pages] == [[m3]]
    assert store.calls == [None, "c1", "c2"]


def test_yielded_pages_are_copies() -> None:
    page = [msg("a"), msg("b")]
    store = Store({None: (page, None)})
    (yielded,) = iter_history(store)
    assert yielded == page and yielded is not page
    yielded.clear()
    assert len(page) == 2


# -- ending ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_resume_from_a_cursor(mode: str) -> None:
    store, (_, _, m3) = seed_store()
    assert ok(mode, store, cursor="c1") == [m3]
    assert store.calls == ["c1", "c2"]


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_page_ends_the_load_even_with_a_cursor(mode: str) -> None:
    a = msg("a")
    store = Store({None: ([a], "c1"), "c1": ([], "c2"), "c2": ([msg("never")], None)})
    assert ok(mode, store) == [a]
    assert store.calls == [None, "c1"]


@pytest.mark.parametrize("mode", MODES)
def test_a_repeated_cursor_ends_the_load_with_a_warning(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    a, b, c = msg("a"), msg("b"), msg("c")
    store = Store({None: ([a], "c1"), "c1": ([b], "c2"), "c2": ([c], "c1")})
    with caplog.at_level(logging.WARNING, logger="convomem.stores.loading"):
        assert ok(mode, store) == [a, b, c]  # the looping page's own messages are kept
    assert store.calls == [None, "c1", "c2"]
    (record,) = [r for r in caplog.records if r.name == "convomem.stores.loading"]
    assert record.levelno == logging.WARNING
    assert "'c1'" in record.getMessage() and "already fetched" in record.getMessage()


@pytest.mark.parametrize("mode", MODES)
def test_a_store_that_returns_the_cursor_it_was_given_is_fetched_once(mode: str) -> None:
    store = Store({"c": ([msg("a")], "c")})
    assert [m.id for m in ok(mode, store, cursor="c")] == ["a"]
    assert store.calls == ["c"]


def endless(cursor: str | None) -> Result:
    n = 0 if cursor is None else int(cursor)
    return [msg(f"m{n}")], str(n + 1)


@pytest.mark.parametrize("mode", MODES)
def test_max_pages_raises_with_what_was_loaded_and_the_cursor(mode: str) -> None:
    calls: list[str | None] = []

    def fetch(cursor: str | None) -> Result:
        calls.append(cursor)
        return endless(cursor)

    result = run(mode, fetch, max_pages=5)
    error = result.error
    assert isinstance(error, HistoryLoadError)
    assert calls == [None, "1", "2", "3", "4"]
    assert error.cursor == "5"
    assert "max_pages=5" in str(error)
    loaded = [f"m{i}" for i in range(5)]
    if mode in ("sync", "async"):
        assert [m.id for m in error.messages] == loaded
    else:  # streamed: everything loaded was already yielded
        assert error.messages == []
        assert [m.id for m in result.messages] == loaded
    again = run(mode, fetch, cursor=error.cursor, max_pages=1)
    assert isinstance(again.error, HistoryLoadError) and again.error.cursor == "6"
    resumed = again.error.messages if mode in ("sync", "async") else again.messages
    assert [m.id for m in resumed] == ["m5"]


@pytest.mark.parametrize("mode", MODES)
def test_max_pages_is_not_an_error_when_the_last_page_ends_the_load(mode: str) -> None:
    store, expected = seed_store()
    assert ok(mode, store, max_pages=3) == expected
    store, _ = seed_store()
    error = run(mode, store, max_pages=2).error
    assert isinstance(error, HistoryLoadError) and error.cursor == "c2"
    store, _ = seed_store()
    assert ok(mode, store, cursor="c2") == []


def test_the_default_page_budget_is_100_000() -> None:
    calls = 0

    def fetch(cursor: str | None) -> Result:
        nonlocal calls
        calls += 1
        n = 0 if cursor is None else int(cursor)
        return [msg("same")], str(n + 1)

    with pytest.raises(HistoryLoadError) as info:
        load_history(fetch)
    assert calls == 100_000
    assert info.value.cursor == "100000"
    assert [m.id for m in info.value.messages] == ["same"]


# -- duplicates ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_duplicate_ids_keep_the_first_occurrence(mode: str) -> None:
    a1, b1, a2, c1, b2, c2 = (
        msg("a", "a first"),
        msg("b", "b first"),
        msg("a", "a again"),
        msg("c", "c first"),
        msg("b", "b again"),
        msg("c", "c again"),
    )
    store = Store({None: ([a1, b1, a2], "c1"), "c1": ([c1, b2, c2], None)})
    result = run(mode, store)
    assert result.error is None
    assert [m.text() for m in result.messages] == ["a first", "b first", "c first"]
    if mode in ("iter", "aiter"):
        assert [[m.id for m in p] for p in result.pages] == [["a", "b"], ["c"]]


@pytest.mark.parametrize("mode", MODES)
def test_a_page_of_only_duplicates_continues_and_yields_nothing(mode: str) -> None:
    a, b = msg("a"), msg("b")
    store = Store({None: ([a], "c1"), "c1": ([a], "c2"), "c2": ([b], None)})
    result = run(mode, store)
    assert result.messages == [a, b]
    assert store.calls == [None, "c1", "c2"]
    if mode in ("iter", "aiter"):
        assert result.pages == [[a], [b]]


# -- retries ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_transient_failures_are_retried_without_losing_or_repeating(mode: str) -> None:
    store, expected = seed_store()
    store.failures = {None: 2, "c1": 3}
    result = run(mode, store, rng=random.Random(7))
    assert result.error is None
    assert result.messages == expected
    assert store.calls == [None, None, None, "c1", "c1", "c1", "c1", "c2"]
    assert len(result.sleeps) == 5


@pytest.mark.parametrize("mode", MODES)
def test_exhausted_retries_raise_with_progress_and_chain(mode: str) -> None:
    store, (m1, m2, m3) = seed_store()
    store.failures = {"c1": 4}
    result = run(mode, store, retries=3)
    error = result.error
    assert isinstance(error, HistoryLoadError)
    assert error.cursor == "c1"
    assert error.__cause__ is store.errors[-1]
    assert isinstance(error.__cause__, TransientError)
    assert store.calls == [None] + ["c1"] * 4
    assert len(result.sleeps) == 3
    assert "fetch_page('c1') failed 4 times" in str(error)
    if mode in ("sync", "async"):
        assert error.messages == [m1, m2]
    else:
        assert error.messages == [] and result.messages == [m1, m2]
    # Resume from the cursor the error carries: nothing is lost or repeated.
    store.failures.clear()
    assert ok(mode, store, cursor=error.cursor) == [m3]


@pytest.mark.parametrize("mode", MODES)
def test_retries_zero_fails_on_the_first_transient_error(mode: str) -> None:
    store, _ = seed_store()
    store.failures = {None: 1}
    result = run(mode, store, retries=0)
    assert isinstance(result.error, HistoryLoadError)
    assert result.error.messages == [] and result.error.cursor is None
    assert store.calls == [None] and result.sleeps == []


@pytest.mark.parametrize("mode", MODES)
def test_a_transient_error_subclass_is_retried(mode: str) -> None:
    class Timeout(TransientError):
        pass

    calls = 0

    def fetch(cursor: str | None) -> Result:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Timeout("slow")
        return [msg("a")], None

    assert [m.id for m in ok(mode, fetch)] == ["a"]
    assert calls == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("exc", [KeyError("gone"), ValueError("bad"), ConvomemError("x")])
def test_any_other_exception_propagates_at_once(mode: str, exc: Exception) -> None:
    store, _ = seed_store()
    store.failures = {"c1": 1}
    store.raise_at = {"c2": exc}
    result = run(mode, store)
    assert result.error is exc
    assert store.calls == [None, "c1", "c1", "c2"]  # no retry of c2
    assert len(result.sleeps) == 1


@pytest.mark.parametrize("mode", MODES)
def test_backoff_is_exponential_capped_and_fully_jittered(mode: str) -> None:
    store = Store({None: ([msg("a")], None)}, failures={None: 8})
    rng = Top()
    result = run(mode, store, retries=8, rng=rng)
    assert result.error is None
    ceilings = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert rng.ranges == [(0.0, c) for c in ceilings]
    assert result.sleeps == ceilings


@pytest.mark.parametrize("mode", MODES)
def test_backoff_attempts_restart_for_each_page(mode: str) -> None:
    store, _ = seed_store()
    store.failures = {None: 2, "c1": 2}
    assert run(mode, store, rng=Top(), base_delay=1.0, max_delay=10.0).sleeps == [1, 2, 1, 2]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_many_retries_do_not_overflow(mode: str) -> None:
    store = Store({None: ([msg("a")], None)}, failures={None: 80})
    result = run(mode, store, retries=80, base_delay=1.0, max_delay=3.0)
    assert result.error is None
    assert len(result.sleeps) == 80
    assert all(0.0 <= d <= 3.0 for d in result.sleeps)


def test_default_sleep_and_rng_work_without_injection() -> None:
    store, expected = seed_store()
    store.failures = {"c1": 1}
    assert load_history(store, base_delay=0.0) == expected  # time.sleep(0.0)
    assert store.calls == [None, "c1", "c1", "c2"]


async def test_async_default_sleep_and_rng_work_without_injection() -> None:
    store, expected = seed_store()
    store.failures = {"c1": 1}

    async def afetch(cursor: str | None) -> Any:
        await asyncio.sleep(0)
        return store(cursor)

    assert await aload_history(afetch, base_delay=0.0) == expected  # asyncio.sleep(0.0)
    assert store.calls == [None, "c1", "c1", "c2"]


# -- progress --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_on_page_reports_progress_after_each_page(mode: str) -> None:
    a, b = msg("a"), msg("b")
    store = Store({None: ([a, b], "c1"), "c1": ([b], "c2"), "c2": ([], None)}, failures={"c1": 2})
    seen: list[LoadProgress] = []
    assert ok(mode, store, on_page=seen.append, rng=random.Random(1)) == [a, b]
    assert seen == [
        LoadProgress(1, 2, 2, 0, 0, None, "c1", False),
        LoadProgress(2, 2, 0, 1, 2, "c1", "c2", False),
        LoadProgress(3, 2, 0, 1, 2, "c2", None, True),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_an_on_page_error_propagates(mode: str) -> None:
    store, _ = seed_store()
    boom = RuntimeError("callback failed")

    def on_page(progress: LoadProgress) -> None:
        if progress.pages == 2:
            raise boom

    assert run(mode, store, on_page=on_page).error is boom
    assert store.calls == [None, "c1"]


# -- bad results -----------------------------------------------------------------------


BAD_RESULTS: list[tuple[Any, str]] = [
    ([msg("x")], "result="),
    (None, "result=None"),
    (([msg("x")],), "result="),
    (([msg("x")], None, "extra"), "result="),
    ("page", "result='page'"),
    (({"x": 1}, None), "messages="),
    (("abc", None), "messages='abc'"),
    ((None, None), "messages=None"),
    (([msg("x")], 5), "next_cursor=5"),
    (([msg("x")], b"c3"), "next_cursor=b'c3'"),
    (([msg("x"), "y"], None), r"messages\[1\]='y'"),
    (([msg("x"), {"id": "y", "role": "user"}], None), r"messages\[1\]="),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("bad", "names"), BAD_RESULTS)
def test_a_malformed_result_names_the_page_and_the_value(mode: str, bad: Any, names: str) -> None:
    a = msg("a")
    store = Store({None: ([a], "c1"), "c1": bad})
    result = run(mode, store)
    error = result.error
    assert isinstance(error, InvalidPage)
    assert isinstance(error, TypeError) and isinstance(error, ConvomemError)
    assert error.page == 2 and error.cursor == "c1"
    assert str(error).startswith("page 2 (fetch_page('c1')): ")
    assert result.sleeps == []
    assert re.search(names, str(error)), str(error)
    assert store.calls == [None, "c1"]  # not retried
    if mode in ("iter", "aiter"):
        assert result.pages == [[a]]


@pytest.mark.parametrize("mode", MODES)
def test_tuples_are_accepted_as_pages(mode: str) -> None:
    a, b = msg("a"), msg("b")
    store = Store({None: ((a, b), None)})
    assert ok(mode, store) == [a, b]


def test_a_bad_page_leaves_the_loader_state_untouched() -> None:
    loader = _Loader(
        seed_store()[0],
        cursor=None,
        max_pages=10,
        retries=3,
        base_delay=0.0,
        max_delay=0.0,
        sleep=lambda delay: None,
        rng=None,
        on_page=None,
        collect=True,
    )
    a, b = msg("a"), msg("b")
    with pytest.raises(InvalidPage, match=r"messages\[1\]='oops'"):
        loader.accept(([a, "oops"], "c1"))
    assert loader.pages == 0 and loader.messages == [] and loader.cursor is None
    assert list(loader.accept(([a, b], "c1"))) == [a, b]  # "a" was not marked as seen
    assert loader.pages == 1 and loader.cursor == "c1"


def test_sync_loader_rejects_an_async_fetch_page_without_leaking_a_coroutine() -> None:
    async def afetch(cursor: str | None) -> Result:
        return [], None

    with pytest.raises(InvalidPage, match="use aload_history"):
        load_history(afetch)  # type: ignore[arg-type]


async def test_async_loader_rejects_a_sync_fetch_page() -> None:
    store, _ = seed_store()
    with pytest.raises(InvalidPage, match="not awaitable; use load_history"):
        await aload_history(store)
    assert store.calls == [None]


# -- options ---------------------------------------------------------------------------


BAD_OPTIONS: list[tuple[str, Any]] = [
    ("cursor", 5),
    ("cursor", b"c"),
    ("max_pages", 0),
    ("max_pages", -1),
    ("max_pages", True),
    ("max_pages", 1.5),
    ("max_pages", "10"),
    ("retries", -1),
    ("retries", False),
    ("retries", 2.0),
    ("base_delay", -0.1),
    ("base_delay", float("nan")),
    ("base_delay", float("inf")),
    ("base_delay", True),
    ("base_delay", "0.05"),
    ("max_delay", -1),
    ("max_delay", None),
    ("sleep", None),
    ("sleep", 0.5),
    ("rng", 42),
    ("rng", object()),
    ("on_page", "print"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("option", "value"), BAD_OPTIONS)
def test_bad_options_raise_config_error_naming_them(mode: str, option: str, value: Any) -> None:
    store, _ = seed_store()
    error = run(mode, store, **{option: value}).error
    assert isinstance(error, ConfigError) and isinstance(error, ValueError)
    assert str(error).startswith(f"{option}={value!r}: "), str(error)
    assert store.calls == []


@pytest.mark.parametrize("loader", [load_history, iter_history])
def test_a_non_callable_fetch_page_is_rejected(loader: Callable[..., Any]) -> None:
    with pytest.raises(ConfigError, match="fetch_page=42"):
        loader(42)


async def test_async_non_callable_fetch_page_is_rejected() -> None:
    with pytest.raises(ConfigError, match="fetch_page=42"):
        await aload_history(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="fetch_page=42"):
        aiter_history(42)  # type: ignore[arg-type]


def test_iter_history_checks_options_at_call_time() -> None:
    store, _ = seed_store()
    with pytest.raises(ConfigError, match="retries=-1"):
        iter_history(store, retries=-1)  # before any iteration


# -- property tests against an oracle --------------------------------------------------


@dataclass
class Layout:
    """A random store: page k lives at cursor keys[k]; ``nexts[k]`` is its next cursor."""

    start: str | None
    pages: dict[str | None, Result]
    failures: dict[str | None, int]

    def store(self) -> Store:
        return Store(dict(self.pages), dict(self.failures))


def keys_for(n: int) -> list[str | None]:
    return [None] + [f"c{k}" for k in range(1, n)]


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    n = draw(st.integers(min_value=1, max_value=7))
    keys = keys_for(n)
    pages: dict[str | None, Result] = {}
    for k, key in enumerate(keys):
        ids = draw(st.lists(st.sampled_from("abcdefghij"), max_size=5))
        messages = [msg(id_, f"{id_}@page{k}.{i}") for i, id_ in enumerate(ids)]
        link = draw(st.sampled_from(["next", "next", "next", "end", "loop"]))
        if link == "next" and k + 1 < n:
            nxt = keys[k + 1]
        elif link == "loop":
            nxt = keys[draw(st.integers(min_value=0, max_value=k))]
            if nxt is None:
                nxt = "c1" if n > 1 else None  # None would end, not loop
        else:
            nxt = None
        pages[key] = (messages, nxt)
    failures = {key: draw(st.integers(min_value=0, max_value=4)) for key in keys}
    start = draw(st.sampled_from(keys))
    return Layout(start, pages, failures)


def walk(layout: Layout) -> Iterator[str | None]:
    """The cursors a correct load fetches, in order (each once)."""
    cursor, given = layout.start, [layout.start]
    while True:
        yield cursor
        page, nxt = layout.pages[cursor]
        if nxt is None or not page or nxt in given:
            return
        given.append(nxt)
        cursor = nxt


def first_occurrences(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for m in messages:
        if all(m.id != kept.id for kept in out):
            out.append(m)
    return out


@dataclass
class Expected:
    messages: list[Message]  # loaded before the load ended or failed
    calls: list[str | None]
    attempts: list[int]  # the backoff attempt index of each sleep
    failed_at: str | bool | None  # the cursor that used up its retries, or False


def expect(layout: Layout, retries: int) -> Expected:
    fetched: list[Message] = []
    calls: list[str | None] = []
    attempts: list[int] = []
    for cursor in walk(layout):
        failures = layout.failures.get(cursor, 0)
        calls += [cursor] * (min(failures, retries + 1) + (failures <= retries))
        attempts += list(range(min(failures, retries)))
        if failures > retries:
            return Expected(first_occurrences(fetched), calls, attempts, cursor)
        fetched += layout.pages[cursor][0]
    return Expected(first_occurrences(fetched), calls, attempts, False)


def same(a: list[Message], b: list[Message]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


@settings(max_examples=120, deadline=None)
@given(
    layout=layouts(),
    mode=st.sampled_from(MODES),
    retries=st.integers(min_value=0, max_value=3),
    base=st.floats(min_value=0.0, max_value=1.0),
    cap=st.floats(min_value=0.0, max_value=3.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_loading_matches_the_oracle(
    layout: Layout, mode: str, retries: int, base: float, cap: float, seed: int
) -> None:
    store = layout.store()
    progress: list[LoadProgress] = []
    result = run(
        mode,
        store,
        cursor=layout.start,
        retries=retries,
        base_delay=base,
        max_delay=cap,
        rng=random.Random(seed),
        on_page=progress.append,
    )
    want = expect(layout, retries)
    assert store.calls == want.calls
    # Full jitter, replayed: uniform(0, min(cap, base * 2**attempt)) from the same rng.
    replay = random.Random(seed)
    ceilings = [min(cap, base * 2**attempt) for attempt in want.attempts]
    assert result.sleeps == [replay.uniform(0.0, c) for c in ceilings]
    assert all(0.0 <= d <= c for d, c in zip(result.sleeps, ceilings, strict=True))
    assert [p.pages for p in progress] == list(range(1, len(progress) + 1))
    assert [p.retries for p in progress] == sorted(p.retries for p in progress)
    if want.failed_at is False:
        assert result.error is None
        assert same(result.messages, want.messages)
        assert progress and progress[-1].done and progress[-1].loaded == len(want.messages)
        return
    error = result.error
    assert isinstance(error, HistoryLoadError)
    assert error.cursor == want.failed_at
    assert error.__cause__ is store.errors[-1]
    loaded = error.messages if mode in ("sync", "async") else result.messages
    assert same(loaded, want.messages)
    if mode in ("iter", "aiter"):
        assert error.messages == []


@settings(max_examples=80, deadline=None)
@given(layout=layouts(), mode=st.sampled_from(MODES), retries=st.integers(0, 2))
def test_resuming_after_a_failure_loses_nothing(layout: Layout, mode: str, retries: int) -> None:
    store = layout.store()
    complete = expect(Layout(layout.start, layout.pages, {}), retries).messages
    first = run(mode, store, cursor=layout.start, retries=retries)
    if first.error is None:
        assert same(first.messages, complete)
        return
    assert isinstance(first.error, HistoryLoadError)
    before = first.error.messages if mode in ("sync", "async") else first.messages
    store.failures.clear()
    rest = ok(mode, store, cursor=first.error.cursor)
    # Duplicates across the two loads are the caller's to drop (a new load has no memory
    # of the ids the first one saw); after that, nothing is lost and the order holds.
    assert same(first_occurrences(before + rest), complete)


# -- the shared retry policy -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_policy_replaces_the_shorthands(mode: str) -> None:
    store, expected = seed_store()
    store.failures = {None: 2, "c1": 1}
    policy = RetryPolicy(stop=stop_after_attempt(3), wait=wait_fixed(0.25))
    result = run(mode, store, retry=policy)
    assert result.error is None and result.messages == expected
    assert result.sleeps == [0.25, 0.25, 0.25]
    store, _ = seed_store()
    store.failures = {"c1": 3}
    error = run(mode, store, retry=policy).error
    assert isinstance(error, HistoryLoadError) and error.cursor == "c1"
    assert "failed 3 times" in str(error)


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_policy_decides_which_errors_are_retried(mode: str) -> None:
    store, expected = seed_store()
    store.raise_at = {}
    calls = 0

    def fetch(cursor: str | None) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError("slow")
        return store(cursor)

    policy = RetryPolicy(retry=(TransientError, TimeoutError), wait=wait_fixed(0.0))
    assert ok(mode, fetch, retry=policy) == expected
    calls = 0
    assert isinstance(run(mode, fetch).error, TimeoutError)  # the default: TransientError only


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_policy_that_stops_by_time(mode: str) -> None:
    clock = [0.0]
    store = Store({None: ([msg("a")], None)}, failures={None: 100})

    def tick(delay: float) -> None:
        clock[0] += delay

    policy = RetryPolicy(stop=stop_after_delay(1.0), wait=wait_fixed(0.3), clock=lambda: clock[0])
    if mode in ("sync", "iter"):
        result = run(mode, store, retry=policy, sleep=tick)
    else:

        async def atick(delay: float) -> None:
            tick(delay)

        result = run(mode, store, retry=policy, sleep=atick)
    assert isinstance(result.error, HistoryLoadError)
    assert store.calls == [None] * 5  # failures at t=0, .3, .6, .9, then 1.2 >= 1.0


@pytest.mark.parametrize(
    ("option", "value"), [("retries", 5), ("base_delay", 1.0), ("max_delay", 9), ("rng", Top())]
)
def test_retry_and_its_shorthands_are_exclusive(option: str, value: Any) -> None:
    store, _ = seed_store()
    with pytest.raises(ConfigError, match=f"^{option}=.*not both"):
        load_history(store, retry=RetryPolicy(), **{option: value})
    with pytest.raises(ConfigError, match="retry=3: must be a RetryPolicy"):
        load_history(store, retry=3)  # type: ignore[arg-type]
    assert store.calls == []


# -- logging why a load ended ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_page_end_is_logged_at_info(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    store = Store({None: ([msg("a")], "c1"), "c1": ([], "c2")})
    with caplog.at_level(logging.DEBUG, logger="convomem.stores.loading"):
        assert [m.id for m in ok(mode, store)] == ["a"]
    (record,) = [r for r in caplog.records if r.name == "convomem.stores.loading"]
    assert record.levelno == logging.INFO
    text = record.getMessage()
    assert "empty page" in text and "'c1'" in text and "'c2'" in text and "1 messages" in text


@pytest.mark.parametrize("mode", MODES)
def test_a_normal_end_is_logged_at_debug_only(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    store, _ = seed_store()
    store.pages["c1"] = ([msg("m3")], None)
    with caplog.at_level(logging.DEBUG, logger="convomem.stores.loading"):
        ok(mode, store)
    records = [r for r in caplog.records if r.name == "convomem.stores.loading"]
    assert [r.levelno for r in records] == [logging.DEBUG]
    assert "complete after 2 pages, 3 messages" in records[0].getMessage()


# -- hostile stores: whatever a store answers, nothing is lost or repeated, and it ends ---


class Hostile:
    """A store whose every answer is drawn by hypothesis as the load goes: pages that
    repeat earlier ones, ids seen on earlier pages, cursors that loop back or point to
    themselves, transient failures, malformed results. It records what it served."""

    def __init__(self, data: st.DataObject, failure_budget: int) -> None:
        self.data = data
        self.failures_left = failure_budget
        self.served: list[list[Message]] = []  # the valid pages, in the order served
        self.cursors: list[str] = []
        self.calls = 0
        self.invalid = False
        self.fresh = 0

    def __call__(self, cursor: str | None) -> Any:
        self.calls += 1
        draw = self.data.draw
        action = draw(st.sampled_from(["page"] * 6 + ["fail", "repeat", "bad"]), label="act")
        if action == "fail" and self.failures_left > 0:
            self.failures_left -= 1
            raise TransientError("hostile store busy")
        if action == "bad":
            self.invalid = True
            return draw(st.sampled_from([None, ([msg("x")], 5), (["y"], None), "page"]))
        if action == "repeat" and self.served:
            page = list(self.served[draw(st.integers(0, len(self.served) - 1))])
        else:
            ids = draw(st.lists(st.sampled_from("abcdefgh"), max_size=4), label="ids")
            page = [msg(i, f"{i}#{self.calls}.{k}") for k, i in enumerate(ids)]
        link = draw(st.sampled_from(["fresh", "fresh", "none", "back", "self"]), label="link")
        if link == "none":
            nxt = None
        elif link == "back" and self.cursors:
            nxt = draw(st.sampled_from(self.cursors))
        elif link == "self" and cursor is not None:
            nxt = cursor
        else:
            self.fresh += 1
            nxt = f"k{self.fresh}"
        if nxt is not None:
            self.cursors.append(nxt)
        self.served.append(page)
        return page, nxt


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    mode=st.sampled_from(MODES),
    retries=st.integers(0, 3),
    max_pages=st.integers(1, 12),
    failure_budget=st.integers(0, 6),
)
def test_hostile_stores_never_lose_or_repeat_a_served_message_and_always_end(
    data: st.DataObject, mode: str, retries: int, max_pages: int, failure_budget: int
) -> None:
    store = Hostile(data, failure_budget)
    result = run(mode, store, retries=retries, max_pages=max_pages, rng=random.Random(0))
    # It ends: at most max_pages pages, each tried at most retries + 1 times.
    assert store.calls <= max_pages * (retries + 1)
    assert len(store.served) <= max_pages
    served = [m for page in store.served for m in page]
    want = first_occurrences(served)
    error = result.error
    if isinstance(error, InvalidPage):
        assert store.invalid and error.page == len(store.served) + 1
    elif error is not None:
        assert isinstance(error, HistoryLoadError)
    # Nothing lost, nothing repeated, in the order served (objects, not copies).
    if mode in ("iter", "aiter") or error is None:
        got = result.messages
    elif isinstance(error, HistoryLoadError):
        got = error.messages
    else:
        return  # an InvalidPage from load_history carries no messages (see the report)
    assert same(got, want)
    assert len({m.id for m in got}) == len(got)


class Resume(RuleBasedStateMachine):
    """Loads resumed from the cursor of each failure, against a fixed paged history:
    the union of every load, first occurrences kept, is always a prefix of the history,
    and once the store stops failing a resumed load completes it."""

    def __init__(self) -> None:
        super().__init__()
        self.history = [msg(f"h{i}") for i in range(23)]
        self.pages: dict[str | None, Result] = {}
        keys: list[str | None] = [None] + [f"p{k}" for k in range(1, 6)]
        for k, key in enumerate(keys):
            nxt = keys[k + 1] if k + 1 < len(keys) else None
            self.pages[key] = (self.history[k * 5 : k * 5 + 5], nxt)
        self.store = Store(dict(self.pages))
        self.loaded: list[Message] = []
        self.cursor: str | None = None
        self.finished = False

    @rule(key=st.sampled_from([None, "p1", "p2", "p3", "p4"]), n=st.integers(1, 4))
    def break_a_page(self, key: str | None, n: int) -> None:
        self.store.failures[key] = self.store.failures.get(key, 0) + n

    @precondition(lambda self: not self.finished)
    @rule(mode=st.sampled_from(MODES), retries=st.integers(0, 2))
    def load(self, mode: str, retries: int) -> None:
        result = run(mode, self.store, cursor=self.cursor, retries=retries)
        if result.error is None:
            self.loaded += result.messages
            self.finished = True
            return
        error = result.error
        assert isinstance(error, HistoryLoadError)
        self.loaded += error.messages if mode in ("sync", "async") else result.messages
        self.cursor = error.cursor

    @invariant()
    def a_prefix_of_the_history_each_message_once(self) -> None:
        got = first_occurrences(self.loaded)
        assert same(got, self.history[: len(got)])
        if self.finished:
            assert same(got, self.history)


Resume.TestCase.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)
test_resumed_loads_complete_the_history = Resume.TestCase
