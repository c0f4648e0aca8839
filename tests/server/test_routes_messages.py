"""``/v1/sessions/{id}/messages`` and ``/context``: appends (idempotent, If-Match, size
limits, all-or-nothing checks), pages of the log, and the context with its accounting."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from convomem.formats import from_openai
from convomem.tokens import get_tokenizer
from convomem.views import REPLY_PRIMING_TOKENS

Key = Callable[[str], dict[str, str]]


def _session(client: TestClient, h: dict[str, str], sid: str = "s1") -> None:
    r = client.post("/v1/sessions", json={"id": sid, "user_id": "u1"}, headers=h)
    assert r.status_code == 201, r.text


def test_append_page_and_context(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _session(client, h)
    msgs = [{"role": "system", "content": "be brief"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i} " * 20}
        for i in range(60)
    ]
    last = 0
    for i in range(0, len(msgs), 10):
        r = client.post("/v1/sessions/s1/messages", json={"messages": msgs[i : i + 10]}, headers=h)
        assert r.status_code == 201, r.text
        last = r.json()["last_seq"]
        assert r.headers["etag"] == f'"{last}"'
    assert last == 61
    seen, cursor = [], None
    while True:
        params = {"limit": 25} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/sessions/s1/messages", params=params, headers=h).json()
        seen += page["messages"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [m["seq"] for m in seen] == list(range(1, 62))
    assert [m["content"] for m in seen] == [m["content"] for m in msgs]
    ctx = client.get("/v1/sessions/s1/context", headers=h).json()
    acc = ctx["accounting"]
    assert ctx["context"][0] == {"role": "system", "content": "be brief"}
    assert acc["log_messages"] == 61 and acc["tokens"] <= acc["budget"]
    assert acc["summarized"] > 0 and acc["summary"] is not None  # 60 long turns overflow 4000
    kept = set(acc["kept"])
    ids = [m["id"] for m in seen]
    assert ids[-1] in kept  # the newest is kept; every message is kept or summarized
    assert len(kept) + acc["summarized"] + acc["omitted"] + acc["waiting"] >= 61
    small = client.get(
        "/v1/sessions/s1/context", params={"budget": 600, "format": "anthropic"}, headers=h
    ).json()
    assert small["accounting"]["budget"] == 600
    assert small["context"]["messages"][0]["role"] == "user"


def test_idempotency_key_and_message_ids(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _session(client, h)
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    idem = h | {"Idempotency-Key": "k-1"}
    first = client.post("/v1/sessions/s1/messages", json=body, headers=idem)
    again = client.post("/v1/sessions/s1/messages", json=body, headers=idem)
    assert first.status_code == again.status_code == 201
    assert first.json()["messages"] == again.json()["messages"]
    other = {"messages": [{"role": "user", "content": "something else"}, body["messages"][1]]}
    r = client.post("/v1/sessions/s1/messages", json=other, headers=idem)
    assert r.status_code == 422 and r.json()["type"].endswith("/idempotency-conflict")
    # a replay is answered from the record even after the session moved on
    client.post(
        "/v1/sessions/s1/messages", json={"messages": [{"role": "user", "content": "z"}]}, headers=h
    )
    late = client.post("/v1/sessions/s1/messages", json=body, headers=idem)
    assert late.json() == first.json() and late.headers["etag"] == first.headers["etag"] == '"2"'
    assert late.headers["idempotent-replayed"] == "true"
    # the key is checked against the body even when every message has its own id
    ided = {"messages": [{"id": "a-1", "role": "user", "content": "q"}]}
    k2 = h | {"Idempotency-Key": "k-2"}
    assert client.post("/v1/sessions/s1/messages", json=ided, headers=k2).status_code == 201
    other_ids = {"messages": [{"id": "a-2", "role": "user", "content": "q"}]}
    r = client.post("/v1/sessions/s1/messages", json=other_ids, headers=k2)
    assert r.status_code == 422 and r.json()["type"].endswith("/idempotency-conflict")
    # the same key on another session is another key
    client.post("/v1/sessions", json={"id": "s2", "user_id": "u1"}, headers=h)
    assert client.post("/v1/sessions/s2/messages", json=other_ids, headers=k2).status_code == 201
    with_id = {"messages": [{"id": "m-7", "role": "user", "content": "x"}]}
    assert client.post("/v1/sessions/s1/messages", json=with_id, headers=h).status_code == 201
    assert client.post("/v1/sessions/s1/messages", json=with_id, headers=h).status_code == 201
    clash = {"messages": [{"id": "m-7", "role": "user", "content": "y"}]}
    r = client.post("/v1/sessions/s1/messages", json=clash, headers=h)
    assert r.status_code == 409 and r.json()["type"].endswith("/message-conflict")
    assert client.get("/v1/sessions/s1", headers=h).json()["message_count"] == 5


def test_if_match(client: TestClient, make_key: Key) -> None:
    h = make_key("acme")
    _session(client, h)
    one = {"messages": [{"role": "user", "content": "a"}]}
    r = client.post("/v1/sessions/s1/messages", json=one, headers=h | {"If-Match": '"0"'})
    assert r.status_code == 201 and r.headers["etag"] == '"1"'
    r = client.post("/v1/sessions/s1/messages", json=one, headers=h | {"If-Match": '"0"'})
    assert r.status_code == 409 and r.json()["field"] == "If-Match"
    r = client.post("/v1/sessions/s1/messages", json=one, headers=h | {"If-Match": "x"})
    assert r.status_code == 422 and r.json()["field"] == "If-Match"
    assert client.get("/v1/sessions/s1", headers=h).json()["last_seq"] == 1


def test_bad_or_large_input_writes_nothing(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    client = make_client(max_messages=3, max_message_chars=500, max_body_bytes=4000)
    h = make_key("acme")
    _session(client, h)
    bad = {"messages": [{"role": "user", "content": "fine"}, {"role": "wizard", "content": "x"}]}
    r = client.post("/v1/sessions/s1/messages", json=bad, headers=h)
    assert r.status_code == 422 and r.json()["field"].startswith("messages[1]")
    many = {"messages": [{"role": "user", "content": "a"}] * 4}
    assert client.post("/v1/sessions/s1/messages", json=many, headers=h).status_code == 413
    long = {"messages": [{"role": "user", "content": "a" * 600}]}
    r = client.post("/v1/sessions/s1/messages", json=long, headers=h)
    assert r.status_code == 413 and r.json()["field"] == "messages[0]"
    huge = {"messages": [{"role": "user", "content": "a" * 5000}]}
    assert client.post("/v1/sessions/s1/messages", json=huge, headers=h).status_code == 413
    missing = client.post(
        "/v1/sessions/nope/messages",
        json={"messages": [{"role": "user", "content": "a"}]},
        headers=h,
    )
    assert missing.status_code == 404
    assert client.get("/v1/sessions/s1", headers=h).json()["message_count"] == 0


def test_a_smaller_budget_leaves_the_oldest_kept_messages_out(
    client: TestClient, make_key: Key
) -> None:
    h = make_key("acme")
    _session(client, h)
    turns = [{"role": "user", "content": f"Question {i} about the parcel."} for i in range(30)]
    client.post("/v1/sessions/s1/messages", json={"messages": turns}, headers=h)
    full = client.get("/v1/sessions/s1/context", headers=h).json()
    small = client.get("/v1/sessions/s1/context", params={"budget": 60}, headers=h).json()
    assert len(small["context"]) < len(full["context"])
    assert small["context"][-1] == turns[-1]
    assert len(small["accounting"]["kept"]) == len(small["context"])
    assert "budget" in small["accounting"]["why"]
    assert small["accounting"]["tokens"] <= small["accounting"]["budget"] == 60
    assert small["accounting"]["tokens"] < full["accounting"]["tokens"]


def test_a_smaller_budgets_accounting_is_of_what_is_sent(
    make_client: Callable[..., TestClient], make_key: Key
) -> None:
    """Every figure of ``/context?budget=`` below the session's is of the context
    returned: ``tokens`` (its messages counted one by one, plus the reply's priming),
    ``split`` (its parts add up to it; the history loses what was left out), ``fits``,
    ``kept`` and why. With recall on, the facts and recall tiers are in the context."""
    client = make_client(budget=600, recall_deadline=None, rate_per_second=0)
    h = make_key("acme")
    tok = get_tokenizer("approx")
    first = [{"role": "system", "content": "You are terse."}]
    first += [{"role": "user", "content": "I live in Lisbon. I am allergic to peanuts."}]
    first += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"parcel {i} weather " * 6}
        for i in range(40)
    ]
    for sid, msgs in (("s1", first), ("s2", first[:1] + first[2:24])):
        client.post("/v1/sessions", json={"id": sid, "user_id": "ana"}, headers=h)
        r = client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs}, headers=h)
        assert r.status_code == 201, r.text
    query = {"query": "parcel 3 weather"}
    full = client.get("/v1/sessions/s2/context", params=query, headers=h).json()
    whole = full["accounting"]
    assert whole["split"]["facts"] > 0 and whole["split"]["recall"] > 0  # the tiers are on
    seen_trimmed = seen_over = False
    for budget in range(20, 620, 20):
        r = client.get("/v1/sessions/s2/context", params=query | {"budget": budget}, headers=h)
        assert r.status_code == 200, r.text
        ctx, acc = r.json()["context"], r.json()["accounting"]
        sent = from_openai(ctx)
        counted = sum(tok.count_message(m) for m in sent) + REPLY_PRIMING_TOKENS
        split = acc["split"]
        assert acc["budget"] == budget and acc["tokens"] == counted == split["total"]
        parts = ("system", "facts", "recall", "summary", "history")
        assert sum(split[p] for p in parts) + REPLY_PRIMING_TOKENS == split["total"]
        assert acc["fits"] == (counted <= budget)
        assert split["limit"] == min(budget, 600) - REPLY_PRIMING_TOKENS
        log_ids = {
            m["id"] for m in client.get("/v1/sessions/s2/messages", headers=h).json()["messages"]
        }
        assert acc["kept"] == [m.id for m in sent if m.id in log_ids]
        left_out = [m for m in from_openai(full["context"]) if m.id in log_ids - set(acc["kept"])]
        lost = sum(tok.count_message(m) for m in left_out)
        assert split["history"] == whole["split"]["history"] - lost
        assert ("budget" in acc["why"]) == (budget < 600)
        assert ("fits" in acc["why"]) == (not acc["fits"])
        seen_trimmed |= bool(left_out) and acc["fits"]
        seen_over |= not acc["fits"]
    assert seen_trimmed and seen_over  # some budgets trim the history, some are too small
