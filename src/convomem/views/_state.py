"""The state of a chunk log: units, totals, pins that move, the current turn; reading.

``views.log.ChunkLog`` adds and drops; this base holds what both need, the moving pins
(``"last_user"``, negative positions), which re-pin and release chunks as messages
arrive, and the current turn (``model.current_turn``): the unit holding the newest
message that starts a turn (``_turn``) and the open exchange: the tool exchanges that
started after the turn of the newest call (``_episode``), while they await a result or
are the newest unit (``_exchange``, the newest exchange). None of them is ever dropped
or evicted while it is current. ``views._snapshot`` writes this state as JSON data.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Final, TypeAlias

from ..model import Chunk, ChunkBuilder, Message, PinPolicy, starts_turn
from ..tokens import BaseTokenizer, Tokenizer

_Plain: TypeAlias = tuple[Message, int]
Unit: TypeAlias = "_Plain | Chunk"
"""A unit of a chunk log: a bare ``(message, tokens)`` pair or a ``Chunk``."""

_BASE_COUNT: Final = BaseTokenizer.count_message
_NEVER: Final = 1 << 62  # the limit of a log that never drops by itself


def _start(unit: Unit) -> int:
    return unit.start if isinstance(unit, Chunk) else -1


def unit_messages(unit: Unit) -> list[Message]:
    """The messages of a unit, oldest first."""
    return unit.messages if isinstance(unit, Chunk) else [unit[0]]


def turns_in(messages: Iterable[Message]) -> int:
    """Turn starts among ``messages``."""
    return sum(1 for m in messages if starts_turn(m))


class LogState:
    """Units of a conversation, oldest first, with running totals and pins (the state of a
    ``ChunkLog``; see there).

    ``add`` appends a message; when ``limit`` is set and the total passes it, the oldest
    droppable units are dropped down to ``target`` (or ``limit``) and their ids returned.
    With ``limit=None`` the log never drops by itself: the owner plans evictions with
    ``evictable()`` and commits them with ``evict()``. Not thread-safe.
    """

    __slots__ = (
        "_builder",
        "_check_pins",
        "_dq",
        "_dyn",
        "_episode",
        "_exchange",
        "_held",
        "_ids",
        "_keep_pairs",
        "_keep_turn",
        "_last_user",
        "_lim",
        "_limit",
        "_loose",
        "_n",
        "_pinned",
        "_pins",
        "_plain_ok",
        "_result_limit",
        "_seen_user",
        "_target",
        "_tokenizer",
        "_total",
        "_track",
        "_trust_given",
        "_turn",
        "_turn_at",
        "_turns",
    )

    def __init__(
        self,
        tokenizer: Tokenizer,
        pins: PinPolicy,
        *,
        keep_tool_pairs: bool = True,
        limit: int | None = None,
        target: int | None = None,
        result_limit: int | None = None,
        keep_turn: bool = True,
    ) -> None:
        self._limit = _NEVER if limit is None else limit
        self._keep_turn = keep_turn
        self._result_limit = result_limit
        self._target = target
        self._lim = self._limit if target is None else target
        self._tokenizer = tokenizer
        # Inlining count_message's first branch (a given count is trusted) saves a call
        # per message; a subclass that overrides count_message is always called.
        self._trust_given = (
            isinstance(tokenizer, BaseTokenizer) and type(tokenizer).count_message is _BASE_COUNT
        )
        self._keep_pairs = keep_tool_pairs
        self._builder: ChunkBuilder | None = ChunkBuilder() if keep_tool_pairs else None
        self._pins = pins
        # Whether some spec might pin a plain message (priority 2 is checked apart).
        self._check_pins = bool(pins.system or pins.first_user or pins.last_user or pins.indices)
        self._dq: deque[Unit] = deque()  # kept units not in _held, oldest first
        self._held: dict[int, Chunk] = {}  # pinned chunks that reached the oldest end
        self._loose: list[int] = []  # heap of starts of released chunks in _held
        self._dyn: dict[Chunk, int] = {}  # chunk -> how many moving pins hold it
        self._track: dict[int, Chunk] = {}  # position -> chunk, for moving pins
        self._ids: set[str] = set()
        self._total = 0
        self._pinned = 0
        self._turns = 0
        self._n = 0  # messages added so far (the next message's position)
        self._seen_user = False
        self._last_user = -1  # position of the newest user message
        self._turn: Unit | None = None  # the unit holding the newest turn start
        self._turn_at = -1  # the position of that message
        self._exchange: Chunk | None = None  # the newest tool exchange
        # The turn start before the newest call: exchanges after it that await a result
        # are open (never, without keep_turn: a plain window).
        self._episode = -1 if keep_turn else _NEVER
        # Plain unpinned messages may be stored as bare pairs: no negative pin can reach
        # them later and no open tool call can pull them into an exchange.
        self._plain_ok = not pins.negative

    # -- reading -----------------------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer that counts the messages."""
        return self._tokenizer

    @property
    def pins(self) -> PinPolicy:
        """The pin policy."""
        return self._pins

    def total(self) -> int:
        """Tokens held (pinned messages included)."""
        return self._total

    @property
    def pinned_tokens(self) -> int:
        """Tokens of the chunks a static pin holds."""
        return self._pinned

    @property
    def turns(self) -> int:
        """Turn starts in the units no static pin holds."""
        return self._turns

    @property
    def position(self) -> int:
        """How many messages were added (the next message's position)."""
        return self._n

    def units(self) -> Iterator[Unit]:
        """Every unit, oldest first."""
        yield from self._held.values()
        yield from self._dq

    def units_newest_first(self) -> Iterator[Unit]:
        """Every unit, newest first."""
        yield from reversed(self._dq)
        yield from reversed(self._held.values())

    def kept(self) -> list[Message]:
        """The messages held, oldest first."""
        out: list[Message] = []
        for c in self._held.values():
            out.extend(c.messages)
        for e in self._dq:
            if type(e) is tuple:
                out.append(e[0])
            else:
                out.extend(e.messages)  # type: ignore[union-attr]
        return out

    def messages(self) -> list[str]:
        """The ids of the messages held, oldest first."""
        return [m.id for m in self.kept()]

    def protected(self, unit: Unit) -> bool:
        """Whether a pin (static or moving) holds ``unit`` now."""
        return isinstance(unit, Chunk) and (unit.pinned or unit in self._dyn)

    @property
    def result_limit(self) -> int | None:
        """Tokens a tool result may take in this log (None: any): a result over it is
        held as a reduced copy (``model.reduce_results``)."""
        return self._result_limit

    @property
    def turn_position(self) -> int:
        """The position of the newest message that starts a turn (-1: none yet)."""
        return self._turn_at

    def in_turn(self, unit: Unit) -> bool:
        """Whether ``unit`` is part of the current turn: it holds the newest message that
        starts a turn, or it is of the open exchange (an exchange started after the turn
        of the newest call, while a call in it awaits its result or it is the newest
        unit)."""
        if unit is self._turn:
            return True
        if type(unit) is tuple:
            return False
        chunk: Chunk = unit  # type: ignore[assignment]
        if chunk.start <= self._episode:
            return False
        return bool(chunk.pending) or (chunk is self._exchange and chunk is self._newest())

    def _newest(self) -> Unit | None:
        """The newest unit (the deque's, or the newest set aside when it is empty)."""
        if self._dq:
            return self._dq[-1]
        held = self._held
        return held[next(reversed(held))] if held else None

    def keeps(self, unit: Unit) -> bool:
        """Whether ``unit`` may not leave the log now: a pin holds it or it is part of the
        current turn."""
        return self.protected(unit) or self.in_turn(unit)

    def turn_units(self) -> list[Unit]:
        """The units of the current turn, oldest first."""
        out: list[Unit] = [] if self._turn is None else [self._turn]
        x = self._exchange
        if x is not None and x is not self._turn and self.in_turn(x):
            out.append(x)
        builder = self._builder
        if builder is not None:
            for c in {id(c): c for _, c in builder.open_calls()}.values():
                if all(c is not u for u in out) and self.in_turn(c):
                    out.append(c)
        return sorted(out, key=_start)

    def pinned_now(self, message_index: int) -> bool:
        """Whether a moving pin holds the message at ``message_index`` now."""
        chunk = self._track.get(message_index)
        return chunk is not None and chunk in self._dyn

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    # -- adding ------------------------------------------------------------------------

    def _new_turn(self, unit: Unit, index: int) -> None:
        """``unit`` holds the newest turn start (at ``index``); the previous turn's unit is
        released: one the log set aside (``_held``) goes on the heap drops drain first."""
        self._turn_at = index
        if not self._keep_turn:
            return  # no current turn to keep: a plain window
        old = self._turn
        self._turn = unit
        if old is None or old is unit or type(old) is tuple:
            return
        chunk: Chunk = old  # type: ignore[assignment]
        if not chunk.pinned and chunk not in self._dyn and self._held.get(chunk.start) is chunk:
            heapq.heappush(self._loose, chunk.start)

    def _new_exchange(self, chunk: Chunk, calls: bool) -> None:
        """``chunk`` is the newest tool exchange; ``calls``: the message just added to it
        calls a tool. A call after a newer turn start begins an episode there: exchanges
        before it that still await a result are released (those set aside go on the heap
        drops drain first)."""
        if not self._keep_turn:
            return
        self._exchange = chunk
        if not calls or self._turn_at <= self._episode:
            return
        old, self._episode = self._episode, self._turn_at
        loose, dyn, turn = self._loose, self._dyn, self._turn
        for c in self._held.values():
            fresh = c.pending and old < c.start <= self._episode
            if fresh and not c.pinned and c not in dyn and c is not turn:
                heapq.heappush(loose, c.start)

    def _acct(self, chunk: Chunk, sign: int) -> None:
        if chunk.pinned:
            self._pinned += sign * chunk.tokens
        else:
            self._turns += sign * turns_in(chunk.messages)

    def _chunks_from(self, target: Chunk) -> list[Chunk]:
        """``target`` and every newer chunk of the builder (they merge into it)."""
        assert self._builder is not None
        out: list[Chunk] = []
        for c in reversed(self._builder.chunks):
            out.append(c)
            if c is target:
                break
        return out

    def _move_pins(self, message: Message, index: int, chunk: Chunk | None) -> None:
        """Apply the moving pins ("last_user", negative positions) for a new message."""
        pins = self._pins
        if not pins.moving:
            return
        track = self._track
        if chunk is not None:
            track[index] = chunk
        n = index + 1
        negative = pins.negative
        for k in negative:  # -k pins position n - k and releases n - 1 - k
            self._pin_at(n - k)
        old_user = self._last_user
        if message.role == "user":
            self._last_user = index
            if pins.last_user:
                self._pin_at(index)
                if old_user >= 0:
                    self._release_at(old_user)
        for k in negative:
            self._release_at(n - 1 - k)
        # Forget positions no moving pin can reach again.
        reach = negative[-1] if negative else 0
        gone = n - 1 - reach
        if gone >= 0 and gone != self._last_user:
            track.pop(gone, None)
        if old_user != self._last_user and 0 <= old_user < n - reach:
            track.pop(old_user, None)

    def _pin_at(self, index: int) -> None:
        chunk = self._track.get(index)
        if chunk is not None:
            self._dyn[chunk] = self._dyn.get(chunk, 0) + 1

    def _release_at(self, index: int) -> None:
        chunk = self._track.get(index)
        if chunk is None:
            return
        left = self._dyn[chunk] - 1
        if left:
            self._dyn[chunk] = left
            return
        del self._dyn[chunk]
        if not chunk.pinned and self._held.get(chunk.start) is chunk:
            heapq.heappush(self._loose, chunk.start)

    def _retarget(self, chunk: Chunk) -> None:
        """After newer chunks merged into ``chunk``, point moving-pin records at it."""
        start = chunk.start
        track = self._track
        for i, c in track.items():
            if c.start > start:
                track[i] = chunk
        dyn = self._dyn
        for c in [c for c in dyn if c.start > start]:
            dyn[chunk] = dyn.get(chunk, 0) + dyn.pop(c)

    def _unhold(self, target: Chunk) -> None:
        """Put ``target`` and every newer held chunk back at the deque's oldest end.

        A result answering a call in a held chunk merges everything from that call on,
        so those chunks must be where ``ChunkBuilder`` merges: in its deque.
        """
        assert self._builder is not None
        held = self._held
        moved: list[Chunk] = []
        while True:
            _, c = held.popitem()  # held is ordered by position: newest last
            moved.append(c)
            if c is target:
                break
        self._dq.extendleft(moved)
        self._builder.chunks.extendleft(moved)

    # -- dropping ----------------------------------------------------------------------
