"""The Redis store on a real 3-node Redis Cluster, beyond the conformance suite (which
runs on it too): sessions spread over the masters, the operations that read several
slots, and a master lost without a replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from _servers_redis import RedisClusterNodes, cli, url_of
from convomem.errors import TransientError
from convomem.model import Message
from convomem.retry import RetryPolicy, stop_after_attempt, wait_none
from convomem.stores import aopen_store, open_store
from convomem.stores._redis_ops import session_keys


def msg(i: int | str) -> Message:
    return Message(f"m{i}", "user", content=f"text {i}")


def test_sessions_spread_over_the_cluster(redis_cluster_nodes: RedisClusterNodes) -> None:
    """Sessions of many tenants land on all three masters; listing, erasing a user and
    sweeping, which read several slots, work across them."""
    url = url_of(redis_cluster_nodes.port, "redis+cluster")
    with open_store(url) as db:
        for k in range(30):
            tenant = f"t{k % 3}"
            db.session(f"s{k}", user_id=f"u{k % 2}", tenant=tenant).append([msg(k)])
        holders = {
            node.port
            for node in redis_cluster_nodes.servers
            for k in range(30)
            if cli(node.port, "EXISTS", session_keys(db.prefix, f"t{k % 3}", f"s{k}")[0]) == "1"
        }
        assert len(holders) == 3
        listed = db.sessions(user_id="u1", tenant="t0", limit=100)[0]
        assert [i.session_id for i in listed] == [f"s{k}" for k in (27, 21, 15, 9, 3)]
        assert db.erase_user("u1", tenant="t0") == 5
        assert db.sessions(user_id="u1", tenant="t0")[0] == []
        assert len(db.sessions(tenant="t0", limit=100)[0]) == 5
        assert db.sweep() == 0


async def test_the_async_twin_on_the_cluster(redis_cluster_nodes: RedisClusterNodes) -> None:
    async with await aopen_store(url_of(redis_cluster_nodes.port, "redis+cluster")) as db:
        for k in range(6):
            await db.session(f"s{k}", user_id="u", tenant=f"t{k}").append([msg(k)])
        assert [i.session_id for i in (await db.sessions(user_id="u", tenant="t4"))[0]] == ["s4"]
        assert await db.erase_user("u", tenant="t4") == 1


def test_a_lost_cluster_master_is_transient(tmp_path: Path) -> None:
    """A master of a cluster goes away (kill -9, no replica to fail over to): calls on
    its sessions raise TransientError (the policy retries them); sessions on the other
    masters keep working."""
    from _servers_redis import start_cluster

    with start_cluster(tmp_path) as nodes:
        policy = RetryPolicy(stop=stop_after_attempt(2), wait=wait_none())
        url = url_of(nodes.port, "redis+cluster")
        with open_store(url, retry=policy, socket_timeout=1) as db:
            owners: dict[int, str] = {}
            for k in range(40):
                sid = f"s{k}"
                db.session(sid).append([msg(k)])
                meta = session_keys(db.prefix, "", sid)[0]
                for node in nodes.servers:
                    if cli(node.port, "EXISTS", meta) == "1":
                        owners.setdefault(node.port, sid)
            assert len(owners) == 3
            victim = nodes.servers[2]
            victim.kill()
            with pytest.raises(TransientError):
                db.session(owners[victim.port]).get_items()
            alive = owners[nodes.servers[1].port]
            assert db.session(alive).get_items() == [msg(int(alive[1:]))]
