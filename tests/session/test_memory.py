"""ConversationMemory: the log, the view under budget, compaction, tiers, failures, twins."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, InvalidMessage, TransientError
from convomem.model import (
    Chunk,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    starts_turn,
    validate_pairs,
)
from convomem.session import COMPRESSED_KEY, ConversationMemory
from convomem.session._turns import joined
from convomem.session.view import STAND_IN, answers_first
from convomem.stores import InMemoryStore
from convomem.summaries import SEGMENT_KEY, RunningSummary, Summary
from convomem.tokens import get_tokenizer
from convomem.views.log import unit_messages

APPROX = get_tokenizer("approx")
SYSTEM = "You are a careful support agent for an online shop."
WORDS_TEXT = (
    "the parcel was delayed again and we talked about shipping options while support checked "
    "the queue and everyone agreed to wait a little longer for news about it"
)
WORDS = WORDS_TEXT.split()


def filler(i: int, n: int = 16) -> str:
    """Fact-free text: lower case, no digits."""
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n)) + "."


def request_tokens(messages: Sequence[Message]) -> int:
    return APPROX.count_messages(messages) + 2


def is_summary(m: Message) -> bool:
    return "summary" in m.metadata


def body(ctx: Sequence[Message]) -> list[Message]:
    return [m for m in ctx if not is_summary(m)]


def chat(mem: ConversationMemory, turns: int, start: int = 0) -> None:
    for i in range(start, start + turns):
        mem.add("user", filler(2 * i), id=f"u{i}")
        mem.add("assistant", filler(2 * i + 1), id=f"a{i}")


class Boom:
    """A summarizer that fails while ``down`` and records its calls."""

    name = "boom"

    def __init__(self, text: str = "ERROR 500: upstream model unavailable") -> None:
        self.down = True
        self.calls = 0
        self.text = text

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        self.calls += 1
        if self.down:
            raise RuntimeError(self.text)
        return "recovered: " + " ".join(m.id for m in messages)


# -- building a random conversation -------------------------------------------------


@dataclass
class Conv:
    messages: list[Message]


def conversation(draw: Any, n: int) -> list[Message]:
    """Text turns, tool exchanges (parallel, unanswered, interleaved, orphan), priorities."""
    out: list[Message] = [Message("sys", "system", content=SYSTEM)]
    k = 0
    call = 0
    while len(out) < n:
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "orphan"]))
        prio = draw(st.sampled_from([0, 0, 0, 0, 1, 2]))
        size = draw(st.integers(2, 40))
        k += 1
        if kind in ("user", "assistant"):
            out.append(Message(f"t{k}", kind, content=filler(k, size), priority=prio))
        elif kind == "orphan":
            out.append(
                Message(f"o{k}", "tool", content=[ToolResultBlock(f"nowhere{k}", filler(k, 5))])
            )
        else:
            width = draw(st.integers(1, 3))
            ids = [f"c{call + j}" for j in range(width)]
            call += width
            out.append(
                Message(
                    f"t{k}",
                    "assistant",
                    content=[ToolUseBlock(c, "lookup", {"q": filler(k, 3)}) for c in ids],
                    priority=prio if prio != 1 else 0,
                )
            )
            answered = draw(st.lists(st.sampled_from(ids), unique=True, max_size=width))
            if draw(st.booleans()) and answered:
                k += 1
                out.append(Message(f"t{k}", "user", content=filler(k, 6)))
            for c in answered:
                k += 1
                out.append(
                    Message(
                        f"r{k}",
                        "tool",
                        content=[ToolResultBlock(c, filler(k, draw(st.integers(2, 60))))],
                        priority=draw(st.sampled_from([0, 0, 1])),
                    )
                )
    return out


@st.composite
def conversations(draw: Any, n: int = 50) -> list[Message]:
    return conversation(draw, draw(st.integers(5, n)))


def log_order(mem: ConversationMemory) -> dict[str, int]:
    return {m.id: i for i, m in enumerate(mem.messages())}


def check_invariants(mem: ConversationMemory, added: list[Message]) -> None:
    ctx = mem.context("messages")
    stats = mem.stats()
    # The log is complete, untouched by eviction.
    assert mem.messages() == added
    # Under budget (unless pinned messages alone are over it, which the stats say); an
    # Anthropic request of a view that cannot lead has its own view, with a stand-in
    # user turn, and the stats cover both.
    view = mem.engine.current()
    anthropic = request_tokens(view.anthropic or ctx)
    anthropic += APPROX.count_message(STAND_IN) if view.stand_in else 0
    anthropic += joined(view.anthropic or ctx, view.stand_in)  # results joined: a newline
    cost = max(request_tokens(ctx), anthropic)
    assert stats.context_tokens == cost
    if stats.fits:
        assert cost <= mem.max_tokens
    else:  # a request over the budget sends only what may not be evicted
        assert cost > mem.max_tokens
        requests = [(ctx, request_tokens(ctx)), (view.anthropic or ctx, anthropic)]
        for sent, tokens in requests:
            if tokens > mem.max_tokens:
                assert {m.id for m in sent} <= protected_ids(mem)
    # Tool pairs are valid; the history is in log order; the summary follows the prompt.
    assert validate_pairs(ctx) == []
    order = log_order(mem)
    in_log_order = sorted(body(ctx), key=lambda m: order[m.id])
    # log order, but a tool result right after its call (providers need that)
    assert [m.id for m in body(ctx)] == [m.id for m in answers_first(in_log_order)]
    heads = [i for i, m in enumerate(ctx) if is_summary(m)]
    assert len(heads) <= 1
    if heads:  # right after the leading pinned messages (the system prompt first)
        assert ctx[0].id == added[0].id == "sys"
        assert heads == [mem.view.head]
    # Priority-2 and system messages are always sent when they fit.
    ids = {m.id for m in ctx}
    if stats.fits:
        assert all(m.id in ids for m in added if m.priority == 2 and not m.has_tool_use())
    # Accounting: every logged message is in the view, summarized, or awaiting a fold.
    engine = mem.view
    log = engine.log
    view = {m.id for m in log.kept()}
    folded = set(mem.summary.covered_ids)
    waiting = {m.id for m in engine.to_fold}
    assert view | folded | waiting == {m.id for m in added}
    assert not view & folded
    # The running totals match a recount (a copy without stray results keeps its count).
    units = list(log.units())
    chunks = [u for u in units if isinstance(u, Chunk)]
    assert log.total() == sum(u.tokens if isinstance(u, Chunk) else u[1] for u in units)
    assert log.pinned_tokens == sum(c.tokens for c in chunks if c.pinned)
    assert all(c.tokens >= APPROX.count_messages(c.messages) for c in chunks)
    free = [m for u in units if not (isinstance(u, Chunk) and u.pinned) for m in unit_messages(u)]
    assert log.turns == sum(starts_turn(m) for m in free)
    # Summarized messages were folded exactly once.
    assert stats.summarized_messages == len(folded)


@settings(max_examples=40, deadline=None)
@given(
    conv=conversations(60),
    budget=st.integers(160, 700),
    max_turns=st.one_of(st.none(), st.integers(1, 6)),
    pin=st.sampled_from(
        [
            ("system",),
            ("system", "last_user"),
            ("system", "first_user"),
            ("system", "tool_results"),
            ("system", -1, -3),
            ("system", 4),
        ]
    ),
)
def test_random_conversations_keep_every_invariant(
    conv: list[Message], budget: int, max_turns: int | None, pin: tuple[Any, ...]
) -> None:
    mem = ConversationMemory(budget, max_turns=max_turns, pin=pin)
    for i, m in enumerate(conv):
        mem.add_message(m)
        if i % 3 == 0 or i == len(conv) - 1:
            check_invariants(mem, conv[: i + 1])
        if max_turns is not None:  # compressed and pinned user messages are not turns
            assert count_turns(mem) <= max_turns


def protected_ids(mem: ConversationMemory) -> set[str]:
    """Ids a compaction may not evict: pinned, or of the current turn."""
    log = mem.view.log
    return {m.id for u in log.units() if log.keeps(u) for m in unit_messages(u)}


def count_turns(mem: ConversationMemory) -> int:
    protected = protected_ids(mem)
    return sum(1 for m in body(mem.context("messages")) if starts_turn(m) and m.id not in protected)


@settings(max_examples=25, deadline=None)
@given(conv=conversations(50), budget=st.integers(160, 500), pattern=st.lists(st.booleans()))
def test_invariants_hold_when_the_summarizer_fails_at_random(
    conv: list[Message], budget: int, pattern: list[bool]
) -> None:
    calls = iter(pattern * 50)

    def flaky(messages: Sequence[Message], previous: Summary | None) -> str:
        if next(calls, False):
            raise TimeoutError("model timed out")
        return " ".join(m.text()[:30] for m in messages)

    rs = RunningSummary(flaky, reserve=60, fallback=flaky, retries=0, backoff=0)
    mem = ConversationMemory(budget, summarizer=rs)
    for i, m in enumerate(conv):
        mem.add_message(m)
        if i % 2 == 0 or i == len(conv) - 1:
            check_invariants(mem, conv[: i + 1])
            assert not any("timed out" in m.text() for m in mem.context("messages"))


@settings(max_examples=25, deadline=None)
@given(conv=conversations(40), budget=st.integers(160, 500))
def test_sync_and_async_give_the_same_contexts(conv: list[Message], budget: int) -> None:
    sync = ConversationMemory(budget)
    amem = ConversationMemory(budget)

    async def run() -> list[list[Message]]:
        out = []
        for m in conv:
            await amem.aadd_message(m)
            out.append(await amem.acontext("messages"))
        return out

    got = asyncio.run(run())
    for m, actx in zip(conv, got, strict=True):
        sync.add_message(m)
        assert sync.context("messages") == actx
    assert sync.stats().summarizer_calls == amem.stats().summarizer_calls
    assert sync.messages() == asyncio.run(amem.amessages())


# -- the user-suffering items -------------------------------------------------------


def test_summaries_are_not_recomputed_per_request() -> None:
    mem = ConversationMemory(600)
    mem.add("system", SYSTEM)
    history: list[tuple[int, int]] = []
    for i in range(80):
        mem.add("user", filler(i), id=f"u{i}")
        for _ in range(5):
            mem.context()
            mem.context("anthropic")
            mem.context("messages")
        s = mem.stats()
        history.append((s.compactions, s.summarizer_calls))
    calls = mem.stats().summarizer_calls
    assert mem.stats().compactions > 3
    for _ in range(200):
        mem.context()
    assert mem.stats().summarizer_calls == calls
    # Summarizer calls only happen on the turns that compacted.
    for (c0, k0), (c1, k1) in itertools.pairwise(history):
        if c1 == c0:
            assert k1 == k0
    # Every message went to the summarizer about once (no re-summarizing per turn).
    logged = APPROX.count_messages(mem.messages())
    assert mem.stats().summarizer_input_tokens <= 1.3 * logged


def test_each_evicted_message_is_summarized_once() -> None:
    seen: list[str] = []

    def recording(messages: Sequence[Message], previous: Summary | None) -> str:
        seen.extend(m.id for m in messages if SEGMENT_KEY not in m.metadata)
        return " ".join(m.text()[:20] for m in messages)

    mem = ConversationMemory(500, summarizer=recording)
    mem.add("system", SYSTEM)
    chat(mem, 150)
    assert mem.stats().compactions > 10
    assert len(seen) == len(set(seen))  # no message went to the summarizer twice
    assert set(seen) == set(mem.summary.covered_ids)


def test_facts_survive_many_compactions() -> None:
    facts = [
        ("order", "order 48213"),
        ("email", "dana.kowalski@example.com"),
        ("date", "March 14"),
        ("ticket", "ticket TK-5521"),
        ("amount", "$249.99"),
        ("pref", "I prefer email over phone calls"),
        ("name", "Priya Raman"),
        ("booking", "booking ZX-88"),
    ]
    mem = ConversationMemory(1500, summary_tokens=600, cache_turns=0)  # many folds
    mem.add("system", SYSTEM)
    for i in range(300):
        text = filler(i)
        if i % 30 == 4 and i // 30 < len(facts):
            text = f"{text} For the record: {facts[i // 30][1]}."
        mem.add("user" if i % 2 == 0 else "assistant", text)
    assert mem.stats().compactions >= 15
    final = "\n".join(m.text() for m in mem.context("messages"))
    for _, value in facts:
        assert value in final
    # They are in the summary's ledger, not in the kept history.
    summary = next(m for m in mem.context("messages") if is_summary(m))
    assert all(value in summary.text() for _, value in facts)


def failing_memory(budget: int = 400) -> tuple[ConversationMemory, Boom]:
    boom = Boom()
    rs = RunningSummary(boom, reserve=80, fallback=boom, retries=1, backoff=0)
    return ConversationMemory(budget, summarizer=rs), boom


def test_a_failed_summarizer_never_replaces_history_with_error_text() -> None:
    mem, boom = failing_memory()
    mem.add("system", SYSTEM)
    added = [mem.messages()[0]]
    for i in range(40):
        added.append(mem.add("user", filler(i), id=f"u{i}"))
        ctx = mem.context("messages")
        assert request_tokens(ctx) <= mem.max_tokens
        assert validate_pairs(ctx) == []
        assert not any("ERROR" in m.text() or "unavailable" in m.text() for m in ctx)
        assert not any(is_summary(m) for m in ctx)
    s = mem.stats()
    assert boom.calls > 0 and s.compaction_failures > 0 and s.compactions == 0
    assert s.compaction_pending and s.omitted > 0
    assert s.summarized_messages == 0
    assert isinstance(mem.last_error, Exception)
    assert mem.messages() == added  # nothing lost
    # The newest messages are the ones sent; the oldest are only left out for now.
    ctx = mem.context("messages")
    assert ctx[0].id == added[0].id and ctx[-1].id == "u39"
    # The summarizer recovers: the next add compacts, nothing is omitted any more.
    boom.down = False
    mem.add("user", filler(99), id="u99")
    s = mem.stats()
    assert s.compactions == 1 and s.omitted == 0 and not s.compaction_pending
    summary = next(m for m in mem.context("messages") if is_summary(m))
    assert "recovered: u0" in summary.text()


def test_fallback_summary_is_marked_degraded() -> None:
    boom = Boom()
    rs = RunningSummary(boom, reserve=80, retries=0, backoff=0)  # extractive fallback
    mem = ConversationMemory(400, summarizer=rs)
    chat(mem, 20)
    s = mem.stats()
    assert s.compactions > 0 and s.degraded and s.compaction_failures == 0
    assert not any("ERROR" in m.text() for m in mem.context("messages"))


def test_summary_goes_right_after_the_system_prompt() -> None:
    mem = ConversationMemory(500)
    mem.add("system", SYSTEM)
    chat(mem, 30)
    ctx = mem.context("messages")
    assert ctx[0].role == "system" and ctx[0].text() == SYSTEM
    assert is_summary(ctx[1]) and not any(is_summary(m) for m in ctx[2:])
    oa = mem.context()
    assert oa[0] == {"role": "system", "content": SYSTEM}
    assert oa[1]["content"].startswith("Summary of the earlier conversation:")
    an = mem.context("anthropic")
    assert an["system"].startswith(SYSTEM + "\n\nSummary of the earlier conversation:")
    assert an["messages"][0]["role"] == "user"


def test_the_prefix_is_stable_between_compactions() -> None:
    mem = ConversationMemory(2000)
    mem.add("system", SYSTEM)
    prev: list[Message] | None = None
    compactions = 0
    cuts = []
    for i in range(300):
        mem.add("user", filler(i, 12), id=f"u{i}")
        mem.add("assistant", filler(i + 1, 20), id=f"a{i}")
        ctx = mem.context("messages")
        s = mem.stats()
        if prev is not None and s.compactions == compactions:
            assert ctx[: len(prev)] == prev  # same prefix: the cut did not move
            assert s.prefix_kept
        if s.compactions != compactions:
            cuts.append(i)
        compactions = s.compactions
        prev = ctx
    assert len(cuts) >= 5
    gaps = [b - a for a, b in itertools.pairwise(cuts)]
    assert min(gaps) >= 5  # many turns between two compactions
    assert mem.stats().prefix_breaks == len(cuts)
    # The kept history after a cut starts with a user message (a turn boundary).
    assert body(mem.context("messages"))[1].role == "user"


def test_log_is_complete_after_eviction() -> None:
    mem = ConversationMemory(300)
    added = [mem.add("system", SYSTEM)]
    for i in range(50):
        added.append(mem.add("user", filler(i)))
    assert mem.messages() == added
    assert mem.messages(limit=3) == added[-3:]
    assert mem.stats().log_messages == 51
    assert mem.stats().view_messages < 51


# -- priorities and turns ---------------------------------------------------------


def test_priority_two_is_never_evicted() -> None:
    mem = ConversationMemory(500)
    mem.add("system", SYSTEM)
    chat(mem, 3)
    keep = mem.add("user", "Remember: my account is ACC-7731 and I am allergic.", priority=2)
    chat(mem, 60, start=3)
    assert mem.stats().compactions > 5
    ctx = mem.context("messages")
    assert keep in ctx
    assert not mem.summary.covers(keep.id)


def test_priority_one_is_compressed_once_then_evicted() -> None:
    mem = ConversationMemory(700)
    mem.add("system", SYSTEM)
    chat(mem, 2)
    long = " ".join(filler(k) for k in range(6))
    important = mem.add(
        "user", f"My order 1182 never arrived. {long} Please call Dana Kowalski.", priority=1
    )
    seen_compressed = None
    for i in range(2, 200):
        chat(mem, 1, start=i)
        view = {m.id: m for m in mem.context("messages")}
        if important.id in view and COMPRESSED_KEY in view[important.id].metadata:
            seen_compressed = view[important.id]
        if mem.summary.covers(important.id):
            break
    assert seen_compressed is not None, "compressed before it was evicted"
    assert seen_compressed.priority == 0
    assert APPROX.count_message(seen_compressed) < APPROX.count_message(important)
    assert "order 1182" in seen_compressed.text() and "Dana Kowalski" in seen_compressed.text()
    assert mem.summary.covers(important.id)
    assert mem.stats().compressions == 1
    assert important in mem.messages()  # the log keeps the original


def test_scorer_assigns_priorities() -> None:
    mem = ConversationMemory(400, scorer=lambda m: 2 if "IMPORTANT" in m.text() else 0)
    mem.add("system", SYSTEM)
    pinned = mem.add("user", "IMPORTANT: ship to the office.")
    assert pinned.priority == 2
    chat(mem, 40)
    assert pinned in mem.context("messages")
    bad = ConversationMemory(400, scorer=lambda m: 7)
    with pytest.raises(ConfigError, match="scorer"):
        bad.add("user", "hi")
    assert bad.messages() == []


def test_max_turns_and_tokens_combine() -> None:
    mem = ConversationMemory(100_000, max_turns=6)
    mem.add("system", SYSTEM)
    for i in range(40):
        chat(mem, 1, start=i)
        users = [m for m in body(mem.context("messages")) if m.role == "user"]
        assert 1 <= len(users) <= 6
    assert mem.stats().compactions >= 5
    # The token limit still applies when it is hit first.
    small = ConversationMemory(400, max_turns=50)
    chat(small, 40)
    assert small.stats().compactions > 0
    assert small.stats().context_tokens <= 400


def test_tool_exchange_leaves_the_view_whole() -> None:
    mem = ConversationMemory(400)
    mem.add("system", SYSTEM)
    mem.add("user", filler(0))
    mem.add(
        "assistant",
        [ToolUseBlock("c1", "lookup", {"q": "a"}), ToolUseBlock("c2", "lookup", {"q": "b"})],
        id="call",
    )
    mem.add("tool", [ToolResultBlock("c2", filler(1, 40))], id="r2")
    mem.add("tool", [ToolResultBlock("c1", filler(2, 40))], id="r1")
    for i in range(30):
        chat(mem, 1, start=i + 5)
        ctx = mem.context("messages")
        assert validate_pairs(ctx) == []
        ids = {m.id for m in ctx}
        assert len(ids & {"call", "r1", "r2"}) in (0, 3)
    assert all(mem.summary.covers(x) for x in ("call", "r1", "r2"))
    # A result whose call was evicted never enters the view.
    mem.add("tool", [ToolResultBlock("c1", "late")], id="late")
    assert "late" not in {m.id for m in mem.context("messages")}


def test_a_pending_tool_call_waits_for_its_result() -> None:
    mem = ConversationMemory(4000)
    mem.add("user", "look it up")
    mem.add("assistant", [ToolUseBlock("c1", "lookup", {})], id="call")
    assert [m["role"] for m in mem.context()] == ["user"]
    mem.add("tool", [ToolResultBlock("c1", "found")], id="res")
    assert [m.id for m in mem.context("messages")][-2:] == ["call", "res"]


# -- stores -----------------------------------------------------------------------


class FlakyStore(InMemoryStore):
    def __init__(self, items: Sequence[Message] = ()) -> None:
        super().__init__(items)
        self.fail = False

    def add_items(self, items: Sequence[Message]) -> None:
        if self.fail:
            raise TransientError("database is locked")
        super().add_items(items)

    def get_items(self, limit: int | None = None) -> list[Message]:
        if self.fail:
            raise TransientError("connection reset")
        return super().get_items(limit)


def snapshot(mem: ConversationMemory) -> tuple[Any, ...]:
    mem.context()
    ctx = mem.context("messages")
    return (ctx, mem.stats(), mem.store.get_items())  # type: ignore[union-attr]


def test_store_errors_leave_state_untouched() -> None:
    store = FlakyStore()
    mem = ConversationMemory(300, store=store)
    mem.add("system", SYSTEM)
    chat(mem, 12)
    before = snapshot(mem)
    store.fail = True
    with pytest.raises(TransientError):
        mem.add("user", "this write fails", id="x")
    store.fail = False
    assert snapshot(mem) == before
    # The id was not taken: the same message can be added once the store is back.
    mem.add("user", "this write fails", id="x")
    assert mem.messages()[-1].id == "x"


def test_existing_log_is_replayed_on_first_use() -> None:
    live = ConversationMemory(400)
    live.add("system", SYSTEM)
    chat(live, 30)
    store = FlakyStore(live.messages())
    store.fail = True
    resumed = ConversationMemory(400, store=store)
    with pytest.raises(TransientError):
        resumed.context()
    store.fail = False
    assert resumed.context("messages") == live.context("messages")
    assert resumed.stats().log_messages == 61
    resumed.add("user", "and one more")
    assert len(resumed.messages()) == 62


def test_a_store_with_duplicate_ids_is_refused() -> None:
    m = Message("same", "user", content="hi")
    mem = ConversationMemory(400, store=InMemoryStore([m, m]))
    with pytest.raises(InvalidMessage, match="id"):
        mem.context()


class AsyncListStore:
    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.fail = False

    async def get_items(self, limit: int | None = None) -> list[Message]:
        await asyncio.sleep(0)
        return self.inner.get_items(limit)

    async def add_items(self, items: Sequence[Message]) -> None:
        await asyncio.sleep(0)
        if self.fail:
            raise TransientError("timeout")
        self.inner.add_items(items)

    async def pop_item(self) -> Message | None:
        return self.inner.pop_item()

    async def clear_session(self) -> None:
        self.inner.clear_session()


async def test_async_store() -> None:
    store = AsyncListStore()
    mem = ConversationMemory(400, store=store)
    await mem.aadd("system", SYSTEM)
    for i in range(20):
        await mem.aadd("user", filler(i))
    assert len(await mem.amessages()) == 21
    ctx = await mem.acontext("messages")
    assert request_tokens(ctx) <= 400
    ctx = await mem.acontext("messages")
    before = (ctx, mem.stats())
    with pytest.raises(ConfigError, match=r"store=.*AsyncStore"):
        mem.add("user", "sync call")
    store.fail = True
    with pytest.raises(TransientError):
        await mem.aadd("user", "fails")
    assert (await mem.acontext("messages"), mem.stats()) == before
    store.fail = False
    await mem.aclear()
    assert [m.text() for m in await mem.amessages()] == [SYSTEM]


def test_bad_stores_are_refused() -> None:
    with pytest.raises(ConfigError, match="store="):
        ConversationMemory(400, store=object())  # type: ignore[arg-type]

    class Mixed(AsyncListStore):
        def pop_item(self) -> Message | None:  # type: ignore[override]
            return None

    with pytest.raises(ConfigError, match="mixes"):
        ConversationMemory(400, store=Mixed())  # type: ignore[arg-type]


# -- async: worker threads and background summaries ----------------------------------


async def test_sync_summarizer_runs_off_the_event_loop() -> None:
    threads: list[int] = []

    def summarizer(messages: Sequence[Message], previous: Summary | None) -> str:
        threads.append(threading.get_ident())
        with pytest.raises(RuntimeError):
            asyncio.get_running_loop()  # no loop in this thread: the loop is not blocked
        return "summary of " + str(len(messages))

    mem = ConversationMemory(400, summarizer=summarizer)
    for i in range(30):
        await mem.aadd("user", filler(i))
    assert threads and threading.get_ident() not in threads
    rs = RunningSummary(summarizer, reserve=100)
    threads.clear()
    await rs.afold([Message("m", "user", content="hello")])
    assert threads and threading.get_ident() not in threads


async def test_background_summary_is_replaced_when_it_arrives() -> None:
    gate = asyncio.Event()

    async def slow(messages: Sequence[Message], previous: Summary | None) -> str:
        await gate.wait()
        return "SLOW SUMMARY"

    mem = ConversationMemory(400, summarizer=slow, background=True)
    await mem.aadd("system", SYSTEM)
    for i in range(12):
        await mem.aadd("user", filler(i))
    s = mem.stats()
    assert s.compactions >= 1 and s.degraded  # compaction went ahead with the fallback
    assert "SLOW SUMMARY" not in (await mem.acontext("messages"))[1].text()
    gate.set()
    await mem.aflush()
    assert not mem.stats().degraded
    ctx = await mem.acontext("messages")
    assert is_summary(ctx[1]) and "SLOW SUMMARY" in ctx[1].text()


# -- clear, set_summary, formats, stats ----------------------------------------------


def test_clear_keeps_the_system_prompt() -> None:
    mem = ConversationMemory(400)
    system = mem.add("system", SYSTEM)
    chat(mem, 20)
    mem.clear()
    assert mem.messages() == [system]
    assert mem.context("messages") == [system]
    assert mem.stats().summarized_messages == 0
    chat(mem, 2)
    mem.clear(keep_system=False)
    assert mem.messages() == [] and mem.context() == []
    with pytest.raises(ConfigError, match="keep_system"):
        mem.clear(keep_system="yes")  # type: ignore[arg-type]


def test_set_summary_from_outside() -> None:
    mem = ConversationMemory(400)
    mem.add("system", SYSTEM)
    mem.set_summary("The customer asked about order 1182.")
    ctx = mem.context()
    assert "order 1182" in ctx[1]["content"]
    with pytest.raises(ConfigError, match="text="):
        mem.set_summary("word " * 400)
    assert mem.context() == ctx
    with pytest.raises(InvalidMessage, match="text"):
        mem.set_summary(5)  # type: ignore[arg-type]


def test_stats_fields() -> None:
    mem = ConversationMemory(400)
    assert mem.stats().prefix_kept is None
    mem.add("system", SYSTEM)
    chat(mem, 20)
    mem.context()
    mem.context()
    s = mem.stats()
    assert s.prefix_kept is True
    assert s.log_messages == 41 and s.view_messages + s.summarized_messages == 41
    assert s.context_messages == len(mem.context()) and s.fits
    assert s.summarizer_calls > 0 and s.summarizer_input_tokens > 0 and s.summary_tokens > 0
    assert "ConversationMemory" in repr(mem)


def test_pinned_overflow_is_reported() -> None:
    mem = ConversationMemory(120, summary=False)
    mem.add("system", "word " * 200)
    mem.add("user", "hi")
    assert not mem.stats().fits
    assert mem.context("messages")[0].role == "system"


def test_response_reserve_lowers_the_ceiling() -> None:
    mem = ConversationMemory(1000, response_reserve=600)
    chat(mem, 40)
    assert mem.stats().context_tokens <= 400


# -- bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.add("robot", "hi"), "role"),
        (lambda m: m.add("user", 5), "content"),
        (lambda m: m.add("user", "hi", priority=3), "priority"),
        (lambda m: m.add("user", "hi", tokens=-1), "tokens"),
        (lambda m: m.add("user", "hi", colour="red"), "colour"),
        (lambda m: m.add("user", "hi", id="u0"), "id"),
        (lambda m: m.add_message("not a message"), "message"),
        (lambda m: m.context("xml"), "format"),
        (lambda m: m.messages(limit=-2), "limit"),
    ],
)
def test_bad_input_raises_a_typed_error_naming_the_field(call: Any, field: str) -> None:
    mem = ConversationMemory(400)
    mem.add("user", "first", id="u0")
    mem.context()
    before = (mem.context("messages"), mem.messages(), mem.stats())
    with pytest.raises((InvalidMessage, ConfigError), match=field):
        call(mem)
    assert (mem.context("messages"), mem.messages(), mem.stats()) == before


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_tokens": 0}, "max_tokens=0"),
        ({"max_tokens": 2.5}, "max_tokens=2.5"),
        ({"max_tokens": 60}, "max_tokens=60"),
        ({"trigger": 1.5}, "trigger=1.5"),
        ({"trigger": 0}, "trigger=0"),
        ({"target": 0.9}, "target=0.9"),
        ({"max_turns": 0}, "max_turns=0"),
        ({"response_reserve": -1}, "response_reserve=-1"),
        ({"response_reserve": 4000}, "response_reserve=4000"),
        ({"summary_tokens": 5}, "summary_tokens=5"),
        ({"summary_tokens": 3000}, "summary_tokens=3000"),
        ({"facts": "yes"}, "facts='yes'"),
        ({"scorer": 3}, "scorer=3"),
        ({"pin": ["nobody"]}, "pin='nobody'"),
        ({"fallback": False, "background": True}, "background=True"),
        ({"summarizer": RunningSummary(), "facts": False}, "RunningSummary"),
    ],
)
def test_bad_options_name_the_option(kwargs: dict[str, Any], name: str) -> None:
    args = {"max_tokens": 4000, **kwargs}
    with pytest.raises(ConfigError, match=name.replace("(", r"\(").replace(".", r"\.")):
        ConversationMemory(**args)


def test_a_running_summary_can_be_passed_in() -> None:
    rs = RunningSummary(reserve=120)
    mem = ConversationMemory(600, summarizer=rs)
    chat(mem, 30)
    assert mem.summary is rs and rs.stats.folds > 0
    with pytest.raises(ConfigError, match="half"):
        ConversationMemory(200, summarizer=RunningSummary(reserve=150))


# -- RunningSummary.compress (added for priority-1 compression) ---------------------


def test_compress_summarizes_alone_and_keeps_the_facts() -> None:
    rs = RunningSummary(reserve=200)
    m = Message("m1", "user", content=f"My order 1182 never arrived. {filler(3, 60)}")
    s = rs.compress([m])
    assert s.first_id == s.last_id == "m1" and s.count == 1 and not s.degraded
    assert any(f.value == "order 1182" for f in s.facts)
    assert s.header == "" and s.tokens == APPROX.count(s.content) + 4
    assert not rs.covers("m1") and rs.current() is None  # the running summary is untouched
    st_ = rs.stats
    assert st_.compressions == 1 and st_.summarizer_calls == 1 and st_.input_tokens > 0
    short = rs.compress([m], summarizer=lambda msgs: "short")
    assert short.text == "short"
    with pytest.raises(InvalidMessage, match="messages"):
        rs.compress([])


async def test_acompress_falls_back_then_fails_cleanly() -> None:
    boom = Boom()
    rs = RunningSummary(boom, reserve=200, retries=0, backoff=0)
    m = Message("m1", "user", content="Call me at 5 pm on Friday.")
    s = await rs.acompress([m])
    assert s.degraded and s.summarizer == "extractive"
    bare = RunningSummary(boom, reserve=200, retries=1, backoff=0, fallback=False)
    from convomem.errors import SummarizerError

    with pytest.raises(SummarizerError):
        await bare.acompress([m])
    assert bare.stats.failures == 1 and bare.stats.compressions == 0


def test_keep_turn_false_evicts_the_newest_user_message_like_any_other() -> None:
    """By default the newest user message stays in the context when the reply after it
    does not fit beside it (the reply goes); ``keep_turn=False`` (the seeds' windows)
    evicts the oldest first: the question."""
    for keep, expected in ((True, ["q"]), (False, ["r"])):
        mem = ConversationMemory(
            60, tokenizer="words", summary=False, trigger=1.0, target=1.0, keep_turn=keep
        )
        mem.add("user", "the question " * 10, id="q")
        mem.add("assistant", "a long reply " * 13, id="r")
        assert [m.id for m in mem.context("messages")] == expected, keep
        assert mem.stats().fits
    with pytest.raises(ConfigError, match="keep_turn="):
        ConversationMemory(60, keep_turn=1)  # type: ignore[arg-type]


def test_why_a_turn_does_not_fit_names_reduced_results_only_when_there_are() -> None:
    mem = ConversationMemory(60, tokenizer="words", summary=False)
    mem.add("user", "a long question " * 40, id="q")
    (why,) = mem.stats().problems
    assert why.startswith("the current turn") and why.endswith("sent anyway"), why
    assert "reduced" not in why  # no tool result in this turn
    call = Message("c", "assistant", content=[ToolUseBlock("t1", "lookup", {"q": 1})])
    mem.add_message(call)
    mem.add_message(Message("r", "tool", content=[ToolResultBlock("t1", "row " * 500)]))
    (why,) = mem.stats().problems
    assert mem.stats().reduced_results == 1 and "tool results over" in why, why
