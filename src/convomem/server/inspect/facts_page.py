"""The inspector's page of a user's facts, with the forms that correct them: pure
functions returning HTML text (``facts_page``), served by ``routes``.

Each current fact has a correction form (a new value: the old one is superseded and
stays in the table) and a delete button; each superseded version a delete button; a
last form sets a new fact. The forms post to the inspector's own routes, which call the
same operations as the API (``server.facts``) with the key of the inspector's cookie;
the page needs no script.
"""

from __future__ import annotations

import time
from html import escape
from urllib.parse import quote

from ..models import FactOut, FactsOut
from .page import CSS

__all__ = ["facts_page", "facts_url"]

_FORMS = """
form.inline{display:inline-flex;gap:4px;margin:0}form.inline input{width:16em}
form.add{display:flex;gap:6px;flex-wrap:wrap;align-items:center}
"""


def facts_url(base: str, user_id: str, fact_id: str | None = None) -> str:
    """The inspector path of a user's facts (or of one fact's form)."""
    out = f"{base}/users/{quote(user_id, safe='')}/facts"
    return out if fact_id is None else f"{out}/{quote(fact_id, safe='')}"


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _row(f: FactOut, action: str) -> str:
    state = "current" if f.current else "superseded"
    source = f"set by key <code>{escape(f.set_by or '')}</code>" if f.manual else "said in"
    where = "" if f.manual else f"<code>{escape(f.message_id or '')}</code>"
    correct = (
        f'<form class="inline" method="post" action="{escape(action)}">'
        f'<input type="hidden" name="action" value="correct">'
        f'<input name="value" value="{escape(f.value)}" required aria-label="new value">'
        "<button>correct</button></form>"
        if f.current
        else ""
    )
    delete = (
        f'<form class="inline" method="post" action="{escape(action)}">'
        '<input type="hidden" name="action" value="delete"><button>delete</button></form>'
    )
    return (
        f'<tr class="{state}" data-fact-id="{escape(f.id)}" data-fact="{escape(f.attribute)}" '
        f'data-current="{str(f.current).lower()}" data-manual="{str(f.manual).lower()}">'
        f"<td>{escape(f.subject)}</td><td>{escape(f.attribute)}</td>"
        f"<td>{escape(f.value)}</td><td>{state}</td><td>{source} {where}</td>"
        f"<td>{escape(_when(f.valid_from))}</td><td>{escape(_when(f.valid_to))}</td>"
        f"<td>{correct}{delete}</td></tr>"
    )


def facts_page(
    user_id: str, facts: FactsOut, base: str, *, error: str | None = None, notice: str = ""
) -> str:
    """The page: every version of the user's facts with its forms, and the add form."""
    every = facts.history or []
    rows = "".join(_row(f, facts_url(base, user_id, f.id)) for f in every)
    table = (
        "<table><thead><tr><th>subject</th><th>attribute</th><th>value</th><th>status</th>"
        "<th>evidence</th><th>since</th><th>until</th><th>edit</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        if rows
        else '<p class="empty">No fact is known about this user.</p>'
    )
    add = (
        f'<form class="add" method="post" action="{escape(facts_url(base, user_id))}">'
        '<label>attribute <input name="attribute" required placeholder="city"></label>'
        '<label>value <input name="value" required placeholder="Porto"></label>'
        '<label>subject <input name="subject" value="user" required></label>'
        "<button>set fact</button></form>"
    )
    flag = f'<p class="flag bad" data-error>{escape(error)}</p>' if error else ""
    note = f'<p class="flag warn" data-notice>{escape(notice)}</p>' if notice else ""
    sessions = f"{base}?user_id={quote(user_id, safe='')}"
    body = (
        f"<header><h1>convomem inspector</h1><span>facts of user <code>{escape(user_id)}"
        f'</code></span><a href="{escape(sessions)}">sessions of this user</a></header>'
        f"<main><section><h2>Facts (version <span data-version>{facts.version}</span>)</h2>"
        f"{flag}{note}"
        '<p class="note">A correction keeps the old value as superseded; a deletion removes '
        "the version (and its recall item). What was said stays in the sessions' logs.</p>"
        f"{table}</section><section><h2>Set a fact</h2>{add}</section></main>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(user_id)} facts · convomem inspector</title>"
        f"<style>{CSS}{_FORMS}</style></head><body>{body}</body></html>"
    )
