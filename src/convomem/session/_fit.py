"""How a session's view fits its budget when rendered: which parts a context leaves out.

A context is ``[leading system] [summary] [kept units]``. Within the limit everything is
sent; over it, the oldest parts no pin holds and not of the current turn are left out
(not evicted: the view keeps them), then the summary. What remains over the limit is
what may not be left out, sent anyway (the caller says ``fits`` is False).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..model import Chunk, Message
from ..views.log import ChunkLog, Unit
from ._turns import joined, needs_stand_in

Part: TypeAlias = tuple[Unit, list[Message], int]
"""A unit, the messages of it a context can send now, and their tokens."""


@dataclass(frozen=True, slots=True)
class Fit:
    """The fitting of one render: the log (what it keeps), the number of leading pinned
    system messages (``head``, sent before the summary) and the limit."""

    log: ChunkLog
    head: int
    limit: int

    def joined(
        self, parts: list[Part], full: int, summary: Message | None, s_tok: int, reserve: int
    ) -> tuple[list[Message], int, int, int]:
        """``within`` counting what an Anthropic request adds when it joins tool results
        to the user message before them (``_turns.joined``: a token each), so the
        request fits with them or sends only what may not be left out. Also returns that
        count. It depends on what is kept, so the room for it grows until it holds (at
        most once per message: it only grows)."""
        extra = 0
        while True:
            out, total, omitted = self.within(parts, full, summary, s_tok, reserve + extra)
            join = joined(out, reserve > 0 and needs_stand_in(out))
            if join <= extra or total + join <= self.limit - reserve:
                return out, total, omitted, join
            extra = join

    def within(
        self, parts: list[Part], full: int, summary: Message | None, s_tok: int, reserve: int
    ) -> tuple[list[Message], int, int]:
        """The view within ``limit - reserve`` if it can be: the oldest parts that may be
        left out, then the summary. Returns its messages, tokens and how many it omits."""
        limit = self.limit - reserve
        if full <= limit:
            return self._arrange(parts, summary), full, 0
        kept, total, omitted = self._omit(parts, full, limit)
        if total > limit and summary is not None:
            total -= s_tok
            summary = None
        return self._arrange(kept, summary), total, omitted

    def _omit(self, parts: list[Part], total: int, limit: int) -> tuple[list[Part], int, int]:
        """Leave out the oldest parts no pin holds and not of the current turn until
        ``total`` fits ``limit``, if it can."""
        log = self.log
        keep: list[Part] = []
        omitted = 0
        for p in parts:
            if total > limit and not log.keeps(p[0]):
                total -= p[2]
                omitted += len(p[1])
            else:
                keep.append(p)
        return keep, total, omitted

    def _arrange(self, parts: list[Part], summary: Message | None) -> list[Message]:
        """The parts in order, the summary after the leading pinned system messages."""
        out: list[Message] = []
        head = self.head
        for u, msgs, _ in parts:
            if summary is not None and not (isinstance(u, Chunk) and u.indices[-1] < head):
                out.append(summary)
                summary = None
            out.extend(msgs)
        if summary is not None:
            out.append(summary)
        return out
