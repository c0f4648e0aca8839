"""A session's derived state: what a durable session saves beside its log, and back.

With the append that made each compaction, a durable session saves everything needed to
rebuild its view without replaying the log or calling a summarizer:

```
{format, version, config, upto, count,
 summary:  RunningSummary.state()   segments, facts ledger, covered ids (JSON text)
 segments: [[first_seq, last_seq]]  the seq range of each segment
 view:     SessionView.snapshot()   units, totals, pins that move, open calls (JSON text)
 tiers:    Tiers.state()}           drift state and boundaries
```

Messages go into the view's snapshot by reference where the log holds them as they are
(the id, with its seq) and whole where it does not: compressed stand-ins, copies without
stray tool results, and every message of a pinned unit, which may be far older than the
rest of the view. A resume then reads the state and the log's rows from ``cut`` on:
O(view), not O(log).

``LogBook`` is what a session knows of its log between reads: the newest seq, the state's
version, and the seq of each message in the view (the object the log holds, so a
snapshot can tell a reference from a copy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ConfigError
from ..model import Message
from ..stores.database import LogEntry
from ..summaries import RunningSummary, Summary
from .view import SessionView

FORMAT: Final = "convomem.session"
VERSION: Final = 1


Stale = ConfigError
"""What a saved state this session cannot use raises (another version or configuration,
a message it refers to that the log no longer holds): the session replays its log."""


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


@dataclass(slots=True)
class LogBook:
    """What a session knows of its log (see the module docstring)."""

    last: int = 0
    """The newest seq of the log this session knows."""
    upto: int = 0
    """The newest seq applied to the view."""
    count: int = 0
    """Messages in the log."""
    version: int = 0
    """The version of the stored state this session knows."""
    saved: dict[str, Any] | None = None
    """That state (put back when an append carried a state that did not apply)."""
    logged: dict[str, tuple[int, Message | None]] = field(default_factory=dict)
    """Messages of the view (and orphans waiting) by id: their seq and the log's own
    object (None: the view holds a copy)."""
    bounds: dict[str, int] = field(default_factory=dict)
    """Seqs of the summary segments' first and last messages."""

    def reset(self) -> None:
        self.upto = self.count = 0
        self.logged, self.bounds = {}, {}

    def note(self, m: Message, seq: int) -> None:
        """``m``, the log's message ``seq``, was applied to the view."""
        self.upto = seq
        self.count += 1
        self.logged[m.id] = (seq, m)

    def seqs_of(self, messages: list[Message]) -> list[int] | None:
        """The seqs of ``messages`` (None when one is not known)."""
        found = [self.logged.get(m.id) for m in messages]
        return None if any(f is None for f in found) else [f[0] for f in found if f]

    def compacted(self, segments: tuple[Summary, ...], keep: set[str]) -> None:
        """After a compaction: keep the seqs the next state needs (the segments' bounds,
        the view's messages); forget those of messages that left."""
        bounds: dict[str, int] = {}
        for s in segments:
            for mid in (s.first_id, s.last_id):
                if mid is None:
                    continue
                seq = self.bounds.get(mid)
                if seq is None and mid in self.logged:
                    seq = self.logged[mid][0]
                if seq is not None:
                    bounds[mid] = seq
        self.bounds = bounds
        self.logged = {k: v for k, v in self.logged.items() if k in keep}


def dump(
    *,
    config: Mapping[str, Any],
    book: LogBook,
    view: SessionView,
    summary: RunningSummary,
    tiers: Any,
) -> dict[str, Any] | None:
    """The derived state now, or None when the view cannot be saved (a resume then
    replays the log)."""
    logged = book.logged
    seqs: dict[str, list[Any]] = {}
    whole: dict[str, dict[str, Any]] = {}
    refs: list[str] = []

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

    try:
        snapshot = view.snapshot(ref)
    except ValueError:
        return None
    snapshot.update(whole=whole, refs=refs, seqs=seqs)
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": dict(config),
        "upto": book.upto,
        "count": book.count,
        # The two big parts go as JSON text: a store checks a string at C speed, but
        # walks nested values one by one (a full facts ledger is 70,000 of them).
        "summary": _text(summary.state()),
        "segments": [
            [book.bounds.get(s.first_id or ""), book.bounds.get(s.last_id or "")]
            for s in summary.segments
        ],
        "view": _text(snapshot),
        "tiers": None if tiers is None else tiers.state(),
    }


def usable(raw: object, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """``raw`` with its JSON parts decoded, when it is a state of this format, version
    and configuration; else None."""
    if not (
        isinstance(raw, Mapping)
        and raw.get("format") == FORMAT
        and raw.get("version") == VERSION
        and raw.get("config") == config
    ):
        return None
    try:
        parts = {k: json.loads(raw[k]) for k in ("summary", "view")}
    except (KeyError, TypeError, ValueError):
        return None
    return {**raw, **parts}


def cut(state: Mapping[str, Any]) -> int:
    """The oldest seq a state's view refers to (``upto + 1`` when it refers to none)."""
    view = state["view"]
    seqs = view["seqs"]
    return min((seqs[r][0] for r in view["refs"]), default=int(state["upto"]) + 1)


def restore(
    state: Mapping[str, Any],
    entries: list[LogEntry],
    *,
    book: LogBook,
    view: SessionView,
    summary: RunningSummary,
) -> list[LogEntry]:
    """Put a usable state in place (``view`` reset, ``book`` reset); return the tail of
    ``entries`` to replay. ``Stale`` when it cannot be used: then the summary and the
    view are left cleared."""
    upto = state["upto"]
    data = state["view"]
    by_id = {e.message.id: e for e in entries if e.seq <= upto}
    seqs = data["seqs"]
    logged: dict[str, Message] = {}
    for mid in data["refs"]:
        seq = seqs[mid][0]
        e = by_id.get(mid)
        if e is None or e.seq != seq:
            raise Stale(f"message {mid!r} (seq {seq}) is no longer in the log")
        logged[mid] = e.message
    summary.load_state(state["summary"], lazy=True)  # ConfigError: unusable
    whole = {k: Message.from_dict(v) for k, v in data["whole"].items()}

    def message(ref: str) -> Message:
        m = whole.get(ref) or logged.get(ref)
        if m is None:
            raise Stale(f"message {ref!r} is no longer in the log")
        return m

    try:
        view.restore(data, message)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        summary.clear()
        if isinstance(exc, Stale):
            raise
        raise Stale(f"the saved view cannot be read: {type(exc).__name__}: {exc}") from None
    held = {m.id: m for m in (*view.log.kept(), *view.to_fold)}
    book.logged = {
        mid: (int(seq), held[mid] if same else None)
        for mid, (seq, same) in seqs.items()
        if mid in held
    }
    book.bounds = {
        mid: seq
        for s, pair in zip(summary.segments, state["segments"], strict=True)
        for mid, seq in ((s.first_id, pair[0]), (s.last_id, pair[1]))
        if mid is not None and seq is not None
    }
    book.upto = upto
    book.count = int(state["count"])
    return [e for e in entries if e.seq > upto]
