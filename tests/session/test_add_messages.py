"""``ConversationMemory.add_messages``: one append per batch, all or nothing.

- A batch gives the log, the view and every context that adding its messages one at a
  time gives (the oracle), on a plain store and on every durable backend.
- A failed append writes nothing and leaves the memory as it was; a retried batch whose
  first attempt was written (the reply lost) is a no-op.
- ``expected_seq`` is a compare-and-set: of N writers holding the same seq, one wins and
  the others get ``ConcurrentUpdate`` with nothing written.
- OpenAI dicts are accepted (a run converts together, so a call pairs with its result);
  bad input names ``messages[i]`` and changes nothing.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _fault_store import FaultySessionStore, ScheduledFaults
from convomem import ConversationMemory, open_store
from convomem.errors import ConcurrentUpdate, InvalidMessage, TransientError
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.stores import InMemoryStore


def script(n: int) -> list[Message]:
    """``n`` exchanges, every fourth a tool call and its result."""
    out = [Message("sys", "system", content="You are a support agent.")]
    for i in range(n):
        out.append(Message(f"u{i}", "user", content=f"Question {i} about order {1000 + i}?"))
        if i % 4 == 3:
            call = ToolUseBlock(f"c{i}", "lookup", {"order": 1000 + i})
            out.append(Message(f"a{i}", "assistant", content=[call]))
            out.append(Message(f"t{i}", "tool", content=[ToolResultBlock(call.id, "shipped")]))
        out.append(Message(f"r{i}", "assistant", content=f"Order {1000 + i} left the depot."))
    return out


def batches(messages: list[Message], cuts: list[int]) -> list[list[Message]]:
    points = sorted({c % (len(messages) + 1) for c in cuts} | {0, len(messages)})
    return [messages[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(1, 30), cuts=st.lists(st.integers(0, 200), max_size=12))
def test_a_batch_is_what_one_at_a_time_gives_on_a_plain_store(n: int, cuts: list[int]) -> None:
    messages = script(n)
    one = ConversationMemory(250)
    for m in messages:
        one.add_message(m)
    many = ConversationMemory(250)
    for part in batches(messages, cuts):
        assert many.add_messages(part) == part
    assert many.messages() == one.messages()
    assert many.context() == one.context()
    assert many.context("anthropic") == one.context("anthropic")
    assert many.stats().compactions == one.stats().compactions


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(1, 24), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_a_batch_is_what_one_at_a_time_gives_on_every_backend(
    backend: Any, n: int, cuts: list[int]
) -> None:
    messages = script(n)
    db = open_store(backend.fresh_url())
    try:
        one = ConversationMemory(250, store=db.session("one", user_id="u"))
        for m in messages:
            one.add_message(m)
        many = ConversationMemory(250, store=db.session("many", user_id="u"))
        for part in batches(messages, cuts):
            many.add_messages(part)
        assert many.messages() == one.messages()
        assert many.context() == one.context()
        # and a restart resumes the batch writer's view exactly
        again = ConversationMemory(250, store=db.session("many", user_id="u"))
        assert again.context() == one.context()
        assert [e.seq for e in db.session("many").entries(limit=1000)[0]] == list(
            range(1, len(messages) + 1)
        )
    finally:
        db.close()


def test_a_failed_append_writes_nothing_and_changes_nothing() -> None:
    db = open_store("sqlite://")
    faults = ScheduledFaults()
    store = FaultySessionStore(db.session("s", user_id="u"), faults)
    mem = ConversationMemory(250, store=store)
    mem.add_messages(script(6))
    before, log = mem.context(), mem.messages()
    faults.arm("append")
    batch = script(12)[len(log) :]
    with pytest.raises(TransientError):
        mem.add_messages(batch)
    assert mem.messages() == log
    assert mem.context() == before
    assert mem.add_messages(batch) == batch  # the retry goes through
    assert len(mem.messages()) == len(log) + len(batch)


def test_a_batch_written_before_its_reply_was_lost_is_not_written_twice() -> None:
    db = open_store("sqlite://")
    faults = ScheduledFaults()
    store = FaultySessionStore(db.session("s", user_id="u"), faults)
    mem = ConversationMemory(250, store=store)
    mem.add_messages(script(3))
    batch = script(9)[len(mem.messages()) :]
    faults.schedule = {faults.calls: "after"}  # the next call is the append
    with pytest.raises(TransientError):
        mem.add_messages(batch)
    assert mem.add_messages(batch) == batch
    ids = [m.id for m in mem.messages()]
    assert len(ids) == len(set(ids)) == len(script(9))


def test_expected_seq_lets_exactly_one_of_many_writers_win(backend: Any) -> None:
    url = backend.fresh_url()
    dbs = [open_store(url) for _ in range(4)]
    try:
        seed = ConversationMemory(400, store=dbs[0].session("s", user_id="u"))
        seed.add_messages(script(2))
        seq = dbs[0].session("s").last_seq()
        mems = [ConversationMemory(400, store=db.session("s", user_id="u")) for db in dbs]
        for mem in mems:
            mem.context()  # each loaded at the same seq
        outcomes: list[str] = []
        gate = threading.Barrier(len(mems))

        def write(k: int) -> None:
            gate.wait()
            try:
                batch = [Message(f"w{k}-{j}", "user", content=f"line {j}") for j in range(3)]
                mems[k].add_messages(batch, expected_seq=seq)
                outcomes.append("won")
            except ConcurrentUpdate:
                outcomes.append("lost")

        threads = [threading.Thread(target=write, args=(k,)) for k in range(len(mems))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["lost"] * (len(mems) - 1) + ["won"]
        log = ConversationMemory(400, store=dbs[0].session("s", user_id="u")).messages()
        assert len(log) == len(script(2)) + 3  # one writer's batch, whole
        assert len({m.id.split("-")[0] for m in log[-3:]}) == 1
    finally:
        for db in dbs:
            db.close()


def test_expected_seq_on_a_plain_store_is_the_log_length() -> None:
    mem = ConversationMemory(300, store=InMemoryStore())
    mem.add_messages(script(2), expected_seq=0)
    with pytest.raises(ConcurrentUpdate):
        mem.add_messages([Message("x", "user", content="late")], expected_seq=0)
    assert len(mem.messages()) == len(script(2))
    mem.add_messages([Message("x", "user", content="on time")], expected_seq=len(script(2)))


def test_openai_dicts_convert_as_one_run_so_calls_pair_with_results() -> None:
    mem = ConversationMemory(500)
    got = mem.add_messages(
        [
            {"role": "user", "content": "Where is order 7?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "track", "arguments": '{"order": 7}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "in transit"},
            Message("m4", "assistant", content="It is in transit."),
            {"role": "user", "content": "ok"},
            {"role": "user", "content": "ok"},
        ]
    )
    assert [m.role for m in got] == ["user", "assistant", "tool", "assistant", "user", "user"]
    assert len({m.id for m in got}) == 6  # equal texts still get distinct ids
    ctx = mem.context()
    assert ctx[1]["tool_calls"][0]["id"] == "call_1"
    assert ctx[2] == {"role": "tool", "tool_call_id": "call_1", "content": "in transit"}
    assert mem.add_message({"role": "user", "content": "ok"}).id not in {m.id for m in got}


@pytest.mark.parametrize(
    ("batch", "field"),
    [
        ([{"role": "user", "content": "fine"}, {"role": "wizard", "content": "x"}], "messages[1]"),
        ([Message("a", "user", content="x"), 42], "messages[1]"),
        ([Message("a", "user", content="x"), Message("a", "user", content="y")], "messages[1].id"),
        ("not a list", "messages"),
    ],
)
def test_bad_input_names_the_item_and_changes_nothing(batch: Any, field: str) -> None:
    mem = ConversationMemory(300)
    mem.add("user", "before")
    with pytest.raises(InvalidMessage) as info:
        mem.add_messages(batch)
    assert info.value.field.startswith(field)
    assert [m.text() for m in mem.messages()] == ["before"]


async def test_the_async_twin_appends_one_batch() -> None:
    db = open_store("sqlite://")
    mem = ConversationMemory(250, store=db.session("s", user_id="u"))
    batch = script(5)
    assert await mem.aadd_messages(batch) == batch
    assert await mem.amessages() == batch
    with pytest.raises(ConcurrentUpdate):
        await mem.aadd_messages([Message("late", "user", content="x")], expected_seq=1)


async def test_wait_is_the_deprecated_spelling_of_aflush() -> None:
    mem = ConversationMemory(300)
    mem.add("user", "hello")
    with pytest.warns(DeprecationWarning, match="aflush"):
        await mem.wait()
    await mem.aflush()  # the one async spelling: no warning
