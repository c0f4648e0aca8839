"""An agent loop through ``ConversationMemory`` over a store that fails at random (issue 9
§5): transient errors before the store is reached, transient errors *after* it did the
write (the reply was lost: the retry must not duplicate), and latency. Each add and each
``context()`` goes through the shared ``RetryPolicy``, as an agent would.

After every turn the context is valid (requests every provider accepts, the pinned system
prompt first, within budget); at the end the store holds exactly the messages the loop
was told were added, once each, in order, seqs gapless, and no message was summarized
twice. Fault schedules are drawn by hypothesis (``CONVOMEM_FAULT_EXAMPLES`` examples of
``CONVOMEM_FAULT_TURNS`` turns, 2 x 2,000 by default) on SQLite, and one seeded schedule
runs on every backend (``CONVOMEM_FAULT_BACKEND_TURNS``, default 300).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from _fault_store import KINDS, FaultySessionStore, ScheduledFaults
from _store_backends import Backend
from convomem.model import Message, TextBlock, ToolResultBlock, ToolUseBlock
from convomem.retry import RetryPolicy, stop_after_attempt, wait_none
from convomem.session import ConversationMemory
from convomem.stores import open_store
from session._faults import FlakySummarizer, Tally
from session.test_memory_stateful import anthropic_problems, openai_problems, request_tokens

EXAMPLES = int(os.environ.get("CONVOMEM_FAULT_EXAMPLES", "2"))
TURNS = int(os.environ.get("CONVOMEM_FAULT_TURNS", "2000"))
BACKEND_TURNS = int(os.environ.get("CONVOMEM_FAULT_BACKEND_TURNS", "300"))
BUDGET = 400
SYSTEM = Message("sys", "system", content="You are a careful assistant; keep tool pairs whole.")


def turn(t: int) -> list[Message]:
    """Turn ``t`` of the agent: a question, every third turn a tool call and its result,
    an answer."""
    out = [Message(f"u{t}", "user", content=f"question {t}: where is order {t * 7}?")]
    if t % 3 == 1:
        call = f"call-{t}"
        out.append(
            Message(
                f"c{t}",
                "assistant",
                content=(TextBlock("checking"), ToolUseBlock(call, "lookup", {"order": t * 7})),
            )
        )
        out.append(
            Message(f"r{t}", "user", content=(ToolResultBlock(call, f"order {t * 7}: late"),))
        )
    out.append(Message(f"a{t}", "assistant", content=f"order {t * 7} ships on day {t % 30}"))
    return out


def check_context(mem: ConversationMemory, policy: RetryPolicy) -> None:
    """The context now: valid for both providers, the prompt first, within budget."""
    ctx: list[Message] = policy.call(mem.context, "messages")
    oa: list[dict[str, Any]] = policy.call(mem.context, "openai")
    an: dict[str, Any] = policy.call(mem.context, "anthropic")
    assert not openai_problems(oa), openai_problems(oa)
    assert not anthropic_problems(an), anthropic_problems(an)
    assert ctx[0].id == "sys", "the pinned system prompt is not first"
    assert mem.stats().fits
    cost = request_tokens(ctx, oa, an)
    assert cost["messages"] <= BUDGET and cost["openai"] <= BUDGET, cost


def read_log(session: Any) -> Iterator[Any]:
    cursor = None
    while True:
        entries, cursor = session.entries(cursor, 1000)
        yield from entries
        if cursor is None:
            return


def run_agent(session: Any, faults: ScheduledFaults, turns: int) -> Tally:
    """The loop over ``session`` wrapped with ``faults``; checks as it goes and at the end."""
    tally = Tally()
    store = FaultySessionStore(session, faults)
    mem = ConversationMemory(BUDGET, store=store, summarizer=FlakySummarizer(tally))  # type: ignore[arg-type]
    # Never give up before the schedule is exhausted: each attempt consumes a call.
    policy = RetryPolicy(stop=stop_after_attempt(len(faults.schedule) + 3), wait=wait_none())
    acked: list[str] = []
    for t in range(turns):
        for m in [SYSTEM] if t == 0 else []:
            policy.call(mem.add_message, m)
            acked.append(m.id)
        for m in turn(t):
            policy.call(mem.add_message, m)
            acked.append(m.id)
        check_context(mem, policy)
    with faults.suspended():
        entries = list(read_log(session))
        assert [e.message.id for e in entries] == acked, "lost, duplicated or reordered"
        assert [e.seq for e in entries] == list(range(1, len(acked) + 1)), "seqs not gapless"
        assert [m.id for m in mem.messages()] == acked
    assert not tally.twice(), f"summarized more than once: {tally.twice()[:5]}"
    assert mem.stats().compactions > 0
    # Shown with pytest -s: what this run survived.
    print(f"{turns} turns, {len(acked)} messages, {faults.calls} store calls, injected:", end=" ")
    print(", ".join(f"{k} {n}" for k, n in sorted(faults.injected.items())))
    return tally


# Calls a run makes: about one per message added (the first context() loads the log).
CALLS = TURNS * 3


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    schedule=st.dictionaries(
        st.integers(0, CALLS), st.sampled_from(KINDS), max_size=max(10, CALLS // 20)
    )
)
def test_an_agent_loop_loses_and_duplicates_nothing_under_store_faults(
    schedule: dict[int, str],
) -> None:
    faults = ScheduledFaults(schedule, latency=0.0005)
    with open_store("sqlite://") as db:
        run_agent(db.session("s", user_id="u"), faults, TURNS)
    # Every scheduled fault fired unless the loop made fewer calls than its number.
    fired = sum(faults.injected[k] for k in KINDS)
    assert fired == sum(1 for n in schedule if n < faults.calls)


def test_a_seeded_fault_schedule_on_every_backend(backend: Backend) -> None:
    """1 call in 12 fails (before or after the write) or is slow, on each backend."""
    rng = random.Random(9)
    calls = BACKEND_TURNS * 3
    schedule = {n: rng.choice(KINDS) for n in range(calls) if rng.random() < 1 / 12}
    faults = ScheduledFaults(schedule, latency=0.001)
    with open_store(backend.fresh_url()) as db:
        run_agent(db.session("s", user_id="u"), faults, BACKEND_TURNS)
    assert faults.injected["after add_items"] + faults.injected["after append"] > 10
    assert faults.injected["before"] > 10 and faults.injected["latency"] > 10
