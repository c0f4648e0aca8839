"""The MCP tools in-process (the SDK's client on the server object, no transport) over
real services on a SQLite store: every tool, bad arguments, another tenant's ids, a long
session, the erase flag, and the typed errors. The transports are ``test_stdio`` and
``test_http``'s, against real processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from _mcp_support import (
    bad_arguments,
    call,
    check_tools,
    every_tool,
    long_session,
    other_tenant,
    refused,
)
from convomem.mcp import build_server
from convomem.mcp.tools import Caller
from convomem.server.deps import ApiKey, Services, open_services
from convomem.server.metrics import Metrics
from convomem.server.settings import Settings

BUDGET = 700


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    settings = Settings(
        store=f"sqlite:///{tmp_path / 'mcp.db'}", budget=BUDGET, recall_deadline=None
    )
    svc = await open_services(settings, Metrics())
    try:
        yield svc
    finally:
        await svc.aclose()


def client_for(services: Services, tenant: str | None, *, erase: bool = False) -> Client:
    caller = Caller(services, ApiKey(tenant, f"key-{tenant}"))
    return Client(build_server(lambda: caller, allow_erase=erase))


async def test_every_tool_and_resource(services: Services) -> None:
    async with client_for(services, "acme") as client:
        await check_tools(client, erase=False)
        await every_tool(client)


async def test_bad_arguments_are_tool_errors_and_write_nothing(services: Services) -> None:
    async with client_for(services, "acme") as client:
        await bad_arguments(client)


async def test_another_tenants_ids_are_unknown_ids(services: Services) -> None:
    async with client_for(services, "acme") as mine, client_for(services, "globex") as theirs:
        await other_tenant(mine, theirs)
    async with client_for(services, None) as none, client_for(services, "acme") as named:
        await other_tenant(none, named, sid="t2", user="tim")  # no tenant: a scope of its own


async def test_a_long_session_stays_within_its_budget(services: Services) -> None:
    async with client_for(services, "acme") as client:
        await long_session(client, budget=BUDGET)


async def test_erase_user_only_with_the_flag(services: Services) -> None:
    async with client_for(services, "acme", erase=True) as client:
        await check_tools(client, erase=True)
        msgs = [{"role": "user", "content": "I live in Lisbon."}]
        await call(client, "add_messages", session_id="e1", user_id="eve", messages=msgs)
        erased = await call(client, "erase_user", user_id="eve")
        assert erased == {"user_id": "eve", "sessions": 1, "items": erased["items"]}
        assert (await call(client, "list_sessions", user_id="eve"))["sessions"] == []
        r = await client.call_tool("get_profile", {"user_id": "eve"})
        assert r.is_error and r.structured_content["error"]["status"] == 404  # type: ignore[index]
    async with client_for(services, "acme") as client:
        r = await client.call_tool("erase_user", {"user_id": "eve"})
        assert r.is_error  # no such tool


async def test_a_refusal_carries_the_apis_problem(services: Services) -> None:
    async with client_for(services, "acme") as client:
        r = await client.call_tool("get_context", {"session_id": "nope"})
        assert r.is_error and r.structured_content == {
            "error": {
                "type": "https://convomem.dev/problems/not-found",
                "title": "No such resource",
                "status": 404,
                "detail": "no session 'nope'",
                "field": "session",
                "value": "nope",
            }
        }
        assert r.content[0].text == "not-found (session): no session 'nope'"  # type: ignore[union-attr]


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from convomem.errors import MissingDependency
    from convomem.mcp import mount

    real: Callable[..., Any] = builtins.__import__

    def no_mcp(name: str, *args: Any, **kw: Any) -> Any:
        if name == "mcp":
            raise ImportError("No module named 'mcp'")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_mcp)
    with pytest.raises(MissingDependency, match=r"convomem\[mcp\]"):
        mount(object())


async def test_the_tools_create_only_ids_every_route_reaches(services: Services) -> None:
    """The one id rule holds for the MCP face too (``operations.create_session``)."""
    async with client_for(services, "acme") as client:
        msg = [{"role": "user", "content": "hi"}]
        for sid, user in (("a/b", "u"), ("..", "u"), ("s", "u\\v")):
            text = await refused(client, "add_messages", session_id=sid, user_id=user, messages=msg)
            assert "an id must be" in text
        listed = await call(client, "list_sessions", user_id="u")
        assert listed["sessions"] == []
        assert await call(client, "add_messages", session_id="a b", user_id="u", messages=msg)
