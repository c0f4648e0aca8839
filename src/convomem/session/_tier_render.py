"""The message that carries the facts and recalled snippets into a context.

One system message, sent right after the system prompt: the user's current facts
(``FactHistory.render``, best ranked first), then the recalled snippets, each labelled
with where and when it was said. A system message goes to Anthropic's ``system`` field
and sits between system messages in OpenAI's list, so no tool pair is split and no
request starts with anything but what it started with.
"""

from __future__ import annotations

import datetime
from typing import Any, Final, NamedTuple

from ..model import Message
from ..summaries.supersession import FactHistory
from ..tokens import Tokenizer

TIERS_ID: Final = "convomem_tiers"
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


def _line(s: Snippet, session_id: str, chars: int) -> str:
    text = " ".join(s.text.split())
    if len(text) > chars:
        text = text[: max(1, chars - 1)].rstrip() + "…"
    return f"- {_label(s, session_id)}: {text}"


def _msg(text: str) -> Message:
    return Message(TIERS_ID, "system", content=text)


def render_tiers(
    tok: Tokenizer,
    history: FactHistory | None,
    snippets: list[Snippet],
    facts_room: int,
    recall_room: int,
    room: int,
    session_id: str,
) -> tuple[Message | None, int, int, list[Any]]:
    """The tiers' message within ``room`` tokens (its per-message overhead included):
    the facts within ``facts_room``, the snippets within ``recall_room``. Returns it
    (None: nothing fits or nothing to say), the facts' tokens, the snippets' tokens and
    the snippets shown."""
    facts = ""
    facts_tokens = 0
    if history is not None and len(history) and facts_room > 0:
        cap = facts_room
        while cap > 0:
            facts = history.render(cap)
            facts_tokens = tok.count_message(_msg(facts)) if facts else 0
            if facts_tokens <= facts_room:
                break
            cap -= max(1, facts_tokens - facts_room)
        else:
            facts, facts_tokens = "", 0
    parts = [facts] if facts else []
    shown: list[Snippet] = []
    lines: list[str] = []
    limit = min(room, facts_tokens + recall_room)
    if snippets and limit > facts_tokens:
        # Lines are counted one by one (a line and its newline), then the message once:
        # a tokenizer that does not add up exactly loses the last lines, never the budget.
        hits = sum(1 for s in snippets if not s.neighbour) or len(snippets)
        chars = max(80, 4 * recall_room // hits)
        total = tok.count_message(_msg("\n\n".join([*parts, RECALL_HEADER])))
        for s in snippets:
            line = _line(s, session_id, chars)
            n = tok.count(line) + 1
            if total + n <= limit:
                lines.append(line)
                shown.append(s)
                total += n
    order = sorted(range(len(shown)), key=lambda i: shown[i].at)
    lines, shown = [lines[i] for i in order], [shown[i] for i in order]
    while True:
        text = "\n\n".join([*parts, "\n".join([RECALL_HEADER, *lines])] if lines else parts)
        if not text:
            return None, 0, 0, []
        m = _msg(text)
        n = tok.count_message(m)
        if n <= max(limit, facts_tokens) or not lines:
            return m, facts_tokens, n - facts_tokens, shown
        lines.pop()
        shown.pop()
