"""The inspector's page shells: the session page (with its live-update script), the list
of a user's sessions, and the login form. Pure functions returning HTML text.

The script is the page's only JavaScript (no build step): every ``interval`` ms it asks
the page's data URL whether the session changed since the version it shows
(``?since=``); when it did, it swaps in the sections the server rendered again. It runs
under a Content-Security-Policy nonce, so no other script can.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape
from typing import Final
from urllib.parse import quote, urlencode

from ...stores.database import SessionInfo

__all__ = ["CSS", "SCRIPT", "login_page", "session_page", "sessions_page"]

CSS: Final = """
:root{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#111827;
background:#f9fafb;font-size:14px}
body{margin:0}header{background:#111827;color:#f9fafb;padding:10px 20px;display:flex;
gap:16px;align-items:baseline;flex-wrap:wrap}header h1{font-size:18px;margin:0}
header a{color:#93c5fd}main{padding:12px 20px;max-width:1400px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:12px 16px;
margin:12px 0}h2{font-size:15px;margin:0 0 8px}h3{font-size:13px;margin:12px 0 4px}
.figures{display:flex;gap:12px;flex-wrap:wrap}.figure{border:1px solid #e5e7eb;
border-radius:6px;padding:6px 12px;min-width:110px}.figure b{display:block;font-size:20px}
.figure span{color:#6b7280;font-size:12px}.counts{margin-top:8px;display:flex;gap:6px;
flex-wrap:wrap}.count{border-radius:12px;padding:2px 10px;color:#fff}
.bar{display:flex;height:26px;border-radius:6px;overflow:hidden;border:1px solid #d1d5db}
.part{height:100%}.legend{display:flex;gap:14px;flex-wrap:wrap;margin:6px 0;font-size:12px}
.key i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(360px,1fr));gap:12px}
.chart{margin:0}.chart svg{width:100%;height:auto;background:#fff}
figcaption{font-weight:600;font-size:13px}.axis{stroke:#9ca3af}.limit{stroke:#dc2626;
stroke-dasharray:4 3}.tick{font-size:10px;fill:#6b7280}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #f3f4f6;
padding:4px 6px;text-align:left;vertical-align:top}th{font-size:12px;color:#6b7280}
td.text{max-width:520px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
color:#374151}td.why{color:#4b5563;font-size:12px}code{font-size:12px}
.badge{border-radius:10px;padding:1px 8px;color:#fff;font-size:12px;white-space:nowrap}
.state-pinned{background:#7c3aed}.state-in_view{background:#16a34a}
.state-compressed{background:#0891b2}.state-waiting{background:#d97706}
.state-omitted{background:#ea580c}.state-summarized{background:#2563eb}
.state-dropped{background:#9ca3af}tr[class^=state-]{background:none}
tr.superseded td{color:#9ca3af;text-decoration:line-through}
.flag{border-radius:4px;padding:2px 8px;font-size:12px}.warn{background:#fef3c7}
.bad{background:#fee2e2}.note,.empty{color:#6b7280;font-size:12px}
.live{font-size:12px;color:#86efac}.live.bad{color:#fca5a5}
form.login{max-width:420px;margin:60px auto;background:#fff;padding:20px;border-radius:8px;
border:1px solid #e5e7eb}form.login input{width:100%;padding:6px;margin:8px 0}
"""

SCRIPT: Final = """
(function () {
  var root = document.getElementById("inspector");
  var live = document.getElementById("live");
  var url = root.getAttribute("data-url");
  var every = parseInt(root.getAttribute("data-interval"), 10) || 1000;
  function say(text, ok) { live.textContent = text; live.className = ok ? "live" : "live bad"; }
  function tick() {
    if (document.hidden) { setTimeout(tick, every); return; }
    var since = root.getAttribute("data-version");
    var sep = url.indexOf("?") < 0 ? "?" : "&";
    fetch(url + sep + "since=" + encodeURIComponent(since),
          {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) {
        if (!r.ok) { say("live: error " + r.status, false); return null; }
        return r.json();
      })
      .then(function (d) {
        if (d && d.changed) {
          Object.keys(d.sections).forEach(function (id) {
            var el = document.getElementById(id);
            if (el) { el.innerHTML = d.sections[id]; }
          });
          root.setAttribute("data-version", d.version);
          say("live: updated " + new Date().toLocaleTimeString(), true);
        } else if (d && live.className !== "live") {
          say("live", true);  // back after an error; an "updated" note stays
        }
      })
      .catch(function () { say("live: offline", false); })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
"""

_TITLES: Final = {
    "sec-figures": "Session",
    "sec-budget": "Budget split (what the context costs now)",
    "sec-plots": "Per turn",
    "sec-segments": "Summary segments",
    "sec-facts": "Facts (current and superseded)",
    "sec-recall": "What recall returns for the last query",
    "sec-timeline": "Timeline (every message of the log and what became of it)",
}


def _doc(title: str, body: str, nonce: str | None = None, script: str = "") -> str:
    js = f'<script nonce="{escape(nonce)}">{script}</script>' if nonce and script else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body>{body}{js}</body></html>"
    )


def session_page(
    session_id: str,
    info: SessionInfo,
    sections: Mapping[str, str],
    *,
    data_url: str,
    version: str,
    nonce: str,
    interval_ms: int = 1000,
    back_url: str | None = None,
    facts_url: str | None = None,
) -> str:
    """The page of one session: its sections, then the live-update script."""
    back = f'<a href="{escape(back_url)}">sessions of this user</a>' if back_url else ""
    if facts_url:
        back += f'<a href="{escape(facts_url)}" data-facts-link>facts of this user</a>'

    user = "" if info.user_id is None else f" · user <code>{escape(info.user_id)}</code>"
    head = (
        f"<header><h1>convomem inspector</h1><span>session <code data-session>"
        f"{escape(session_id)}</code>{user}</span>{back}"
        f'<span id="live" class="live">live</span></header>'
    )
    parts = "".join(
        f'<section><h2>{escape(_TITLES.get(k, k))}</h2><div id="{escape(k)}">{html}</div></section>'
        for k, html in sections.items()
    )
    body = (
        f'{head}<main id="inspector" data-url="{escape(data_url)}" '
        f'data-version="{escape(version)}" data-interval="{interval_ms}">{parts}</main>'
    )
    return _doc(f"{session_id} · convomem inspector", body, nonce, SCRIPT)


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def sessions_page(
    user_id: str | None, infos: Sequence[SessionInfo], next_cursor: str | None, base: str
) -> str:
    """The sessions of a user (or a form asking for the user id)."""
    form = (
        f'<form method="get" action="{escape(base)}">user id '
        f'<input name="user_id" value="{escape(user_id or "")}" required> '
        "<button>list sessions</button></form>"
    )
    if user_id is None:
        return _doc(
            "convomem inspector",
            f"<header><h1>convomem inspector</h1></header><main><section>{form}</section></main>",
        )
    rows = "".join(
        f'<tr data-session="{escape(i.session_id)}"><td><a href="{escape(base)}/'
        f'{quote(i.session_id, safe="")}"><code>{escape(i.session_id)}</code></a></td>'
        f"<td>{i.message_count}</td><td>{escape(_when(i.created_at))}</td>"
        f"<td>{escape(_when(i.updated_at))}</td><td>{escape(_when(i.expires_at))}</td></tr>"
        for i in infos
    )
    table = (
        "<table><thead><tr><th>session</th><th>messages</th><th>created</th><th>updated</th>"
        f"<th>expires</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else '<p class="empty">No session for this user.</p>'
    )
    more = ""
    if next_cursor is not None:
        q = urlencode({"user_id": user_id, "cursor": next_cursor})
        more = f'<p><a href="{escape(base)}?{escape(q)}">more sessions</a></p>'
    facts = f"{base}/users/{quote(user_id, safe='')}/facts"
    body = (
        f"<header><h1>convomem inspector</h1><span>sessions of user <code>{escape(user_id)}"
        f'</code></span><a href="{escape(facts)}" data-facts-link>facts of this user</a>'
        f"</header><main><section>{form}</section><section>{table}{more}"
        "</section></main>"
    )
    return _doc(f"{user_id} · convomem inspector", body)


def login_page(action: str, next_url: str, error: str | None = None) -> str:
    """The form that stores an API key in the inspector's cookie."""
    err = f'<p class="flag bad">{escape(error)}</p>' if error else ""
    body = (
        f'<form class="login" method="post" action="{escape(action)}"><h1>convomem inspector'
        f'</h1>{err}<label>API key<input type="password" name="key" autocomplete="off" '
        f'required></label><input type="hidden" name="next" value="{escape(next_url)}">'
        '<button>open</button><p class="note">The key is kept in an HttpOnly cookie for '
        "this site; the inspector shows only its tenant's sessions.</p></form>"
    )
    return _doc("log in · convomem inspector", body)
