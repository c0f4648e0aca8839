"""Recalled snippets as a context shows them: a hit and its neighbouring turns, each
message once, labelled with where and when it was said (``placement`` places them)."""

from __future__ import annotations

import datetime
from typing import Any, Final, NamedTuple

RECALL_HEADER: Final = "Recalled from earlier messages (may be outdated):"


class Snippet(NamedTuple):
    """A line to render. ``at`` orders the lines shown (a hit and its neighbouring turns
    together, in session order); the list's own order is the priority they get room in.
    ``neighbour``: a turn next to a hit, shown only if room is left after the hits."""

    message_id: str
    session_id: str
    kind: str
    text: str
    created_at: float
    at: tuple[int, int] = (0, 0)
    neighbour: bool = False


def snippets_of(hits: list[Any], in_view: Any) -> list[Snippet]:
    """The snippets of ``hits`` not in the view, best first, then their neighbouring
    turns (``Hit.context``), each message once: the hits get room first."""
    kept = [h for h in hits if h.message_id not in in_view]
    seen = set(in_view) | {h.message_id for h in kept}
    out = [
        Snippet(h.message_id, h.session_id, h.kind, h.text, h.created_at, _at(i, h.seq))
        for i, h in enumerate(kept)
    ]
    for i, h in enumerate(kept):
        for t in getattr(h, "context", ()):
            if t.message_id not in seen:
                seen.add(t.message_id)
                at = _at(i, t.seq)
                out.append(
                    Snippet(t.message_id, h.session_id, t.kind, t.text, t.created_at, at, True)
                )
    return out


def _at(rank: int, seq: int | None) -> tuple[int, int]:
    return rank, -1 if seq is None else seq


def _label(s: Snippet, session_id: str) -> str:
    when = datetime.datetime.fromtimestamp(s.created_at, datetime.UTC).strftime("%Y-%m-%d")
    where = "this conversation" if s.session_id == session_id else "an earlier conversation"
    who = "summary" if s.kind == "summary" else s.kind
    return f"[{when}, {where}] {who}"


def snippet_line(s: Snippet, session_id: str) -> str:
    """A snippet as one line, whole: where and when it was said, then its text."""
    return f"- {_label(s, session_id)}: {' '.join(s.text.split())}"
