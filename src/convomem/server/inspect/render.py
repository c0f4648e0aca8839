"""The inspector's HTML, rendered on the server from a ``Timeline``.

Pure functions (no FastAPI): ``sections(timeline, recall)`` renders each part of the page
(header figures, budget bar, plots, segments, facts, recall, the timeline table) as a
fragment keyed by its element id; the page embeds them, and the live update fetches them
again as JSON and swaps them in. Everything from the log is escaped. States, tokens and
figures are also in ``data-`` attributes, which the browser test reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any, Final

from ...session.timeline import STATES, Entry, Timeline
from .plots import Series, bar, chart

__all__ = ["COLORS", "STATE_LABELS", "sections"]

COLORS: Final = {
    "pinned": "#7c3aed",
    "in_view": "#16a34a",
    "compressed": "#0891b2",
    "waiting": "#d97706",
    "omitted": "#ea580c",
    "summarized": "#2563eb",
    "dropped": "#9ca3af",
    "summary": "#60a5fa",
    "facts": "#f472b6",
    "recall": "#a78bfa",
    "history": "#22c55e",
    "free": "#e5e7eb",
    "reply": "#fbbf24",
}
STATE_LABELS: Final = {
    "pinned": "pinned",
    "in_view": "in view",
    "compressed": "compressed",
    "waiting": "waiting",
    "omitted": "omitted",
    "summarized": "summarized",
    "dropped": "dropped",
}


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _figures(t: Timeline) -> str:
    st = t.stats
    items = [
        ("log", "messages in the log", st.log_messages),
        (
            "context-tokens",
            "context tokens now",
            (st.budget_split or {}).get("total", st.context_tokens),
        ),
        ("context-messages", "messages sent", st.context_messages),
        ("summarized", "summarized", st.summarized_messages),
        ("segments", "summary segments", len(t.segments)),
        ("view", "kept in view", st.view_messages),
    ]
    cells = "".join(
        f'<div class="figure"><b data-figure="{k}">{v}</b><span>{escape(label)}</span></div>'
        for k, label, v in items
    )
    flags = []
    if not st.fits:
        flags.append('<span class="flag bad">pinned messages exceed the budget</span>')
    if st.compaction_pending:
        flags.append('<span class="flag warn">a failed compaction waits for a retry</span>')
    if st.degraded:
        flags.append('<span class="flag warn">summary made by the fallback</span>')
    counts = "".join(
        f'<span class="count state-{s}" data-count="{s}">{escape(STATE_LABELS[s])} '
        f"<b>{t.counts.get(s, 0)}</b></span>"
        for s in STATES
    )
    older = (
        f'<p class="note">{t.older} older messages are not listed (newest first limit).</p>'
        if t.older
        else ""
    )
    return (
        f'<div class="figures">{cells}</div><div class="flags">{"".join(flags)}</div>'
        f'<div class="counts">{counts}</div>{older}'
    )


def _budget(t: Timeline) -> str:
    b = t.budget
    parts = [
        ("pinned", "pinned", b.pinned, COLORS["pinned"]),
        ("facts", "user facts", b.facts, COLORS["facts"]),
        ("recall", "recalled", b.recall, COLORS["recall"]),
        ("summary", "summary", b.summary, COLORS["summary"]),
        ("history", "history", b.history, COLORS["history"]),
        ("free", "free", b.free, COLORS["free"]),
        ("reply", "reply reserve", b.reply, COLORS["reply"]),
    ]
    note = (
        f'<p class="note" data-budget="{b.budget}">Budget <b>{b.budget}</b> tokens. The '
        f"summary may take {b.summary_reserve}; the unpinned history's share is "
        f"{b.history_share}: compaction starts past {b.trigger:.0%} of it "
        f"({int(b.trigger * b.history_share)}) and cuts to {b.target:.0%} "
        f"({int(b.target * b.history_share)}).</p>"
    )
    over = ""
    if b.free < 0:
        over = f'<p class="flag bad">Over the budget by {-b.free} tokens.</p>'
    return bar(parts, b.budget) + note + over


def _plots(t: Timeline) -> str:
    turns = [r.turn for r in t.turns]
    tokens = chart(
        "plot-tokens",
        "Context tokens per turn",
        turns,
        [Series("context tokens", [r.context_tokens for r in t.turns], "#2563eb")],
        limit=float(t.budget.budget),
    )
    costs = [r.cost for r in t.turns]
    cost = chart(
        "plot-cost",
        "Cost per turn",
        turns,
        [Series("cost", costs, "#dc2626")],
        unit=" $",
    )
    has_cached = any(r.cached_tokens is not None for r in t.turns)
    series = [Series("prefix reused (estimated)", [r.prefix_tokens for r in t.turns], "#16a34a")]
    if has_cached:
        series.append(
            Series("cache hits (reported)", [r.cached_tokens for r in t.turns], "#7c3aed", True)
        )
    series.append(Series("context tokens", [r.context_tokens for r in t.turns], "#9ca3af", True))
    prefix = chart("plot-prefix", "Prompt-cache prefix hits per turn", turns, series)
    total = sum(c for c in costs if c is not None)
    note = ""
    if t.turns and all(c is None for c in costs):
        note = '<p class="note">No price configured: costs are not known.</p>'
    elif t.turns:
        note = (
            '<p class="note">Total cost of the listed turns: '
            f"<b data-total-cost>{total:.6f}</b></p>"
        )
    return f'<div class="plots">{tokens}{cost}{prefix}</div>{note}'


def _table(head: Sequence[str], rows: Iterable[str], empty: str, cls: str = "") -> str:
    body = "".join(rows)
    if not body:
        return f'<p class="empty">{escape(empty)}</p>'
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


_DEGRADED: Final = ' <span class="flag warn">degraded</span>'


def _segments(t: Timeline) -> str:
    rows = (
        f'<tr data-segment="{s.index}" data-count="{s.count}">'
        f"<td>{s.index}</td><td>{s.count}</td>"
        f"<td><code>{escape(s.first_id or '')}</code> … "
        f"<code>{escape(s.last_id or '')}</code></td>"
        f"<td>{'' if s.tokens is None else s.tokens}</td><td>{escape(s.summarizer)}"
        f"{_DEGRADED if s.degraded else ''}</td>"
        f'<td class="text">{escape(s.text)}</td></tr>'
        for s in t.segments
    )
    facts = ""
    if t.summary_facts:
        items = "".join(f"<li>{escape(f)}</li>" for f in t.summary_facts)
        facts = f'<h3>Key facts the summary carries verbatim</h3><ul class="facts">{items}</ul>'
    return (
        _table(
            ("#", "messages", "covers", "tokens", "summarizer", "text"),
            rows,
            "Nothing has been summarized yet.",
        )
        + facts
    )


def _facts(t: Timeline) -> str:
    rows = (
        f'<tr class="{"current" if f.current else "superseded"}" '
        f'data-fact="{escape(f.attribute)}" data-current="{str(f.current).lower()}">'
        f"<td>{escape(f.subject)}</td><td>{escape(f.attribute)}</td>"
        f"<td>{escape(f.value)}</td><td>{'current' if f.current else 'superseded'}</td>"
        f"<td><code>{escape(f.message_id or '')}</code></td>"
        f"<td>{escape(_when(f.valid_from))}</td></tr>"
        for f in t.facts
    )
    scope = (
        "The user's long-term facts, from every session of the user."
        if t.facts_scope == "user"
        else "Facts said in the listed messages of this session."
    )
    table = _table(
        ("subject", "attribute", "value", "status", "said in", "since"), rows, "No fact found."
    )
    return f'<p class="note" data-facts-scope="{t.facts_scope}">{scope}</p>{table}'


def _recall(recall: Mapping[str, Any] | None) -> str:
    if recall is None:
        return '<p class="empty">Recall is not configured for this session.</p>'
    query = recall.get("query")
    status = str(recall.get("status", "ok"))
    error = f" ({escape(str(recall['error']))})" if recall.get("error") else ""
    head = (
        f'<p>Status <b data-recall-status="{escape(status)}">{escape(status)}</b>{error}; '
        f"{int(recall.get('tokens') or 0)} tokens in the context.</p>"
    )
    if not query:
        return head + '<p class="empty">No user message to recall for yet.</p>'
    hits: Sequence[Mapping[str, Any]] = recall.get("hits") or ()
    rows = (
        f'<tr data-hit="{escape(str(h.get("message_id")))}" '
        f'data-shown="{str(bool(h.get("shown"))).lower()}"><td>{i + 1}</td>'
        f"<td>{float(h.get('score') or 0.0):.4f}</td><td>{escape(str(h.get('kind', '')))}</td>"
        f"<td><code>{escape(str(h.get('message_id', '')))}</code></td>"
        f"<td><code>{escape(str(h.get('session_id', '')))}</code></td>"
        f"<td>{'sent' if h.get('shown') else 'did not fit'}</td>"
        f'<td class="text">{escape(str(h.get("text", ""))[:300])}</td></tr>'
        for i, h in enumerate(hits)
    )
    q = f"<p>Query (the newest user message): <q data-query>{escape(str(query)[:300])}</q></p>"
    table = _table(
        ("#", "score", "kind", "message", "session", "in context", "text"),
        rows,
        "No hit (messages still in the view are not recalled).",
    )
    return head + q + table


def _row(e: Entry) -> str:
    seg = "" if e.segment is None else str(e.segment)
    sent = "" if e.sent_tokens is None else str(e.sent_tokens)
    return (
        f'<tr class="state-{e.state}" data-id="{escape(e.id)}" data-state="{e.state}" '
        f'data-tokens="{e.tokens}" data-segment="{seg}" data-position="{e.position}">'
        f"<td>{e.position}</td><td><code>{escape(e.id)}</code></td>"
        f"<td>{escape(e.role)}</td><td>{e.tokens}</td><td>{sent}</td>"
        f'<td><span class="badge state-{e.state}">{escape(STATE_LABELS[e.state])}'
        f"{'' if e.segment is None else f' #{e.segment}'}</span></td>"
        f'<td class="why">{escape(e.reason)}</td><td class="text">{escape(e.text)}</td></tr>'
    )


def _timeline(t: Timeline) -> str:
    return _table(
        ("#", "id", "role", "tokens", "sent", "state", "why", "text"),
        (_row(e) for e in t.entries),
        "The session is empty.",
        "timeline",
    )


def sections(t: Timeline, recall: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Each part of the page as HTML, keyed by its element id; ``recall`` (default: the
    timeline's own, from its context) is what recall returned for the last query."""
    recall = t.recall if recall is None else recall
    return {
        "sec-figures": _figures(t),
        "sec-budget": _budget(t),
        "sec-plots": _plots(t),
        "sec-segments": _segments(t),
        "sec-facts": _facts(t),
        "sec-recall": _recall(recall),
        "sec-timeline": _timeline(t),
    }
