"""MCP over streamable HTTP at ``/mcp`` of a real ``convomem serve`` process, with the
official client: every tool, bad arguments, another tenant's ids (keys of two tenants),
a long session, the erase flag, the handshake-era (``legacy``) and the current protocol,
and the API keys (no key, a wrong key: 401, nothing served)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _mcp_support import (
    bad_arguments,
    call,
    check_tools,
    every_tool,
    long_session,
    other_tenant,
)
from _servers_app import Replica, create_key, spawn_replicas, wait_ready

BUDGET = 700


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, str, str]]:
    """One ``convomem serve`` with ``/mcp`` (erase allowed); keys of acme and globex."""
    folder = tmp_path_factory.mktemp("mcp-http")
    store = f"sqlite:///{folder / 'service.db'}"
    acme, globex = create_key(store, "acme"), create_key(store, "globex")
    args = ("--rate", "0", "--budget", str(BUDGET), "--mcp-allow-erase")
    (replica,) = spawn_replicas(store, 1, *args, directory=folder)
    try:
        wait_ready([replica])
        yield replica, acme, globex
    finally:
        replica.stop()


def client(replica: Replica, key: str, mode: str = "auto") -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    return Client(streamable_http_client(f"{replica.url}/mcp", http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_tool_over_http(served: tuple[Replica, str, str], mode: str) -> None:
    replica, acme, _ = served
    async with client(replica, acme, mode) as c:
        await check_tools(c, erase=True)
        await every_tool(c, session=f"s-{mode}", user=f"ana-{mode}")


async def test_bad_arguments_over_http(served: tuple[Replica, str, str]) -> None:
    replica, acme, _ = served
    async with client(replica, acme) as c:
        await bad_arguments(c)


async def test_a_key_sees_only_its_tenant(served: tuple[Replica, str, str]) -> None:
    replica, acme, globex = served
    async with client(replica, acme) as mine, client(replica, globex) as theirs:
        await other_tenant(mine, theirs)
    # the same names in two tenants stay apart
    async with client(replica, globex) as theirs, client(replica, acme) as mine:
        msgs = [{"role": "user", "content": "I live in Porto."}]
        await call(theirs, "add_messages", session_id="t1", user_id="tom", messages=msgs)
        profile = await call(mine, "get_profile", user_id="tom")
        assert "Porto" not in str(profile) and "Braga" in profile["text"]


async def test_a_long_session_over_http(served: tuple[Replica, str, str]) -> None:
    replica, acme, _ = served
    async with client(replica, acme) as c:
        await long_session(c, budget=BUDGET)


async def test_erase_user_over_http(served: tuple[Replica, str, str]) -> None:
    replica, acme, _ = served
    async with client(replica, acme) as c:
        msgs = [{"role": "user", "content": "I live in Lisbon."}]
        await call(c, "add_messages", session_id="e1", user_id="eve", messages=msgs)
        erased = await call(c, "erase_user", user_id="eve")
        assert erased["sessions"] == 1
    api = httpx.get(f"{replica.url}/v1/sessions/e1", headers={"Authorization": f"Bearer {acme}"})
    assert api.status_code == 404


def test_without_a_valid_key_nothing_is_served(served: tuple[Replica, str, str]) -> None:
    replica, _, _ = served
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer cm_nope"}, {"Authorization": "Basic x"}):
        r = httpx.post(f"{replica.url}/mcp", json=ping, headers={**accept, **headers})
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["type"].endswith("/unauthorized") and "tools" not in r.text
