"""What the timeline reads off a session to place each message (``session.timeline``).

``held_ids`` sorts the messages of the view's log by what holds them (a pin, the current
turn, a tool call awaiting its result, a tool exchange); ``segments_of`` finds the
summary segment that covers each evicted message; ``pin_reason`` says which pin holds a
pinned one. The timeline turns these into states and reasons.
"""

from __future__ import annotations

from typing import NamedTuple

from ..model import Chunk, Message, PinPolicy
from ..summaries import RunningSummary
from ..views.log import ChunkLog, unit_messages

__all__ = ["Held", "held_ids", "pin_reason", "segments_of"]


class Held(NamedTuple):
    """Ids of the messages of a view's log, by what holds them."""

    pinned: set[str]
    """Held by a pin (static or moving)."""
    turn: set[str]
    """Of the current turn, and not pinned."""
    waiting: set[str]
    """In a tool exchange that awaits a result."""
    exchange: set[str]
    """In a tool exchange (a call with its results)."""


def held_ids(log: ChunkLog) -> Held:
    """What holds each message of ``log`` now (one pass over its units)."""
    held = Held(set(), set(), set(), set())
    for u in log.units():
        msgs = unit_messages(u)
        if log.protected(u):
            held.pinned.update(m.id for m in msgs)
        elif log.in_turn(u):
            held.turn.update(m.id for m in msgs)
        if isinstance(u, Chunk) and u.pending:
            held.waiting.update(m.id for m in msgs)
        if len(msgs) > 1 and any(m.has_tool_use() for m in msgs):
            held.exchange.update(m.id for m in msgs)
    return held


def segments_of(summary: RunningSummary, wanted: set[str]) -> dict[str, int]:
    """The segment (an index into ``summary.segments``) covering each id of ``wanted``
    that the summary covers; ``summary`` has at least one segment."""
    out: dict[str, int] = {}
    if not wanted:
        return out
    last = len(summary.segments) - 1
    bounds = iter(s.count for s in summary.segments)
    index, left = 0, next(bounds)
    for mid in summary.covered_ids:
        while left == 0 and index < last:
            index, left = index + 1, next(bounds)
        if mid in wanted:
            out[mid] = index
        left -= 1
    return out


def pin_reason(m: Message, position: int, pins: PinPolicy, first_user: str) -> str:
    """Which pin holds ``m`` (at ``position`` of the log; ``first_user``: the id of the
    log's first user message, or "" when it is not known)."""
    if m.priority == 2:
        return "priority 2: never evicted"
    if m.role == "system" and pins.system:
        return "system prompt (pin 'system')"
    if position in pins.indices:
        return f"pin at position {position}"
    if pins.first_user and m.id == first_user:
        return "first user message (pin 'first_user')"
    if pins.tool_results and m.has_tool_result():
        return "tool result (pin 'tool_results')"
    if pins.last_user and m.role == "user":
        return "newest user message (pin 'last_user')"
    if pins.negative:
        return f"among the newest (pins {list(pins.negative)})"
    return "in a tool exchange with a pinned message"
