"""Tiered memory: a ConversationMemory over a durable SQLite session with a RecallIndex
(HashingEmbedder). Properties against brute force: the context never exceeds the budget
(a token sum of what is sent), tool pairs stay intact and an Anthropic request starts
with a user turn; every evicted message is found by searching its own text in its
user's scope and never in another user's; then facts shared across a user's sessions,
drift acting on summary segments and recall, recovery, emergency compaction, resume
and the async twin."""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, TransientError
from convomem.model import Message, ToolResultBlock, ToolUseBlock, validate_pairs
from convomem.recall import (
    AsyncGuardedRecall,
    AsyncRecallIndex,
    DriftDetector,
    GuardedRecall,
    HashingEmbedder,
    RecallIndex,
)
from convomem.retry import CircuitBreaker
from convomem.session import ConversationMemory
from convomem.stores import aopen_store, open_store
from convomem.summaries import RunningSummary
from convomem.summaries.extractor import OfflineExtractor
from convomem.tokens import get_tokenizer
from convomem.views.budget import ContextBudget

EXAMPLES = int(os.environ.get("CONVOMEM_TIER_EXAMPLES", "8"))
APPROX = get_tokenizer("approx")
WORDS_TEXT = (
    "the parcel was delayed again and we talked about shipping options while support "
    "checked the queue and everyone agreed to wait a little longer for news"
)
WORDS = WORDS_TEXT.split()


def filler(k: int, n: int) -> str:
    return " ".join(WORDS[(k * 7 + j * 3) % len(WORDS)] for j in range(n))


def text(k: int, n: int) -> str:
    """A text with a word of its own (``zq<k>``), so a search for it has one answer."""
    return f"zq{k} {filler(k, n)} zq{k}"


def make_conversation(draw: Any, n: int, prefix: str) -> list[Message]:
    out: list[Message] = []
    call = 0
    for k in range(n):
        kind = draw(st.sampled_from(["user", "assistant", "user", "tools"]))
        size = draw(st.integers(2, 30))
        at = 1_700_000_000.0 + k
        if kind != "tools":
            out.append(Message(f"{prefix}{k}", kind, content=text(k, size), created_at=at))
            continue
        width = draw(st.integers(1, 2))
        ids = [f"{prefix}c{call + j}" for j in range(width)]
        call += width
        uses = [ToolUseBlock(c, "lookup", {"q": filler(k, 3)}) for c in ids]
        out.append(Message(f"{prefix}{k}", "assistant", content=uses, created_at=at))
        for j, c in enumerate(ids):
            result = [ToolResultBlock(c, text(1000 * (k + 1) + j, size))]
            out.append(Message(f"{prefix}{k}r{j}", "tool", content=result, created_at=at))
    return out


@st.composite
def conversations(draw: Any, prefix: str = "m") -> list[Message]:
    return make_conversation(draw, draw(st.integers(4, 40)), prefix)


def cost(ctx: Sequence[Message]) -> int:
    return APPROX.count_messages(ctx) + 2


def memory(db: Any, sid: str, user: str, idx: Any, budget: int, **kw: Any) -> ConversationMemory:
    """A memory over ``idx``; a plain ``RecallIndex`` gets no search deadline (a busy test
    machine must not time recall out: the guard's deadline has tests of its own here)."""
    if type(idx) is RecallIndex:
        idx = GuardedRecall(idx, deadline=None)
    return ConversationMemory(budget, store=db.session(sid, user_id=user), recall=idx, **kw)


def check_context(mem: ConversationMemory, query: str | None) -> list[Message]:
    ctx = mem.context("messages", query=query)
    st_ = mem.stats()
    limit = mem.budget - mem.response_reserve
    if st_.fits:
        assert cost(ctx) <= limit, (cost(ctx), limit, st_.budget_split)
    # The split's total is what the larger request (Anthropic's, with a stand-in user
    # turn when the view needs one) costs.
    assert st_.budget_split is not None
    assert cost(ctx) <= st_.budget_split["total"] <= max(limit, st_.context_tokens)
    assert validate_pairs([m for m in ctx if m.role != "system"]) == []
    anthropic = mem.context("anthropic", query=query)
    assert not anthropic["messages"] or anthropic["messages"][0]["role"] == "user"
    openai = mem.context("openai", query=query)
    assert [d["role"] for d in openai][: len(ctx)].count("system") >= 1 or not ctx
    return ctx


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    convo=conversations(),
    other=conversations(prefix="o"),
    budget=st.integers(300, 1500),
    queries=st.lists(st.integers(0, 60), max_size=4),
)
def test_budget_pairs_and_recall_scope(
    convo: list[Message], other: list[Message], budget: int, queries: list[int]
) -> None:
    with open_store("sqlite://") as db, RecallIndex(db, embedder=HashingEmbedder(dim=64)) as idx:
        mem = memory(db, "s1", "ana", idx, budget)
        bob = memory(db, "s2", "bob", idx, budget)
        mem.add("system", "You are a careful support agent.", id="sys")
        for i, m in enumerate(convo):
            mem.add_message(m)
            if i % 7 == 3:
                check_context(mem, None)
        for m in other:
            bob.add_message(m)
        for q in queries:
            check_context(mem, f"zq{q} news")
        check_context(mem, None)
        mem.flush()
        bob.flush()
        kept = {m.id for m in mem.view.log.kept()}
        # a tool call without text is searched by its calls (name and arguments)
        said = {m.id: m.text() or m.calls_text() for m in convo}
        evicted = [m for m in convo if m.id not in kept and said[m.id].strip()]
        bob_ids = {m.id for m in other}
        for m in evicted:
            # of equal texts one hit; k=10: these texts are mostly stop words, and BM25F
            # scores a text with its neighbours', so a near twin can outrank the original
            found = idx.search(said[m.id], user_id="ana", k=10)
            same = {said[h.message_id] for h in found if h.message_id in said}
            assert said[m.id] in same, m.id
            theirs = idx.search(said[m.id], user_id="bob", k=10)
            assert {h.message_id for h in theirs} <= bob_ids | {
                h.message_id for h in theirs if h.kind == "summary" and h.session_id == "s2"
            }
            assert all(h.session_id == "s2" for h in theirs)


def said(mid: str, content: str, at: float = 1_700_000_000.0) -> Message:
    return Message(mid, "user", content=content, created_at=at)


@pytest.mark.parametrize("backend", ["sqlite_memory", "postgresql"])
def test_facts_cross_sessions_of_one_user_only(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(backend).fresh_url()
    with open_store(url) as db, RecallIndex(db) as idx:
        a = memory(db, "s1", "ana", idx, 2000)
        a.add_message(said("a1", "I am allergic to peanuts and I live in Lisbon."))
        a.add_message(Message("a2", "assistant", content="Noted."))
        a.flush()
        b = memory(db, "s2", "ana", idx, 2000)
        b.add_message(said("b1", "What should I cook tonight?"))
        system = b.context("anthropic")["system"]
        assert "peanuts" in system and "Lisbon" in system
        facts = b.stats().facts
        assert facts is not None and facts["count"] == 2 and facts["extracted"] == 1
        b.add_message(said("b2", "I moved to Porto.", 1_700_000_100.0))
        b.flush()
        history = idx.facts("ana").history("city")
        assert [f.value for f in history] == ["Lisbon", "Porto"]  # "my old address?"
        eve = memory(db, "s3", "eve", idx, 2000)
        eve.add_message(said("e1", "hello"))
        assert "peanuts" not in str(eve.context("anthropic"))
        assert eve.stats().facts["count"] == 0  # type: ignore[index]


def test_two_live_sessions_merge_their_facts() -> None:
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        a = memory(db, "s1", "ana", idx, 2000)
        b = memory(db, "s2", "ana", idx, 2000)
        a.add_message(said("a1", "My name is Ana."))
        b.add_message(said("b1", "I live in Lisbon."))
        a.flush()
        b.flush()  # loses the race, re-reads, merges, saves
        assert b.stats().facts["conflicts"] == 1  # type: ignore[index]
        values = {f.value for f in idx.facts("ana").current()}
        assert values == {"Ana", "Lisbon"}


class CountingExtractor(OfflineExtractor):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def extract_one(self, message: Message) -> list[Any]:
        self.ids.append(message.id)
        return super().extract_one(message)


TOPIC_A = "pasta recipe with tomato basil garlic olive oil parmesan"
TOPIC_B = "kubernetes cluster upgrade pods nodes helm charts ingress"


def drift_chat(mem: ConversationMemory, ks: range) -> None:
    for k in ks:
        topic = TOPIC_A if k < 12 else TOPIC_B
        mem.add_message(said(f"u{k}", f"{topic} step{k}", 1_700_000_000.0 + k))
        mem.add_message(
            Message(f"a{k}", "assistant", content=f"{topic} answer{k}", created_at=1e9 + k)
        )


def test_drift_starts_a_segment_and_resume_keeps_facts_and_drift_state() -> None:
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        ex1 = CountingExtractor()
        whole = memory(db, "w", "wendy", idx, 500, drift=DriftDetector(), extractor=ex1)
        drift_chat(whole, range(24))
        whole.add_message(said("fact", "My name is Wendy."))
        drift_chat(whole, range(24, 30))
        stats = whole.stats().drift
        assert stats is not None and stats["segments_started"] >= 1
        starts = {s.first_id for s in whole.summary.segments}
        assert "u12" in starts  # the topic changed there: a segment of its own

        ex2 = CountingExtractor()
        first = memory(db, "r", "rita", idx, 500, drift=DriftDetector(), extractor=ex2)
        drift_chat(first, range(24))
        first.add_message(said("fact", "My name is Wendy."))
        first.flush()
        ex3 = CountingExtractor()
        det = DriftDetector()
        again = memory(db, "r", "rita", idx, 500, drift=det, extractor=ex3)
        drift_chat(again, range(24, 30))
        assert ex3.ids == [f"{p}{k}" for k in range(24, 30) for p in "ua"]  # nothing re-read
        assert det.state()["topic"] == whole.tiers.drift.state()["topic"]  # type: ignore[union-attr]
        assert det.state()["checks"] == whole.tiers.drift.state()["checks"]  # type: ignore[union-attr]
        assert "Wendy" in str(again.context("anthropic")["system"])
        assert {s.first_id for s in again.summary.segments} == {
            s.first_id for s in whole.summary.segments
        }


def test_widen_recall_doubles_k_once() -> None:
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        mem = memory(db, "s", "ana", idx, 3000, drift=DriftDetector(threshold=0.3), recall_k=3)
        mem.add_message(said("u0", TOPIC_A))
        for k in range(1, 5):
            mem.add_message(said(f"u{k}", f"{TOPIC_B} {k}"))
        mem.add_message(said("u9", TOPIC_A + " again"))  # back to the opening topic
        assert mem.stats().drift["action"] == "widen_recall"  # type: ignore[index]
        mem.context()
        assert mem.stats().recall["k"] == 6  # type: ignore[index]
        mem.add_message(said("u10", TOPIC_A + " once more"))  # the next turn's update
        mem.context()
        assert mem.stats().recall["k"] == 3  # type: ignore[index]


class FailingRecall:
    """A recall index whose searches fail (a backend down), ingest passing through."""

    def __init__(self, index: RecallIndex) -> None:
        self.inner = index
        self.searches = 0

    def search(self, query: str, **kw: Any) -> Any:
        self.searches += 1
        raise TransientError("recall backend down")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_failed_recall_still_answers_then_the_breaker_opens() -> None:
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        failing = FailingRecall(idx)
        mem = memory(db, "s", "ana", failing, 400)  # wrapped in a GuardedRecall
        mem.add("system", "Be brief.")
        mem.add_message(said("f", "I am allergic to peanuts."))
        for k in range(20):
            mem.add_message(said(f"u{k}", text(k, 20)))
        statuses = []
        for k in range(7):  # a turn each: one search a turn (its update is made once)
            mem.add_message(said(f"t{k}", text(100 + k, 20)))
            ctx = mem.context("messages")
            facts = " ".join(m.text() for m in ctx if m.role == "system")
            assert cost(ctx) <= 400 and "peanuts" in facts  # the facts still come
            statuses.append(mem.stats().recall["status"])  # type: ignore[index]
        assert statuses == ["failed"] * 5 + ["open"] * 2  # the backend is left alone
        assert failing.searches == 5
        mem.flush()  # ingest went on: the index itself is up
        assert idx.search(text(0, 20), user_id="ana", k=1)[0].message_id == "u0"


class StuckRecall:
    """A recall index whose searches wait until released (a backend that hangs)."""

    def __init__(self, index: RecallIndex) -> None:
        self.inner = index
        self.release = threading.Event()

    def search(self, query: str, **kw: Any) -> Any:
        self.release.wait()
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_slow_recall_times_out_and_the_context_comes_without_it() -> None:
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        stuck = StuckRecall(idx)
        guarded = GuardedRecall(stuck, deadline=0.01, breaker=CircuitBreaker(failures=100))
        mem = memory(db, "s", "ana", guarded, 400)
        for k in range(20):
            mem.add_message(said(f"u{k}", text(k, 20)))
        try:
            ctx = mem.context("messages")
            recall = mem.stats().recall
            assert recall is not None and recall["status"] == "timeout" and not recall["hits"]
            assert cost(ctx) <= 400 and ctx[-1].id == "u19"
        finally:
            stuck.release.set()


class Flaky:
    """A summarizer that fails when its script says so; counts its calls."""

    def __init__(self, fails: list[bool]) -> None:
        self.fails, self.calls = fails, 0

    def __call__(self, messages: Sequence[Message], previous: Any) -> str:
        self.calls += 1
        if self.fails and self.fails[self.calls % len(self.fails)]:
            raise TransientError("the summarizer is down")
        return " ".join(m.text()[:30] for m in messages)


WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    convo=conversations(),
    budget=st.integers(300, 1500),
    fails=st.lists(st.booleans(), max_size=5),
    pin=st.sampled_from([(), ("system", "last_user")]),
    queries=st.lists(st.one_of(st.none(), st.integers(0, 60)), min_size=1, max_size=3),
)
def test_context_is_read_only(
    convo: list[Message],
    budget: int,
    fails: list[bool],
    pin: tuple[str, ...],
    queries: list[int | None],
) -> None:
    """Two contexts in a row are equal, within the budget, and make no summarizer call
    and no store write, whatever the tiers need (an emergency fold is the write
    path's): the facts, the recalled snippets are cut to the room instead."""
    with open_store("sqlite://") as db, RecallIndex(db, embedder=HashingEmbedder(dim=64)) as idx:
        flaky = Flaky(fails)
        rs = RunningSummary(flaky, reserve=60, fallback=False, retries=0, backoff=0)
        mem = memory(db, "s1", "ana", idx, budget, summarizer=rs, pin=pin)
        mem.add("system", "You are a careful support agent.", id="sys")
        mem.add_message(said("f", "I am allergic to peanuts and my name is Ana."))
        for m in convo:
            mem.add_message(m)
        mem.flush()
        writes = 0

        def trace(statement: str) -> None:
            nonlocal writes
            writes += statement.lstrip().upper().startswith(WRITES)

        db._driver.conns.get().raw.set_trace_callback(trace)
        calls, stats = flaky.calls, mem.stats()
        for q in queries:
            query = None if q is None else f"zq{q} news"
            first = mem.context("messages", query=query)
            second = mem.context("messages", query=query)
            assert first == second
            limit = mem.budget - mem.response_reserve
            if mem.stats().fits:
                assert cost(first) <= limit
        after = mem.stats()
        assert flaky.calls == calls and writes == 0
        assert after.compactions == stats.compactions
        assert after.emergency_compactions == stats.emergency_compactions


def test_emergency_compaction_when_the_tiers_do_not_fit() -> None:
    """A pinned message grows the pins: the add that brings it folds the history the
    tiers need (the context only reads)."""
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        mem = memory(db, "s", "ana", idx, 1000, pin=("system", "last_user"))
        mem.add("system", "Be brief.", id="sys")
        mem.add_message(said("f", "I am allergic to peanuts and my name is Ana."))
        for k in range(8):
            mem.add_message(said(f"u{k}", text(k, 20)))
            mem.add_message(Message(f"a{k}", "assistant", content=text(100 + k, 20)))
        assert mem.stats().emergency_compactions == 0
        mem.add_message(said("huge", text(999, 560)))  # pinned: the newest user message
        assert mem.stats().emergency_compactions == 1  # on the add
        mem.flush()  # what the fold evicted is indexed: both contexts see the same index
        ctx = mem.context("messages", query="zq3")
        stats = mem.stats()
        assert stats.emergency_compactions == 1
        assert cost(ctx) <= 1000 and stats.budget_split["total"] <= 1000  # type: ignore[index]
        assert "huge" in {m.id for m in ctx}
        assert mem.context("messages", query="zq3") == ctx


def test_emergency_compaction_folds_just_enough_when_facts_grew() -> None:
    """Another session of the user saved many facts: after this one's save merged them,
    its view leaves less room than the tiers need; the context cuts the tiers (read-only),
    and the next add folds the oldest history (no summary here: it is dropped, and
    recallable), only as much as needed."""
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        shares = ContextBudget(1000, facts=0.3, recall=0.15)
        a = memory(
            db,
            "s1",
            "ana",
            idx,
            1000,
            trigger=1.0,
            target=0.95,
            summary=False,
            shares=shares,
            cache_turns=0,  # the view's target alone: what an emergency fold adds shows
        )
        a.add("system", "Be brief.", id="sys")
        for k in range(40):
            a.add_message(said(f"u{k}", text(k, 12), 1e9 + k))
            a.add_message(Message(f"a{k}", "assistant", content=text(500 + k, 12)))
        b = memory(db, "s2", "ana", idx, 1000)
        b.add_message(
            said(
                "b1",
                "My name is Ana. I live in Lisbon. I am allergic to peanuts. My email is "
                "ana@example.com. I work as a nurse. I have two kids. My phone is 555-1234. "
                "I am 34 years old. My favourite color is blue.",
            )
        )
        b.flush()
        a.add_message(said("a-fact", "I like jazz."))  # a fact of its own
        a.flush()  # loses to b's save: merges b's facts
        before = a.stats()
        assert before.facts["conflicts"] == 1 and before.facts["count"] == 10  # type: ignore[index]
        ctx = a.context("messages", query="parcel delayed news support")
        assert cost(ctx) <= 1000  # the tiers cut to the room: the context only reads
        read = a.stats()
        assert read.emergency_compactions == before.emergency_compactions
        assert read.compactions == before.compactions
        # The next add makes room for the merged facts (the profile's size is in the
        # reserve a compaction keeps free).
        a.add_message(Message("a-ok", "assistant", content="Noted."))
        after = a.stats()
        assert after.compactions == before.compactions + 1
        ctx = a.context("messages", query="parcel delayed news support")
        assert cost(ctx) <= 1000
        split = a.stats().budget_split
        assert split is not None and split["facts"] > 0 and split["recall"] > 0
        assert split["history"] > 500  # just enough went, not the whole history
        a.flush()
        gone = {m.id for m in a.messages()} - {m.id for m in a.view.log.kept()}
        for mid in gone - {"sys"}:
            m = next(m for m in a.messages() if m.id == mid)
            assert mid in {h.message_id for h in idx.search(m.text(), user_id="ana", k=3)}


def test_bad_options() -> None:
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        with pytest.raises(ConfigError, match="recall="):
            ConversationMemory(1000, recall=idx)  # no user scope
        with pytest.raises(ConfigError, match="recall_k"):
            memory(db, "s", "ana", idx, 1000, recall_k=0)
        with pytest.raises(ConfigError, match="shares="):
            memory(db, "s", "ana", idx, 1000, shares=0.5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="facts="):
            ContextBudget(1000, facts=0.4, recall=0.4)
        with pytest.raises(ConfigError, match="query="):
            ConversationMemory(1000).context(query="x")
        with pytest.raises(ConfigError, match="not pickled"):
            pickle.dumps(ConversationMemory(1000, drift=DriftDetector()))


def test_async_twin() -> None:
    async def main() -> None:
        db = await aopen_store("sqlite://")
        try:
            idx = AsyncRecallIndex(db)
            guarded = AsyncGuardedRecall(idx, deadline=None)  # no deadline: a busy test box
            mem = ConversationMemory(400, store=db.session("s", user_id="ana"), recall=guarded)
            await mem.aadd("system", "Be brief.")
            await mem.aadd_message(said("f", "I am allergic to peanuts."))
            for k in range(20):
                await mem.aadd_message(said(f"u{k}", text(k, 20)))
            await mem.aflush()
            ctx = await mem.acontext("messages", query="zq2 delayed")
            assert cost(ctx) <= 400
            assert "peanuts" in ctx[1].text()
            recall = mem.stats().recall
            assert recall is not None and recall["status"] == "ok"
            assert "u2" in {h["message_id"] for h in recall["hits"]}
            with pytest.raises(ConfigError, match="async"):
                mem.context()
            await idx.aclose()
        finally:
            await db.aclose()

    asyncio.run(main())


def test_a_hits_neighbouring_turns_reach_the_context_once() -> None:
    """The turn that matched is often the question; the answer is the reply next to it.
    Two hits sharing a neighbour show it once; an index whose search takes no
    ``neighbours=`` still recalls (hits alone)."""
    old = [
        Message("q1", "user", content="zqneedle what colour was the umbrella?"),
        Message("a1", "assistant", content="It was violet, with a bent handle."),
        Message("q2", "user", content="zqneedle and the coat?"),
        Message("x", "assistant", content="unrelated filler about the weather"),
        Message("y", "user", content="far away talk of harbours"),
    ]
    with open_store("sqlite://") as db, RecallIndex(db) as idx:
        idx.add(old, user_id="ana", session_id="old", seqs=[1, 2, 3, 4, 5])
        mem = memory(db, "new", "ana", idx, 3000, recall_k=2)
        mem.add_message(Message("n1", "user", content="hello again"))
        ctx = mem.context("messages", query="zqneedle")
        tiers = "\n".join(m.text() for m in ctx if m.role == "system")
        assert "violet" in tiers and tiers.count("bent handle") == 1
        assert tiers.count("weather") == 1 and "harbours" not in tiers  # q2's, and no one's
        shown = [h["message_id"] for h in mem.stats().recall["hits"] if h["shown"]]  # type: ignore[index]
        assert sorted(shown) == ["q1", "q2"]

        class Plain:
            def __init__(self) -> None:
                self.index = idx

            def search(self, query: str, *, user_id: str, tenant: Any = None, k: int = 10) -> Any:
                return self.index.search(query, user_id=user_id, tenant=tenant, k=k)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.index, name)

        plain = memory(db, "new2", "ana", Plain(), 3000, recall_k=2)
        ctx = plain.context("messages", query="zqneedle")
        tiers = "\n".join(m.text() for m in ctx if m.role == "system")
        assert "zqneedle" in tiers and "violet" not in tiers
