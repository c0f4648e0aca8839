"""The current turn is never lost: ``model.current_turn`` and the three views that keep it.

Over any sequence of messages (user and assistant turns, tool calls from one or two
assistant messages at once, results of any size answered at once, later, together
(Anthropic style) or never, the user typing while a tool runs, orphans, priorities),
pins and budgets, after every message:

- ``History``, the ``Packer`` (``pack`` and ``pack_anthropic``) and ``ConversationMemory``
  (``context()`` as messages, OpenAI and Anthropic) send the newest user message and the
  calls and results of the open exchange once answered;
- a result over the view's ``result_limit`` is sent reduced (same id and answers, each
  result under the limit) and the log keeps it whole;
- what is sent is valid (OpenAI: each result right after its call; no result without
  its call), and ``fits`` is honest: when it is False, only what no view may drop (pins,
  the current turn, Recency's ``min_keep``) is over the budget, and the memory's
  ``stats().problems`` says why.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.formats.openai import order_tool_results, to_openai
from convomem.model import (
    REDUCED_KEY,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    current_turn,
    group_pairs,
    validate_pairs,
)
from convomem.packing import Packer
from convomem.session import ConversationMemory
from convomem.strategies import Recency
from convomem.tokens import get_tokenizer
from convomem.views.log import unit_messages
from convomem.views.window import History
from session.test_memory_stateful import anthropic_problems, openai_problems

EXAMPLES = int(os.environ.get("CONVOMEM_TURN_EXAMPLES", "60"))
APPROX = get_tokenizer("approx")
WORDS = "the parcel left the depot and support checked the queue for order 1182".split()  # noqa: SIM905


def words(seed: int, n: int) -> str:
    return " ".join(WORDS[(seed * 3 + k) % len(WORDS)] for k in range(n))


def big(seed: int, n: int, kind: str) -> str:
    """A tool result of about ``n`` items: a JSON list, an object, or lines of text."""
    rows = [{"id": f"{seed}-{k}", "note": words(seed + k, 3)} for k in range(n)]
    if kind == "list":
        return json.dumps(rows)
    if kind == "object":
        return json.dumps({"count": n, "rows": rows})
    return "\n".join(f"{r['id']}: {r['note']}" for r in rows)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message("sys", "system", content="You are a warehouse agent."))
    open_calls: list[str] = []
    for i in range(draw(st.integers(1, 16))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "call", "call", "answer",
                                     "answer", "together", "orphan"]))  # fmt: skip
        prio = draw(st.sampled_from([0, 0, 0, 0, 1, 2]))
        if kind in ("user", "assistant"):
            out.append(Message(f"m{i}", kind, content=words(i, draw(st.integers(1, 40))),
                               priority=prio))  # fmt: skip
        elif kind == "call":
            ids = [f"c{i}_{k}" for k in range(draw(st.integers(1, 3)))]
            text = [TextBlock("Let me check.")] if draw(st.booleans()) else []
            calls = [ToolUseBlock(c, "lookup", {"q": words(i, 2)}) for c in ids]
            out.append(Message(f"m{i}", "assistant", content=[*text, *calls]))
            open_calls += ids
        elif kind == "orphan":
            out.append(Message(f"m{i}", "tool", content=[ToolResultBlock(f"nowhere{i}", "?")]))
        elif open_calls:
            picks = draw(st.lists(st.sampled_from(open_calls), min_size=1, max_size=3,
                                  unique=True))  # fmt: skip
            open_calls = [c for c in open_calls if c not in picks]
            size = draw(st.sampled_from([1, 3, 40, 200, 900]))
            shape = draw(st.sampled_from(["list", "object", "lines"]))
            blocks = [ToolResultBlock(c, big(i + k, size, shape)) for k, c in enumerate(picks)]
            if kind == "together":  # one message, Anthropic style
                out.append(Message(f"m{i}", "user", content=blocks, priority=prio))
            else:
                out += [Message(f"m{i}r{k}", "tool", content=[b], priority=prio)
                        for k, b in enumerate(blocks)]  # fmt: skip
    return out


PINS = st.sampled_from(
    [(), ("system",), ("system", "last_user"), ("system", -2), ("tool_results",)]
)


def tools_of(messages: list[Message], exchange: list[int], complete_only: bool) -> set[str]:
    """Ids of the calls and results of the open exchange's chunks (answered ones only)."""
    out: set[str] = set()
    for c in group_pairs(messages):
        if set(c.indices) <= set(exchange) and not (complete_only and c.pending):
            out.update(m.id for m in c.messages if m.has_tool_use() or m.has_tool_result())
    return out


def check_sent(
    where: str,
    log: list[Message],
    sent: list[Message],
    limit: int | None,
    *,
    complete_only: bool = True,
) -> None:
    turn, exchange = current_turn(log)
    ids = {m.id for m in sent}
    if turn >= 0:
        assert log[turn].id in ids, f"{where}: the newest user message {log[turn].id!r} is not sent"
    missing = tools_of(log, exchange, complete_only) - ids
    assert not missing, f"{where}: the open exchange is not sent: {sorted(missing)}"
    by_id = {m.id: m for m in log}
    for m in sent:
        if REDUCED_KEY not in m.metadata:
            continue
        orig = by_id[m.id]
        assert m.role == orig.role and set(m.tool_result_ids()) <= set(orig.tool_result_ids())
        assert limit is not None
        for b in m.blocks:
            if isinstance(b, ToolResultBlock):
                assert APPROX.count(b.text()) <= limit
        assert APPROX.count_message(m) < APPROX.count_message(orig)


@settings(max_examples=EXAMPLES, deadline=None)
@given(log=conversations(), budget=st.integers(160, 2500), pins=PINS)
def test_every_view_sends_the_current_turn(log: list[Message], budget: int, pins: Any) -> None:
    window = History(budget, tokenizer="approx", pin=pins)
    packer = Packer(budget=budget, tokenizer="approx", pin=pins)
    anthropic = Packer(budget=budget, tokenizer="approx", pin=pins, start_on="user")
    strict = Packer(budget=budget, tokenizer="approx", pin=pins, strategy=Recency(min_keep=0))
    mem = ConversationMemory(budget, pin=pins or ("system",))
    seen: list[Message] = []
    for m in log:
        seen.append(m)
        window.add(m)
        mem.add_message(m)
        # History: keeps units whole, pending exchanges too.
        check_sent("History", seen, window.kept(), window.result_limit, complete_only=False)
        # The Packer: the current turn whatever else fits; OpenAI and Anthropic requests.
        for p in (packer, anthropic):
            res = p.pack(seen)
            assert validate_pairs(res.kept) == []
            assert openai_problems(order_tool_results(to_openai(res.kept))) == []
            lost = {seen[i].id for i, why in res.lost_pins.items() if why == "start_on"}
            if p is anthropic and (lost or res.unstartable):
                # A turn in an exchange with no user turn before it (the conversation
                # began with a call), or no user turn at all, cannot start a request:
                # said, not sent.
                assert not res.fits
                if not res.unstartable:
                    check_sent(repr(p), seen, [*res.kept, *(x for x in seen if x.id in lost)],
                               p.result_limit)  # fmt: skip
                continue
            check_sent(repr(p), seen, res.kept, p.result_limit)
        # Without min_keep, it does not fit exactly when the pins and the turn do not.
        alone = strict.pack(seen)
        if not alone.lost_pins:
            sent = {m.id: m for m in alone.kept}
            forced = sum(
                APPROX.count_message(sent[d.id])
                for d in alone.decisions
                if d.kept and d.reason in ("pinned", "turn")
            )
            assert alone.fits == (forced <= budget), alone.explain()
        # The memory: every format, fits honest, the log whole.
        ctx = mem.context("messages")
        check_sent("ConversationMemory", seen, ctx, mem.engine.view.result_limit)
        log = mem.engine.view.log
        keep = {x.id for u in log.units() if log.keeps(u) for x in unit_messages(u)}
        oa = mem.context()
        assert openai_problems(oa) == []
        an = mem.context("anthropic")
        assert anthropic_problems(an) == []
        turn, _ = current_turn(seen)
        if turn >= 0 and seen[turn].text().strip():
            assert an["messages"], "an Anthropic request with no messages"
        s = mem.stats()
        assert s.fits == (s.context_tokens <= budget)
        assert bool(s.problems) == (not s.fits)
        if not s.fits:  # only what may not be evicted is sent
            assert {x.id for x in ctx if "summary" not in x.metadata} <= keep
        assert mem.messages() == seen


def answered_ids(messages: list[Message]) -> set[str]:
    return {r for m in messages for r in m.tool_result_ids()}


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(log=conversations())
def test_current_turn_against_a_brute_force_oracle(log: list[Message]) -> None:
    """``current_turn`` over every prefix, against what it must hold, counted by hand."""
    for n in range(1, len(log) + 1):
        seen = log[:n]
        turn, exchange = current_turn(seen)
        # The newest message that starts a turn (a user message that is not a result).
        starts = [i for i, m in enumerate(seen) if m.role == "user" and m.text().strip()
                  and not m.has_tool_result()]  # fmt: skip
        assert turn == (starts[-1] if starts else -1)
        assert exchange == sorted(set(exchange))
        where = {c: i for i, m in enumerate(seen) for c in m.tool_use_ids()}
        calls = sorted(where.values())
        since = max((i for i in starts if calls and i < calls[-1]), default=-1)
        answered = answered_ids(seen)
        held = set(exchange)
        # What a view keeps: the open exchange and the chunk of the turn start (a call
        # the user typed over shares that chunk with the turn; it is kept as the turn's).
        kept = held | {i for c in group_pairs(seen) if turn in c.indices for i in c.indices}
        # Complete: every call after the newest turn start still awaiting its result,
        # and the newest message's exchange (a call of the newest call's turn, or a
        # result answering one). A call of an earlier turn, made into an exchange that
        # was already open then, is abandoned once the user has spoken after it.
        for c, i in where.items():
            if i > turn and c not in answered:
                assert i in kept, f"{seen[i].id}: a call awaiting its result is not kept"
        last = seen[-1]
        answers = [where[r] for r in last.tool_result_ids() if r in where]
        if (last.tool_use_ids() and n - 1 > since) or any(i > since for i in answers):
            assert n - 1 in kept, "the newest message, of the open exchange, is not kept"
        # Closed: a call's results come with it, and a result with its call.
        for i in held:
            for c in seen[i].tool_use_ids():
                assert all(j in held for j, m in enumerate(seen) if c in m.tool_result_ids())
            for r in seen[i].tool_result_ids():
                assert r not in where or where[r] in held, "a result without its call"
        # Nothing open: the assistant answered in text, or the user spoke after the
        # results, with no call awaiting one.
        if not (where.keys() - answered) and not last.has_tool_result() and not last.tool_use_ids():
            assert exchange == []
