"""Summary, the summarizer adapter, built-in summarizers and RunningSummary."""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem import summaries as summaries_mod
from convomem.errors import (
    AsyncSummarizerError,
    ConfigError,
    InvalidMessage,
    SummarizerError,
    TransientError,
)
from convomem.model import Message, ToolUseBlock
from convomem.summaries import (
    SEGMENT_KEY,
    ExtractiveSummarizer,
    RunningSummary,
    Summary,
    TruncatingSummarizer,
    as_summarizer,
    asummarize,
    clip_to_tokens,
    summarize,
    transcript,
)
from convomem.summaries import adapter as adapter_mod
from convomem.summaries.facts import Fact
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")

FILLER_TEXT = (
    "the weather was nice so we talked about shipping options and the usual delays while "
    "support checked the queue again and everyone agreed to wait a little longer for news"
)
FILLER = FILLER_TEXT.split()


def filler(i: int, n: int = 14) -> str:
    words = [FILLER[(i * 7 + k * 3) % len(FILLER)] for k in range(n)]
    return " ".join(words).capitalize() + "."


def msgs(n: int, start: int = 0) -> list[Message]:
    return [
        Message(f"m{i}", "user" if i % 2 == 0 else "assistant", content=filler(i))
        for i in range(start, start + n)
    ]


class Counting:
    """A deterministic summarizer that records what it was given."""

    name = "counting"

    def __init__(self, words: int = 6) -> None:
        self.calls: list[tuple[list[Message], Summary | None]] = []
        self.words = words

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls.append((list(messages), previous))
        ids = [m.id for m in messages if not m.metadata.get(SEGMENT_KEY)]
        head = f"[{ids[0]}..{ids[-1]}]" if ids else "[merge]"
        return head + " " + " ".join(FILLER[: self.words])

    def message_ids(self) -> list[str]:
        """Ids of real messages passed in (merges pass summary segments, not messages)."""
        return [m.id for ms, _ in self.calls for m in ms if not m.metadata.get(SEGMENT_KEY)]


class Failing:
    name = "failing"

    def __init__(self, exc: Exception | None = None, *, times: int = 10**9) -> None:
        self.exc = exc or TransientError("service down")
        self.times = times
        self.calls = 0

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise self.exc
        return "recovered summary"


def snapshot(rs: RunningSummary) -> tuple[Any, ...]:
    return (
        rs.current(),
        rs.message(),
        rs.segments,
        tuple(rs.covered_ids),
        rs.ledger.facts,
        rs.ledger.render(),
    )


# -- Summary -------------------------------------------------------------------------


def test_summary_renders_as_a_stable_system_message() -> None:
    a = Summary("text", "m1", "m9", 9, "x", 12, created_at=1.0)
    b = Summary("text", "m1", "m9", 9, "x", 12, created_at=2.0)
    ma, mb = a.to_message(), b.to_message()
    assert ma.role == "system" and ma.tokens == 12
    assert ma == mb and ma.id == mb.id  # same coverage: same message, whatever the time
    assert ma.id.startswith("summary_")
    assert Summary("text", "m1", "m10", 10).id != a.id
    assert ma.metadata["summary"]["count"] == 9
    assert Summary("x").id == Summary("x").id != Summary("y").id  # no coverage: by text


def test_summary_content_carries_header_facts_and_text() -> None:
    s = Summary("the narrative", facts=(Fact("reference", "order 1182"),), facts_omitted=2)
    lines = s.content.splitlines()
    assert lines[0] == summaries_mod.SUMMARY_HEADER
    assert "- reference: order 1182" in lines
    assert "(2 more facts omitted)" in lines
    assert lines[-1] == "the narrative"
    assert Summary("t", header="").content == "t"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": 3}, "Summary.text"),
        ({"count": -1}, "Summary.count"),
        ({"tokens": 1.5}, "Summary.tokens"),
    ],
)
def test_summary_validates_fields(kwargs: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"text": "t"} | kwargs
    with pytest.raises(InvalidMessage) as info:
        Summary(**args)
    assert info.value.field == field


# -- the adapter ---------------------------------------------------------------------

M = [Message("a", "user", content="hello there")]
PREV = Summary("before")


def test_adapter_accepts_both_forms() -> None:
    def two(messages: Sequence[Message], previous: Summary | None) -> str:
        return f"two:{len(messages)}:{previous.text if previous else None}"

    def one(messages: list[Message]) -> str:
        return f"one:{len(messages)}"

    def kw(messages: list[Message], *, previous: Summary | None = None) -> str:
        return f"kw:{previous.text if previous else None}"

    def opt(messages: list[Message], limit: int = 3) -> str:  # a default that is not previous
        return f"opt:{limit}"

    assert as_summarizer(two)(M, PREV) == "two:1:before"
    assert as_summarizer(one)(M, PREV) == "one:1"
    assert as_summarizer(kw)(M, PREV) == "kw:before"
    assert as_summarizer(opt)(M, PREV) == "opt:3"
    assert as_summarizer(lambda *a: str(len(a)))(M, PREV) == "2"
    assert as_summarizer(functools.partial(two))(M, None) == "two:1:None"
    assert summarize(one, M) == "one:1"
    assert as_summarizer(two).name == "two"
    ad = as_summarizer(one)
    assert as_summarizer(ad) is ad


def test_signature_is_inspected_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = inspect.signature

    def counting(fn: Any) -> inspect.Signature:
        calls.append(fn)
        return real(fn)

    monkeypatch.setattr(adapter_mod.inspect, "signature", counting)
    ad = as_summarizer(lambda ms, prev: "x")
    for _ in range(5):
        ad(M, None)
    assert len(calls) == 1


def test_adapter_rejects_bad_summarizers() -> None:
    with pytest.raises(ConfigError, match="must be callable"):
        as_summarizer("nope")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="first argument"):
        as_summarizer(lambda: "x")
    with pytest.raises(SummarizerError, match="returned int"):
        as_summarizer(lambda ms: 3)(M)


def test_async_summarizer_from_sync_code() -> None:
    async def asum(messages: Sequence[Message], previous: Summary | None) -> str:
        await asyncio.sleep(0)
        return "async summary"

    ad = as_summarizer(asum)
    assert ad.is_async
    assert ad(M) == "async summary"  # no running loop: run to completion

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="use the async method"):
            ad(M)
        with pytest.raises(AsyncSummarizerError):
            as_summarizer(lambda ms: asum(ms, None))(M)  # a sync fn returning a coroutine
        assert await ad.acall(M) == "async summary"
        assert await asummarize(asum, M, PREV) == "async summary"

    asyncio.run(inside())


async def test_async_path_prefers_an_async_twin() -> None:
    class Twin:
        name = "twin"

        def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
            return "sync"

        async def acall(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
            return "async"

    class AsyncCallable:
        async def __call__(self, messages: Sequence[Message]) -> str:
            return "callable"

    ad = as_summarizer(Twin())
    assert not ad.is_async
    assert ad(M) == "sync"
    assert await ad.acall(M) == "async"
    assert await as_summarizer(AsyncCallable()).acall(M) == "callable"
    assert as_summarizer(AsyncCallable()).is_async
    assert await as_summarizer(lambda ms: "plain").acall(M) == "plain"


# -- text helpers --------------------------------------------------------------------


def test_transcript_labels_messages_and_tool_calls() -> None:
    ms = [
        Message("u", "user", content="Where is my parcel?", name="ann"),
        Message("a", "assistant", content=[ToolUseBlock("c1", "track", {"id": 7})]),
        Message("s", "system", content="seg text", metadata={SEGMENT_KEY: True}),
        Message("e", "user", content=""),
    ]
    assert transcript(ms).splitlines() == [
        "user(ann): Where is my parcel?",
        'assistant: [called track({"id": 7})]',
        "seg text",
    ]


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=300), st.integers(0, 80))
def test_clip_to_tokens_fits_and_is_a_prefix(text: str, limit: int) -> None:
    out = clip_to_tokens(text, limit, APPROX.count)
    assert APPROX.count(out) <= limit
    if APPROX.count(text) <= limit:
        assert out == text
    elif out:
        assert out.endswith(summaries_mod.TRUNCATION_MARKER)
        assert text.startswith(out[: -len(summaries_mod.TRUNCATION_MARKER)])


# -- built-in summarizers ------------------------------------------------------------


def test_extractive_picks_informative_sentences_in_order() -> None:
    ms = [
        Message("1", "user", content="Hi there. My order 1182 never arrived. Thanks a lot."),
        Message("2", "assistant", content="Ok. Sure. I will check order 1182 with the courier."),
        Message("3", "user", content="Ok thanks. I prefer email updates, please."),
    ]
    ex = ExtractiveSummarizer(max_tokens=40)
    out = ex(ms)
    assert APPROX.count(out) <= 40
    assert "My order 1182 never arrived." in out
    assert "I prefer email updates, please." in out
    assert "Hi there." not in out and "Ok thanks." not in out
    assert out.index("1182") < out.index("email")  # original order kept
    assert out.splitlines()[0].startswith("user: ")
    assert ex(ms) == out  # deterministic


def test_extractive_folds_the_previous_summary_in() -> None:
    prev = Summary("user: My name is Dana Scully and my order 88123 is lost.")
    out = ExtractiveSummarizer(max_tokens=60)(msgs(2), prev)
    assert out.startswith("user: My name is Dana Scully")
    assert ExtractiveSummarizer()([]) == ""
    assert ExtractiveSummarizer()([Message("x", "user", content="   ")], None) == ""


def test_extractive_keeps_a_huge_sentence_whole_or_leaves_it_out() -> None:
    """Never cut where a value is: a sentence over half the budget is read as its
    clauses, and a clause that cannot fit is left out whole; one with no value at all
    is shown by its first words and "…"."""
    big = " ".join(f"word{i}" for i in range(500))
    out = ExtractiveSummarizer(max_tokens=30)([Message("b", "user", content=big)])
    assert out.startswith("user: word0 word1") and out.endswith(" …")  # no value: its start
    with_value = big.replace("word250", "order 4417")
    out = ExtractiveSummarizer(max_tokens=30)([Message("b", "user", content=with_value)])
    assert out == ""  # a value in it, no clause to keep whole: left out, not cut
    long = "Refund R-4417-1 of $14.95 is approved, " + ", ".join(
        f"and item {i} was checked" for i in range(30)
    )
    out = ExtractiveSummarizer(max_tokens=40)([Message("a", "assistant", content=long)])
    assert "Refund R-4417-1 of $14.95 is approved" in out
    assert summaries_mod.TRUNCATION_MARKER not in out and APPROX.count(out) <= 40


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.text(max_size=200)),
        max_size=12,
    ),
    st.integers(8, 120),
)
def test_extractive_never_exceeds_its_budget(items: list[tuple[str, str]], budget: int) -> None:
    ms = [Message(f"x{i}", r, content=t) for i, (r, t) in enumerate(items)]
    out = ExtractiveSummarizer(max_tokens=budget)(ms)
    assert APPROX.count(out) <= budget


def test_truncating_summarizer() -> None:
    short = [Message("a", "user", content="hi")]
    assert TruncatingSummarizer()(short) == "user: hi"
    long = [Message("a", "user", content="x" * 500)]
    out = TruncatingSummarizer(chars=50)(long)
    assert out == "user: " + "x" * 44 + summaries_mod.TRUNCATION_MARKER
    assert TruncatingSummarizer(chars=100)(short, Summary("before")) == "before\nuser: hi"
    with pytest.raises(ConfigError, match="chars=0"):
        TruncatingSummarizer(chars=0)
    with pytest.raises(ConfigError, match="max_tokens=2"):
        ExtractiveSummarizer(max_tokens=2)


# -- RunningSummary: incremental folds -----------------------------------------------


def test_fold_summarizes_only_new_messages() -> None:
    c = Counting()
    rs = RunningSummary(c, reserve=2000)
    history = msgs(30)
    rs.fold(history[:10])
    rs.fold(history[:20])  # first 10 already covered: skipped
    rs.fold(history[5:20])  # nothing new: no call at all
    assert len(c.calls) == 2
    assert c.message_ids() == [m.id for m in history[:20]]
    assert all(prev is None for _, prev in c.calls)
    assert rs.covers("m19") and not rs.covers("m20")
    assert list(rs.covered_ids) == [m.id for m in history[:20]]
    s = rs.current()
    assert s is not None and (s.first_id, s.last_id, s.count) == ("m0", "m19", 20)
    assert rs.stats.skipped == 10 + 15
    assert rs.stats.summarizer_calls == 2


def test_duplicates_within_one_fold_are_passed_once() -> None:
    c = Counting()
    rs = RunningSummary(c)
    m = msgs(3)
    rs.fold([m[0], m[1], m[0], m[2], m[1]])
    assert c.message_ids() == ["m0", "m1", "m2"]


def test_empty_fold_keeps_none() -> None:
    rs = RunningSummary()
    assert rs.fold([]) is None and rs.current() is None and rs.message() is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 80), st.integers(0, 30)), min_size=1, max_size=25))
def test_no_message_is_ever_summarized_twice(windows: list[tuple[int, int]]) -> None:
    history = msgs(110)
    c = Counting(words=30)
    rs = RunningSummary(c, reserve=300, max_segments=3)
    seen: set[str] = set()
    for start, length in windows:
        rs.fold(history[start : start + length])
        seen.update(m.id for m in history[start : start + length])
    ids = c.message_ids()
    assert len(ids) == len(set(ids))
    assert set(ids) == seen == set(rs.covered_ids)
    s = rs.current()
    if seen:
        assert s is not None and s.count == len(seen)


def test_segments_merge_oldest_first() -> None:
    c = Counting(words=40)
    rs = RunningSummary(c, reserve=400, facts=False, max_segments=3)
    history = msgs(60)
    for k in range(0, 60, 6):
        rs.fold(history[k : k + 6])
        assert len(rs.segments) <= 3
    merges = [(ms, prev) for ms, prev in c.calls if ms and ms[0].metadata.get(SEGMENT_KEY)]
    assert merges and rs.stats.merges == len(merges)
    for ms, prev in merges:
        # a merge folds the second-oldest segment into the oldest: previous is the oldest
        assert prev is not None and prev.first_id == "m0"
        assert len(ms) == 1
    segs = rs.segments
    assert segs[0].first_id == "m0" and segs[-1].last_id == "m59"
    for a, b in itertools.pairwise(segs):
        assert int(b.first_id[1:]) == int(a.last_id[1:]) + 1  # type: ignore[index]
    assert sum(s.count for s in segs) == 60
    # the newest segment is never re-summarized by the fold that made it
    assert segs[-1].summarizer == "counting"


@settings(max_examples=40, deadline=None)
@given(
    st.integers(120, 900),
    st.integers(1, 5),
    st.lists(st.integers(1, 25), min_size=1, max_size=12),
    st.sampled_from(["extractive", "verbose", "truncating"]),
    st.booleans(),
)
def test_summary_never_exceeds_the_reserve(
    reserve: int, max_segments: int, folds: list[int], kind: str, facts: bool
) -> None:
    def verbose(messages: Sequence[Message], previous: Summary | None) -> str:
        return transcript(messages) * 3  # a summarizer that makes things longer

    summarizer = {
        "extractive": None,
        "verbose": verbose,
        "truncating": TruncatingSummarizer(chars=400),
    }[kind]
    rs = RunningSummary(summarizer, reserve=reserve, max_segments=max_segments, facts=facts)
    history = [
        Message(
            f"m{i}", "user", content=filler(i) + f" Order {1000 + i} for Bob on March {i % 28 + 1}."
        )
        for i in range(sum(folds))
    ]
    k = 0
    for n in folds:
        s = rs.fold(history[k : k + n])
        k += n
        assert s is not None and s.tokens is not None
        assert s.tokens <= reserve
        assert APPROX.count(s.content) + 4 == s.tokens
        assert len(rs.segments) <= max_segments
        msg = rs.message()
        assert msg is not None and msg.tokens == s.tokens
    assert rs.current().count == k  # type: ignore[union-attr]


def test_fold_results_match_between_sync_and_async() -> None:
    history = msgs(40)
    a, b = RunningSummary(reserve=300), RunningSummary(reserve=300)
    for k in range(0, 40, 8):
        sa = a.fold(history[k : k + 8])
        sb = asyncio.run(b.afold(history[k : k + 8]))
        assert sa is not None and sb is not None
        assert sa.content == sb.content and sa.to_message() == sb.to_message()
    assert a.stats == b.stats


def test_message_is_stable_between_folds() -> None:
    rs = RunningSummary()
    rs.fold(msgs(5))
    m1 = rs.message()
    rs.fold(msgs(5))  # nothing new
    assert rs.message() is m1
    other = RunningSummary()
    other.fold(msgs(5))
    assert other.message() == m1  # same input, same rendering: prompt-cache friendly


def test_input_tokens_count_what_summarizers_received() -> None:
    c = Counting()
    rs = RunningSummary(c, reserve=5000)
    history = msgs(10)
    rs.fold(history)
    assert rs.stats.input_tokens == APPROX.count_messages(history)


def test_a_plain_one_argument_function_works() -> None:
    seen: list[int] = []

    def plain(messages: list[Message]) -> str:
        seen.append(len(messages))
        return "plain summary"

    rs = RunningSummary(plain)
    s = rs.fold(msgs(4))
    assert s is not None and s.text == "plain summary" and s.summarizer == "plain"
    assert seen == [4]


# -- facts ---------------------------------------------------------------------------


def test_facts_survive_fifty_folds() -> None:
    planted = [
        Message("p0", "user", content="Hi, I'm Dana Scully. My order 1182 never arrived."),
        Message("p1", "assistant", content="Sorry Dana! Ticket #A-77 is open, refund $12.50."),
        Message("p2", "user", content="I prefer email at dana@example.com, never phone."),
        Message("p3", "user", content="The delivery was due 2026-03-14."),
    ]
    rs = RunningSummary(reserve=500)
    rs.fold(planted)
    history = msgs(500, start=100)
    for k in range(50):
        rs.fold(history[k * 10 : (k + 1) * 10])
    content = rs.message().content  # type: ignore[union-attr]
    for value in [
        "Dana Scully",
        "order 1182",
        "#A-77",
        "$12.50",
        "dana@example.com",
        "I prefer email at dana@example.com, never phone",
        "2026-03-14",
    ]:
        assert value in content, value
    assert rs.current().tokens <= 500  # type: ignore[union-attr]
    assert rs.current().count == 504  # type: ignore[union-attr]
    assert rs.stats.folds == 51


def test_facts_off() -> None:
    rs = RunningSummary(facts=False)
    rs.fold([Message("a", "user", content="My order 1182 is late.")])
    assert rs.current().facts == ()  # type: ignore[union-attr]
    assert "Key facts" not in rs.message().content  # type: ignore[union-attr]


# -- failures ------------------------------------------------------------------------


def test_retries_with_backoff_then_succeeds() -> None:
    sleeps: list[float] = []
    f = Failing(times=2)
    rs = RunningSummary(f, retries=2, backoff=0.5, sleep=sleeps.append)
    s = rs.fold(msgs(3))
    assert s is not None and s.text == "recovered summary" and not s.degraded
    assert sleeps == [0.5, 1.0]
    assert f.calls == 3 and rs.stats.retries == 2 and rs.stats.fallbacks == 0


def test_failing_summarizer_falls_back_to_a_degraded_summary() -> None:
    sleeps: list[float] = []
    f = Failing()
    rs = RunningSummary(f, retries=2, sleep=sleeps.append)
    s = rs.fold([Message("a", "user", content="My order 1182 never arrived. It is urgent.")])
    assert s is not None and s.degraded and "order 1182" in s.text
    assert s.summarizer == "extractive"
    assert f.calls == 3 and len(sleeps) == 2
    assert rs.stats.fallbacks == 1 and rs.stats.summarizer_calls == 4
    assert rs.message().metadata["summary"]["degraded"] is True  # type: ignore[union-attr]
    assert rs.covers("a")


def test_both_failing_aborts_and_leaves_state_unchanged() -> None:
    rs = RunningSummary(Failing(times=0), fallback=Failing(), sleep=lambda s: None)
    rs.fold(msgs(6))  # works: Failing(times=0) never fails
    before = snapshot(rs)
    rs._primary = as_summarizer(Failing(ValueError("boom")))
    with pytest.raises(SummarizerError) as info:
        rs.fold(msgs(6, start=6))
    assert len(info.value.errors) == 4  # 3 attempts + the fallback
    assert isinstance(info.value.errors[0], ValueError)
    assert snapshot(rs) == before
    assert not rs.covers("m6")
    assert rs.stats.failures == 1


def test_a_failing_merge_aborts_the_whole_fold() -> None:
    class FailOnMerge(Counting):
        def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
            if previous is not None:
                raise RuntimeError("merge failed")
            return super().__call__(messages, previous)

    rs = RunningSummary(FailOnMerge(words=50), reserve=200, fallback=False, max_segments=2)
    rs.fold(msgs(3))
    rs.fold(msgs(3, start=3))
    before = snapshot(rs)
    with pytest.raises(SummarizerError, match="merge failed"):
        rs.fold(msgs(3, start=6))
    assert snapshot(rs) == before


async def test_async_summarizer_in_sync_fold_inside_a_loop_is_refused() -> None:
    async def asum(messages: Sequence[Message], previous: Summary | None) -> str:
        return "a"

    rs = RunningSummary(asum)
    with pytest.raises(RuntimeError, match="afold"):
        rs.fold(msgs(2))
    assert rs.current() is None and not rs.covers("m0")
    assert (await rs.afold(msgs(2))).text == "a"  # type: ignore[union-attr]


async def test_afold_retries_with_an_async_sleep() -> None:
    slept: list[float] = []

    async def fake_sleep(s: float) -> None:
        slept.append(s)

    rs = RunningSummary(Failing(times=1), backoff=2.0, sleep=fake_sleep)
    s = await rs.afold(msgs(2))
    assert s is not None and not s.degraded and slept == [2.0]


# -- background ----------------------------------------------------------------------


class Gate:
    """An async summarizer that waits for a signal (deterministic, no timing)."""

    name = "gate"

    def __init__(self, fail: bool = False) -> None:
        self.release = asyncio.Event()
        self.started = 0
        self.fail = fail

    async def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.started += 1
        await self.release.wait()
        if self.fail:
            raise TransientError("still down")
        ids = [m.id for m in messages if not m.metadata.get(SEGMENT_KEY)]
        return f"REAL summary of {len(ids)} messages"


async def test_background_fold_returns_a_fallback_then_replaces_it() -> None:
    gate = Gate()
    rs = RunningSummary(gate)
    s = await rs.afold(msgs(4), background=True)
    assert s is not None and s.degraded and s.summarizer == "extractive"
    assert rs.covers("m3") and rs.pending == 1
    first_id = rs.message().id  # type: ignore[union-attr]
    await asyncio.sleep(0)
    assert gate.started == 1 and rs.current().degraded  # type: ignore[union-attr]
    gate.release.set()
    await rs.wait()
    now = rs.current()
    assert now is not None and not now.degraded and now.text == "REAL summary of 4 messages"
    assert rs.message().id == first_id  # same coverage, same id  # type: ignore[union-attr]
    assert rs.pending == 0 and rs.stats.background_replaced == 1


async def test_pending_background_segments_are_not_merged_until_they_settle() -> None:
    gate = Gate()
    rs = RunningSummary(gate, max_segments=1)
    await rs.afold(msgs(4), background=True)
    await rs.afold(msgs(4, start=4), background=True)
    # Both segments wait for the primary: merging them now would bake the fallback's
    # text in for good. The rendering still fits the reserve.
    assert len(rs.segments) == 2 and rs.current().degraded  # type: ignore[union-attr]
    assert rs.current().tokens <= rs.reserve  # type: ignore[union-attr]
    gate.release.set()
    await rs.wait()
    now = rs.current()
    assert now is not None and not now.degraded and now.count == 8
    assert len(rs.segments) == 1  # merged by the primary once both settled
    st = rs.stats
    assert st.background_replaced == 2 and st.background_discarded == 0
    assert st.fallback_calls == 2  # one per background fold
    assert st.primary_calls == 3 == gate.started  # once per segment, plus the merge


async def test_background_failure_keeps_the_fallback() -> None:
    gate = Gate(fail=True)
    rs = RunningSummary(gate, retries=0)
    await rs.afold(msgs(3), background=True)
    gate.release.set()
    await rs.wait()
    assert rs.current().degraded  # type: ignore[union-attr]
    assert isinstance(rs.last_error, SummarizerError)
    assert rs.stats.background_failures == 1


async def test_background_needs_a_fallback() -> None:
    rs = RunningSummary(fallback=False)
    with pytest.raises(ConfigError, match="background=True"):
        await rs.afold(msgs(2), background=True)
    assert rs.current() is None


async def test_clear_cancels_pending_work() -> None:
    gate = Gate()
    rs = RunningSummary(gate)
    await rs.afold(msgs(3), background=True)
    rs.clear()
    await rs.wait()
    assert rs.current() is None and rs.pending == 0 and not rs.covers("m0")
    assert len(rs.ledger) == 0


# -- set_text, clear, bad input ------------------------------------------------------


def test_set_text_keeps_coverage_and_facts() -> None:
    rs = RunningSummary()
    rs.fold([Message("a", "user", content="My order 1182 is late.")])
    s = rs.set_text("The user is waiting for order 1182.")
    assert s.text == "The user is waiting for order 1182." and s.summarizer == "external"
    assert (s.first_id, s.count) == ("a", 1) and rs.covers("a")
    assert "- reference: order 1182" in s.content
    rs.fold([Message("b", "user", content="Any news?")])
    assert rs.segments[0].text == "The user is waiting for order 1182."
    assert rs.current().count == 2  # type: ignore[union-attr]
    fresh = RunningSummary().set_text("from outside")
    assert fresh.count == 0 and fresh.first_id is None


def test_set_text_over_the_reserve_is_refused() -> None:
    rs = RunningSummary(reserve=100)
    rs.fold(msgs(2))
    before = snapshot(rs)
    with pytest.raises(ConfigError, match="over reserve=100"):
        rs.set_text("word " * 400)
    with pytest.raises(InvalidMessage, match="text=3"):
        rs.set_text(3)  # type: ignore[arg-type]
    assert snapshot(rs) == before


def test_clear_forgets_everything_but_stats() -> None:
    rs = RunningSummary()
    rs.fold(msgs(3))
    rs.clear()
    assert rs.current() is None and list(rs.covered_ids) == []
    rs.fold(msgs(3))
    assert rs.current().count == 3  # type: ignore[union-attr]
    assert rs.stats.folds == 2


def test_bad_fold_input_is_refused_and_state_untouched() -> None:
    rs = RunningSummary()
    rs.fold(msgs(2))
    before = snapshot(rs)
    with pytest.raises(InvalidMessage) as info:
        rs.fold([msgs(3)[2], "oops"])  # type: ignore[list-item]
    assert info.value.field == "messages[1]"
    with pytest.raises(InvalidMessage, match="messages"):
        rs.fold("abc")  # type: ignore[arg-type]
    assert snapshot(rs) == before


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"reserve": 10}, "reserve=10"),
        ({"reserve": True}, "reserve=True"),
        ({"retries": -1}, "retries=-1"),
        ({"backoff": -0.1}, "backoff=-0.1"),
        ({"backoff": float("nan")}, "backoff=nan"),
        ({"facts_share": 0.95}, "facts_share=0.95"),
        ({"facts": "yes"}, "facts='yes'"),
        ({"max_segments": 0}, "max_segments=0"),
        ({"sleep": 3}, "sleep=3"),
        ({"header": None}, "header=None"),
    ],
)
def test_config_errors_name_the_option(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError) as info:
        RunningSummary(**kwargs)
    assert str(info.value).startswith(name)


def test_repr_and_accessors() -> None:
    rs = RunningSummary()
    rs.fold(msgs(2))
    assert "2 messages" in repr(rs)
    assert rs.summarizer.name == "extractive" and rs.fallback is not None
    assert RunningSummary(fallback=False).fallback is None
