"""A chunk log's state as plain JSON data and back (what a session stores of its view).

``LogSnapshot`` adds ``snapshot`` and ``restore`` to ``LogState``: every unit with its
positions, pins, token counts and open calls, the moving pins' records, the running
totals and the current turn, so a restored log answers exactly as the one that was
snapshotted. ``views.log.ChunkLog`` is a ``LogSnapshot``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..model import Chunk, Message
from ._state import LogState, Unit


class LogSnapshot(LogState):
    """A ``LogState`` that can be written as plain JSON data and read back."""

    __slots__ = ()

    def snapshot(self, ref: Callable[[Message, bool], str]) -> dict[str, Any]:
        """The log as plain JSON data. ``ref(message, protected)`` names each message
        (the caller keeps what it cannot find again by that name); ``restore`` undoes it.
        ``ValueError`` when a pin or an open call refers to a chunk no longer held (a
        shape this snapshot cannot express)."""
        chunk_no: dict[int, int] = {}
        units: list[list[Any]] = []
        held = set(map(id, self._held.values()))
        turn = exchange = -1
        for u in self.units():
            if u is self._turn:
                turn = len(units)
            if u is self._exchange:
                exchange = len(units)
            if isinstance(u, Chunk):
                chunk_no[id(u)] = len(chunk_no)
                pin = self.protected(u)
                units.append(
                    [
                        "c",
                        [ref(m, pin) for m in u.messages],
                        list(u.indices),
                        u.pinned,
                        u.tokens,
                        sorted(u.pending),
                        u.orphan,
                        list(u.pinned_at),
                        id(u) in held,
                    ]
                )
            else:
                units.append(["p", ref(u[0], False), u[1]])

        def no(c: Chunk) -> int:
            k = chunk_no.get(id(c))
            if k is None:
                raise ValueError("a pin or an open call refers to a chunk not in the log")
            return k

        builder = self._builder
        return {
            "n": self._n,
            "seen_user": self._seen_user,
            "last_user": self._last_user,
            "plain_ok": self._plain_ok,
            "totals": [self._total, self._pinned, self._turns],
            "units": units,
            "loose": list(self._loose),
            "dyn": [[no(c), n] for c, n in self._dyn.items()],
            "track": [[i, no(c)] for i, c in self._track.items()],
            "open": [] if builder is None else [[k, no(c)] for k, c in builder.open_calls()],
            "chunks": [] if builder is None else [no(c) for c in builder.chunks],
            "turn": [turn, self._turn_at, exchange, self._episode],
        }

    def restore(self, data: Mapping[str, Any], message: Callable[[str], Message]) -> None:
        """Put a ``snapshot`` in place of this log, which must be empty; ``message``
        resolves a name ``ref`` gave. Raises ``ValueError`` (``KeyError``, ``TypeError``,
        ``IndexError`` for malformed data) and then leaves the log as it was."""
        if self._ids or self._n:
            raise ValueError("restore needs an empty log")
        chunks: list[Chunk] = []
        held: dict[int, Chunk] = {}
        dq: deque[Unit] = deque()
        ids: set[str] = set()
        every: list[Unit] = []
        count = 0
        for u in data["units"]:
            if u[0] == "p":
                m = message(u[1])
                if type(u[2]) is not int:
                    raise ValueError("a token count is not an int")
                pair = (m, u[2])
                dq.append(pair)
                every.append(pair)
                ids.add(m.id)
                count += 1
                continue
            if u[0] != "c":
                raise ValueError(f"unknown unit {u[0]!r}")
            _, refs, indices, pinned, tokens, pending, orphan, pinned_at, is_held = u
            msgs = [message(r) for r in refs]
            if len(msgs) != len(indices) or not msgs:
                raise ValueError("a chunk's positions do not match its messages")
            c = Chunk(msgs, list(indices), bool(pinned), int(tokens), set(pending), bool(orphan))
            c.pinned_at = list(pinned_at)
            chunks.append(c)
            every.append(c)
            ids.update(m.id for m in msgs)
            count += len(msgs)
            if is_held:
                held[c.start] = c
            else:
                dq.append(c)
        if len(ids) != count:
            raise ValueError("a message id appears twice")
        builder = self._builder
        if builder is not None:
            builder.restore(
                [chunks[k] for k in data["chunks"]], {str(k): chunks[c] for k, c in data["open"]}
            )
        elif data["chunks"] or data["open"]:
            raise ValueError("open calls in a log that keeps no tool pairs")
        loose = [int(x) for x in data["loose"]]
        dyn = {chunks[k]: int(n) for k, n in data["dyn"]}
        track = {int(i): chunks[k] for i, k in data["track"]}
        total, pinned_tokens, turns = (int(x) for x in data["totals"])
        turn_no, turn_at, exchange_no, episode = (int(x) for x in data["turn"])
        turn = every[turn_no] if turn_no >= 0 else None
        exchange = every[exchange_no] if exchange_no >= 0 else None
        if exchange is not None and not isinstance(exchange, Chunk):
            raise ValueError("the open exchange is not a chunk")
        self._turn, self._turn_at, self._exchange = turn, turn_at, exchange
        self._episode = episode
        self._dq, self._held, self._loose, self._dyn, self._track = dq, held, loose, dyn, track
        self._ids = ids
        self._total, self._pinned, self._turns = total, pinned_tokens, turns
        self._n = int(data["n"])
        self._seen_user = bool(data["seen_user"])
        self._last_user = int(data["last_user"])
        self._plain_ok = bool(data["plain_ok"])
