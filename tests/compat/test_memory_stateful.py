"""Stateful tests: any interleaving of adds, reads, clock moves and failures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from convomem.compat import HierarchicalMemory, HybridWindow, ProgressiveSummarizer
from convomem.model import Message
from convomem.summaries import Summary

ROLES = ("system", "user", "assistant", "tool")


class HybridMachine(RuleBasedStateMachine):
    """HybridWindow against a brute-force model of both windows, by message."""

    MAX_TOKENS = 40
    MINUTES = 10

    def __init__(self) -> None:
        super().__init__()
        self.t = 1_000_000.0
        self.window = HybridWindow(self.MAX_TOKENS, self.MINUTES, model="words", now=self.now)
        self.log: list[tuple[float, str, str, int]] = []  # stamp, role, content, cost
        self.in_tokens: list[int] = []  # indices the token window holds

    def now(self) -> float:
        return self.t

    @rule(role=st.sampled_from(ROLES), n=st.integers(0, 12))
    def add(self, role: str, n: int) -> None:
        k = len(self.log)
        content = " ".join([f"w{k}"] * n)
        self.window.add_message(role, content)
        self.log.append((self.t, role, content, n + 4))
        self.in_tokens.append(k)
        pinned = {0} if self.log[0][1] == "system" else set()
        while sum(self.log[i][3] for i in self.in_tokens) > self.MAX_TOKENS:
            evictable = [i for i in self.in_tokens if i not in pinned and i != k]
            if not evictable:
                break
            self.in_tokens.remove(evictable[0])

    @rule(seconds=st.integers(0, 400))
    def advance(self, seconds: int) -> None:
        self.t += seconds

    @invariant()
    def both_limits(self) -> None:
        cutoff = self.t - self.MINUTES * 60
        keep = [
            i
            for i in self.in_tokens
            if self.log[i][0] > cutoff or (i == 0 and self.log[0][1] == "system")
        ]
        expected = [{"role": self.log[i][1], "content": self.log[i][2]} for i in keep]
        assert self.window.get_messages() == expected


HybridMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25)
TestHybrid = HybridMachine.TestCase


class Flaky:
    """A summarizer that fails while ``failing`` is set; records what it summarized."""

    def __init__(self) -> None:
        self.failing = False
        self.folded: list[str] = []

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        if self.failing:
            raise TimeoutError("down")
        self.folded.extend(m.text() for m in messages)
        return f"covers {len(self.folded)}"


class SummariesMachine(RuleBasedStateMachine):
    """Both summarizing memories under failures: nothing lost, nothing summarized twice."""

    def __init__(self) -> None:
        super().__init__()
        self.progressive_fn = Flaky()
        self.progressive = ProgressiveSummarizer(self.progressive_fn, 3, fallback=False)
        self.hierarchical_fn = Flaky()
        self.hierarchical = HierarchicalMemory(self.hierarchical_fn, 2, 1, fallback=False)
        self.said: list[str] = []

    @rule()
    def exchange(self) -> None:
        k = len(self.said)
        pair = (f"u{k}", f"a{k}")
        self.progressive.add_exchange_sync(*pair)
        self.hierarchical.add_exchange_sync(*pair)
        self.said.extend(pair)

    @rule(failing=st.booleans())
    def summarizers(self, failing: bool) -> None:
        self.progressive_fn.failing = self.hierarchical_fn.failing = failing

    @invariant()
    def a_partition_in_order(self) -> None:
        recent = [m["content"] for m in self.progressive.recent_messages]
        assert self.progressive_fn.folded + recent == self.said
        assert self.progressive.summary == (
            f"covers {len(self.progressive_fn.folded)}" if self.progressive_fn.folded else ""
        )
        short = [m["content"] for m in self.hierarchical.short_term]
        assert self.hierarchical_fn.folded + short == self.said

    @invariant()
    def pending_only_after_a_failure(self) -> None:
        if self.progressive.pending:
            assert self.progressive.failures > 0


SummariesMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30)
TestSummaries = SummariesMachine.TestCase


def test_concurrent_exchanges_summarize_each_message_once() -> None:
    folded: list[str] = []

    async def slow(messages: Sequence[Message], previous: Summary | None) -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        folded.extend(m.text() for m in messages)
        return f"covers {len(folded)}"

    progressive = ProgressiveSummarizer(slow, summarize_threshold=1, keep_turns=1)
    hierarchical = HierarchicalMemory(slow, short_term_limit=1, mid_term_limit=10)

    async def run() -> None:
        await asyncio.gather(*(progressive.add_exchange(f"u{k}", f"a{k}") for k in range(30)))
        await asyncio.gather(*(hierarchical.add_exchange(f"x{k}", f"y{k}") for k in range(30)))

    asyncio.run(run())
    said = [t for k in range(30) for t in (f"u{k}", f"a{k}")]
    recent = [m["content"] for m in progressive.recent_messages]
    assert [t for t in folded if t[0] in "ua"] + recent == said
    assert progressive.summarized_messages > 0 and len(recent) >= 2
    other = [t for k in range(30) for t in (f"x{k}", f"y{k}")]
    short = [m["content"] for m in hierarchical.short_term]
    assert [t for t in folded if t[0] in "xy"] + short == other
