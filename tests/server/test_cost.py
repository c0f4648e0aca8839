"""A request's work does not grow with the session's length: the store rows read and the
statements sent by an append and by a context are the same at 200 and at 800 messages
(the memory resumes from the derived state: the view's rows and the tail since the last
state, both bounded by the budget).

With recall on, a context also searches the user's index: its statements stay the same,
the rows it reads are the search's (posting lists grow with what the user said, as in any
inverted index), so the row counts are compared with recall off."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count

import pytest
from fastapi.testclient import TestClient

Key = Callable[[str], dict[str, str]]


@pytest.mark.parametrize("use_recall", [False, True], ids=["recall-off", "recall-on"])
def test_append_and_context_work_is_flat_in_the_sessions_length(
    use_recall: bool, make_client: Callable[..., TestClient], make_key: Key
) -> None:
    client = make_client(budget=1000, rate_per_second=0, use_recall=use_recall)
    h = make_key("acme")
    client.post("/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
    serial = count()
    stats = client.app.state.services.db.stats  # type: ignore[attr-defined]

    def batch(n: int) -> list[dict[str, str]]:
        return [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"m{next(serial)} " + "w " * 30,
            }
            for i in range(n)
        ]

    def grow_to(n: int) -> None:
        while client.get("/v1/sessions/s", headers=h).json()["last_seq"] < n:
            client.post("/v1/sessions/s/messages", json={"messages": batch(100)}, headers=h)

    def worst() -> tuple[int, ...]:
        """The most work of one append and one context over a compaction cycle."""
        out = [0, 0, 0, 0]
        for _ in range(30):  # ~27 of these messages fill the history's trigger band once
            a = stats()
            assert (
                client.post(
                    "/v1/sessions/s/messages", json={"messages": batch(1)}, headers=h
                ).status_code
                == 201
            )
            b = stats()
            assert client.get("/v1/sessions/s/context", headers=h).status_code == 200
            c = stats()
            got = (
                b.rows_read - a.rows_read,
                b.statements - a.statements,
                c.rows_read - b.rows_read,
                c.statements - b.statements,
            )
            out = [max(x, y) for x, y in zip(out, got, strict=True)]
        return tuple(out)

    grow_to(200)
    short = worst()
    grow_to(800)
    long = worst()
    if use_recall:
        assert (long[1], long[3]) == (short[1], short[3]), (short, long)
    else:
        assert long == short, (short, long)
        assert short[0] < 60 and short[2] < 60  # O(view): about 20 messages fit 1,000 tokens
