"""Strategies and stages: the protocol, the I/O plan, selections and pipelines."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .._io import adrive, drive
from ..errors import ConfigError, ConvomemError
from ..model import Message
from ..tokens import Tokenizer, get_tokenizer
from .result import PackResult, _Positions, check_budget
from .table import ORPHAN, ChunkTable, Placement, _as_messages, _check_unanswered

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


@dataclass
class Call:
    """An I/O request a stage's ``plan()`` yields; the driver sends back the result.

    ``pack()`` calls ``fn`` (running it to completion if it returns an awaitable and no
    event loop is running); ``pack_async()`` awaits ``async_fn`` when given, else runs
    ``fn`` in a worker thread when ``offload`` (so a slow sync summarizer does not block
    the loop) and awaits what it returns if that is awaitable. An exception raised by
    the call is thrown into the generator, so a stage may fall back.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    async_fn: Callable[..., Awaitable[Any]] | None = None
    offload: bool = True
    what: str = ""


PlanGen: TypeAlias = Generator[Call, Any, "Selection"]


def _perform(call: Call) -> Any:
    result = call.fn(*call.args, **call.kwargs)
    return _run_awaitable(result, call) if inspect.isawaitable(result) else result


def run_plan(gen: PlanGen) -> Selection:
    """Drive a plan synchronously."""
    return drive(gen, _perform)


def _run_awaitable(result: Awaitable[Any], call: Call) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> Any:
            return await result

        return asyncio.run(wait())
    close = getattr(result, "close", None)
    if callable(close):
        close()  # never awaited: avoid the "coroutine was never awaited" warning
    what = call.what or getattr(call.fn, "__qualname__", repr(call.fn))
    raise RuntimeError(
        f"{what} is async and an event loop is running: use `await packer.pack_async(...)` "
        "(or the strategy's pack_async) instead of pack()"
    )


async def _aperform(call: Call) -> Any:
    if call.async_fn is not None:
        result = await call.async_fn(*call.args, **call.kwargs)
    elif call.offload:
        result = await asyncio.to_thread(call.fn, *call.args, **call.kwargs)
    else:
        result = call.fn(*call.args, **call.kwargs)
    return (await result) if inspect.isawaitable(result) else result


async def run_plan_async(gen: PlanGen) -> Selection:
    """Drive a plan in an event loop: async calls awaited, sync ones off the loop."""
    return await adrive(gen, _aperform)


# ------------------------------------------------------------------------- selection


@dataclass
class Selection:
    """A budget stage's decision over a table.

    ``kept`` maps free positions kept to a reason; every pinned sendable chunk is kept
    too (reason ``"pinned"``). Other free chunks are dropped with ``dropped[p]`` or
    ``default``. ``notes`` (input index -> reason) and ``ranges`` (``(lo, hi, reason)``
    over input indices) explain messages removed by earlier stages; earlier entries win.
    """

    table: ChunkTable
    kept: dict[int, str] = field(default_factory=dict)
    dropped: dict[int, str] = field(default_factory=dict)
    default: str = "budget"
    summary: Message | None = None
    placement: Placement = "head"
    notes: dict[int, str] = field(default_factory=dict)
    ranges: list[tuple[int, int, str]] = field(default_factory=list)


def _note_bad(table: ChunkTable, notes: dict[int, str]) -> None:
    chunks = table.chunks
    status = table.status
    for p in table.bad_positions():
        reason = "orphan" if status[p] == ORPHAN else "unanswered"
        for i in chunks[p].indices:
            notes.setdefault(i, reason)


def assemble(sel: Selection, budget: int, strategy: str = "") -> PackResult:
    """Turn a selection into a ``PackResult`` (pins added, stubs and summary placed)."""
    table = sel.table
    msgs = table.messages
    chunks = table.chunks
    cost = table.cost
    stubs = table.stubs
    pinned = table.pinned_positions()
    chosen = sel.kept
    positions = sorted(chain(pinned, chosen)) if chosen else pinned
    pin_set = set(pinned)
    kept: list[Message] = []
    kept_idx: list[int] = []
    kept_reason: list[str] = []
    all_stubs: list[Message] = []
    tokens = 0
    getitem = msgs.__getitem__
    for p in positions:
        c = chunks[p]
        idx = c.indices
        kept_idx.extend(idx)
        kept.extend(map(getitem, idx))
        reason = "pinned" if p in pin_set else chosen[p]
        kept_reason.extend([reason] * len(idx))
        tokens += cost[p]
        sb = stubs.get(p)
        if sb:
            kept.extend(sb)
            all_stubs.extend(sb)
    summary = sel.summary
    if summary is not None:
        tokens += table.tokenizer.count_message(summary)
        at = 0
        if sel.placement == "after_system":
            while at < len(kept) and kept[at].role == "system":
                at += 1
        kept.insert(at, summary)
    explicit: dict[int, str] = dict(sel.notes)
    _note_bad(table, explicit)
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
    )


# ------------------------------------------------------------------------- strategies


class ChunkStrategy:
    """Base of the built-in strategies: decide over a ``ChunkTable``.

    Subclasses implement ``select(table, budget) -> Selection`` (pure logic), or
    ``plan(table, budget)``, a generator that may ``yield Call(...)`` for I/O and
    returns a ``Selection``. ``pack`` / ``pack_async`` (the ``Strategy`` protocol)
    chunk and count the messages afresh; a ``Packer`` reuses its table across calls.

    Patterns: a summarizing stage runs ``Recency().select(table, budget - reserve)``,
    yields one ``Call`` to its summarizer, and returns the selection with ``summary``,
    ``placement`` and ``default="summarized"``. A dedup stage marks duplicates, runs
    ``sel = yield from fallback.plan(table.subset(rest), budget)`` and records the
    duplicates' input indices in ``sel.notes`` (reason ``"duplicate"``). Per-chunk
    values worth keeping across calls go in ``table.memo(self)``.
    """

    name: str = "chunk"

    def select(self, table: ChunkTable, budget: int) -> Selection:
        raise NotImplementedError(f"{type(self).__name__} must implement select() or plan()")

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        """The decision as a generator (no I/O by default)."""
        return self.select(table, budget)
        yield  # pragma: no cover - makes this a generator

    def _table(
        self,
        messages: Sequence[Message],
        budget: int,
        tokenizer: str | Tokenizer,
        pinned_indices: Iterable[int],
        unanswered: str,
    ) -> ChunkTable:
        check_budget(budget)
        msgs = _as_messages(messages)
        n = len(msgs)
        pins = set()
        for i in pinned_indices:
            if isinstance(i, bool) or not isinstance(i, int):
                raise ConfigError(f"pinned_indices: {i!r} is not an index")
            j = i + n if i < 0 else i
            if 0 <= j < n:
                pins.add(j)
        return ChunkTable.build(
            msgs,
            tokenizer=get_tokenizer(tokenizer),
            pinned_indices=pins,
            unanswered=_check_unanswered(unanswered),
        )

    def pack(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: str | Tokenizer = "approx",
        pinned_indices: Iterable[int] = (),
        unanswered: str = "drop",
    ) -> PackResult:
        """Decide for ``messages`` (chunked and counted afresh)."""
        table = self._table(messages, budget, tokenizer, pinned_indices, unanswered)
        return assemble(run_plan(self.plan(table, budget)), budget, self.name)

    async def pack_async(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: str | Tokenizer = "approx",
        pinned_indices: Iterable[int] = (),
        unanswered: str = "drop",
    ) -> PackResult:
        """``pack`` for event loops: I/O calls awaited, sync ones off the loop."""
        table = self._table(messages, budget, tokenizer, pinned_indices, unanswered)
        return assemble(await run_plan_async(self.plan(table, budget)), budget, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Window:
    """A pre-filter stage over chunks: keeps some free chunks, drops the rest.

    Subclasses implement ``apply(table) -> (keep, runs)``: ``keep`` is the sorted list
    of free positions kept, ``runs`` the ``(first, last)`` position pairs of maximal
    runs of dropped free chunks (no kept free chunk inside a run). Pinned chunks are
    never dropped by a window.
    """

    reason: str = "filtered"
    name: str = "window"

    def apply(self, table: ChunkTable) -> tuple[list[int], list[tuple[int, int]]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def runs_of(dropped: Iterable[int], free: bytearray) -> list[tuple[int, int]]:
    """Group sorted dropped free positions into runs not broken by a kept free chunk."""
    runs: list[tuple[int, int]] = []
    first = last = -1
    for p in dropped:
        if first >= 0:
            # a kept free chunk between last and p breaks the run
            if any(free[q] for q in range(last + 1, p)):
                runs.append((first, last))
                first = p
        else:
            first = p
        last = p
    if first >= 0:
        runs.append((first, last))
    return runs


Stage: TypeAlias = "Window | Strategy | ChunkStrategy | Callable[[list[Message]], list[Message]]"
"""What a stage list may hold: windows and plain functions, then one budget strategy."""


def _stage_name(stage: object) -> str:
    if isinstance(stage, Window | ChunkStrategy | Strategy):
        return str(stage.name)
    return str(getattr(stage, "__qualname__", None) or repr(stage))


class _Foreign(ChunkStrategy):
    """Runs a user ``Strategy`` on the sendable messages and enforces pairs and pins."""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy
        self.name = strategy.name

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        msgs = table.messages
        pin_set = set(table.pinned_positions())
        seq: list[Message] = []
        owner: list[int] = []
        for p in table.good_positions():
            for i in table.chunks[p].indices:
                seq.append(msgs[i])
                owner.append(p)
            for s in table.stubs.get(p, ()):
                seq.append(s)
                owner.append(p)
        pins = [k for k, p in enumerate(owner) if p in pin_set]
        kwargs = {"budget": budget, "tokenizer": table.tokenizer, "pinned_indices": pins}
        afn = getattr(self.strategy, "pack_async", None)
        result = yield Call(
            self.strategy.pack,
            (seq,),
            kwargs,
            async_fn=afn if callable(afn) else None,
            offload=False,
            what=f"strategy {self.name!r}",
        )
        if not isinstance(result, PackResult):
            raise ConvomemError(
                f"strategy {self.name!r}: pack() must return a PackResult, "
                f"not {type(result).__name__}"
            )
        where = _Positions(seq)
        summary = result.summary
        placement: Placement = "head"
        kept_count: dict[int, int] = {}
        last = -1
        for n, m in enumerate(result.kept):
            if summary is not None and m is summary:
                placement = "head" if n == 0 else "after_system"
                continue
            k = where.after(m, last)
            if k < 0:
                raise ConvomemError(
                    f"strategy {self.name!r}: kept {m!r}, which is not one of the messages "
                    "it was given, or is out of order; keep the original objects in order"
                )
            last = k
            kept_count[owner[k]] = kept_count.get(owner[k], 0) + 1
        reason_of = {d.index: d.reason for d in result.decisions}
        first: dict[int, int] = {}
        size: dict[int, int] = {}
        for k, p in enumerate(owner):
            first.setdefault(p, k)
            size[p] = size.get(p, 0) + 1
        sel = Selection(table, summary=summary, placement=placement)
        for p in first:
            if p in pin_set:
                continue
            reason = reason_of.get(first[p], "budget")
            if kept_count.get(p, 0) == size[p]:
                sel.kept[p] = reason
            elif reason != "budget":
                sel.dropped[p] = reason
        return sel


class Pipeline(ChunkStrategy):
    """Stages run in order: windows and plain functions filter, the last stage packs.

    ``Packer(strategy=[MaxTurns(20), my_filter, Recency()])`` builds one. A function
    stage receives the messages still in play and must return a subsequence of them
    (the same objects, in order); messages it removes get reason ``"filtered"``.
    Pinned messages survive every stage.
    """

    def __init__(self, *stages: object) -> None:
        if len(stages) == 1 and isinstance(stages[0], list | tuple):
            stages = tuple(stages[0])
        if not stages:
            raise ConfigError("strategy=[]: give at least one stage, ending in a budget strategy")
        *pre, last = stages
        for s in pre:
            if isinstance(s, ChunkStrategy | Strategy):
                raise ConfigError(
                    f"strategy: stage {s!r} is a budget strategy; only the last stage may "
                    "enforce the budget (earlier stages are windows or functions)"
                )
            if not isinstance(s, Window) and not callable(s):
                raise ConfigError(
                    f"strategy: stage {s!r} is not a window, a function or a strategy"
                )
        self.stages: tuple[object, ...] = tuple(stages)
        self._pre: tuple[object, ...] = tuple(pre)
        self._last: ChunkStrategy = as_strategy(last)
        self.name = " -> ".join(_stage_name(s) for s in stages)

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        notes: dict[int, str] = {}
        ranges: list[tuple[int, int, str]] = []
        t = table
        for stage in self._pre:
            if isinstance(stage, Window):
                keep, runs = stage.apply(t)
                if not runs:
                    continue
                _note_bad(t, notes)
                chunks = t.chunks
                for a, b in runs:
                    ranges.append((chunks[a].start, chunks[b].stop, stage.reason))
                t = t.subset(sorted(chain(t.pinned_positions(), keep)))
            else:
                t = _run_filter(stage, t, notes)
        sel = yield from self._last.plan(t, budget)
        for i, r in sel.notes.items():
            notes.setdefault(i, r)
        sel.notes = notes
        sel.ranges = ranges + sel.ranges
        return sel

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(map(repr, self.stages))})"


def _run_filter(fn: object, t: ChunkTable, notes: dict[int, str]) -> ChunkTable:
    assert callable(fn)
    name = _stage_name(fn)
    _note_bad(t, notes)
    msgs = t.messages
    pinned_idx: set[int] = set()
    for p in t.pinned_positions():
        pinned_idx.update(t.chunks[p].indices)
    idx = [i for p in t.good_positions() for i in t.chunks[p].indices]
    given = [msgs[i] for i in idx]
    out = fn(list(given))
    if isinstance(out, str | bytes) or not isinstance(out, Iterable):
        raise ConvomemError(
            f"stage {name}: must return a list of messages (a subsequence of its input), "
            f"not {type(out).__name__}"
        )
    where = _Positions(given)
    chosen: set[int] = set()
    last = -1
    for j, m in enumerate(out):
        k = where.after(m, last)
        if k < 0:
            raise ConvomemError(
                f"stage {name}: must return a subsequence of its input (the same Message "
                f"objects, in order); item {j} ({m!r}) is not"
            )
        last = k
        chosen.add(idx[k])
    keep = chosen | pinned_idx
    for i in idx:
        if i not in keep:
            notes.setdefault(i, "filtered")
    return ChunkTable.build(
        msgs,
        tokenizer=t.tokenizer,
        pinned_indices=pinned_idx,
        unanswered=t.unanswered,
        stubber=t.stubber,
        include=[i for i in idx if i in keep],
    )


def as_strategy(strategy: object) -> ChunkStrategy:
    """Normalize a strategy option: a strategy, a stage list, or a user ``Strategy``."""
    if isinstance(strategy, list | tuple):
        return Pipeline(*strategy)
    if isinstance(strategy, Window):
        raise ConfigError(
            f"strategy={strategy!r}: a window only filters; end a stage list with a budget "
            f"strategy, e.g. strategy=[{strategy!r}, Recency()]"
        )
    if isinstance(strategy, ChunkStrategy):
        return strategy
    if isinstance(strategy, Strategy):
        return _Foreign(strategy)
    if callable(strategy):
        raise ConfigError(
            f"strategy={strategy!r}: a plain function only filters; end a stage list with a "
            "budget strategy, e.g. strategy=[my_filter, Recency()]"
        )
    raise ConfigError(
        f"strategy={strategy!r}: expected a strategy (name + pack()), or a list of stages "
        "ending in one"
    )
