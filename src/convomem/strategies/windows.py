"""Windows: pre-filters that bound a conversation by turns, age or position.

A window drops whole chunks (a tool call never loses its results) and never drops a
pinned chunk. Use it in a stage list that ends with a budget strategy, e.g.
``Packer(budget=4000, strategy=[MaxTurns(20), Recency()])`` keeps at most the last 20
turns *and* at most 4,000 tokens.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .. import _check
from ..errors import ConfigError
from ..packing import ChunkTable, Window, runs_of


class MaxTurns(Window):
    """Keep the last ``n`` turns; a turn starts at a user message.

    A user message that only carries tool results does not start a turn; a chunk
    belongs to the turn of its first message. System messages and pinned chunks are
    kept whatever their age; messages before the first user message count as part of
    the oldest turn.
    """

    reason = "max_turns"
    name = "max_turns"

    def __init__(self, n: int) -> None:
        self.n = _check.positive_int("n", n)

    def apply(self, table: ChunkTable) -> tuple[list[int], list[tuple[int, int]]]:
        msgs = table.messages
        chunks = table.chunks
        free = table.free
        turns = 0
        cut = -1
        for p in range(len(chunks) - 1, -1, -1):
            first = msgs[chunks[p].indices[0]]
            if first.role == "user" and not first.has_tool_result():
                turns += 1
                if turns == self.n:
                    cut = p
                    break
        if cut <= 0:
            return [p for p in range(len(chunks)) if free[p]], []
        # Before the cut only free chunks that start with a system message stay; the
        # dropped free chunks between them form the runs (O(system chunks), not O(n)).
        keep = [p for p in table.system_positions() if p < cut and free[p]]
        runs: list[tuple[int, int]] = []
        lo = -1
        for hi in [*keep, cut]:
            start = table.next_free(lo + 1)
            if 0 <= start < hi:
                runs.append((start, table.prev_free(hi)))
            lo = hi
        keep.extend(p for p in range(cut, len(chunks)) if free[p])
        return keep, runs

    def __repr__(self) -> str:
        return f"MaxTurns({self.n})"


class MaxAge(Window):
    """Drop chunks older than ``seconds``, by ``Message.created_at``.

    A chunk is too old when every timestamped message in it is older than
    ``now - seconds``; messages without ``created_at`` are kept (their age is unknown).
    ``now`` is a function returning epoch seconds (default ``time.time``).
    """

    reason = "max_age"
    name = "max_age"

    def __init__(self, seconds: float, now: Callable[[], float] | None = None) -> None:
        self.seconds = _check.number("seconds", seconds, minimum=0.0, low_open=True)
        self.now: Callable[[], float] = (
            time.time if now is None else _check.function("now", now, "returning epoch seconds")
        )

    def _cutoff(self) -> float:
        now = self.now()
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            raise ConfigError(f"now: returned {now!r}; it must return epoch seconds (a number)")
        return float(now) - self.seconds

    def apply(self, table: ChunkTable) -> tuple[list[int], list[tuple[int, int]]]:
        cutoff = self._cutoff()
        msgs = table.messages
        chunks = table.chunks
        free = table.free
        keep: list[int] = []
        dropped: list[int] = []
        for p in range(len(chunks)):
            if not free[p]:
                continue
            newest = None
            for i in chunks[p].indices:
                ts = msgs[i].created_at
                if ts is not None and (newest is None or ts > newest):
                    newest = ts
            if newest is not None and newest < cutoff:
                dropped.append(p)
            else:
                keep.append(p)
        return keep, runs_of(dropped, free)

    def __repr__(self) -> str:
        return f"MaxAge({self.seconds:g})"


class HeadTail(Window):
    """Keep the first ``head`` and the last ``tail`` free chunks; drop the middle.

    The head keeps how a conversation started (the task), the tail where it is now.
    Pinned chunks are kept wherever they are and do not count, but for the current
    turn's (the newest chunks, kept before anything else): the tail counts them.
    """

    reason = "head_tail"
    name = "head_tail"

    def __init__(self, head: int, tail: int) -> None:
        self.head = _check.non_negative_int("head", head)
        self.tail = _check.non_negative_int("tail", tail)
        if head + tail == 0:
            raise ConfigError("head=0, tail=0: keep at least one chunk (head + tail >= 1)")

    def apply(self, table: ChunkTable) -> tuple[list[int], list[tuple[int, int]]]:
        n = len(table)
        heads: list[int] = []
        q = 0
        while len(heads) < self.head:
            q = table.next_free(q)
            if q < 0:
                break
            heads.append(q)
            q += 1
        floor = heads[-1] if heads else -1
        tails: list[int] = []
        turn = [p for p in table.turn_positions() if p > floor]
        q = n
        counted = 0
        while counted < self.tail:
            q = table.prev_free(q)
            while turn and turn[-1] > q and counted < self.tail:
                turn.pop()  # the current turn's chunk: kept anyway, and it counts
                counted += 1
            if q <= floor or counted >= self.tail:
                break
            tails.append(q)
            counted += 1
        tails.reverse()
        first = table.next_free(floor + 1)
        last = table.prev_free(tails[0] if tails else n)
        if first < 0 or last < first:
            return heads + tails, []
        return heads + tails, [(first, last)]

    def __repr__(self) -> str:
        return f"HeadTail({self.head}, {self.tail})"
