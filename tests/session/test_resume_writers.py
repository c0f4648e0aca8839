"""Durable memories sharing a session, duplicates, and sessions without a usable state.

- Two memories (two database handles, two threads) adding to one session lose and
  duplicate nothing: the log holds every message once, seqs gapless, each writer's
  messages in its order, and every context either returns is valid for both providers.
- Appends are idempotent: a re-sent message is a no-op, other content under its id
  raises ``MessageConflict``; an id a converter derived that the log holds gets a fresh
  one, the same way before and after a restart.
- A session written without state replays once and saves it; a state that a pop made
  stale is replaced (and the summary keeps what it covered).
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convomem import ConversationMemory, aopen_store, open_store
from convomem.errors import ConcurrentUpdate, MessageConflict
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from session.test_memory_stateful import anthropic_problems, openai_problems

WRITES = 60


def open_twice(url: str) -> tuple[Any, Any]:
    first = open_store(url)
    return first, (first if url == "sqlite://" else open_store(url))


def writer(mem: ConversationMemory, name: str, errors: list[BaseException]) -> None:
    try:
        for i in range(WRITES):
            if i % 10 == 3:  # a tool exchange now and then
                call = ToolUseBlock(f"{name}c{i}", "lookup", {"q": name})
                mem.add_message(Message(f"{name}{i}", "assistant", content=[call]))
                mem.add_message(
                    Message(f"{name}{i}r", "tool", content=[ToolResultBlock(call.id, "found")])
                )
            else:
                mem.add("user", f"{name} says hello number {i} about the order", id=f"{name}{i}")
            if i % 7 == 0:
                assert openai_problems(mem.context()) == []
                assert anthropic_problems(mem.context("anthropic")) == []
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_two_writers_on_one_session_lose_and_duplicate_nothing(backend: Any) -> None:
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    mems = [ConversationMemory(300, store=db.session("shared", user_id="u")) for db in (db1, db2)]
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=writer, args=(m, name, errors))
        for m, name in zip(mems, ("a", "b"), strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    entries, _ = db1.session("shared").entries(limit=10_000)
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    ids = [e.message.id for e in entries]
    assert len(ids) == len(set(ids)) == 2 * (WRITES + WRITES // 10)
    for name in ("a", "b"):
        mine = [i for i in ids if i.startswith(name)]
        assert mine == sorted(mine, key=lambda i: (int(i[1:].rstrip("r")), i.endswith("r")))
    for mem in mems:
        assert openai_problems(mem.context()) == []
        assert anthropic_problems(mem.context("anthropic")) == []
    # A third memory opening the session sees what the last writer saw.
    third = ConversationMemory(300, store=db1.session("shared", user_id="u"))
    assert openai_problems(third.context()) == []
    assert third.stats().log_messages == len(ids)


def test_appends_are_idempotent_and_conflicts_are_typed(backend: Any) -> None:
    url = backend.fresh_url()
    db = open_store(url)
    mem = ConversationMemory(200, store=db.session("s", user_id="u"))
    first = mem.add("user", "hello there", id="u1")
    for i in range(40):  # enough for u1 to leave the view
        mem.add("assistant" if i % 2 else "user", f"turn {i} of a long talk about parcels")
    assert "u1" not in {m.id for m in mem.context("messages")}
    before = mem.stats().log_messages
    assert mem.add_message(first) == first  # re-sent: nothing appended
    last = mem.messages()[-1]
    assert mem.add_message(last) == last  # re-sent while in view
    assert mem.stats().log_messages == before == len(mem.messages())
    with pytest.raises(MessageConflict):
        mem.add("user", "other words", id="u1")
    with pytest.raises(MessageConflict):
        mem.add("user", "other words", id=last.id)
    assert len(mem.messages()) == before


def test_a_derived_id_already_logged_gets_a_fresh_one_across_restarts(backend: Any) -> None:
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    one = ConversationMemory(500, store=db1.session("s", user_id="u"))
    repeated = Message("~oa_same", "user", content="Thanks.")
    assert one.add_message(repeated).id == "~oa_same"
    assert one.add_message(repeated).id == "~oa_same~1"
    two = ConversationMemory(500, store=db2.session("s", user_id="u"))  # a restart
    assert two.add_message(repeated).id == "~oa_same~2"
    assert two.stats().reids == 1
    assert [m.id for m in two.messages()] == ["~oa_same", "~oa_same~1", "~oa_same~2"]


def test_a_session_without_state_replays_once_then_resumes(backend: Any) -> None:
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    store = db1.session("s", user_id="u")
    store.add_items(
        [
            Message(f"m{i}", "user" if i % 2 else "assistant", content=f"line {i} " * 6)
            for i in range(80)
        ]
    )
    first = ConversationMemory(300, store=store)
    want = first.context()
    calls = first.stats().summarizer_calls
    assert calls > 0 and store.load_state()[0] is not None
    resumed = ConversationMemory(300, store=db2.session("s", user_id="u"))
    assert resumed.context() == want
    assert resumed.stats().summarizer_calls == 0


def test_a_pop_of_a_saved_message_replays_without_summarizing_twice(backend: Any) -> None:
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    mem = ConversationMemory(250, store=db1.session("s", user_id="u"))
    for i in range(50):
        mem.add("user" if i % 2 == 0 else "assistant", f"turn {i} about the parcel and refunds")
    covered = set(mem.summary.covered_ids)
    popped = mem.pop()
    assert popped is not None and popped.id not in covered
    after = mem.context()
    assert popped.id not in {m.id for m in mem.context("messages")}
    resumed = ConversationMemory(250, store=db2.session("s", user_id="u"))
    assert resumed.context() == after
    assert set(resumed.summary.covered_ids) >= covered


def test_clear_keeps_the_system_prompt_and_drops_the_state(backend: Any) -> None:
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    mem = ConversationMemory(250, store=db1.session("s", user_id="u"))
    mem.add("system", "Be brief.")
    for i in range(40):
        mem.add("user" if i % 2 == 0 else "assistant", f"turn {i} about the parcel")
    assert mem.summary.current() is not None
    mem.clear()
    assert [m.content for m in mem.context("messages")] == ["Be brief."]
    resumed = ConversationMemory(250, store=db2.session("s", user_id="u"))
    assert resumed.context() == [{"role": "system", "content": "Be brief."}]
    assert resumed.summary.current() is None


class Racing:
    """A session store that counts the races it reports (``ConcurrentUpdate``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.races = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def append(self, *args: Any, **kwargs: Any) -> int:
        try:
            return int(self._inner.append(*args, **kwargs))
        except ConcurrentUpdate:
            self.races += 1
            raise


@settings(
    max_examples=int(os.environ.get("CONVOMEM_RESUME_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(order=st.lists(st.integers(0, 1), min_size=10, max_size=60))
def test_interleaved_writers_agree_with_a_fresh_reader(backend: Any, order: list[int]) -> None:
    """Whatever the interleaving, the memory that wrote last returns what a memory
    opening the session afresh returns, and every race was resolved by a retry."""
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    stores = [Racing(db.session("s", user_id="u")) for db in (db1, db2)]
    mems = [ConversationMemory(260, store=s, pin=("system", "last_user")) for s in stores]
    for n, who in enumerate(order):
        if n % 9 == 4:
            call = ToolUseBlock(f"c{n}", "lookup", {"n": n})
            mems[who].add_message(Message(f"w{n}", "assistant", content=[call]))
            mems[who].add_message(
                Message(f"w{n}r", "tool", content=[ToolResultBlock(call.id, "ok")])
            )
        else:
            mems[who].add(
                "user" if n % 2 else "assistant", f"message {n} from writer {who} on parcels"
            )
        fresh = ConversationMemory(
            260, store=db1.session("s", user_id="u"), pin=("system", "last_user")
        )
        assert mems[who].context() == fresh.context()
        assert mems[who].context("anthropic") == fresh.context("anthropic")
    # a writer loses a race each time the other wrote since its last write (its first
    # write reads the session first)
    races = sum(1 for i, b in enumerate(order) if i and order[i - 1] != b and b in order[:i])
    assert sum(s.races for s in stores) == races
    entries, _ = db1.session("s").entries(limit=1000)
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))


def test_a_re_sent_message_is_compared_as_it_was_scored(backend: Any) -> None:
    db = open_store(backend.fresh_url())

    def scorer(m: Message) -> int:
        return 2 if "remember" in m.text() else 0

    mem = ConversationMemory(300, store=db.session("s", user_id="u"), scorer=scorer)
    sent = Message("k1", "user", content="remember: the code is 4411")
    logged = mem.add_message(sent)
    assert logged.priority == 2
    assert mem.add_message(sent) == logged  # the same message, re-sent: no-op
    assert len(mem.messages()) == 1


def test_a_summary_set_from_outside_is_saved(backend: Any) -> None:
    url = backend.fresh_url()
    db1, db2 = open_twice(url)
    mem = ConversationMemory(300, store=db1.session("s", user_id="u"))
    for i in range(30):
        mem.add("user" if i % 2 == 0 else "assistant", f"turn {i} about the parcel and refunds")
    mem.set_summary("The customer wants a refund for order 1182.")
    resumed = ConversationMemory(300, store=db2.session("s", user_id="u"))
    assert resumed.context() == mem.context()
    assert "refund for order 1182" in str(resumed.context())


def test_background_summaries_are_saved_once_awaited(backend: Any) -> None:
    url = backend.fresh_url()

    async def primary(messages: Any, previous: Any = None) -> str:
        await asyncio.sleep(0)
        return "PRIMARY " + " / ".join(m.text()[:12] for m in messages)

    async def run() -> None:
        db1 = await aopen_store(url)
        db2 = db1 if url == "sqlite://" else await aopen_store(url)
        mem = ConversationMemory(
            300, store=db1.session("s", user_id="u"), summarizer=primary, background=True
        )
        for i in range(30):
            await mem.aadd("user" if i % 2 == 0 else "assistant", f"turn {i} about parcels")
        await mem.aflush()
        live = await mem.acontext()
        assert "PRIMARY" in str(live) and mem.stats().degraded is False
        resumed = ConversationMemory(
            300, store=db2.session("s", user_id="u"), summarizer=primary, background=True
        )
        assert await resumed.acontext() == live

    asyncio.run(run())
