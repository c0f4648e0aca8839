"""``server.indexing``: the messages an append stores are indexed for recall with the
seqs the log gave them (a batch, a batch replaying earlier messages, another session;
a batch waiting in the backlog keeps them: ``test_recall_backlog``), so a hit brings
its neighbouring turns. Checked against the log's own pages, read through the API, and
the recall index the service wrote, opened on the same database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convomem.model import Message
from convomem.recall import RecallIndex
from convomem.server._recall_backlog import with_seqs

Key = Callable[[str], dict[str, str]]


def log_seqs(client: TestClient, h: dict[str, str], sid: str) -> dict[str, int]:
    out: dict[str, int] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 100} | ({"cursor": cursor} if cursor else {})
        page = client.get(f"/v1/sessions/{sid}/messages", params=params, headers=h).json()
        out |= {m["id"]: m["seq"] for m in page["messages"]}
        cursor = page["next_cursor"]
        if cursor is None:
            return out


@pytest.fixture
def index(store_url: str) -> Iterator[RecallIndex]:
    idx = RecallIndex(store_url)
    yield idx
    idx.close()


def turn(i: int) -> list[dict[str, str]]:
    return [
        {"id": f"u{i}", "role": "user", "content": f"What do courier rates cost in zone {i}?"},
        {"id": f"a{i}", "role": "assistant", "content": f"Zone {i} costs {i + 3} euros."},
    ]


def test_appended_messages_are_indexed_with_their_seqs(
    make_client: Callable[..., TestClient], make_key: Key, index: RecallIndex
) -> None:
    client = make_client(budget=100_000, recall_deadline=None, rate_per_second=0)
    h = make_key("acme")
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "ana"}, headers=h).is_success
    question = {"id": "q", "role": "user", "content": "Which courier carries my parcel 4471?"}
    answer = {"id": "r", "role": "assistant", "content": "It is Brightline, out on Tuesday."}
    batches = [
        turn(0) + turn(1),
        [*turn(1), question, answer, *turn(2)],  # a replay of turn 1, then new messages
        turn(3),
    ]
    for body in batches:
        r = client.post("/v1/sessions/s1/messages", json={"messages": body}, headers=h)
        assert r.status_code == 201, r.text
    assert client.post("/v1/sessions", json={"id": "s2", "user_id": "ana"}, headers=h).is_success
    r = client.post("/v1/sessions/s2/messages", json={"messages": turn(9)}, headers=h)
    assert r.status_code == 201, r.text
    seqs = log_seqs(client, h, "s1") | log_seqs(client, h, "s2")
    hits = index.search("courier zone rates parcel", user_id="ana", tenant="acme", k=100)
    assert {x.message_id for x in hits} == set(seqs)
    assert {x.message_id: x.seq for x in hits} == seqs
    # a hit brings the turns next to it: the answer that shares no word with the query
    (hit,) = index.search("parcel 4471", user_id="ana", tenant="acme", k=1, neighbours=1)
    assert hit.message_id == "q"
    assert [t.message_id for t in hit.context] == ["a1", "r"]  # the turns either side


async def test_a_replay_of_earlier_messages_has_no_seq_to_give() -> None:
    """``with_seqs`` reads the log newest first, down to the seq the append started
    after: a message stored before then (a replay) is left without a seq."""

    class Log:
        def __init__(self, n: int) -> None:
            self.entries_read = 0
            self.rows = [(i, Message(f"m{i}", "user", content="x")) for i in range(1, n + 1)]

        async def entries(self, cursor: str | None, limit: int, newest_first: bool) -> Any:
            assert newest_first
            start = 0 if cursor is None else int(cursor)
            page = self.rows[::-1][start : start + limit]
            self.entries_read += len(page)
            more = start + limit < len(self.rows)
            return [Entry(seq, m) for seq, m in page], (str(start + limit) if more else None)

    class Entry:
        def __init__(self, seq: int, message: Message) -> None:
            self.seq, self.message = seq, message

    log = Log(1000)
    replay, *new = [log.rows[10][1]] + [m for _, m in log.rows[-3:]]
    batches = await with_seqs(log, [replay, *new], after=997)
    assert [([m.id for m in b], s) for b, s in batches] == [
        (["m998", "m999", "m1000"], [998, 999, 1000]),
        (["m11"], None),
    ]
    assert log.entries_read <= 8  # O(appended), never the whole log
