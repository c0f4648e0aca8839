"""The inspector's HTML, rendered from a timeline: what it shows is the timeline's data.

Parsed with the standard library's HTML parser: one row per entry with its state and
tokens, the state counts, the budget bar's parts, the plots' values per turn, segments
and facts; text from the log is escaped (a message cannot inject markup or script).
"""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.server.inspect.page import login_page, session_page, sessions_page
from convomem.server.inspect.plots import Series, chart
from convomem.server.inspect.render import sections
from convomem.session import ConversationMemory
from convomem.session.timeline import STATES, timeline
from convomem.session.turn_records import TURN_KEY, record_turn
from convomem.stores.database import SessionInfo

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes"'
INFO = SessionInfo("s<1>", "u&1", "t", 0.0, 0.0, None, {}, 0, 0, 0)


class Collect(HTMLParser):
    """Every start tag with its attributes; script bodies; text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)
        self.text.append(data)

    def having(self, attr: str) -> list[dict[str, str | None]]:
        return [a for _, a in self.tags if attr in a]


def parse(html: str) -> Collect:
    p = Collect()
    p.feed(html)
    p.close()
    return p


def session(n: int, budget: int = 300) -> ConversationMemory:
    mem = ConversationMemory(budget)
    mem.add("system", "You are terse. " + EVIL, id="sys")
    for i in range(n):
        mem.add("user", f"I live in Porto. My order is {1000 + i}. {EVIL}", id=f"u{i}")
        mem.context()
        rec = record_turn(mem, usage={"prompt_tokens": 80, "completion_tokens": 7})
        mem.add("assistant", f"Noted {i}. " + "ok " * 12, id=f"a{i}", metadata={TURN_KEY: rec})
    return mem


@settings(max_examples=15, deadline=None)
@given(n=st.integers(0, 25), budget=st.integers(200, 700))
def test_sections_show_the_timeline(n: int, budget: int) -> None:
    t = timeline(session(n, budget), price={"input": 2.0, "output": 8.0})
    recall = {"query": EVIL, "hits": [{"message_id": "m", "text": EVIL}]}
    html = "".join(sections(t, recall).values())
    p = parse(html)

    rows = [a for a in p.having("data-state") if "data-id" in a]
    assert [(a["data-id"], a["data-state"], a["data-tokens"]) for a in rows] == [
        (e.id, e.state, str(e.tokens)) for e in t.entries
    ]
    counts = {a["data-count"]: a for a in p.having("data-count") if a["data-count"] in STATES}
    assert set(counts) == set(STATES)

    parts = {a["data-part"]: int(a["data-tokens"] or 0) for a in p.having("data-part")}
    b = t.budget
    assert parts == {
        "pinned": b.pinned,
        "facts": b.facts,
        "recall": b.recall,
        "summary": b.summary,
        "history": b.history,
        "free": b.free,
        "reply": b.reply,
    }
    series = {a["data-name"]: a["data-values"] for a in p.having("data-values")}
    if t.turns:
        want = ",".join(str(r.context_tokens) for r in t.turns)
        assert series["context tokens"] == want
        assert series["prefix reused (estimated)"] == ",".join(
            str(r.prefix_tokens) for r in t.turns
        )
        assert len(series["cost"].split(",")) == len(t.turns)
    else:
        assert series == {}
    assert len([a for a in p.having("data-segment") if "data-count" in a]) == len(t.segments)

    # Nothing from the log became markup: no script, no img, no handler attribute.
    assert p.scripts == []
    assert not any(tag in ("script", "img") for tag, _ in p.tags)
    assert not any(k.startswith("on") for _, a in p.tags for k in a)
    assert EVIL in "".join(p.text) or n == 0


def test_page_carries_one_script_with_its_nonce() -> None:
    t = timeline(session(3))
    html = session_page(
        "s<1>", INFO, sections(t), data_url="/inspect/s%3C1%3E/data", version="7.1.7", nonce="N1"
    )
    p = parse(html)
    scripts = [a for tag, a in p.tags if tag == "script"]
    assert scripts == [{"nonce": "N1"}]
    main = next(a for tag, a in p.tags if a.get("id") == "inspector")
    assert main["data-url"] == "/inspect/s%3C1%3E/data" and main["data-version"] == "7.1.7"
    assert "s<1>" in "".join(p.text) and "<1>" not in html.split("<main")[0].replace("&lt;", "")


def test_chart_without_turns_and_lists() -> None:
    assert "No turn recorded yet" in chart("c", "t", [], [Series("a", [], "#000")])
    svg = chart("c", "t", [1, 2, 3], [Series("a", [1.0, None, 3.0], "#000")], limit=4.0)
    assert 'data-values="1,,3"' in svg and svg.count("<circle") == 2
    page = sessions_page("u<1>", [INFO], "cur", "/inspect")
    assert "&lt;1&gt;" in page and "cursor=cur" in page and "/inspect/s%3C1%3E" in page
    assert "<form" in sessions_page(None, [], None, "/inspect")
    login = login_page("/inspect/login", "/inspect/x", "bad <key>")
    assert "bad &lt;key&gt;" in login and 'name="next" value="/inspect/x"' in login
