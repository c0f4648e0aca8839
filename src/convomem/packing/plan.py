"""The strategy protocol, the I/O plan a stage yields, and how a selection becomes a result.

A plan's I/O requests are ``_io``'s (``Call``, re-exported as ``packing.Call``, and
``Sleep``): one vocabulary with the session and the summaries.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .._io import Call, Sleep, arun, run
from ..errors import AsyncSummarizerError
from ..model import Message, starts_turn
from ..tokens import Tokenizer
from .classify import TableChunk, count_one
from .result import PackResult
from .table import ORPHAN, ChunkTable, Placement, lost_pins, sent_messages

StartOn: TypeAlias = Literal["user"] | None

# --------------------------------------------------------------------------- protocol


@runtime_checkable
class Strategy(Protocol):
    """Decides what of a list of messages fits a budget.

    ``pinned_indices`` are positions the result must keep. The Packer hands a strategy
    a list that is already valid (orphans and unanswered calls removed or stubbed) and
    enforces tool pairs and pins on what it returns. An optional
    ``async pack_async(...)`` with the same signature is used by ``Packer.pack_async``.
    """

    name: str

    def pack(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: Tokenizer,
        pinned_indices: Iterable[int],
    ) -> PackResult:
        """Return the decision for ``messages``."""
        ...


PlanGen: TypeAlias = Generator[Call | Sleep, Any, "Selection"]
"""A stage's plan: yields ``_io`` requests (``Call``, ``Sleep``), returns its selection.

A ``Call`` is performed by ``pack()`` synchronously (an async function's result is run to
completion when no event loop is running) and by ``pack_async()`` in the loop (``afn``
awaited when given, else ``fn`` in a worker thread when ``offload``). An exception raised
by the call is thrown into the plan, so a stage may fall back.
"""


def _refused(call: Call) -> AsyncSummarizerError:
    what = getattr(call.fn, "__qualname__", repr(call.fn))
    return AsyncSummarizerError(
        f"{what} is async and an event loop is running: use `await packer.pack_async(...)` "
        "(or the strategy's pack_async) instead of pack()"
    )


def run_plan(gen: PlanGen) -> Selection:
    """Drive a plan synchronously."""
    return run(gen, refuse=_refused, complete=True)


async def run_plan_async(gen: PlanGen) -> Selection:
    """Drive a plan in an event loop: async calls awaited, offloaded sync ones off it."""
    return await arun(gen)


# ------------------------------------------------------------------------- selection


@dataclass
class Selection:
    """A budget stage's decision over a table.

    ``kept`` maps free positions kept to a reason; every pinned sendable chunk is kept
    too (reason ``"pinned"``). Other free chunks are dropped with ``dropped[p]`` or
    ``default``. ``notes`` (input index -> reason) and ``ranges`` (``(lo, hi, reason)``
    over input indices) explain messages removed by earlier stages; earlier entries win.
    ``lost`` (input index -> reason) records pinned messages earlier stages found
    unsendable (a pinned tool result without its call).
    """

    table: ChunkTable
    kept: dict[int, str] = field(default_factory=dict)
    dropped: dict[int, str] = field(default_factory=dict)
    default: str = "budget"
    summary: Message | None = None
    placement: Placement = "head"
    notes: dict[int, str] = field(default_factory=dict)
    ranges: list[tuple[int, int, str]] = field(default_factory=list)
    lost: dict[int, str] = field(default_factory=dict)


def _note_bad(table: ChunkTable, notes: dict[int, str], lost: dict[int, str]) -> None:
    """Record why the unsendable chunks' messages are dropped, and the pins they lose."""
    chunks = table.chunks
    status = table.status
    for p in table.bad_positions():
        reason = "orphan" if status[p] == ORPHAN else "unanswered"
        c = chunks[p]
        for i in c.indices:
            notes.setdefault(i, reason)
        for i in lost_pins(c):
            lost.setdefault(i, reason)


def _turn_before(table: ChunkTable, p: int) -> int:
    """The nearest free position before ``p`` whose chunk starts a turn, or -1."""
    chunks, free = table.chunks, table.free
    q = p - 1
    while q >= 0 and not (free[q] and starts_turn(chunks[q].messages[0])):
        q -= 1
    return q


def _start_on_user(
    table: ChunkTable,
    chosen: dict[int, str],
    pinned: list[int],
    explicit: dict[int, str],
    lost: dict[int, str],
) -> list[int]:
    """Make the kept list start, after its system messages, at a user turn.

    Kept chunks before the first kept turn are dropped (``"start_on"``). When no kept
    chunk starts a turn, or a pinned chunk comes before the first that does, the nearest
    earlier chunk that starts one is kept in front (reason ``"start_on"``, even over
    budget), so the newest exchange and every pin stay. A pinned chunk with no turn
    before it cannot be sent (``lost``). Returns the pinned positions still kept.
    """
    chunks = table.chunks
    pin_set = set(pinned)

    def drop_before(kept: list[int], stop: int) -> None:
        for p in kept:
            if p >= stop:
                break
            if p in pin_set:
                pin_set.discard(p)
                for i in lost_pins(chunks[p]) or chunks[p].indices:  # a moving pin too
                    lost.setdefault(i, "start_on")
            else:
                del chosen[p]
            for i in chunks[p].indices:
                explicit[i] = "start_on"

    while True:
        kept = [p for p in sorted(chain(pin_set, chosen)) if chunks[p].messages[0].role != "system"]
        if not kept:
            break
        turn = next((p for p in kept if starts_turn(chunks[p].messages[0])), -1)
        first_pin = next((p for p in kept if p in pin_set), -1)
        if turn >= 0 and (first_pin < 0 or turn <= first_pin):
            drop_before(kept, turn)
            break
        anchor = first_pin if first_pin >= 0 else kept[-1]  # a chunk that must stay
        q = _turn_before(table, anchor)
        if q >= 0:
            chosen[q] = "start_on"
            drop_before(kept, q)
            break
        drop_before(kept, anchor + 1)  # nothing up to the anchor can start the list
    return [p for p in pinned if p in pin_set]


def assemble(
    sel: Selection, budget: int, strategy: str = "", *, start_on: StartOn = None
) -> PackResult:
    """Turn a selection into a ``PackResult`` (pins added, stubs and summary placed).

    With ``start_on="user"`` the kept list starts, after its system messages, at a user
    turn (``model.starts_turn``), as the Anthropic API requires.
    """
    table = sel.table
    msgs = table.messages
    chunks = table.chunks
    cost = table.cost
    stubs = table.stubs
    explicit: dict[int, str] = dict(sel.notes)
    lost: dict[int, str] = dict(sel.lost)
    _note_bad(table, explicit, lost)
    pinned = table.pinned_positions()
    chosen = sel.kept
    if start_on is not None and (chosen or pinned):
        chosen = dict(chosen)
        pinned = _start_on_user(table, chosen, pinned, explicit, lost)
    positions = sorted(chain(pinned, chosen)) if chosen else pinned
    pin_set = set(pinned)
    # Nothing but system messages kept: no request can be made of it (Anthropic needs a
    # message), unless there was nothing else to send.
    unstartable = (
        start_on is not None
        and all(chunks[p].messages[0].role == "system" for p in positions)
        and any(m.role != "system" for m in msgs)
    )
    kept: list[Message] = []
    kept_idx: list[int] = []
    kept_reason: list[str] = []
    all_stubs: list[Message] = []
    repairs: dict[int, Message] = {}
    tokens = 0
    held = [0, 0]  # tokens of the pinned chunks, and of the current turn's
    turn_only = table.turn_only
    getitem = msgs.__getitem__
    for p in positions:
        c = chunks[p]
        idx = c.indices
        kept_idx.extend(idx)
        if isinstance(c, TableChunk) and c.repairs:
            kept.extend(sent_messages(c, msgs))
            repairs.update(c.repairs)
        else:
            kept.extend(map(getitem, idx))
        if p in pin_set:
            reason = "turn" if idx[0] in turn_only else "pinned"
            held[reason == "turn"] += cost[p]
        else:
            reason = chosen[p]
        kept_reason.extend([reason] * len(idx))
        tokens += cost[p]
        sb = stubs.get(p)
        if sb:
            kept.extend(sb)
            all_stubs.extend(sb)
    summary = sel.summary
    if summary is not None:
        tokens += count_one(table.tokenizer, summary)
        at = 0
        if sel.placement == "after_system":
            while at < len(kept) and kept[at].role == "system":
                at += 1
        kept.insert(at, summary)
    for p, reason in sel.dropped.items():
        if p not in pin_set and p not in chosen:
            for i in chunks[p].indices:
                explicit.setdefault(i, reason)
    return PackResult(
        messages=msgs,
        kept=kept,
        kept_indices=kept_idx,
        kept_reasons=kept_reason,
        token_count=tokens,
        budget=budget,
        tokenizer=table.tokenizer,
        summary=summary,
        stubs=all_stubs,
        explicit=explicit,
        ranges=sel.ranges,
        default_reason=sel.default,
        strategy=strategy,
        repairs=repairs,
        lost_pins=lost,
        counts=table.counts,
        unstartable=unstartable,
        pinned_tokens=held[0],
        turn_tokens=held[1],
    )
