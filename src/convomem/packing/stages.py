"""Stages: the base of the built-in strategies, windows, pipelines and user strategies."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import TypeAlias

from .._io import Call
from ..errors import ConfigError, ConvomemError
from ..model import Message
from ..tokens import Tokenizer, get_tokenizer
from .classify import check_unanswered
from .plan import (
    PlanGen,
    Selection,
    Strategy,
    _note_bad,
    assemble,
    run_plan,
    run_plan_async,
)
from .result import PackResult, _Positions, check_budget
from .table import ChunkTable, Placement, _as_messages


class ChunkStrategy:
    """Base of the built-in strategies: decide over a ``ChunkTable``.

    Subclasses implement ``select(table, budget) -> Selection`` (pure logic), or
    ``plan(table, budget)``, a generator that may ``yield Call(...)`` for I/O and
    returns a ``Selection``. ``pack`` / ``pack_async`` (the ``Strategy`` protocol)
    chunk and count the messages afresh (the current turn pinned, as a ``Packer`` pins
    it; no tool result is reduced); a ``Packer`` reuses its table across calls.

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
            unanswered=check_unanswered(unanswered),
            turn=True,
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
        pin_set = set(table.pinned_positions())
        seq: list[Message] = []
        owner: list[int] = []
        for p in table.good_positions():
            for m in table.sent_at(p):
                seq.append(m)
                owner.append(p)
            for s in table.stubs.get(p, ()):
                seq.append(s)
                owner.append(p)
        pins = [k for k, p in enumerate(owner) if p in pin_set]
        kwargs = {"budget": budget, "tokenizer": table.tokenizer, "pinned_indices": pins}
        afn = getattr(self.strategy, "pack_async", None)
        result = yield Call(self.strategy.pack, (seq,), kwargs, afn if callable(afn) else None)
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
        lost: dict[int, str] = {}
        ranges: list[tuple[int, int, str]] = []
        t = table
        for stage in self._pre:
            if isinstance(stage, Window):
                keep, runs = stage.apply(t)
                if not runs:
                    continue
                _note_bad(t, notes, lost)
                chunks = t.chunks
                for a, b in runs:
                    ranges.append((chunks[a].start, chunks[b].stop, stage.reason))
                t = t.subset(sorted(chain(t.pinned_positions(), keep)))
            else:
                t = _run_filter(stage, t, notes, lost)
        sel = yield from self._last.plan(t, budget)
        for i, r in sel.notes.items():
            notes.setdefault(i, r)
        sel.notes = notes
        for i, r in sel.lost.items():
            lost.setdefault(i, r)
        sel.lost = lost
        sel.ranges = ranges + sel.ranges
        return sel

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(map(repr, self.stages))})"


def _run_filter(
    fn: object, t: ChunkTable, notes: dict[int, str], lost: dict[int, str]
) -> ChunkTable:
    assert callable(fn)
    name = _stage_name(fn)
    _note_bad(t, notes, lost)
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
        counts=t.counts,
        reduced=t.reduced,
        turn_only=t.turn_only,
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
