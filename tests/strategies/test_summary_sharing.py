"""SummaryEvict shared by many conversations: a summary only ever stands for its own
messages (issue 8 #1), a failing summarizer loses nothing, and the summary uses the
reserve plus whatever the kept messages leave unused (issue 7 section 5)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from _packing_support import check_invariants
from convomem.errors import AsyncSummarizerError, SummarizerError
from convomem.model import Message
from convomem.packing import Packer, PackResult
from convomem.strategies import Recency, SummaryEvict
from convomem.summaries import Summary
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")


class Recording:
    """A ``(messages, previous)`` summarizer that writes out every message it is given.

    Folding gives the same text as summarizing at once, so any summary can be compared
    with a fresh strategy's; ``fail`` makes that many next calls raise.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[list[Message], str | None]] = []
        self.fail = 0

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        if self.fail:
            self.fail -= 1
            raise TimeoutError("the summarizer is down")
        self.calls.append((list(messages), None if previous is None else previous.text))
        parts = [] if previous is None else [previous.text]
        return " ".join(parts + [f"{m.id}={m.text()}" for m in messages])


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
        None if r.summary is None else (r.summary.id, r.summary.content),
    )


def foreign_secrets(r: PackResult, messages: Sequence[Message]) -> set[str]:
    """Secrets (``secret<k>``) in the summary that none of ``messages`` holds."""
    if r.summary is None:
        return set()
    own = {w for m in messages for w in re.findall(r"secret\d", m.text())}
    return set(re.findall(r"secret\d", r.summary.content)) - own


def key(messages: Sequence[Message]) -> tuple[str, ...]:
    """Messages as strict JSON: equal exactly when every field is."""
    return tuple(json.dumps(m.to_dict(), sort_keys=True) for m in messages)


PATHS = ("packer", "async", "fresh", "rebuilt")


def run_path(
    how: str, packer: Packer, strategy: SummaryEvict, msgs: list[Message], budget: int
) -> PackResult:
    """Pack ``msgs`` one of four ways: a Packer sync or async, or the strategy itself
    on the list or on rebuilt copies (equal messages, other objects)."""
    if how == "packer":
        return packer.pack(msgs)
    if how == "async":
        return asyncio.run(packer.pack_async(msgs))
    if how == "rebuilt":
        msgs = [Message.from_dict(m.to_dict()) for m in msgs]
    return strategy.pack(msgs, budget=budget)


# ----------------------------------------------------------------- the reproducer


def conversation(first: str) -> list[Message]:
    return [
        Message("m1", "user", content=first),
        Message("m2", "assistant", content="Noted, I will keep that in mind for later."),
        Message("m3", "user", content="Thanks. What's the forecast for tomorrow?"),
        Message("m4", "assistant", content="Sunny, 24 degrees."),
        Message("m5", "user", content="Great, thank you very much for the help."),
        Message("m6", "assistant", content="Anything else?"),
    ]


ALICE = conversation("My SSN is 111-22-3333, please remember it.")
BOB = conversation("Bob here, I would like to ask about the weather.")


def test_one_conversations_summary_is_never_served_to_another() -> None:
    """Issue 8 #1: Bob's pack returned Alice's SSN through a shared SummaryEvict."""
    shared = SummaryEvict(Recording())
    alice = Packer(budget=80, strategy=shared, pin=()).pack(ALICE)
    bob = Packer(budget=80, strategy=shared, pin=()).pack(BOB)
    assert alice.summary is not None and "SSN is 111-22" in alice.summary.content
    assert bob.summary is not None and "SSN" not in bob.summary.content
    assert "Bob here" in bob.summary.content
    # The same through the strategy's own pack (fresh tables), sync and async.
    assert fingerprint(shared.pack(BOB, budget=80)) == fingerprint(bob)
    assert fingerprint(asyncio.run(shared.pack_async(BOB, budget=80))) == fingerprint(bob)
    assert fingerprint(asyncio.run(shared.pack_async(ALICE, budget=80))) == fingerprint(alice)


def test_a_fold_never_extends_another_conversations_summary() -> None:
    """Alice's summary of [m1] must not become the ``previous`` of Bob's longer set."""
    recording = Recording()
    shared = SummaryEvict(recording, reserve=40)
    Packer(budget=80, strategy=shared, pin=()).pack(ALICE[:3])  # drops Alice's m1
    assert [[m.id for m in ms] for ms, _ in recording.calls] == [["m1"]]
    r = Packer(budget=80, strategy=shared, pin=()).pack(BOB)  # drops Bob's m1, m2, m3
    assert r.summary is not None and "SSN" not in r.summary.content
    given, previous = recording.calls[-1]
    assert [m.id for m in given] == ["m1", "m2", "m3"] and previous is None
    assert given[0] is BOB[0]
    # Alice's own dropped set grows: her summary is folded, only the new ones are given.
    r = Packer(budget=80, strategy=shared, pin=()).pack(ALICE)
    given, previous = recording.calls[-1]
    assert [m.id for m in given] == ["m2", "m3"] and given[0] is ALICE[1]
    assert previous is not None and previous.startswith("m1=My SSN")
    assert r.summary is not None and "Bob" not in r.summary.content


def test_equal_messages_share_a_summary_rebuilt_or_not() -> None:
    """Messages equal in every field are the same messages: one call serves them all."""
    recording = Recording()
    shared = SummaryEvict(recording)
    first = Packer(budget=80, strategy=shared, pin=()).pack(ALICE)
    assert first.summary is not None
    rebuilt = [Message.from_dict(m.to_dict()) for m in ALICE]
    assert fingerprint(Packer(budget=80, strategy=shared, pin=()).pack(rebuilt)) == (
        fingerprint(first)
    )
    assert fingerprint(shared.pack(rebuilt, budget=80)) == fingerprint(first)
    assert len(recording.calls) == 1
    # A difference in any field is a different message: metadata, say.
    marked = [ALICE[0].replace(metadata={"user": "carol"}), *ALICE[1:]]
    Packer(budget=80, strategy=shared, pin=()).pack(marked)
    assert len(recording.calls) == 2


# ------------------------------------------------ random conversations, colliding ids

SHARED_TEXTS = ("hello there!", "ok, thanks a lot", "tell me more about it please", "yes, go ahead")


def secret(k: int, like: str) -> str:
    """A secret of conversation ``k`` as long as ``like`` (so it costs the same)."""
    return f"secret{k} {'#' * len(like)}"[: max(len(like), 8)]


@st.composite
def colliding(draw: Any) -> list[list[Message]]:
    """2-4 conversations with the same ids: one script, in which each conversation puts
    secrets of its own (as long as the text they replace) at random places."""
    n = draw(st.integers(1, 20))
    script = draw(st.lists(st.sampled_from(SHARED_TEXTS), min_size=n, max_size=n))
    convs = []
    for k in range(draw(st.integers(2, 4))):
        # Mostly early: the oldest messages are the ones dropped and summarized.
        own = draw(st.sets(st.integers(0, n - 1).map(lambda i: i // 3), max_size=n))
        convs.append(
            [
                Message(
                    f"m{i}",
                    "user" if i % 2 == 0 else "assistant",
                    content=secret(k, text) if i in own else text,
                )
                for i, text in enumerate(script)
            ]
        )
    return convs


@settings(max_examples=80, deadline=None)
@given(
    convs=colliding(),
    budget=st.integers(30, 90),
    reserve=st.none() | st.integers(1, 40),
    gaps=st.booleans(),
    order=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(PATHS), st.integers(0, 20)),
        min_size=1,
        max_size=16,
    ),
)
def test_colliding_conversations_through_one_strategy_get_their_own_summaries(
    convs: list[list[Message]],
    budget: int,
    reserve: int | None,
    gaps: bool,
    order: list[tuple[int, str, int]],
) -> None:
    """Each pack (of a whole conversation or of a prefix, as an agent loop grows it)
    equals a fresh strategy's: no summary, and no fold, ever crosses conversations."""
    assume(reserve is None or reserve < budget)
    fallback = Recency() if gaps else None
    shared = SummaryEvict(Recording(), reserve=reserve, fallback=fallback)
    packers = [Packer(budget=budget, strategy=shared, pin=()) for _ in convs]
    for k, how, cut in order:
        k %= len(convs)
        msgs = convs[k][:cut] if cut else convs[k]
        expected = SummaryEvict(Recording(), reserve=reserve, fallback=fallback).pack(
            msgs, budget=budget
        )
        r = run_path(how, packers[k], shared, msgs, budget)
        assert fingerprint(r) == fingerprint(expected)
        assert foreign_secrets(r, msgs) == set()


# ------------------------------------------------- a shared strategy, as a state machine

CONVERSATIONS = 2


class SharedSummaryEvict(RuleBasedStateMachine):
    """Several conversations with colliding ids (``m0``, ``m1``, ...), some equal
    messages and some secrets of their own, packed through one SummaryEvict by their
    Packers (sync and async) and by the strategy itself (fresh and rebuilt lists).

    Every result must equal a fresh strategy's for the same list; the summarizer is
    called exactly when the dropped set (by every field) is not among the 16 most
    recently used, and then handed only what a cached strict prefix does not cover;
    a failing summarizer either raises and caches nothing or (``on_error="drop"``)
    drops for budget; no summary ever holds another conversation's secret.
    """

    @initialize(
        budget=st.integers(30, 100),
        reserve=st.none() | st.integers(1, 40),
        gaps=st.booleans(),
        on_error=st.sampled_from(("raise", "drop")),
    )
    def setup(self, budget: int, reserve: int | None, gaps: bool, on_error: Any) -> None:
        assume(reserve is None or reserve < budget)
        self.budget = budget
        self.options: dict[str, Any] = {"reserve": reserve, "on_error": on_error}
        self.gaps = gaps
        self.recording = Recording()
        self.strategy = SummaryEvict(self.recording, fallback=self.fallback(), **self.options)
        self.packers = [
            Packer(budget=budget, strategy=self.strategy, pin=()) for _ in range(CONVERSATIONS)
        ]
        self.convs: list[list[Message]] = [[] for _ in range(CONVERSATIONS)]
        self.lru: list[tuple[tuple[str, ...], str]] = []  # (dropped set, text), oldest first

    def fallback(self) -> Recency | None:
        return Recency() if self.gaps else None

    @rule(
        k=st.integers(0, CONVERSATIONS - 1),
        texts=st.lists(
            st.sampled_from(SHARED_TEXTS) | st.integers(1, 4).map(lambda n: "#" * n),
            min_size=1,
            max_size=4,
        ),
    )
    def say(self, k: int, texts: list[str]) -> None:
        conv = self.convs[k]
        for text in texts:
            i = len(conv)
            if text.startswith("#"):  # a secret of this conversation, of some length
                text = " ".join([f"secret{k}x{i}"] * len(text))
            conv.append(Message(f"m{i}", "user" if i % 2 == 0 else "assistant", content=text))

    @rule(k=st.integers(0, CONVERSATIONS - 1), at=st.integers(0, 30))
    def fork(self, k: int, at: int) -> None:
        """Conversation ``k`` becomes the other one with one message its own: the same
        ids and lengths, a different content (two users of one scripted flow)."""
        conv = list(self.convs[1 - k])
        if conv:
            at %= len(conv)
            conv[at] = conv[at].replace(content=secret(k, conv[at].text()))
        self.convs[k] = conv

    @rule(k=st.integers(0, CONVERSATIONS - 1))
    def edit_last(self, k: int) -> None:
        """Replace the last message by another with the same id (a caller's edit)."""
        conv = self.convs[k]
        if conv:
            conv[-1] = conv[-1].replace(content=f"secret{k} edited {len(conv)}")

    @rule()
    def break_summarizer(self) -> None:
        self.recording.fail = 1

    def predict(self, dropped: list[Message]) -> tuple[bool, list[Message], str | None]:
        """(called, messages handed over, previous text) by the cache model."""
        k = key(dropped)
        for n, (cached, _) in enumerate(self.lru):
            if cached == k:
                self.lru.append(self.lru.pop(n))
                return False, [], None
        best = max(
            (e for e in self.lru if len(e[0]) < len(k) and k[: len(e[0])] == e[0]),
            key=lambda e: len(e[0]),
            default=None,
        )
        if best is None:
            return True, dropped, None
        return True, dropped[len(best[0]) :], best[1]

    @rule(
        k=st.integers(0, CONVERSATIONS - 1),
        how=st.sampled_from(("packer", "packer", "async", "fresh", "rebuilt")),
    )
    def pack(self, k: int, how: str) -> None:
        msgs = list(self.convs[k])
        oracle = Recording()
        expected = SummaryEvict(oracle, fallback=self.fallback(), **self.options).pack(
            msgs, budget=self.budget
        )
        assert len(oracle.calls) <= 1
        dropped = oracle.calls[0][0] if oracle.calls else []
        lru_before = list(self.lru)
        called, given, previous = self.predict(dropped) if dropped else (False, [], None)
        failing = called and self.recording.fail > 0
        before = len(self.recording.calls)

        lst = [Message.from_dict(m.to_dict()) for m in msgs] if how == "rebuilt" else msgs

        def run() -> PackResult:
            if how == "packer":
                return self.packers[k].pack(lst)
            if how == "async":
                return asyncio.run(self.packers[k].pack_async(lst))
            return self.strategy.pack(lst, budget=self.budget)

        if failing and self.options["on_error"] == "raise":
            with pytest.raises(TimeoutError):
                run()
            self.lru = lru_before  # nothing cached
            assert len(self.recording.calls) == before
            return
        r = run()
        check_invariants(lst, r, pins=(), tokenizer=APPROX)
        assert r.token_count <= self.budget or not r.fits
        if failing:  # on_error="drop": what the fresh strategy sent, without a summary
            self.lru = lru_before
            assert r.summary is None
            assert [m.id for m in r.kept] == [
                m.id for m in expected.kept if m is not expected.summary
            ]
            assert [d.reason for d in r.decisions] == [
                "budget" if d.reason == "summarized" else d.reason for d in expected.decisions
            ]
            return
        assert fingerprint(r) == fingerprint(expected)
        if called:
            assert len(self.recording.calls) == before + 1
            got, prev = self.recording.calls[-1]
            assert key(got) == key(given) and prev == previous
            self.lru.append((key(dropped), oracle(dropped, None)))
            del oracle.calls[-1]
            del self.lru[:-16]
        else:
            assert len(self.recording.calls) == before
        assert foreign_secrets(r, lst) == set()

    @invariant()
    def cache_is_bounded(self) -> None:
        if hasattr(self, "strategy"):
            assert len(self.strategy.cache) == len(self.lru) <= 16


TestSharedSummaryEvict = SharedSummaryEvict.TestCase
TestSharedSummaryEvict.settings = settings(max_examples=50, stateful_step_count=40, deadline=None)


# ------------------------------------------------------------- failing summarizers


def chat(n: int) -> list[Message]:
    return [
        Message(f"m{i}", "user" if i % 2 == 0 else "assistant", content=f"message number {i} " * 3)
        for i in range(n)
    ]


def test_a_failing_summarizer_raises_caches_nothing_and_the_retry_folds_the_same() -> None:
    recording = Recording()
    strategy = SummaryEvict(recording, reserve=40)
    packer = Packer(budget=120, strategy=strategy, pin=())
    history = chat(12)
    packer.pack(history[:8])
    assert len(strategy.cache) == 1
    first = [m.id for m in recording.calls[0][0]]
    recording.fail = 1
    with pytest.raises(TimeoutError):
        packer.pack(history)
    assert len(strategy.cache) == 1 and len(recording.calls) == 1
    r = packer.pack(history)  # the retry folds the new messages into the cached text
    given, previous = recording.calls[-1]
    assert previous is not None and previous.startswith(f"{first[0]}=")
    assert [m.id for m in given] == [
        history[d.index].id for d in r.decisions if d.reason == "summarized"
    ][len(first) :]
    check_invariants(history, r, pins=(), tokenizer=APPROX)


@pytest.mark.parametrize("fails", [TimeoutError("down"), SummarizerError("bad output")])
def test_on_error_drop_keeps_every_message_accounted_for(
    fails: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(messages: Sequence[Message]) -> str:
        raise fails

    history = chat(12)
    strategy = SummaryEvict(broken, on_error="drop")
    with caplog.at_level(logging.WARNING, logger="convomem.strategies"):
        r = Packer(budget=120, strategy=strategy, pin=()).pack(history)
    assert r.summary is None and r.dropped and r.fits
    assert set(r.reason_counts()) == {"recent", "budget", "turn"}
    check_invariants(history, r, pins=(), tokenizer=APPROX)
    assert "summarizer 'broken' failed" in caplog.text and type(fails).__name__ in caplog.text
    assert len(strategy.cache) == 0
    # Nothing was cached: once the summarizer works, the next pack summarizes.
    recording = Recording()
    strategy.summarizer = SummaryEvict(recording).summarizer
    r = Packer(budget=120, strategy=strategy, pin=()).pack(history)
    assert r.summary is not None and len(recording.calls) == 1


async def _async_summary(messages: Sequence[Message]) -> str:
    return "async"


async def test_on_error_drop_still_reports_a_sync_pack_inside_a_loop() -> None:
    strategy = SummaryEvict(_async_summary, on_error="drop")
    with pytest.raises(AsyncSummarizerError, match="pack_async"):
        Packer(budget=120, strategy=strategy, pin=()).pack(chat(12))
    r = await Packer(budget=120, strategy=strategy, pin=()).pack_async(chat(12))
    assert r.summary is not None


@pytest.mark.parametrize("on_error", ["ignore", None, True])
def test_bad_on_error(on_error: Any) -> None:
    with pytest.raises(ValueError, match=f"on_error={on_error!r}"):
        SummaryEvict(Recording(), on_error=on_error)


# ----------------------------------------------------- the reserve plus what is unused


def test_budget_30_sends_a_summary_in_the_reserve_plus_the_unused_budget() -> None:
    """Issue 7 section 5: with budget=30, approx counting and the default reserve (3),
    messages were dropped and no summary sent although the kept message left 13 tokens
    unused. The shortest summary (header and one character) costs 14; 16 are free."""
    history = [
        Message(
            f"m{i}",
            "user" if i % 2 == 1 else "assistant",  # m5, the current turn, a question
            content=f"a message of forty characters, no. {i:02d}",
        )
        for i in range(6)
    ]
    assert {APPROX.count_message(m) for m in history} == {14}
    strategy = SummaryEvict(lambda ms: "they greeted each other")
    assert strategy.shortest_summary(APPROX) == 14
    r = Packer(budget=30, strategy=strategy, pin=()).pack(history)
    assert [m.id for m in r.kept[1:]] == ["m5"] and r.summary is r.kept[0]
    assert r.token_count == 30 and APPROX.count_message(r.summary) == 16
    assert [d.reason for d in r.decisions] == ["summarized"] * 5 + ["turn"]
