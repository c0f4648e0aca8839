"""SummaryEvict: invariants and a Recency oracle, the summary's budget, its cache, async."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _packing_support import (
    PIN_SPECS,
    check_invariants,
    histories,
    kept_ids,
    oracle_chunks,
    oracle_recency,
    originals,
)
from convomem.errors import ConfigError, ConvomemError, SummarizerError
from convomem.model import Message, PinPolicy, ToolResultBlock, ToolUseBlock, validate_pairs
from convomem.packing import Packer, PackResult
from convomem.recall import HashingEmbedder
from convomem.strategies import MaxTurns, Recency, SemanticDedup, SummaryEvict
from convomem.strategies.summary import SUMMARY_KEY
from convomem.summaries import SUMMARY_HEADER, TRUNCATION_MARKER, ExtractiveSummarizer, Summary
from convomem.tokens import PER_MESSAGE_TOKENS, get_tokenizer

GIVEN = get_tokenizer("given")
FEW = settings(max_examples=30, deadline=None)
MANY = settings(max_examples=80, deadline=None)


class Folding:
    """A ``(messages, previous)`` summarizer: the previous text plus the new ids.

    Folding it incrementally gives the same text as summarizing everything at once,
    so the text names exactly the messages summarized. ``pad`` words make it long.
    """

    def __init__(self, pad: int = 0) -> None:
        self.pad = pad
        self.calls: list[tuple[list[str], int | None]] = []

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls.append(([m.id for m in messages], None if previous is None else previous.count))
        head = previous.text.split(" |")[0] if previous is not None else ""
        ids = " ".join(x for x in [head, *(m.id for m in messages)] if x)
        return ids + (" |" + " pad" * self.pad if self.pad else "")

    def text_for(self, ids: Sequence[str]) -> str:
        """The text for ``ids`` summarized at once (folding gives the same)."""
        return " ".join(ids) + (" |" + " pad" * self.pad if self.pad else "")

    def seen(self) -> list[str]:
        return [i for ids, _ in self.calls for i in ids]


class Plain:
    """A ``(messages) -> str`` summarizer: it always needs every dropped message."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls.append([m.id for m in messages])
        return "about " + " ".join(m.id for m in messages)


SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "ze", "pi", "shu", "gra", "dol")


def text(i: str, role: str, words: int = 50) -> Message:
    """A message of ``words`` pseudo-words, different for every id."""
    rng = random.Random(i)
    body = " ".join(
        "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(words)
    )
    return Message(i, role, content=body)


def chat(n: int, words: int = 50) -> list[Message]:
    """A system prompt and ``n`` alternating user / assistant messages."""
    out = [Message("sys", "system", content="Be brief.")]
    out += [text(f"m{i}", "user" if i % 2 == 0 else "assistant", words) for i in range(n)]
    return out


def summarized(r: PackResult) -> list[int]:
    return [d.index for d in r.decisions if d.reason == "summarized"]


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
        None if r.summary is None else (r.summary.id, r.summary.content),
    )


def summary_cost(message: Message, tok: Any) -> int:
    """What a summary message costs (estimated like SummaryEvict for ``given``)."""
    if message.tokens is None and tok.name == "given":
        return tok.count(message.countable_text()) + PER_MESSAGE_TOKENS
    return int(tok.count_message(message))


def smallest_summary(text: str, tok: Any) -> int:
    """The cheapest summary message of ``text``: all of it, or its first character and
    the truncation marker (the shortest clip)."""
    text = text.strip()

    def cost(t: str) -> int:
        return summary_cost(Summary(t, "a", "b", 1).to_message(), tok)

    return min(cost(text), cost(text[:1] + TRUNCATION_MARKER))


# ------------------------------------------------------------------ invariants, oracle


def check_summary(
    messages: list[Message],
    r: PackResult,
    *,
    budget: int,
    reserve: int,
    placement: str,
    pins: Any,
    tok: Any,
    unanswered: str = "drop",
    contiguous: bool = True,
    text: Callable[[list[str]], str] | None = None,
    least: int = 0,
) -> None:
    """SummaryEvict on top of the packing invariants: the Recency oracle, the summary's
    cost, placement and reasons; given ``text`` (dropped ids -> the summarizer's
    text), whether a summary is present. ``least`` is ``least_room``: when the reserve
    plus what the kept chunks leave is below it, Recency packs into ``budget - least``
    instead, if that leaves ``least`` (a shortened summary rather than none)."""
    check_invariants(messages, r, pins=pins, tokenizer=tok)
    assert validate_pairs([m for m in r.kept if m is not r.summary]) == []
    where = {id(m): i for i, m in enumerate(messages)}
    assert sorted([where[id(m)] for m in originals(r)] + [where[id(m)] for m in r.dropped]) == (
        list(range(len(messages)))
    )
    gone = summarized(r)
    chunks = oracle_chunks(messages, pins, tok, unanswered)
    sendable = {m.id for c, pinned, _ in chunks if not pinned for m in c.messages}

    def recency(room: int) -> tuple[set[str], int]:
        kept = oracle_recency(
            messages, room, pins, tok, unanswered=unanswered, contiguous=contiguous
        )
        return kept, sum(cost for c, _, cost in chunks if c.messages[0].id in kept)

    budget_kept, used = recency(budget - reserve)
    if sendable - budget_kept and budget - used < least < budget:
        wider, wider_used = recency(budget - least)
        if budget - wider_used >= least:
            budget_kept = wider
    assert kept_ids(r) == budget_kept
    fallen = [m.id for m in messages if m.id in sendable - budget_kept]
    if text is not None:
        # A summary is present exactly when something was dropped and the smallest
        # summary of its text fits the reserve plus what the kept chunks leave unused.
        used = r.token_count - (0 if r.summary is None else summary_cost(r.summary, tok))
        t = text(fallen)
        fits = bool(t.strip()) and budget - used >= smallest_summary(t, tok)
        assert (r.summary is not None) == (bool(fallen) and fits)
    if r.summary is None:
        assert gone == []
        return
    s = r.summary
    assert [m for m in r.kept if m is s] == [s]
    assert s.role == "system" and s.metadata[SUMMARY_KEY] is True
    assert s.metadata["summary"]["count"] == len(gone) > 0
    assert r.token_count <= budget  # never over budget because of the summary
    at = r.kept.index(s)
    if placement == "head":
        assert at == 0
    else:
        rest = originals(r)
        lead = next((k for k, m in enumerate(rest) if m.role != "system"), len(rest))
        assert at == lead
    assert [messages[i].id for i in gone] == fallen


@pytest.mark.parametrize("tokenizer", ["given", "approx", "words"])
@MANY
@given(
    messages=histories(),
    budget=st.integers(1, 250),
    pins=PIN_SPECS,
    unanswered=st.sampled_from(("drop", "stub")),
    placement=st.sampled_from(("head", "after_system")),
    reserve=st.none() | st.integers(1, 80),
    pad=st.sampled_from((0, 0, 3, 40, 400)),
    gaps=st.booleans(),
)
def test_invariants_and_recency_oracle(
    tokenizer: str,
    messages: list[Message],
    budget: int,
    pins: Any,
    unanswered: Any,
    placement: Any,
    reserve: int | None,
    pad: int,
    gaps: bool,
) -> None:
    """The default fallback is Recency(contiguous=True); Recency() keeps gaps."""
    tok = get_tokenizer(tokenizer)
    folding = Folding(pad)
    fallback = Recency() if gaps else None
    strategy = SummaryEvict(folding, reserve=reserve, placement=placement, fallback=fallback)
    packer = Packer(
        budget=budget, tokenizer=tok, strategy=strategy, pin=pins, unanswered=unanswered
    )
    if reserve is not None and reserve >= budget:
        with pytest.raises(ConfigError, match=rf"reserve={reserve}: .*budget \({budget}\)"):
            packer.pack(messages)
        assert folding.calls == []
        return
    r = packer.pack(messages)
    effective = budget // 10 if reserve is None else reserve
    check_summary(
        messages,
        r,
        budget=budget,
        reserve=effective,
        placement=placement,
        pins=pins,
        tok=tok,
        unanswered=unanswered,
        contiguous=not gaps,
        text=folding.text_for,
        least=strategy.least_room(tok),
    )
    gone = [messages[i].id for i in summarized(r)]
    if r.summary is not None:
        assert folding.seen() == gone  # exactly the summarized messages, in order
        full = " ".join(gone)
        body = r.summary.content.split("\n", 1)[1]
        assert full.startswith(body.split(" |")[0].removesuffix(" […]").rstrip())
    # The same list again, and rebuilt objects with the same ids: no new call, same result.
    calls = len(folding.calls)
    assert fingerprint(packer.pack(messages)) == fingerprint(r)
    rebuilt = [Message.from_dict(m.to_dict()) for m in messages]
    assert fingerprint(packer.pack(rebuilt)) == fingerprint(r)
    assert len(folding.calls) == calls <= 1


@FEW
@given(messages=histories(max_size=30), budget=st.integers(20, 200), data=st.data())
def test_strategy_pack_equals_packer(messages: list[Message], budget: int, data: Any) -> None:
    placement = data.draw(st.sampled_from(("head", "after_system")))
    a = SummaryEvict(Folding(5), placement=placement).pack(
        messages, budget=budget, tokenizer=GIVEN, pinned_indices=PinPolicy((0,)).resolve(messages)
    )
    b = Packer(
        budget=budget,
        tokenizer=GIVEN,
        pin=(0,),
        strategy=SummaryEvict(Folding(5), placement=placement),
    ).pack(messages)
    assert fingerprint(a) == fingerprint(b)


# ------------------------------------------------------- convopack's failures, fixed


def test_a_long_summary_is_clipped_to_the_room_left() -> None:
    """convopack: a 400-word summary took a 500-token pack to 1,164 tokens, ahead of the
    system prompt. Here it is clipped to the reserve plus what the kept messages leave."""
    history = chat(40)
    tok = get_tokenizer("approx")
    kept_alone = Packer(budget=450, strategy=Recency(contiguous=True)).pack(history)
    for placement in ("head", "after_system"):
        packer = Packer(
            budget=500, strategy=SummaryEvict(lambda ms: "summary " * 400, placement=placement)
        )
        r = packer.pack(history)
        assert r.fits and r.token_count <= 500
        assert r.summary is not None and r.summary.content.endswith("[…]")
        room = 500 - kept_alone.token_count
        assert room > 50  # more than the reserve: the kept chunks left some unused
        assert room - 2 <= tok.count_message(r.summary) <= room  # clipped to a word's end
        first = r.kept[0] if placement == "after_system" else r.kept[1]
        assert first.id == "sys"
        assert r.kept.index(r.summary) == (0 if placement == "head" else 1)
        check_summary(
            history,
            r,
            budget=500,
            reserve=50,
            placement=placement,
            pins=("system",),
            tok=packer.tokenizer,
            text=lambda ids: "summary " * 400,
        )


def test_the_summarizer_runs_once_for_an_unchanged_dropped_set() -> None:
    """convopack: 5 packs of the same history -> 5 calls with all 35 dropped messages."""
    plain = Plain()
    packer = Packer(budget=500, strategy=SummaryEvict(plain))
    history = chat(40)
    first = packer.pack(history)
    for _ in range(4):
        assert packer.pack(history).summary is first.summary  # the same object: cache-stable
    for _ in range(3):  # the caller rebuilds its Message objects (same ids) every turn
        again = packer.pack([Message.from_dict(m.to_dict()) for m in history])
        assert fingerprint(again) == fingerprint(first)
    assert len(plain.calls) == 1 and len(plain.calls[0]) == len(summarized(first))


def test_nothing_dropped_means_no_summary_and_no_call() -> None:
    plain = Plain()
    history = chat(6, words=5)
    r = Packer(budget=1000, strategy=SummaryEvict(plain)).pack(history)
    assert r.summary is None and r.dropped == [] and plain.calls == []
    # The messages are packed into budget - reserve: with the room taken, they are dropped.
    total = get_tokenizer("approx").count_messages(history)
    r = Packer(budget=total + 20, strategy=SummaryEvict(plain, reserve=20)).pack(history)
    assert r.summary is None and r.kept == history and plain.calls == []
    r = Packer(budget=total + 19, strategy=SummaryEvict(plain, reserve=20)).pack(history)
    assert r.summary is not None and len(plain.calls) == 1 and r.token_count <= total + 19


def test_an_agent_loop_summarizes_each_message_once() -> None:
    """Each pack hands the summarizer only the newly dropped messages, folded into the
    previous text; the result equals summarizing the whole dropped set at once."""
    history = chat(120, words=20)
    folding = Folding()
    strategy = SummaryEvict(folding, reserve=300)  # Recency(contiguous=True) by default
    assert repr(strategy.fallback) == "Recency(min_keep=1, contiguous=True)"
    packer = Packer(budget=600, strategy=strategy)
    results = [packer.pack(history[:n]) for n in range(2, len(history) + 1)]
    gone = [history[i].id for i in summarized(results[-1])]
    assert folding.seen() == gone  # no message was summarized twice
    summary = results[-1].summary
    assert summary is not None and summary.content.endswith(" ".join(gone))
    changes = len({tuple(summarized(r)) for r in results if summarized(r)})
    assert len(folding.calls) == changes
    assert all(prev is not None for _, prev in folding.calls[1:])
    # A (messages)-only summarizer cannot fold: it gets the whole dropped set each time.
    plain = Plain()
    packer = Packer(budget=600, strategy=SummaryEvict(plain, reserve=300))
    for n in range(2, len(history) + 1):
        packer.pack(history[:n])
    assert plain.calls[-1] == gone and len(plain.calls) == changes


def test_with_gaps_a_changed_middle_is_summarized_afresh() -> None:
    """With fallback=Recency() a short old message is kept in a gap and dropped later:
    that dropped set does not extend the cached one, so it is summarized afresh."""
    history = chat(120, words=20)
    for k in range(0, 120, 7):
        history[k + 1] = text(f"m{k}", history[k + 1].role, words=2)
    folding = Folding()
    packer = Packer(budget=600, strategy=SummaryEvict(folding, reserve=300, fallback=Recency()))
    sets = []
    for n in range(2, len(history) + 1):
        r = packer.pack(history[:n])
        gone = [history[i].id for i in summarized(r)]
        if gone:
            assert r.summary is not None and r.summary.content.endswith(" ".join(gone))
            sets.append(tuple(gone))
    assert any(prev is None for _, prev in folding.calls[1:])  # a gap was closed
    assert len(folding.calls) == len(dict.fromkeys(sets))


def test_the_cache_serves_several_conversations() -> None:
    plain = Plain()
    strategy = SummaryEvict(plain)
    a = chat(40)
    b = [m.replace(id="b" + m.id) for m in chat(40)]
    for _ in range(3):
        Packer(budget=500, strategy=strategy).pack(a)
        Packer(budget=500, strategy=strategy).pack(b)
    assert len(plain.calls) == 2


# ------------------------------------------------------------------ room and reasons


def test_a_reserve_too_small_for_a_summary_makes_room_for_a_shortened_one() -> None:
    """convopack inserts a shortened summary when its reserve cannot hold the full one;
    so does SummaryEvict: older messages go too, until a shortened summary fits."""
    plain = Plain()
    history = [Message(f"m{i}", "user", 10, content=f"turn {i}") for i in range(20)]
    strategy = SummaryEvict(plain, reserve=6)
    shortest = strategy.shortest_summary(GIVEN)
    assert shortest == GIVEN.count(SUMMARY_HEADER + "\nx") + PER_MESSAGE_TOKENS == 14
    least = strategy.least_room(GIVEN)
    shortened = SUMMARY_HEADER + "\n" + "word " * 7 + "word […]"
    assert least == GIVEN.count(shortened) + PER_MESSAGE_TOKENS == 24
    # At 56, five messages fit budget - reserve and leave 6 tokens: too few for a
    # shortened summary. Packed into 56 - 24 instead, three stay and the summary fits.
    r = Packer(budget=56, tokenizer=GIVEN, strategy=strategy).pack(history)
    assert [m.id for m in r.kept][1:] == ["m17", "m18", "m19"] and r.token_count == 56
    assert r.summary is not None and r.summary.content.endswith(TRUNCATION_MARKER)
    assert GIVEN.count_message(r.summary) >= least
    assert plain.calls == [[f"m{i}" for i in range(17)]]
    assert set(r.reason_counts()) == {"recent", "summarized", "turn"}
    # The same dropped set at 63: the cached text, clipped to the larger room; no call.
    r = Packer(budget=63, tokenizer=GIVEN, strategy=strategy).pack(history)
    assert [m.id for m in r.kept][1:] == ["m17", "m18", "m19"] and len(plain.calls) == 1
    # At 30 even the newest message alone (min_keep) leaves less than that: plain
    # Recency, no summary and no call.
    plain.calls.clear()
    r = Packer(budget=30, tokenizer=GIVEN, strategy=strategy).pack(history)
    assert r.summary is None and plain.calls == []
    assert [m.id for m in r.kept] == ["m18", "m19"]
    assert set(r.reason_counts()) == {"recent", "budget", "turn"}
    # Pins that overflow the budget leave no room either.
    big = [Message("sys", "system", content="rule " * 600), *chat(10)[1:]]
    r = Packer(budget=500, strategy=SummaryEvict(plain)).pack(big)
    assert r.summary is None and plain.calls == [] and not r.fits


def test_an_empty_summary_is_not_sent() -> None:
    history = chat(40)
    r = Packer(budget=500, strategy=SummaryEvict(lambda ms: "  ")).pack(history)
    assert r.summary is None and "summarized" not in r.reason_counts()
    assert kept_ids(r) == oracle_recency(
        history, 450, ("system",), get_tokenizer("approx"), contiguous=True
    )


def test_orphans_unanswered_and_window_drops_are_not_summarized() -> None:
    history = [
        Message("sys", "system", 5, content="Be brief."),
        Message("orphan", "tool", 5, content=[ToolResultBlock("ghost", "42")]),
        Message("c1", "assistant", 5, content=[ToolUseBlock("t1", "f", {})]),  # unanswered
        *[
            Message(f"m{i}", "user" if i % 2 else "assistant", 30, content=f"x{i}")
            for i in range(12)
        ],
    ]
    folding = Folding()
    r = Packer(budget=150, tokenizer=GIVEN, strategy=[MaxTurns(4), SummaryEvict(folding)]).pack(
        history
    )
    reasons = {d.id: d.reason for d in r.decisions}
    assert reasons["orphan"] == "orphan" and reasons["c1"] == "unanswered"
    assert {reasons[f"m{i}"] for i in range(4)} == {"max_turns"}
    assert folding.seen() == [history[i].id for i in summarized(r)]
    assert summarized(r) and all(history[i].id not in ("orphan", "c1") for i in summarized(r))


def test_duplicates_are_not_summarized_either_way_round() -> None:
    history = chat(30, words=20)
    history[20] = history[20].replace(content=history[4].content)  # m19 repeats m3
    for make in (
        lambda f: SummaryEvict(f, fallback=SemanticDedup(HashingEmbedder())),
        lambda f: SemanticDedup(HashingEmbedder(), fallback=SummaryEvict(f)),
    ):
        folding = Folding()
        r = Packer(budget=300, strategy=make(folding)).pack(history)
        dups = [d.id for d in r.decisions if d.reason == "duplicate"]
        assert "m19" not in {m.id for m in r.kept}
        assert r.summary is not None and "m19" not in folding.seen()
        assert dups and not set(dups) & set(folding.seen())
        assert folding.seen() == [history[i].id for i in summarized(r)]


def test_the_given_tokenizer_counts_the_summary() -> None:
    history = [Message(f"m{i}", "user", 40, content=f"turn {i}") for i in range(20)]
    r = Packer(budget=200, tokenizer="given", strategy=SummaryEvict(Folding(100))).pack(history)
    assert r.summary is not None and r.summary.tokens is not None
    # Four messages fit 200 - 20: the summary gets the reserve and the 20 tokens unused.
    assert len(r.kept) == 5 and r.summary.tokens == 40
    assert r.token_count == GIVEN.count_messages(r.kept) == 200


def test_explain_shows_the_summary() -> None:
    r = Packer(budget=500, strategy=SummaryEvict(ExtractiveSummarizer(30))).pack(chat(40))
    table = r.explain()
    assert r.summary is not None and "summarized" in table
    assert table.splitlines()[-1].split()[-1] == "summary"


# ---------------------------------------------------------------------- sync / async


async def _async_summary(messages: Sequence[Message]) -> str:
    await asyncio.sleep(0)
    return "async " + " ".join(m.id for m in messages)


def _sync_summary(messages: Sequence[Message]) -> str:
    return "async " + " ".join(m.id for m in messages)


def test_an_async_summarizer_runs_in_sync_pack_outside_a_loop() -> None:
    r = Packer(budget=500, strategy=SummaryEvict(_async_summary)).pack(chat(40))
    assert r.summary is not None and "async m0" in r.summary.content


async def test_sync_pack_inside_a_loop_says_use_pack_async() -> None:
    packer = Packer(budget=500, strategy=SummaryEvict(_async_summary))
    with pytest.raises(RuntimeError, match="pack_async"):
        packer.pack(chat(40))

    class Sneaky:  # a sync __call__ that returns a coroutine
        def __call__(self, messages: Sequence[Message]) -> Any:
            return _async_summary(messages)

    sneaky = Packer(budget=500, strategy=SummaryEvict(Sneaky()))
    with pytest.raises(RuntimeError, match="pack_async"):
        sneaky.pack(chat(40))
    r = await sneaky.pack_async(chat(40))
    assert r.summary is not None and "async m0" in r.summary.content


async def test_pack_async_matches_pack() -> None:
    history = chat(40)
    a = await Packer(budget=500, strategy=SummaryEvict(_async_summary)).pack_async(history)
    b = Packer(budget=500, strategy=SummaryEvict(_sync_summary)).pack(history)
    c = await Packer(budget=500, strategy=SummaryEvict(_sync_summary)).pack_async(history)
    d = await SummaryEvict(_async_summary).pack_async(
        history, budget=500, pinned_indices=[0], tokenizer="approx"
    )
    assert fingerprint(a) == fingerprint(b) == fingerprint(c) == fingerprint(d)


async def test_pack_async_runs_a_sync_summarizer_in_a_thread_and_caches() -> None:
    threads: list[int] = []

    def summarize(messages: Sequence[Message]) -> str:
        threads.append(threading.get_ident())
        return "s"

    packer = Packer(budget=500, strategy=SummaryEvict(summarize))
    for _ in range(3):
        await packer.pack_async(chat(40))
    assert len(threads) == 1 and threads[0] != threading.get_ident()


# --------------------------------------------------------------------- bad input


@pytest.mark.parametrize("reserve", [0, -1, 1.5, "10", True])
def test_bad_reserve(reserve: Any) -> None:
    with pytest.raises(ConfigError, match=f"reserve={reserve!r}"):
        SummaryEvict(Plain(), reserve=reserve)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="placement='tail'"):
        SummaryEvict(Plain(), placement="tail")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="summarizer=42"):
        SummaryEvict(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="fallback=MaxTurns"):
        SummaryEvict(Plain(), fallback=MaxTurns(2))
    with pytest.raises(ConfigError, match="fallback="):
        SummaryEvict(Plain(), fallback=SummaryEvict(Plain()))


def test_a_reserve_not_below_the_budget_fails_at_pack_time_and_changes_nothing() -> None:
    plain = Plain()
    strategy = SummaryEvict(plain, reserve=100)
    packer = Packer(budget=100, strategy=strategy)
    with pytest.raises(ConfigError, match=r"reserve=100: must be less than the budget \(100\)"):
        packer.pack(chat(40))
    assert plain.calls == []
    r = Packer(budget=1000, strategy=strategy).pack(chat(40))  # the same strategy still works
    assert r.summary is not None and r.token_count <= 1000 and len(plain.calls) == 1


def test_summarizer_errors_propagate_and_are_not_cached() -> None:
    attempts: list[int] = []

    def flaky(messages: Sequence[Message]) -> str:
        attempts.append(len(messages))
        if len(attempts) == 1:
            raise TimeoutError("llm down")
        return "ok"

    packer = Packer(budget=500, strategy=SummaryEvict(flaky))
    with pytest.raises(TimeoutError):
        packer.pack(chat(40))
    assert packer.pack(chat(40)).summary is not None and len(attempts) == 2
    bad = Packer(budget=500, strategy=SummaryEvict(lambda ms: 42))
    with pytest.raises(SummarizerError, match="must return a str"):
        bad.pack(chat(40))


def test_a_fallback_that_summarizes_is_refused() -> None:
    class Sneaky(Recency):
        def select(self, table: Any, budget: int) -> Any:
            sel = super().select(table, budget)
            sel.summary = Message("s2", "system", 1, content="x")
            return sel

    with pytest.raises(ConvomemError, match="summary of its own"):
        Packer(budget=500, strategy=SummaryEvict(Plain(), fallback=Sneaky())).pack(chat(40))
