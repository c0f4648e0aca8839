"""The chunk log: the one incremental engine behind every view of a conversation.

``ChunkLog`` keeps the messages of a view as *units*, oldest first, with running totals,
and answers in amortized O(1) per message. ``History`` is a chunk log that drops its
oldest units past a limit; ``ConversationMemory`` is one whose compaction plans its
victims first (they are summarized before they leave) and commits them after.

Units: a message that neither calls a tool, nor answers one, nor is pinned (nor has
priority 1, which a session may compress in place) is stored as a bare
``(message, tokens)`` pair — the fast path. Everything else lives in a ``Chunk`` built
by ``model.ChunkBuilder`` (a tool call and its results are one unit). Pins come from the
shared ``model.PinPolicy``. A pinned chunk that reaches the oldest end while the log
drops units moves to a side table (``_held``), so later drops never walk over it again.
Moving pins (``"last_user"``, negative positions) release a message as newer ones
arrive; a released chunk in the side table goes on a small heap (``_loose``) that drops
drain first, because it is older than everything in the deque.

Running totals: ``total`` (every kept token), ``pinned_tokens`` (tokens of chunks pinned
by a static pin: what a session reserves), and ``turns`` (turn starts, per
``model.starts_turn``, in units that are not statically pinned).

The current turn (``model.current_turn``: the unit holding the newest message that
starts a turn, and the open exchange: the newest tool exchange while it is the newest
unit or awaits a result) is never dropped: a drop sets it aside like a pinned chunk (or
stops at it, when it is the newest unit), so a turn bigger than the limit stays (over
the limit) while everything else goes. A tool result
over ``result_limit`` tokens is held as a reduced copy (``model.reduce_results``: head and
tail, same id); whoever keeps the log keeps the original.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from ..errors import ConvomemError, InvalidMessage, NotAMessage
from ..model import Chunk, Message, opens_exchange, reduce_results, starts_turn
from ..tokens import checked_count
from ._snapshot import LogSnapshot
from ._state import Unit, turns_in, unit_messages

__all__ = ["ChunkLog", "Unit", "turns_in", "unit_messages"]


def _has_tool_blocks(m: Message) -> bool:
    return type(m.content) is not str and (m.has_tool_use() or m.has_tool_result())


class ChunkLog(LogSnapshot):
    """Units of a conversation, oldest first, with running totals and pins.

    ``add`` appends a message; when ``limit`` is set and the total passes it, the oldest
    droppable units are dropped down to ``target`` (or ``limit``) and their ids returned.
    With ``limit=None`` the log never drops by itself: the owner plans evictions with
    ``evictable()`` and commits them with ``evict()``. Not thread-safe.
    """

    __slots__ = ()

    def count(self, message: Message) -> int:
        """``message``'s tokens (a given count is trusted); TokenizerError if not an int."""
        return checked_count(self._tokenizer, message)

    def add(self, message: Message, tokens: int | None = None) -> list[str]:
        """Append ``message``, drop past the limit; return the dropped ids, oldest first.

        ``tokens`` is the message's count if the caller has it. Raises ``NotAMessage``,
        ``InvalidMessage`` for an id already held, or the tokenizer's error; a failed add
        changes nothing. An orphan result (its call not held) is dropped on arrival: its
        id comes back in the dropped list.
        """
        if type(message) is not Message and not isinstance(message, Message):
            raise NotAMessage(
                "message", message, f"must be a Message, not {type(message).__name__}"
            )
        mid = message.id
        ids = self._ids
        if mid in ids:
            raise InvalidMessage("id", mid, "is already in the window")
        t = tokens
        if t is None:
            t = message.tokens
            if t is None or not self._trust_given:
                t = self.count(message)
        if not (
            self._plain_ok
            and type(message.content) is str
            and message.priority == 0
            and (not self._check_pins or not self._pins_plain(message))
        ):
            return self._add_slow(message, t)
        # Fast path: a plain message (no tools, no pins) becomes a bare (message, tokens) pair.
        index = self._n
        self._n = index + 1
        pair = (message, t)
        if message.role == "user":
            self._turns += 1
            self._seen_user = True
            self._new_turn(pair, index)
        ids.add(mid)
        dq = self._dq
        dq.append(pair)
        total = self._total + t
        if total <= self._limit:
            self._total = total
            return []
        # Drop the oldest pairs inline; chunks, pins, the turn and released pins go to
        # _drop_to.
        turn = self._turn
        e = dq.popleft()  # never empty: the new message is in it
        if type(e) is not tuple or self._loose or e is turn:
            dq.appendleft(e)
            dropped: list[str] = []
            self._total = self._drop_to(total, dropped)
            return dropped
        old = e[0]
        total -= e[1]
        ids.discard(old.id)
        if old.role == "user":
            self._turns -= 1
        dropped = [old.id]
        lim = self._lim
        while total > lim and dq:
            e = dq.popleft()
            if type(e) is not tuple or e is turn:
                dq.appendleft(e)
                total = self._drop_to(total, dropped)
                break
            old = e[0]
            total -= e[1]
            ids.discard(old.id)
            if old.role == "user":
                self._turns -= 1
            dropped.append(old.id)
        self._total = total
        return dropped

    def _pins_plain(self, m: Message) -> bool:
        """Whether a spec pins ``m``, a next message with text content and priority 0."""
        pins = self._pins
        role = m.role
        return (
            self._n in pins.indices
            or (role == "system" and pins.system)
            or (role == "user" and (pins.last_user or (pins.first_user and not self._seen_user)))
        )

    def _reduced(self, message: Message, t: int) -> tuple[Message, int]:
        """``message`` and its count, or its reduced copy and the copy's count when a tool
        result is over ``result_limit`` (a copy the tokenizer cannot count is not used)."""
        limit = self._result_limit
        if (
            limit is None
            or t <= limit
            or message.priority == 2
            or type(message.content) is str
            or not message.has_tool_result()
        ):
            return message, t
        try:
            copy = reduce_results(message, limit, self._tokenizer.count, t)
            return (message, t) if copy is message else (copy, self.count(copy))
        except ConvomemError:
            return message, t

    def _add_slow(self, message: Message, t: int) -> list[str]:
        """The general add: tool exchanges, pins, moving pins (``t`` already counted)."""
        message, t = self._reduced(message, t)
        index = self._n
        builder = self._builder
        pins = self._pins
        static = pins.static(message, index, self._seen_user)
        plain = (
            not static
            and message.priority == 0
            and not (pins.last_user and message.role == "user")
            and not _has_tool_blocks(message)
        )

        target: Chunk | None = None
        orphan = False
        if builder is not None and not plain:
            if message.has_tool_result():
                target = builder.joins(message)
                orphan = target is None
            else:  # nothing but repeats of open calls: an orphan too
                orphan = builder.repeats(message)

        # From here on nothing can fail: mutate.
        self._n = index + 1
        if message.role == "user":
            self._seen_user = True
        dq = self._dq
        chunk: Chunk | None = None
        if not orphan:
            self._ids.add(message.id)
            self._total += t
            turn = starts_turn(message)
            if plain and self._plain_ok:
                pair = (message, t)
                dq.append(pair)
                self._turns += turn
                if turn:
                    self._new_turn(pair, index)
            elif builder is None:
                chunk = Chunk([message], [index], static, t, pinned_at=[index] if static else [])
                dq.append(chunk)
                self._acct(chunk, +1)
                if opens_exchange(message):
                    self._new_exchange(chunk, message.has_tool_use())
            else:
                if target is not None:
                    if self._held.get(target.start) is target:
                        self._unhold(target)
                    for c in self._chunks_from(target):
                        self._acct(c, -1)
                before = len(builder.chunks)
                chunk = builder.add(message, index, tokens=t, pinned=static)
                if chunk is target:
                    for _ in range(before - len(builder.chunks)):
                        dq.pop()  # the chunks merged into the target
                    if self._track:
                        self._retarget(chunk)
                    if self._keep_turn and self._turn_at >= chunk.start:  # the turn merged in
                        self._turn = chunk
                    self._new_exchange(chunk, chunk.messages[-1].has_tool_use())
                else:
                    dq.append(chunk)
                    if opens_exchange(chunk.messages[0]):
                        self._new_exchange(chunk, True)
                self._acct(chunk, +1)
            if turn and chunk is not None:
                self._new_turn(chunk, index)
        self._move_pins(message, index, chunk)
        dropped: list[str] = []
        if self._total > self._limit:
            self._total = self._drop_to(self._total, dropped)
        if orphan:
            dropped.append(message.id)
        if builder is not None and not pins.negative:
            self._plain_ok = not builder.has_open_calls()
        return dropped

    def _drop_to(self, total: int, dropped: list[str]) -> int:
        """Drop the oldest droppable units until the total is at most the cut; return it."""
        lim = self._lim
        dq = self._dq
        held = self._held
        loose = self._loose
        dyn = self._dyn
        builder = self._builder
        ids = self._ids
        while total > lim:
            if loose:  # released held chunks are older than anything in the deque
                c = held.get(heapq.heappop(loose))
                if c is None or c.pinned or c in dyn or c is self._turn:
                    continue  # stale: merged, re-pinned, the turn again, or already gone
                if c.pending and c.start > self._episode:
                    continue  # awaits a result in this episode (released by a newer one)
                if not dq and self.in_turn(c):  # the open exchange, the newest unit: it
                    heapq.heappush(loose, c.start)  # stays (dropped first once it is not)
                    break
                del held[c.start]
                total -= c.tokens
                self._drop(c, dropped)
                continue
            if not dq:
                break
            e = dq.popleft()
            if type(e) is tuple:
                old = e[0]
                if e is self._turn:  # set aside, as a chunk of its own, while it is current
                    c = Chunk([old], [self._turn_at], False, e[1])
                    held[c.start] = c
                    self._turn = c
                    continue
                total -= e[1]
                ids.discard(old.id)
                if old.role == "user":
                    self._turns -= 1
                dropped.append(old.id)
                continue
            chunk: Chunk = e  # type: ignore[assignment]
            if not dq and chunk is self._exchange and chunk.start > self._episode:
                dq.append(chunk)  # the open exchange, the newest unit: part of the turn
                break
            if builder is not None:
                builder.chunks.popleft()  # mirrors the Chunk entries of the deque
            if (
                chunk.pinned
                or chunk in dyn
                or chunk is self._turn
                or (chunk.pending and chunk.start > self._episode)
            ):
                held[chunk.start] = chunk
            else:
                total -= chunk.tokens
                self._drop(chunk, dropped)
        return total

    def _drop(self, chunk: Chunk, dropped: list[str]) -> None:
        self._acct(chunk, -1)
        if chunk is self._exchange:
            self._exchange = None
        ids = self._ids
        for m in chunk.messages:
            ids.discard(m.id)
            dropped.append(m.id)
        builder = self._builder
        if chunk.pending and builder is not None:
            builder.discard(chunk)
            if not self._pins.negative:
                self._plain_ok = not builder.has_open_calls()
        track = self._track
        if track:
            for i in chunk.indices:
                if track.get(i) is chunk:
                    del track[i]

    # -- planned eviction (a session summarizes before it drops) -----------------------

    def evictable(self) -> Iterator[Unit]:
        """Units no pin holds and not of the current turn, in the order they would be
        dropped (oldest first).

        Reading only: the owner picks victims among them and commits with ``evict``.
        """
        held = self._held
        for start in sorted(set(self._loose)):
            c = held.get(start)
            if c is not None and not self.keeps(c):
                yield c
        for e in self._dq:
            if not self.keeps(e):
                yield e

    def evict(self, victims: Sequence[Unit]) -> list[str]:
        """Drop ``victims`` (units from ``evictable()``); return their ids, oldest first."""
        dropped: list[str] = []
        gone = {id(v) for v in victims}
        held = self._held
        for v in victims:
            if isinstance(v, Chunk) and held.get(v.start) is v:
                del held[v.start]
                self._total -= v.tokens
                self._drop(v, dropped)
                gone.discard(id(v))
        dq = self._dq
        builder = self._builder
        kept: list[Unit] = []
        while gone:
            e = dq.popleft()
            if isinstance(e, Chunk) and builder is not None:
                builder.chunks.popleft()
            if id(e) not in gone:
                kept.append(e)
                continue
            gone.discard(id(e))
            if isinstance(e, Chunk):
                self._total -= e.tokens
                self._drop(e, dropped)
            else:
                self._total -= e[1]
                self._ids.discard(e[0].id)
                self._turns -= starts_turn(e[0])
                dropped.append(e[0].id)
        dq.extendleft(reversed(kept))
        if builder is not None:
            builder.chunks.extendleft(reversed([e for e in kept if isinstance(e, Chunk)]))
        return dropped

    def replace(self, chunk: Chunk, messages: list[Message], tokens: int) -> None:
        """Put ``messages`` (same ids, e.g. compressed copies) in place of ``chunk``'s."""
        self._acct(chunk, -1)
        self._total += tokens - chunk.tokens
        chunk.messages[:] = messages
        chunk.tokens = tokens
        self._acct(chunk, +1)
