"""Shared by the packing tests: random histories with tool calls and brute-force oracles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from convomem.model import (
    Chunk,
    Message,
    PinPolicy,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    current_turn,
    group_pairs,
    starts_turn,
    validate_pairs,
)
from convomem.packing import REASONS, PackResult, countable_stub

KINDS = (
    "user",
    "user",
    "assistant",
    "assistant",
    "call",
    "call",
    "result",
    "result",
    "result",
    "orphan",
    "stray",
    "system",
)


@st.composite
def histories(draw: Any, max_size: int = 24, prefix: str = "m") -> list[Message]:
    """Histories with parallel calls, results in any order and interleaved, orphans,
    results mixed with strays (answered twice / never made), unanswered calls,
    system messages, priorities and timestamps. Token counts are given."""
    n = draw(st.integers(0, max_size))
    out: list[Message] = []
    open_calls: list[str] = []
    answered: list[str] = []
    calls = 0
    for i in range(n):
        kind = draw(st.sampled_from(KINDS))
        tokens = draw(st.integers(0, 40))
        priority = draw(st.sampled_from((0, 0, 0, 0, 0, 0, 1, 2)))
        created = draw(st.none() | st.integers(0, 100).map(float))
        role = "assistant"
        content: Any
        if kind == "call":
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                calls += 1
                ids.append(f"{prefix}c{calls}")
            open_calls.extend(ids)
            content = [TextBlock("let me check")] * draw(st.integers(0, 1))
            content += [ToolUseBlock(c, "lookup", {"q": c}) for c in ids]
        elif kind == "result" and open_calls:
            role = "tool"
            k = draw(st.integers(1, min(2, len(open_calls))))
            picks = [open_calls.pop(draw(st.integers(0, len(open_calls) - 1))) for _ in range(k)]
            answered.extend(picks)
            content = [ToolResultBlock(c, f"result for {c}") for c in picks]
        elif kind == "stray" and open_calls and answered:
            role = "tool"  # answers one open call, plus a call answered before
            c = open_calls.pop(draw(st.integers(0, len(open_calls) - 1)))
            content = [
                ToolResultBlock(c, "ok"),
                ToolResultBlock(draw(st.sampled_from(answered)), "again"),
            ]
            answered.append(c)
        elif kind in ("result", "orphan", "stray"):
            role = "tool"
            content = [ToolResultBlock(f"{prefix}ghost{i}", "nobody asked")]
        else:
            role = kind
            content = f"{kind} says {i}"
        out.append(
            Message(
                f"{prefix}{i}",
                role,
                tokens,
                content=content,
                priority=priority,
                created_at=created,
            )
        )
    return out


PIN_SPECS = st.lists(
    st.sampled_from(("system", "first_user", "last_user", "tool_results", 0, 2, -1, -3, 50)),
    max_size=3,
    unique=True,
).map(tuple)


def originals(result: PackResult) -> list[Message]:
    """``kept`` without the synthetic messages (summary, stubs), each repaired copy
    replaced by the input message it stands for."""
    synthetic = {id(m) for m in result.stubs}
    if result.summary is not None:
        synthetic.add(id(result.summary))
    back = {id(copy): result.messages[i] for i, copy in result.repairs.items()}
    return [back.get(id(m), m) for m in result.kept if id(m) not in synthetic]


def check_invariants(
    messages: Sequence[Message],
    result: PackResult,
    *,
    pins: Sequence[Any],
    tokenizer: Any,
) -> None:
    """What every strategy and stage combination must guarantee."""
    assert validate_pairs(result.kept) == []
    where = {id(m): i for i, m in enumerate(messages)}
    orig = originals(result)
    idx = [where[id(m)] for m in orig]  # KeyError: a kept message is not an input
    assert idx == sorted(idx)
    assert len(set(idx)) == len(idx)
    dropped = [where[id(m)] for m in result.dropped]
    assert dropped == sorted(dropped)
    assert sorted(idx + dropped) == list(range(len(messages)))
    for s in result.stubs:
        assert s.metadata.get("convomem_stub") is True
    decisions = result.decisions
    assert [d.index for d in decisions] == list(range(len(messages)))
    kept_set = set(idx)
    for d in decisions:
        assert d.kept == (d.index in kept_set)
        assert d.reason in REASONS
        assert d.id == messages[d.index].id
    for i in PinPolicy(pins).resolve(messages):
        d = decisions[i]
        assert d.kept or i in result.lost_pins, (i, d)  # a pin is sent, or reported lost
    for i, reason in result.lost_pins.items():  # pins validity forced out are reported
        assert not decisions[i].kept and decisions[i].reason == reason and not result.fits
    for i, copy in result.repairs.items():  # a repaired copy only lost stray results
        ids = copy.tool_result_ids()
        assert copy.id == messages[i].id and i in idx and ids
        assert set(ids) <= set(messages[i].tool_result_ids())
    assert result.token_count == tokenizer.count_messages(result.kept)
    valid = not result.lost_pins and not result.unstartable
    assert result.fits == (result.token_count <= result.budget and valid)
    assert result.headroom == result.budget - result.token_count
    if not result.fits:  # what no strategy may drop (the pins, the current turn) overflows
        sent = result.repairs
        forced = sum(
            tokenizer.count_message(sent.get(d.index, messages[d.index]))
            for d in decisions
            if d.reason in ("pinned", "turn")
        ) + tokenizer.count_messages(result.stubs)
        assert (
            forced > result.budget
            or not valid
            or any(d.kept and d.reason in ("min_keep", "start_on") for d in decisions)
        )


# ------------------------------------------------------------------------------ oracles


def repaired_forms(messages: Sequence[Message]) -> dict[int, Message]:
    """Brute force over the whole list: the copy sent for each message that carries
    results answering no call open at that point (made nowhere, or answered already),
    when it also answers an open one (one that answers none is an orphan)."""
    open_calls: set[str] = set()
    out: dict[int, Message] = {}
    for i, m in enumerate(messages):
        ids = m.tool_result_ids()
        answers = [r for r in dict.fromkeys(ids) if r in open_calls]
        open_calls.difference_update(answers)
        if answers and len(answers) < len(ids):
            left = set(answers)
            blocks = []
            for b in m.blocks:
                if isinstance(b, ToolResultBlock):
                    if b.tool_use_id not in left:
                        continue
                    left.discard(b.tool_use_id)
                blocks.append(b)
            out[i] = m.replace(content=blocks, tokens=m.tokens)
        open_calls.update(m.tool_use_ids())
    return out


def tool_free(m: Message) -> bool:
    return m.role != "tool" and not m.has_tool_use() and not m.has_tool_result()


def chunk_status(chunk: Chunk, unanswered: str, tokenizer: Any) -> tuple[bool, list[Message]]:
    """(can be sent, stubs) of a chunk (its messages as they are sent), decided naively."""
    if chunk.orphan:
        return False, []
    stubs = [countable_stub(c, tokenizer) for c in sorted(chunk.pending)]
    if chunk.pending and unanswered == "drop":
        return False, []
    return validate_pairs([*chunk.messages, *stubs]) == [], stubs


def turn_pins(messages: Sequence[Message], tokenizer: Any, unanswered: str) -> set[int]:
    """Indices the current turn holds: the newest message that starts a turn (brute force
    over the list), and the open exchange (``model.current_turn``) when it can be sent."""
    turn = max((i for i, m in enumerate(messages) if starts_turn(m)), default=-1)
    _, exchange = current_turn(messages)
    out = {turn} if turn >= 0 else set()
    repaired = repaired_forms(messages)
    for chunk in group_pairs(messages):  # the open exchange's chunks that can be sent
        if set(chunk.indices) <= set(exchange):
            sent = Chunk([repaired.get(i, messages[i]) for i in chunk.indices], chunk.indices,
                         pending=set(chunk.pending), orphan=chunk.orphan)  # fmt: skip
            if chunk_status(sent, unanswered, tokenizer)[0]:
                out.update(chunk.indices)
    return out


def oracle_chunks(
    messages: Sequence[Message], pins: Sequence[Any], tokenizer: Any, unanswered: str
) -> list[tuple[Chunk, bool, int]]:
    """Sendable chunks as (chunk, pinned, cost), from group_pairs and the Packer's pins
    (``PinPolicy(pins)``: specs add to the system pin) and the current turn (the newest
    message that starts a turn; the open exchange, when it can be sent). A chunk holds
    the messages as sent (``repaired_forms``); a pinned tool-free message of an
    unsendable chunk is sent as a chunk of its own."""
    pinned_at = PinPolicy(pins).resolve(messages) | turn_pins(messages, tokenizer, unanswered)
    repaired = repaired_forms(messages)
    out = []
    for c in group_pairs(messages, pinned_at):
        sent = Chunk([repaired.get(i, messages[i]) for i in c.indices], list(c.indices),
                     c.pinned, pending=set(c.pending), orphan=c.orphan)  # fmt: skip
        ok, stubs = chunk_status(sent, unanswered, tokenizer)
        if ok:
            cost = tokenizer.count_messages(sent.messages) + tokenizer.count_messages(stubs)
            out.append((sent, c.pinned, cost))
            continue
        for i in c.indices:
            if i in pinned_at and tool_free(messages[i]):
                single = Chunk([messages[i]], [i], True)
                out.append((single, True, tokenizer.count_message(messages[i])))
    return out


def oracle_recency(
    messages: Sequence[Message],
    budget: int,
    pins: Sequence[Any],
    tokenizer: Any,
    *,
    min_keep: int = 1,
    contiguous: bool = False,
    unanswered: str = "drop",
    newest_first: bool = True,
    gone: set[int] = frozenset(),  # type: ignore[assignment]
) -> set[str]:
    """Ids kept by Recency (or, with newest_first=False, FirstFit), but for the chunks
    starting at an index in ``gone``. Recency's ``min_keep`` counts the chunks only the
    current turn pins among the newest it forces."""
    chunks = [
        x for x in oracle_chunks(messages, pins, tokenizer, unanswered) if x[0].start not in gone
    ]
    room = budget - sum(cost for _, pinned, cost in chunks if pinned)
    kept = {m.id for c, pinned, _ in chunks if pinned for m in c.messages}
    policy = PinPolicy(pins).resolve(messages)
    order = [
        (c, cost, pinned)
        for c, pinned, cost in chunks
        if not pinned or (newest_first and not policy.intersection(c.indices))
    ]
    if newest_first:
        order.reverse()
    n = 0
    for c, cost, turn in order:
        n += 1
        if turn:
            continue
        if n <= min_keep or cost <= room:
            room -= cost
            kept.update(m.id for m in c.messages)
        elif contiguous:
            break
    return kept


def oracle_importance(
    messages: Sequence[Message],
    budget: int,
    pins: Sequence[Any],
    tokenizer: Any,
    scorer: Any,
    unanswered: str = "drop",
) -> set[str]:
    chunks = oracle_chunks(messages, pins, tokenizer, unanswered)
    total = sum(cost for _, _, cost in chunks)
    free = [
        (max(scorer(m) for m in c.messages), c.start, c, cost) for c, p, cost in chunks if not p
    ]
    dropped: set[int] = set()
    for _, start, _c, cost in sorted(free, key=lambda x: (x[0], x[1])):
        if total <= budget:
            break
        dropped.add(start)
        total -= cost
    return {m.id for c, _, _ in chunks if c.start not in dropped for m in c.messages}


def kept_ids(result: PackResult) -> set[str]:
    return {m.id for m in originals(result)}
