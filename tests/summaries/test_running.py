"""RunningSummary: work counts (facts scanned once, summarizer calls), the compression
contract, the retry policy, background summaries and flat per-fold work."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, SummarizerError, TransientError
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.retry import RetryPolicy, retry_if_exception_type, stop_after_attempt, wait_fixed
from convomem.summaries import ExtractiveSummarizer, RunningSummary, Summary
from convomem.summaries.facts import Fact, fact_cache_info
from convomem.tokens import get_tokenizer

_ids = itertools.count()


def unique(text: str, role: str = "user") -> Message:
    """A message whose text no other test uses (the extraction memo is process-wide)."""
    n = next(_ids)
    return Message(f"u{n}", role, content=f"{text} (case ZX{n:06d}Q)")  # type: ignore[arg-type]


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls += 1
        return f"summary {self.calls}"


# -- facts are scanned once ----------------------------------------------------------------


def test_fold_then_compress_scans_the_message_once() -> None:
    m = unique("My order 4412 never arrived; I prefer email at kim@example.com.")
    before = fact_cache_info().misses
    rs = RunningSummary()
    rs.compress([m])
    rs.fold([m])
    assert rs.stats.extractions == 1
    # The extractive summarizer (primary and compressor) used the same scan too.
    assert fact_cache_info().misses - before == 1
    assert "kim@example.com" in rs.message().content  # type: ignore[union-attr]


def test_compress_then_fold_scans_once_and_facts_can_be_passed_in() -> None:
    filler = " ".join(f"Line {n} repeats the weather report for the week." for n in range(12))
    m = unique(f"Ticket #B-19 was opened on 2026-04-02 by Priya Raman. {filler}")
    rs = RunningSummary()
    s = rs.compress([m], summarizer=ExtractiveSummarizer(40))
    assert not s.kept_original and rs.stats.extractions == 1
    # The caller folds the compressed message (another text) with the facts it carries:
    # the ledger takes them as they are; only the summarizer reads the new, short text.
    compressed = Message(m.id, "user", content=s.text)
    rs.fold([compressed], facts={m.id: s.facts})
    assert rs.stats.extractions == 1
    assert set(rs.ledger.facts) == set(s.facts) and "Ticket #B-19" in {f.value for f in s.facts}
    # A kept message is folded as it is: its text was scanned already.
    short = unique("Fine by me.")
    assert rs.compress([short]).kept_original
    rs.fold([short])
    assert rs.stats.extractions == 2


def test_passed_facts_are_checked() -> None:
    rs = RunningSummary()
    m = unique("hello")
    with pytest.raises(ConfigError, match=r"facts\['x'\]\[0\]='nope': must be a Fact"):
        rs.fold([m], facts={"x": ["nope"]})  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="facts=3"):
        rs.fold([m], facts=3)  # type: ignore[arg-type]
    assert rs.current() is None and not rs.covers(m.id)


def test_each_fold_scans_only_its_new_messages() -> None:
    rs = RunningSummary()
    history = [unique(f"Order {n} shipped to Lisbon on March {n % 28 + 1}.") for n in range(30)]
    for k in range(0, 30, 3):
        rs.fold(history[: k + 3])  # the caller re-sends old messages: they are skipped
    assert rs.stats.extractions == 30


# -- compression never yields empty content (issue 8 #4) ------------------------------------


def test_a_short_consent_is_kept_as_it_is() -> None:
    m = Message("c", "user", content="Yes, that is fine with me.")
    tok = get_tokenizer("approx")
    # The session's default compressor: extractive, to half the message (here 8 tokens).
    rs = RunningSummary()
    s = rs.compress([m], summarizer=ExtractiveSummarizer(8, tok))
    assert s.kept_original and s.text == "user: Yes, that is fine with me."
    assert s.content and s.facts == () and s.tokens == tok.count(s.text) + 4
    s = rs.compress([m])  # the default extractive primary returns it unchanged: not shorter
    assert s.kept_original and s.text.endswith("fine with me.")
    assert rs.stats.compressions_kept == 2 and rs.stats.compressions == 0


def test_a_summarizer_returning_blank_text_means_keep() -> None:
    rs = RunningSummary(lambda ms: "   ")
    m = unique("A long message about the refund of $40.00 for order 5521, sent twice.")
    s = rs.compress([m])
    assert s.kept_original and m.text() in s.text


def test_a_real_shortening_is_used() -> None:
    long = " ".join(f"Sentence {n} about the weather and nothing else at all." for n in range(20))
    m = unique("My order 8812 is lost. " + long)
    rs = RunningSummary()
    s = rs.compress([m], summarizer=ExtractiveSummarizer(30))
    assert not s.kept_original and s.text.strip()
    assert s.tokens is not None and s.tokens < get_tokenizer("approx").count_message(m)
    assert rs.stats.compressions == 1


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(max_size=300),
    role=st.sampled_from(["user", "assistant", "tool"]),
    size=st.integers(8, 60),
)
def test_compression_never_yields_empty_content(text: str, role: str, size: int) -> None:
    m = Message("x", role, content=text)  # type: ignore[arg-type]
    rs = RunningSummary(facts=True)
    s = rs.compress([m], summarizer=ExtractiveSummarizer(size))
    if s.kept_original:
        assert s.text == (f"{role}: {text}" if text else "")
    else:
        assert s.content.strip()
        assert s.tokens is not None and s.tokens < get_tokenizer("approx").count_message(m)


# -- the retry policy ------------------------------------------------------------------------


class Flaky:
    name = "flaky"

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.error = error or TransientError("busy")

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok summary"


def test_a_retry_policy_replaces_retries_and_backoff() -> None:
    slept: list[float] = []
    policy = RetryPolicy(
        stop=stop_after_attempt(4), wait=wait_fixed(0.3), retry=retry_if_exception_type()
    )
    f = Flaky(3)
    rs = RunningSummary(f, retry=policy, sleep=slept.append)
    s = rs.fold([unique("hello there")])
    assert s is not None and s.text == "ok summary" and slept == [0.3] * 3
    # A non-transient error is not retried under this policy: straight to the fallback.
    f = Flaky(1, ValueError("bad request"))
    rs = RunningSummary(f, retry=policy, sleep=slept.append)
    s = rs.fold([unique("hello again")])
    assert s is not None and s.degraded and f.calls == 1
    assert rs.stats.primary_calls == 1 and rs.stats.fallback_calls == 1


def test_retry_and_its_shorthands_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="not both"):
        RunningSummary(retry=RetryPolicy(), retries=5)
    with pytest.raises(ConfigError, match="retry=3"):
        RunningSummary(retry=3)  # type: ignore[arg-type]


# -- background ------------------------------------------------------------------------------


class Slow:
    """An async primary that waits for a signal and counts its calls."""

    name = "slow"

    def __init__(self, fail: bool = False) -> None:
        self.release = asyncio.Event()
        self.calls = 0
        self.fail = fail

    async def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls += 1
        await self.release.wait()
        if self.fail:
            raise TransientError("down")
        return f"primary {self.calls}: " + " ".join(m.id for m in messages)


@settings(max_examples=15, deadline=None)
@given(folds=st.lists(st.integers(1, 4), min_size=1, max_size=12), segs=st.integers(1, 4))
def test_background_folds_settle_undegraded_with_one_primary_call_per_segment(
    folds: list[int], segs: int
) -> None:
    async def scenario() -> None:
        slow = Slow()
        rs = RunningSummary(slow, reserve=200, max_segments=segs, retries=0)
        k = 0
        for n in folds:
            batch = [
                Message(f"b{k + i}", "user", content=f"Order {k + i} is late.") for i in range(n)
            ]
            k += n
            s = await rs.afold(batch, background=True)
            assert s is not None and s.tokens is not None and s.tokens <= rs.reserve
        slow.release.set()
        await rs.wait()
        st_ = rs.stats
        now = rs.current()
        assert now is not None and not now.degraded and now.count == k
        assert not any(seg.degraded for seg in rs.segments)
        assert len(rs.segments) <= segs and now.tokens is not None and now.tokens <= rs.reserve
        assert st_.fallback_calls == len(folds)  # one per fold, at once
        assert st_.primary_calls == len(folds) + st_.merges  # once per segment, plus merges
        assert st_.background_replaced == len(folds) and st_.background_discarded == 0

    asyncio.run(scenario())


async def test_a_failing_background_primary_leaves_only_its_segment_degraded() -> None:
    slow = Slow(fail=True)
    rs = RunningSummary(slow, retries=0)
    await rs.afold([unique("first batch")], background=True)
    slow.release.set()
    await rs.wait()
    assert rs.current().degraded and rs.stats.background_failures == 1  # type: ignore[union-attr]
    assert isinstance(rs.last_error, SummarizerError)
    slow.fail = False
    rs2 = RunningSummary(slow, retries=0)
    await rs2.afold([unique("second")], background=True)
    await rs2.wait()
    assert not rs2.current().degraded  # type: ignore[union-attr]


# -- the work of a fold does not grow with the conversation ----------------------------------


def test_fold_work_is_flat_in_the_length_of_the_conversation() -> None:
    counted: list[int] = []

    def count(text: str) -> int:
        counted.append(len(text))
        return -(-len(text) // 4)

    calls = Counting()
    rs = RunningSummary(calls, reserve=400, tokenizer=count, max_segments=4)
    per_fold: list[tuple[int, int]] = []
    for k in range(600):
        batch = [
            Message(f"f{k}.{i}", "user", content=f"Order {k * 3 + i} for Ana on May {k % 28 + 1}.")
            for i in range(1 + k % 3)
        ]
        counted.clear()
        rs.fold(batch)
        per_fold.append((len(counted), sum(counted)))
    early = max(per_fold[50:100])
    late = max(per_fold[550:600])
    # Tokenizer calls and characters counted per fold: the same bound late as early.
    assert late[0] <= early[0] + 2 and late[1] <= 2 * early[1]
    assert len(rs.ledger) > 1000  # while the ledger kept growing


def test_tool_results_and_calls_are_attributed() -> None:
    rs = RunningSummary()
    call = Message("a", "assistant", content=[ToolUseBlock("c1", "lookup", {"order": 9})])
    result = Message("t", "tool", content=[ToolResultBlock("c1", "Order 99120 costs $12.00")])
    rs.fold([call, result])
    roles = {f.value: f.source_role for f in rs.ledger.facts}
    assert roles.get("$12.00") == "tool"


def test_stats_count_primary_and_fallback_calls() -> None:
    rs = RunningSummary(Flaky(10), retries=1, sleep=lambda s: None)
    rs.fold([unique("anything at all here")])
    st_ = rs.stats
    assert (st_.primary_calls, st_.fallback_calls, st_.summarizer_calls) == (2, 1, 3)


def test_facts_passed_in_keep_their_attribution() -> None:
    rs = RunningSummary()
    f = Fact("preference", "I'm allergic to peanuts", "orig", "user")
    rs.fold([Message("orig", "user", content="(compressed)")], facts={"orig": [f]})
    assert rs.ledger.entries()[0][0] == f
