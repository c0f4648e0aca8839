"""The inspector in a real browser: Playwright driving Debian's headless chromium against a
real ``convomem serve`` process.

The session is seeded through the library on the service's store (so its replies carry
turn records, as the chat route writes them) and through the API; the test opens the
page with ``?key=`` (the cookie login), checks the states and figures the page shows
against the API (``/v1/sessions/{id}/context``'s accounting, the log's pages), takes
screenshots (into ``docs/img/``, which the README shows, only with
``CONVOMEM_SCREENSHOTS=1``: a test run leaves the tracked files alone), then appends
messages through the API and waits for the page to show them without a reload.

``scripts/ensure-chromium.sh`` installs chromium when it is missing (``make test`` runs
it first; the ``browser`` fixture of conftest.py runs it too). A browser or server that
cannot start FAILS the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from _servers_app import create_key, spawn_replicas, wait_ready
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.recall import RecallIndex
from convomem.session import ConversationMemory
from convomem.session.turn_records import TURN_KEY, record_turn
from convomem.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "img" if os.environ.get("CONVOMEM_SCREENSHOTS") == "1" else None
BUDGET = 900
PRICE = {"input": 3.0, "cached_input": 0.3, "output": 15.0}  # per million tokens
TAIL = 30  # the live part shows the newest messages only (?limit=)
WAIT_MS = 20_000  # how long the page may take to show an update (it polls every 300 ms)
TEXT = (
    "the parcel was delayed again and we talked about shipping options while support "
    "checked the queue"
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A ``convomem serve`` process over a SQLite file: (base URL, store URL)."""
    store = f"sqlite:///{tmp_path / 'inspect.db'}"
    (replica,) = spawn_replicas(
        store, 1, "--budget", str(BUDGET), "--rate", "0", directory=tmp_path
    )
    try:
        wait_ready([replica])
        yield replica.url, store
    finally:
        replica.stop()


def seed(store: str, tenant: str, sid: str, user: str) -> None:
    """A support conversation with turn records on the replies (as a chat route writes
    them), a tool exchange and facts that change."""
    with open_store(store) as db:
        recall = RecallIndex(db)  # as the service's memory: facts and recall tiers
        session = db.session(sid, user_id=user, tenant=tenant)
        mem = ConversationMemory(BUDGET, store=session, recall=recall)
        mem.add("system", "You are a careful support agent for an online shop.", id="sys")
        mem.add("user", "My account email is dana@example.com.", id="email", priority=2)
        cities = ["Lisbon", "Porto", "Braga"]
        for i in range(36):
            if i == 30:  # a note worth keeping (priority 1: compressed before it is evicted)
                note = f"Refund policy for order 1130: {TEXT}; refunds take 5 days. {TEXT}."
                mem.add("assistant", note, id="policy", priority=1)
            if i == 33:  # a tool exchange: the call and its result stay together
                call = ToolUseBlock("call-1", "lookup_order", {"order": 1133})
                mem.add_message(Message("lookup", "assistant", content=[call]))
                result = ToolResultBlock("call-1", "order 1133: shipped, arriving Friday")
                mem.add_message(Message("lookup-result", "tool", content=[result]))
            said = f"I live in {cities[i // 14]} now. " if i % 7 == 0 else ""
            mem.add("user", f"{said}About order {1100 + i}: {TEXT} {i}.", id=f"u{i}")
            mem.context()
            cached = 0 if i == 0 else 200 + 10 * (i % 5)
            usage = {"prompt_tokens": 400 + 9 * i, "completion_tokens": 30}
            usage["prompt_tokens_details"] = {"cached_tokens": cached}  # type: ignore[assignment]
            rec = record_turn(mem, usage=usage, price=PRICE)
            reply = f"Checked order {1100 + i}. {TEXT}."
            mem.add("assistant", reply, id=f"a{i}", metadata={TURN_KEY: rec})
        mem.flush()  # the facts and the evicted messages are in the index
        recall.close()


def rows(page: Page) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = page.eval_on_selector_all(
        "tr[data-id]",
        "els => els.map(e => ({id: e.dataset.id, state: e.dataset.state,"
        " tokens: +e.dataset.tokens}))",
    )
    return out


def test_inspector_in_chromium(browser: Browser, service: tuple[str, str], tmp_path: Path) -> None:
    base, store = service
    key = create_key(store, "acme")
    auth = {"Authorization": f"Bearer {key}"}
    seed(store, "acme", "support-42", "dana")
    api = httpx.Client(base_url=base, headers=auth, timeout=30)

    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    page.goto(f"{base}/inspect?user_id=dana&key={key}")  # the cookie login, then the list
    assert "key=" not in page.url
    page.click('tr[data-session="support-42"] a')
    page.wait_for_selector("tr[data-id]")
    assert page.url.endswith("/inspect/support-42")

    # States and figures shown == the API's.
    shown = rows(page)
    page_of_log = api.get("/v1/sessions/support-42/messages?limit=500").json()
    log = [m["id"] for m in page_of_log["messages"]]
    assert [r["id"] for r in shown] == log
    acc = api.get("/v1/sessions/support-42/context").json()["accounting"]
    sent = {r["id"] for r in shown if r["state"] in ("pinned", "in_view", "compressed")}
    assert sent == set(acc["kept"])
    assert sum(r["state"] == "summarized" for r in shown) == acc["summarized"] > 0
    assert page.text_content('[data-figure="context-tokens"]') == str(acc["tokens"])
    assert page.text_content('[data-figure="log"]') == str(acc["log_messages"])
    hits = page.eval_on_selector_all("tr[data-hit]", "els => els.map(e => e.dataset.hit)")
    assert hits == [h["message_id"] for h in acc["recalled"]] and hits  # recall's answer
    data = api.get("/inspect/support-42/data").json()["timeline"]
    assert [r["tokens"] for r in shown] == [e["tokens"] for e in data["entries"]]
    parts = page.eval_on_selector_all(".bar [data-part]", "els => els.map(e => +e.dataset.tokens)")
    assert sum(parts) == BUDGET
    values = page.get_attribute('#plot-tokens g[data-name="context tokens"]', "data-values")
    assert values == ",".join(str(t["context_tokens"]) for t in data["turns"])
    assert len(data["turns"]) == 36
    city = 'tr[data-fact="city"]'
    assert page.locator(f'{city}[data-current="false"]').count() == 2
    assert page.locator(f'{city}[data-current="true"]').count() == 1
    costs = page.get_attribute('#plot-cost g[data-name="cost"]', "data-values") or ""
    assert len(costs.split(",")) == 36 and all(float(c) > 0 for c in costs.split(","))

    shots = SHOTS or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "inspector.png"))

    # Live: the page polls; messages appended through the API appear without a reload.
    page.goto(f"{base}/inspect/support-42?interval=300&limit={TAIL}")
    page.wait_for_selector("tr[data-id]")
    before = page.get_attribute("#inspector", "data-version")
    new = [
        {"id": "live-u", "role": "user", "content": "Actually I moved to Faro last week."},
        {"id": "live-a", "role": "assistant", "content": "Noted: Faro."},
    ]
    r = api.post("/v1/sessions/support-42/messages", json={"messages": new})
    assert r.status_code == 201, r.text
    page.wait_for_selector('tr[data-id="live-a"]', timeout=WAIT_MS)
    assert page.get_attribute("#inspector", "data-version") != before
    assert page.text_content('[data-figure="log"]') == str(len(log) + 2)
    assert [r["id"] for r in rows(page)] == [*log, "live-u", "live-a"][-TAIL:]
    assert "updated" in (page.text_content("#live") or "")
    current = page.locator(f'{city}[data-current="true"] td').nth(2).text_content()
    assert current == "Faro"
    facts = page.locator("section", has=page.locator("#sec-facts"))
    facts.screenshot(path=str(shots / "inspector-facts.png"))
    states = {r["id"]: r["state"] for r in rows(page)}
    acc = api.get("/v1/sessions/support-42/context").json()["accounting"]
    sent = {i for i, s in states.items() if s in ("pinned", "in_view", "compressed")}
    assert sent == set(acc["kept"]) & set(states)
    page.locator("#sec-timeline").screenshot(path=str(shots / "inspector-timeline.png"))
    assert all(
        (shots / f"inspector{s}.png").stat().st_size > 0 for s in ("", "-facts", "-timeline")
    )
    page.close()


def test_the_facts_correction_form_in_chromium(browser: Browser, service: tuple[str, str]) -> None:
    base, store = service
    key = create_key(store, "acme")
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert api.post("/v1/sessions", json={"id": "s1", "user_id": "dana"}).status_code == 201
    said = [{"role": "user", "content": "I live in Lisbon. My email is dana@old.example"}]
    assert api.post("/v1/sessions/s1/messages", json={"messages": said}).status_code == 201

    page = browser.new_page()
    page.goto(f"{base}/inspect/s1?key={key}")  # the cookie login, then the session page
    page.click("a[data-facts-link]")
    page.wait_for_selector("tr[data-fact-id]")
    assert page.url.endswith("/inspect/users/dana/facts")
    city = 'tr[data-fact="city"][data-current="true"]'
    page.fill(f'{city} input[name="value"]', "Faro")
    page.click(f'{city} button:has-text("correct")')
    page.wait_for_selector("[data-notice]")
    assert "corrected: city: Faro" in (page.text_content("[data-notice]") or "")
    assert page.locator(f"{city} td").nth(2).text_content() == "Faro"
    assert page.locator(f'{city}[data-manual="true"]').count() == 1
    old = 'tr[data-fact="city"][data-current="false"]'
    assert page.locator(f"{old} td").nth(2).text_content() == "Lisbon"
    facts = api.get("/v1/users/dana/facts?history=true").json()
    assert [(f["value"], f["current"]) for f in facts["history"] if f["attribute"] == "city"] == [
        ("Lisbon", False),
        ("Faro", True),
    ]

    page.click('tr[data-fact="email"] button:has-text("delete")')
    page.wait_for_selector("[data-notice]")
    assert page.locator('tr[data-fact="email"]').count() == 0
    page.fill('form.add input[name="attribute"]', "job")
    page.fill('form.add input[name="value"]', "nurse")
    page.click("form.add button")
    page.wait_for_selector('tr[data-fact="job"][data-current="true"]')
    current = {
        f["attribute"]: f["value"] for f in api.get("/v1/users/dana/facts").json()["current"]
    }
    assert current == {"city": "Faro", "job": "nurse"}

    page.fill(f'{city} input[name="value"]', "   ")  # blank: the problem is shown, nothing saved
    page.click(f'{city} button:has-text("correct")')
    page.wait_for_selector("[data-error]")
    assert "value" in (page.text_content("[data-error]") or "")
    assert {f["value"] for f in api.get("/v1/users/dana/facts").json()["current"]} == {
        "Faro",
        "nurse",
    }
    page.close()
