"""timeline(): the states partition the log and agree with context().

The oracle is the memory itself: after any sequence of messages (plain, pinned,
priority 1 and 2, tool exchanges with missing, late and orphan results), with summaries
on or off, pins of every kind, a turn limit and a summarizer that may be down (a pending
compaction: messages omitted from the context), the timeline must

- hold every log message once, in order, each with one state;
- put exactly the log messages of ``context("messages")`` in the in-context states;
- call ``summarized`` exactly what the running summary covers (and is not sent), with
  segment sizes equal to the segments' counts;
- add the budget up: parts + free == budget, and the parts are what the context costs;
- agree with ``stats()`` (waiting, omitted), and with itself under ``limit``.

Turn records have their own tests (``test_turn_records.py``).

``CONVOMEM_TIMELINE_EXAMPLES`` raises the example count (default 60).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.recall import RecallIndex
from convomem.session import ConversationMemory
from convomem.session.timeline import IN_CONTEXT, STATES, atimeline, timeline
from convomem.stores import open_store
from convomem.summaries import SUMMARY_HEADER, RunningSummary, Summary
from convomem.summaries.facts import OfflineExtractor
from convomem.tokens import PER_MESSAGE_TOKENS, get_tokenizer
from convomem.views.budget import REPLY_PRIMING_TOKENS

APPROX = get_tokenizer("approx")
EXAMPLES = int(os.environ.get("CONVOMEM_TIMELINE_EXAMPLES", "60"))
_SENTENCE = "the parcel was delayed again and we talked about shipping options while support"
WORDS = _SENTENCE.split(" ")


def words(seed: int, n: int) -> str:
    return " ".join(WORDS[(seed * 5 + k * 3) % len(WORDS)] for k in range(n))


class Switch:
    """A summarizer that fails while ``down`` (so a compaction stays pending)."""

    def __init__(self) -> None:
        self.down = False

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        if self.down:
            raise RuntimeError("summarizer down")
        return " ".join(m.text()[:30] for m in messages)[:120]


# One step: (kind, seed). Kinds: plain user/assistant, pinned (priority 2), priority 1,
# a tool call (results come later or never), a result for an open call, an orphan
# result, a system message, the summarizer going down or up.
STEP = st.tuples(
    st.sampled_from(
        [
            *("user", "user", "assistant", "assistant", "p2", "p1"),
            *("call", "result", "orphan", "system", "down", "up"),
        ]
    ),
    st.integers(0, 40),
)


def memory(switch: Switch, budget: int, **options: object) -> ConversationMemory:
    """A memory whose summarizer is ``switch``: no fallback and no retry (so no backoff
    sleep), the summary's reserve as the default one would be."""
    limit = budget - int(options.get("response_reserve", 0)) - REPLY_PRIMING_TOKENS  # type: ignore[call-overload]
    floor = APPROX.count(SUMMARY_HEADER) + PER_MESSAGE_TOKENS + 32
    rs = RunningSummary(switch, reserve=max(floor, limit // 5), fallback=False, retries=0)
    return ConversationMemory(budget, summarizer=rs, **options)  # type: ignore[arg-type]


def run(steps: list[tuple[str, int]], mem: ConversationMemory, switch: Switch) -> None:
    open_calls: list[str] = []
    for i, (kind, seed) in enumerate(steps):
        mid = f"m{i}"
        text = words(seed, 4 + seed % 12)
        if kind == "down":
            switch.down = True
        elif kind == "up":
            switch.down = False
        elif kind in ("user", "assistant", "system"):
            mem.add(kind, text, id=mid)
        elif kind == "p2":
            mem.add("user", text, id=mid, priority=2)
        elif kind == "p1":
            mem.add("assistant", text + " order 1182 and ticket TK-5521", id=mid, priority=1)
        elif kind == "call":
            calls = [f"c{i}_{k}" for k in range(1 + seed % 2)]
            blocks = [ToolUseBlock(c, "lookup", {"q": seed}) for c in calls]
            mem.add_message(Message(mid, "assistant", content=blocks))
            open_calls.extend(calls)
        elif kind == "result" and open_calls:
            call = open_calls.pop(seed % len(open_calls))
            mem.add_message(Message(mid, "tool", content=[ToolResultBlock(call, text)]))
        elif kind == "orphan":
            mem.add_message(Message(mid, "tool", content=[ToolResultBlock(f"x{i}", text)]))


CONFIGS = st.fixed_dictionaries(
    {
        "budget": st.integers(180, 600),
        "summary": st.booleans(),
        "pin": st.sampled_from([("system",), (), ("last_user",), ("first_user", -2), (1,)]),
        "max_turns": st.sampled_from([None, None, 3, 6]),
        "response_reserve": st.sampled_from([0, 20]),
        "tiers": st.sampled_from([None, None, "facts", "recall"]),
    }
)


def check(mem: ConversationMemory, switch: Switch) -> None:
    mem.flush()  # the index worker done: the timeline's context and this one see one index
    log = mem.messages()
    t = timeline(mem)  # with tiers it takes the context itself (the search; read-only)
    stats = mem.stats()
    ctx_ids = [m.id for m in mem.context("messages")]
    assert t.context_ids == ctx_ids
    view = mem.engine.current()

    # A partition of the log, in order.
    assert [e.id for e in t.entries] == [m.id for m in log]
    assert [e.position for e in t.entries] == list(range(len(log)))
    assert all(e.state in STATES for e in t.entries)
    assert t.older == 0
    assert sum(t.counts.values()) == len(log)
    assert Counter(e.state for e in t.entries) == +Counter(t.counts)

    # In-context states are exactly the log messages context() sends.
    logged = {m.id for m in log}
    sent = [i for i in ctx_ids if i in logged]
    assert len(sent) == len(set(sent))
    assert {e.id for e in t.entries if e.state in IN_CONTEXT} == set(sent)
    for e in t.entries:
        assert (e.sent_tokens is not None) == (e.state in IN_CONTEXT)

    # Summarized: what the summary covers and is not sent; segment sizes match.
    rs = mem.summary
    covered_out = {e.id for e in t.entries if rs.covers(e.id) and e.state not in IN_CONTEXT}
    in_view = {e.id for e in t.entries if e.state in ("waiting", "omitted")}
    assert {e.id for e in t.entries if e.state == "summarized"} == covered_out - in_view
    if len(rs.covered_ids) == sum(1 for e in t.entries if rs.covers(e.id)):  # nothing popped
        sizes = Counter(e.segment for e in t.entries if e.state == "summarized")
        assert sizes == +Counter({i: s.count for i, s in enumerate(rs.segments)})
    if not mem.engine.summarize:
        assert t.counts["summarized"] == 0

    # The budget adds up, and its parts are what the context costs.
    b = t.budget
    assert b.pinned + b.summary + b.history + b.facts + b.recall + b.free + b.reply == mem.budget
    parts = b.pinned + b.summary + b.history + REPLY_PRIMING_TOKENS  # the view's part
    if mem.tiers is None:
        assert b.facts == b.recall == 0 and t.recall is None and t.facts_scope == "session"
    else:
        split = stats.budget_split or {}
        assert (b.facts, b.recall) == (split.get("facts", 0), split.get("recall", 0))
        assert split.get("total") == stats.context_tokens + b.facts + b.recall
    if view.anthropic is None:
        assert parts == stats.context_tokens
    else:
        assert parts <= stats.context_tokens

    # Agrees with stats().
    assert t.counts["omitted"] == stats.omitted
    assert t.counts["waiting"] == stats.waiting
    compressed = sum(1 for m in view.messages if "convomem_compressed" in m.metadata)
    assert t.counts["compressed"] == compressed

    # A limited timeline explains the newest messages the same way.
    k = max(1, len(log) // 3)
    tail = timeline(mem, limit=k)
    assert tail.older == len(log) - k
    assert [(e.id, e.state, e.position) for e in tail.entries] == [
        (e.id, e.state, e.position) for e in t.entries[-k:]
    ]
    assert [e.id for e in tail.entries] == [e.id for e in t.entries[-k:]]


@settings(max_examples=EXAMPLES, deadline=None)
@given(config=CONFIGS, steps=st.lists(STEP, min_size=1, max_size=40))
def test_states_partition_the_log_and_agree_with_context(
    config: dict[str, object], steps: list[tuple[str, int]]
) -> None:
    switch = Switch()
    tiers = config.pop("tiers")
    with contextlib.ExitStack() as stack:
        if tiers == "facts":
            config["extractor"] = OfflineExtractor()
        elif tiers == "recall":  # facts and recall of evicted messages, per user
            db = stack.enter_context(open_store("sqlite://"))
            config["store"] = db.session("s", user_id="u")
            config["recall"] = stack.enter_context(RecallIndex(db))  # closed before db
        try:
            mem = memory(switch, **config)  # type: ignore[arg-type]
        except ConfigError:
            return  # a budget too small for the reserves: not this test's concern
        mem.add("system", "You are a careful support agent.", id="sys")
        run(steps, mem, switch)
        check(mem, switch)


def test_each_state_is_reachable_and_explained() -> None:
    """One session reaching every state, with the reasons a reader sees."""
    switch = Switch()
    mem = memory(switch, 220, pin=("system",))
    mem.add("system", "You are terse.", id="sys")
    mem.add("user", "my order is 1182 " + words(1, 10), id="keep", priority=2)
    mem.add("assistant", words(2, 30) + " ticket TK-5521", id="p1", priority=1)
    for i in range(12):
        mem.add("user" if i % 2 == 0 else "assistant", words(i, 12), id=f"h{i}")
    mem.add_message(Message("call", "assistant", content=[ToolUseBlock("c1", "f", {})]))
    mem.add_message(Message("orphan", "tool", content=[ToolResultBlock("nope", "x")]))
    switch.down = True
    for i in range(12, 20):
        mem.add("user" if i % 2 == 0 else "assistant", words(i, 12), id=f"h{i}")
    t = timeline(mem)
    by_id = {e.id: e for e in t.entries}
    assert by_id["sys"].state == "pinned" and "system" in by_id["sys"].reason
    assert by_id["keep"].state == "pinned" and "priority 2" in by_id["keep"].reason
    assert by_id["call"].state == "waiting"
    assert by_id["h0"].state == "summarized" and by_id["h0"].segment == 0
    assert t.counts["omitted"] > 0
    assert by_id["orphan"].state in ("dropped", "summarized")
    assert {"p1"} & {e.id for e in t.entries if e.state in ("compressed", "summarized")}
    check(mem, switch)


def test_summaries_off_drop_and_say_why() -> None:
    mem = ConversationMemory(150, summary=False)
    for i in range(30):
        mem.add("user", words(i, 10), id=f"u{i}")
    t = timeline(mem)
    assert t.entries[0].state == "dropped" and "summaries are off" in t.entries[0].reason
    assert t.segments == [] and t.counts["summarized"] == 0


def test_durable_and_async_twin(tmp_path: object) -> None:
    """Over a durable session resumed in a new memory, the async twin explains the same
    states (the summary's coverage comes from the stored state)."""
    url = f"sqlite:///{tmp_path}/t.db"

    def fill() -> list[tuple[str, str, int | None]]:
        with open_store(url) as db:
            mem = ConversationMemory(250, store=db.session("s1", user_id="u"))
            for i in range(40):
                mem.add("user" if i % 2 == 0 else "assistant", words(i, 12), id=f"m{i}")
            t = timeline(mem)
            return [(e.id, e.state, e.segment) for e in t.entries]

    before = fill()

    async def resume() -> list[tuple[str, str, int | None]]:
        from convomem.stores import aopen_store

        db = await aopen_store(url)
        try:
            mem = ConversationMemory(250, store=db.session("s1", user_id="u"))
            t = await atimeline(mem)
            return [(e.id, e.state, e.segment) for e in t.entries]
        finally:
            await db.aclose()

    assert asyncio.run(resume()) == before
    assert {s for _, s, _ in before} >= {"summarized", "in_view"}


def test_rows_read_do_not_grow_with_the_log(tmp_path: object) -> None:
    """Over a durable session, a timeline of the newest ``limit`` messages reads the
    view's rows and those ``limit``, whatever the log's length (work counted in rows)."""
    read = []
    for n in (150, 600):
        url = f"sqlite:///{tmp_path}/rows{n}.db"
        with open_store(url) as db:
            mem = ConversationMemory(600, store=db.session("s", user_id="u"))
            for i in range(n):
                mem.add("user" if i % 2 == 0 else "assistant", words(i, 10), id=f"m{i}")
        with open_store(url) as db:
            before = db.stats().rows_read
            t = timeline(ConversationMemory(600, store=db.session("s", user_id="u")), limit=40)
            read.append(db.stats().rows_read - before)
            assert len(t.entries) == 40 and t.older == n - 40
    assert read[1] <= read[0] + 10, read
