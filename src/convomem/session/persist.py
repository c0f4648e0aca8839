"""A session's derived state as plain JSON: the view engine's snapshot and back.

A durable session (``ConversationMemory`` over a ``SessionStore``) saves, with the
append that made each compaction, everything needed to rebuild its view without
replaying the log: the running summary (``RunningSummary.state()``: segments, facts
ledger, coverage), the seq range each segment covers, the compressed priority-1 texts,
and a snapshot of the ``SessionView`` (its chunk log's units, totals, pins that move,
open tool calls, the leading system prompt).

Messages are saved by reference where the log holds them as they are (the id; the
store's rows from ``cut`` on are read back on resume), and whole where it does not:
compressed stand-ins, copies stripped of stray tool results, and every message of a
pinned unit, which may be far older than the rest of the view. So a resume reads the
state and the log's rows from ``cut`` on: O(view), not O(log).

The snapshot walks the chunk log's internals (``views._state.LogState``); the two must
change together. Loading checks everything it reads and raises ``Stale`` (and changes
nothing the caller keeps) for a state it cannot use: the session then replays its log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Final

from ..errors import ConfigError
from ..model import Chunk, Message
from ..views.log import ChunkLog, Unit
from .view import SessionView

Stale = ConfigError
"""What a saved state this session cannot use raises (another version, another
configuration, a message it refers to that the log no longer holds): the session then
replays its log."""
FORMAT: Final = "convomem.session"
VERSION: Final = 1


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise Stale(f"state['view']: {what}")


def dump_view(
    view: SessionView, logged: Mapping[str, tuple[int, Message | None]]
) -> dict[str, Any]:
    """The snapshot of ``view``. ``logged`` maps ids to their seq and the log's own
    message object (None: not known); a message that is that object is saved by
    reference, any other whole. Raises ``Stale`` if the engine is in a shape it does not
    know (then no state is saved and a resume replays)."""
    log = view.log
    builder = log._builder
    whole: dict[str, dict[str, Any]] = {}
    refs: list[str] = []
    seqs: dict[str, list[Any]] = {}
    chunk_no: dict[int, int] = {}

    def ref(m: Message, keep_whole: bool) -> str:
        hit = logged.get(m.id)
        same = hit is not None and hit[1] is m
        if hit is not None:
            seqs[m.id] = [hit[0], same]
        if keep_whole or not same:
            whole[m.id] = m.to_dict()
        else:
            refs.append(m.id)
        return m.id

    units: list[list[Any]] = []
    held = set(map(id, log._held.values()))
    for u in log.units():
        if isinstance(u, Chunk):
            chunk_no[id(u)] = len(chunk_no)
            pin = log.protected(u)
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
        _need(k is not None, "a pin or an open call refers to a chunk not in the view")
        assert k is not None
        return k

    # Kept apart from ``whole``: a message may wait in the view as it is while its
    # compressed stand-in (made by a compaction that failed) waits here.
    comp = {k: m.to_dict() for k, m in view.compressions.items() if k in log}
    return {
        "n": log._n,
        "seen_user": log._seen_user,
        "last_user": log._last_user,
        "plain_ok": log._plain_ok,
        "totals": [log._total, log._pinned, log._turns],
        "head": [view.head, view.head_tokens],
        "units": units,
        "loose": list(log._loose),
        "dyn": [[no(c), n] for c, n in log._dyn.items()],
        "track": [[i, no(c)] for i, c in log._track.items()],
        "open": [] if builder is None else [[k, no(c)] for k, c in builder._open.items()],
        "chunks": [] if builder is None else [no(c) for c in builder.chunks],
        "to_fold": [ref(m, False) for m in view.to_fold],
        "compressions": comp,
        "whole": whole,
        "refs": refs,
        "seqs": seqs,
    }


def view_cut(data: Mapping[str, Any], upto: int) -> int:
    """The oldest seq a snapshot refers to (``upto + 1`` when it refers to none)."""
    seqs = data["seqs"]
    return min((seqs[r][0] for r in data["refs"]), default=upto + 1)


def load_view(view: SessionView, data: Mapping[str, Any], logged: Mapping[str, Message]) -> None:
    """Put the snapshot ``data`` into ``view`` (freshly reset); ``logged`` maps the ids
    the snapshot refers to to the log's messages. ``Stale`` if anything does not fit:
    ``view`` is then left reset."""
    try:
        _load(view, data, logged)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # Stale too
        view.reset()
        if isinstance(exc, Stale):
            raise
        raise Stale(f"the saved view cannot be read: {type(exc).__name__}: {exc}") from None


def _load(view: SessionView, data: Mapping[str, Any], logged: Mapping[str, Message]) -> None:
    whole = {k: Message.from_dict(v) for k, v in data["whole"].items()}

    def msg(ref: str) -> Message:
        m = whole.get(ref)
        if m is None:
            m = logged.get(ref)
            _need(m is not None, f"message {ref!r} is no longer in the log")
        assert m is not None
        return m

    log = view.log
    _need(isinstance(log, ChunkLog) and len(log) == 0, "the view is not empty")
    chunks: list[Chunk] = []
    held: dict[int, Chunk] = {}
    dq: deque[Unit] = deque()
    ids: set[str] = set()
    for u in data["units"]:
        if u[0] == "p":
            m = msg(u[1])
            _need(type(u[2]) is int, "a token count is not an int")
            dq.append((m, u[2]))
            ids.add(m.id)
            continue
        _need(u[0] == "c", "unknown unit")
        _, refs, indices, pinned, tokens, pending, orphan, pinned_at, is_held = u
        msgs = [msg(r) for r in refs]
        _need(len(msgs) == len(indices) and len(msgs) > 0, "a chunk's positions do not match")
        c = Chunk(msgs, list(indices), bool(pinned), int(tokens), set(pending), bool(orphan))
        c.pinned_at = list(pinned_at)
        chunks.append(c)
        ids.update(m.id for m in msgs)
        if is_held:
            held[c.start] = c
        else:
            dq.append(c)
    _need(len(ids) == sum(len(u[1]) if u[0] == "c" else 1 for u in data["units"]), "repeated ids")
    builder = log._builder
    if builder is not None:
        builder.chunks = deque(chunks[k] for k in data["chunks"])
        builder._open = {str(k): chunks[c] for k, c in data["open"]}
    else:
        _need(not data["chunks"] and not data["open"], "open calls without a builder")
    log._dq = dq
    log._held = held
    log._loose = [int(s) for s in data["loose"]]
    log._dyn = {chunks[k]: int(n) for k, n in data["dyn"]}
    log._track = {int(i): chunks[k] for i, k in data["track"]}
    log._ids = ids
    log._total, log._pinned, log._turns = (int(x) for x in data["totals"])
    log._n = int(data["n"])
    log._seen_user = bool(data["seen_user"])
    log._last_user = int(data["last_user"])
    log._plain_ok = bool(data["plain_ok"])
    view.head, view.head_tokens = (int(x) for x in data["head"])
    view.to_fold = [msg(r) for r in data["to_fold"]]
    view.compressions = {str(k): Message.from_dict(d) for k, d in data["compressions"].items()}
    view.version += 1
