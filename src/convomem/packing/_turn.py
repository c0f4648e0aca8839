"""The current turn in a ``ChunkTable``: which chunks it holds, and pinning them.

``model.current_turn`` is the one definition (the newest message that starts a turn,
and the open exchange); ``open_turn`` finds it among a table's chunks from what the
``ChunkBuilder`` saw, and ``pin_turn`` pins it for ``ChunkTable.build(turn=True)``, as a
``Packer`` does. ``packing.live`` keeps its own pins with ``open_turn`` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Chunk, ChunkBuilder
from .classify import OK, STUBBED

__all__ = ["open_turn", "pin_turn"]


def open_turn(
    builder: ChunkBuilder,
    last_turn: int,
    exchange: Chunk | None,
    episode: int,
    pos_of: Mapping[int, int] | Sequence[int],
    status: Sequence[int],
) -> list[int]:
    """Table positions of the current turn (``model.current_turn``) that can be sent: the
    chunk of the message at ``last_turn`` (the newest that starts a turn; -1: none) and
    the open exchange: the chunks starting after ``episode`` (the turn start before the
    newest call) that await a result, or are ``exchange`` (the newest builder chunk that
    is a tool exchange) while it is the newest chunk that is not an orphan. ``pos_of``
    maps an input index to its table position."""
    out = [] if last_turn < 0 else [pos_of[last_turn]]
    if exchange is None:
        return out
    chunks = [c for _, c in builder.open_calls() if c.start > episode]
    if not exchange.pending and exchange.start > episode:
        newest = next((c for c in reversed(builder.chunks) if not c.orphan), None)
        if newest is exchange:
            chunks.append(exchange)
    for c in chunks:
        p = pos_of[c.indices[0]]
        if (status[p] == OK or status[p] == STUBBED) and p not in out:
            out.append(p)
    return out


def pin_turn(
    builder: ChunkBuilder,
    last_turn: int,
    exchange: Chunk | None,
    episode: int,
    pos_of: Mapping[int, int],
    chunks: Sequence[Chunk],
    status: list[int],
    free: bytearray,
    cands: bytearray,
    pinned: list[int],
) -> frozenset[int]:
    """Pin the current turn (``open_turn``) in a table being built, in place: a free
    chunk stops being free, a tool-free candidate in an unsendable exchange is sent on
    its own (``OK``, pinned at its message); ``pinned`` is sorted again. Returns the
    first input indices of the chunks only the turn pins (``ChunkTable.turn_only``)."""
    held: list[int] = []
    for p in open_turn(builder, last_turn, exchange, episode, pos_of, status):
        c = chunks[p]
        if free[p]:
            free[p] = 0
        elif cands[p] and status[p] != OK:  # tool-free, in an unsendable exchange
            status[p] = OK
            c.pinned, c.pinned_at = True, [c.indices[0]]
        else:
            continue
        pinned.append(p)
        held.append(c.indices[0])
    pinned.sort()
    return frozenset(held)
