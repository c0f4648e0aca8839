"""MCP over stdio: ``convomem mcp --store URL`` started as a subprocess by the official
client, as Claude Desktop or Cursor start it. Every tool, bad arguments, a long session;
two processes on one store with different ``--tenant`` see only their own tenant;
``--allow-erase`` adds ``erase_user``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from _mcp_support import (
    bad_arguments,
    call,
    check_tools,
    every_tool,
    long_session,
    other_tenant,
)

BUDGET = 700


def stdio(store: str, *args: str) -> Client:
    command = ["-m", "convomem", "mcp", "--store", store, "--budget", str(BUDGET), *args]
    params = StdioServerParameters(command=sys.executable, args=command, env=dict(os.environ))
    return Client(params)


async def test_every_tool_bad_arguments_and_a_long_session(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mcp.db'}"
    async with stdio(store) as c:
        await check_tools(c, erase=False)
        await every_tool(c)
        await bad_arguments(c)
        await long_session(c, budget=BUDGET)


async def test_tenants_of_two_processes_stay_apart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mcp.db'}"
    async with stdio(store) as none, stdio(store, "--tenant", "globex") as globex:
        await other_tenant(none, globex)
        await other_tenant(globex, none, sid="t2", user="tim")


async def test_erase_user_with_the_flag(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mcp.db'}"
    async with stdio(store, "--tenant", "acme", "--allow-erase") as c:
        await check_tools(c, erase=True)
        msgs = [{"role": "user", "content": "I live in Lisbon."}]
        await call(c, "add_messages", session_id="e1", user_id="eve", messages=msgs)
        assert (await call(c, "erase_user", user_id="eve"))["sessions"] == 1
        assert (await call(c, "list_sessions", user_id="eve"))["sessions"] == []
