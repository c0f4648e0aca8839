"""RecallBacklog: the bound, forgetting a session's or a user's batches, and draining in
order against a scripted index (failures keep their batch first in line, a batch whose
session is gone is dropped unindexed), checked against a plain list as the oracle."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convomem.errors import ConfigError, TransientError
from convomem.model import Message
from convomem.server._recall_backlog import RecallBacklog


class Index:
    """Records what ``add`` got; fails while ``down``."""

    def __init__(self) -> None:
        self.added: list[tuple[str, str, str, list[str]]] = []
        self.seqs: list[list[int] | None] = []
        self.down = False

    async def add(
        self,
        messages: list[Message],
        *,
        user_id: str,
        session_id: str,
        tenant: str,
        seqs: list[int] | None = None,
    ) -> int:
        await asyncio.sleep(0)
        if self.down:
            raise TransientError("the embedder is down")
        self.added.append((tenant, user_id, session_id, [m.id for m in messages]))
        self.seqs.append(seqs)
        return len(messages)


def batch(*ids: str) -> list[Message]:
    return [Message(i, "user", content=f"text {i}") for i in ids]


async def always(tenant: str, session_id: str) -> bool:
    return True


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.sampled_from(["t1", "t2"]),
            st.sampled_from(["u1", "u2"]),
            st.sampled_from(["s1", "s2", "s3"]),
            st.integers(1, 4),
        ),
        st.tuples(
            st.just("forget"),
            st.sampled_from(["t1", "t2"]),
            st.sampled_from([None, "u1", "u2"]),
            st.sampled_from([None, "s1", "s2"]),
        ),
    ),
    max_size=30,
)


@given(ops, st.integers(1, 12))
def test_the_backlog_is_a_bounded_queue_of_batches(script: list[Any], limit: int) -> None:
    backlog = RecallBacklog(limit=limit, per_drain=1000)
    oracle: list[tuple[str, str, str, list[str]]] = []
    dropped, n = 0, 0
    for op in script:
        if op[0] == "put":
            _, tenant, user, session, size = op
            ids = [f"m{n + i}" for i in range(size)]
            n += size
            backlog.put(tenant, user, session, batch(*ids))
            oracle.append((tenant, user, session, ids))
            while sum(len(b[3]) for b in oracle) > limit:
                dropped += len(oracle.pop(0)[3])
        else:
            _, tenant, user, session = op
            backlog.forget(tenant, user_id=user, session_id=session)
            oracle = [
                b
                for b in oracle
                if not (b[0] == tenant and (b[2] == session or (user is not None and b[1] == user)))
            ]
        assert len(backlog) == sum(len(b[3]) for b in oracle) and backlog.dropped == dropped
    index = Index()
    assert asyncio.run(backlog.drain(index, always)) == sum(len(b[3]) for b in oracle)
    assert index.added == oracle and len(backlog) == 0


def test_a_failure_keeps_its_batch_first_and_a_gone_session_is_dropped() -> None:
    backlog = RecallBacklog(per_drain=3)
    backlog.put("t", "u", "gone", batch("a"))
    backlog.put("t", "u", "s", batch("b", "c"))
    backlog.put("t", "u", "s", batch("d"))
    backlog.put("t", "u", "s", batch("e"))
    index = Index()

    async def exists(tenant: str, session_id: str) -> bool:
        return session_id != "gone"

    index.down = True
    with pytest.raises(TransientError):
        asyncio.run(backlog.drain(index, exists))
    assert len(backlog) == 4  # "gone" was dropped before the failure; the rest wait
    index.down = False
    assert asyncio.run(backlog.drain(index, exists)) == 3  # per_drain: the rest next time
    assert [b[3] for b in index.added] == [["b", "c"], ["d"]] and len(backlog) == 1
    assert asyncio.run(backlog.drain(index, exists)) == 1 and len(backlog) == 0


def test_two_drains_at_once_index_each_batch_and_leave_nothing() -> None:
    backlog = RecallBacklog()
    for i in range(5):
        backlog.put("t", "u", "s", batch(f"m{i}"))
    index = Index()

    async def both() -> None:
        await asyncio.gather(backlog.drain(index, always), backlog.drain(index, always))

    asyncio.run(both())
    assert len(backlog) == 0
    assert {ids[0] for *_, ids in index.added} == {f"m{i}" for i in range(5)}


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="limit="):
        RecallBacklog(limit=0)
    with pytest.raises(ConfigError, match="per_drain="):
        RecallBacklog(per_drain=0)


def test_a_waiting_batch_keeps_the_seqs_it_was_put_with() -> None:
    backlog, index = RecallBacklog(), Index()
    backlog.put("t1", "u1", "s1", batch("a", "b"), [7, 8])
    backlog.put("t1", "u1", "s1", batch("c"))  # a replay: no seq known
    assert asyncio.run(backlog.drain(index, always)) == 3
    assert index.added == [("t1", "u1", "s1", ["a", "b"]), ("t1", "u1", "s1", ["c"])]
    assert index.seqs == [[7, 8], None]
