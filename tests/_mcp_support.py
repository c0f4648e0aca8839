"""What the MCP tests share: one scenario that exercises every tool, bad arguments,
another tenant's ids and a long session through the official MCP client, whatever the
transport (in-process, stdio, streamable HTTP)."""

from __future__ import annotations

import json
import re
from typing import Any

from mcp import Client

TOOLS = {
    "add_messages": {"session_id", "user_id", "messages"},
    "get_context": {"session_id", "budget", "query", "format"},
    "search_memory": {"user_id", "query", "k", "kinds"},
    "get_profile": {"user_id"},
    "add_fact": {"user_id", "attribute", "value", "subject"},
    "update_fact": {"user_id", "fact_id", "value", "attribute", "subject"},
    "delete_fact": {"user_id", "fact_id"},
    "list_sessions": {"user_id", "cursor"},
    "delete_session": {"session_id"},
}
ERASE = {"erase_user": {"user_id"}}


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's structured answer; fails the test on a tool error."""
    r = await client.call_tool(tool, args)
    assert not r.is_error, (tool, args, r.content)
    assert isinstance(r.structured_content, dict)
    return r.structured_content


async def refused(client: Client, tool: str, **args: Any) -> str:
    """The text of a tool error (the problem's JSON when convomem refused)."""
    r = await client.call_tool(tool, args)
    assert r.is_error, (tool, args, r.structured_content)
    text = " ".join(getattr(c, "text", "") for c in r.content)
    if r.structured_content is not None:
        problem = r.structured_content["error"]
        assert problem["type"].startswith("https://convomem.dev/problems/")
        return json.dumps(problem, sort_keys=True)
    assert text
    return text


def blank(text: str, *names: str) -> str:
    for n in names:
        text = text.replace(n, "<name>")
    return re.sub(r'"(created_at|updated_at)": [0-9.e+]+', r'"\1": 0', text)


async def check_tools(client: Client, *, erase: bool) -> None:
    """Every tool is listed with a description and its arguments' schema."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    want = {**TOOLS, **(ERASE if erase else {})}
    assert set(listed) == set(want)
    for name, args in want.items():
        tool = listed[name]
        assert tool.description and len(tool.description) > 60, name
        assert set(tool.input_schema["properties"]) == args, name
        assert tool.output_schema is not None, name
    templates = {
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    }
    assert templates == {
        "convomem://sessions/{session_id}/transcript",
        "convomem://users/{user_id}/profile",
    }


async def every_tool(client: Client, *, session: str = "s1", user: str = "ana") -> None:
    """Each tool once, checked against what the others then show."""
    said = [
        {
            "role": "user",
            "content": "Hi, I am Ana. I live in Lisbon and my email is ana@old.example",
        },
        {"role": "assistant", "content": "Nice to meet you, Ana."},
    ]
    added = await call(client, "add_messages", session_id=session, user_id=user, messages=said)
    assert added["last_seq"] == 2 and [m["role"] for m in added["messages"]] == [
        "user",
        "assistant",
    ]
    ctx = await call(client, "get_context", session_id=session)
    assert ctx["format"] == "openai" and ctx["context"][-1]["content"] == "Nice to meet you, Ana."
    anthropic = await call(client, "get_context", session_id=session, format="anthropic")
    assert anthropic["context"]["messages"][0]["role"] == "user"
    hits = (await call(client, "search_memory", user_id=user, query="Lisbon"))["hits"]
    assert hits and "Lisbon" in hits[0]["text"] and hits[0]["session_id"] == session
    profile = await call(client, "get_profile", user_id=user)
    current = {f["attribute"]: f for f in profile["facts"]}
    assert current["city"]["value"] == "Lisbon" and "city: Lisbon" in profile["text"]
    job = await call(client, "add_fact", user_id=user, attribute="job", value="nurse")
    assert job["changed"] and job["fact"]["manual"] and job["fact"]["current"]
    again = await call(client, "add_fact", user_id=user, attribute="job", value="nurse")
    assert not again["changed"] and again["fact"]["id"] == job["fact"]["id"]
    moved = await call(
        client, "update_fact", user_id=user, fact_id=current["city"]["id"], value="Porto"
    )
    assert moved["fact"]["value"] == "Porto" and moved["fact"]["id"] != current["city"]["id"]
    gone = await call(client, "delete_fact", user_id=user, fact_id=job["fact"]["id"])
    assert gone["deleted"] == job["fact"]["id"]
    profile = await call(client, "get_profile", user_id=user)
    values = {f["attribute"]: f["value"] for f in profile["facts"]}
    assert values["city"] == "Porto" and values["email"] == "ana@old.example"
    assert "job" not in values
    assert "nurse" not in profile["text"] and "city: Porto" in profile["text"]
    block = (await call(client, "get_context", session_id=session))["context"][0]["content"]
    assert "city: Porto" in block and "nurse" not in block
    sessions = await call(client, "list_sessions", user_id=user)
    assert [s["id"] for s in sessions["sessions"]] == [session] and sessions["next_cursor"] is None
    transcript = await client.read_resource(f"convomem://sessions/{session}/transcript")
    text = transcript.contents[0].text  # type: ignore[union-attr]
    assert text.splitlines() == [
        f"[1] user: {said[0]['content']}",
        f"[2] assistant: {said[1]['content']}",
    ]
    shown = await client.read_resource(f"convomem://users/{user}/profile")
    assert json.loads(shown.contents[0].text)["facts"] == profile["facts"]  # type: ignore[union-attr]
    deleted = await call(client, "delete_session", session_id=session)
    assert deleted["deleted"] == session
    missing = json.loads(await refused(client, "get_context", session_id=session))
    assert missing["status"] == 404


async def bad_arguments(client: Client, *, user: str = "bea") -> None:
    """Arguments the tools refuse: a tool error naming what is wrong; nothing written."""
    await call(
        client,
        "add_messages",
        session_id="b1",
        user_id=user,
        messages=[{"role": "user", "content": "I live in Faro."}],
    )
    before = await call(client, "get_profile", user_id=user)
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("add_messages", {"session_id": "b2", "user_id": user, "messages": []}, "messages"),
        (
            "add_messages",
            {"session_id": "b2", "user_id": user, "messages": [{"role": "wizard", "content": "x"}]},
            "messages[0]",
        ),
        (
            "add_messages",
            {
                "session_id": "b2",
                "user_id": user,
                "messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 3}],
            },
            "messages[1]",
        ),
        (
            "add_messages",
            {
                "session_id": "b1",
                "user_id": "someone-else",
                "messages": [{"role": "user", "content": "x"}],
            },
            "user_id",
        ),
        ("add_messages", {"session_id": "b2", "user_id": user}, "messages"),
        ("get_context", {"session_id": "b1", "budget": 0}, "budget"),
        ("get_context", {"session_id": "b1", "format": "xml"}, "format"),
        ("search_memory", {"user_id": user, "query": ""}, "query"),
        ("search_memory", {"user_id": user, "query": "x", "k": "many"}, "k"),
        ("add_fact", {"user_id": user, "attribute": "", "value": "x"}, "attribute"),
        ("add_fact", {"user_id": user, "attribute": "verbatim:x", "value": "1"}, "attribute"),
        ("add_fact", {"user_id": user, "attribute": "city", "value": "  "}, "value"),
        ("update_fact", {"user_id": user, "fact_id": before["facts"][0]["id"]}, "value"),
        ("update_fact", {"user_id": user, "fact_id": "f_nope", "value": "x"}, "fact"),
        ("delete_fact", {"user_id": user, "fact_id": "f_nope"}, "fact"),
        ("delete_session", {"session_id": "nope"}, "session"),
        ("get_profile", {}, "user_id"),
    ]
    for tool, args, field in cases:
        text = await refused(client, tool, **args)
        assert field in text, (tool, args, text)
    assert await call(client, "get_profile", user_id=user) == before
    listed = await call(client, "list_sessions", user_id=user)
    assert [s["id"] for s in listed["sessions"]] == ["b1"]  # no b2 was created
    log = await client.read_resource("convomem://sessions/b1/transcript")
    assert log.contents[0].text == "[1] user: I live in Faro."  # type: ignore[union-attr]


async def other_tenant(mine: Client, theirs: Client, *, sid: str = "t1", user: str = "tom") -> None:
    """``theirs`` (another tenant) asks for ``mine``'s names and for names that exist
    nowhere: the same answers once the names are blanked out; ``mine`` is unchanged."""
    said = [{"role": "user", "content": "My locker code is 4471 and I live in Braga."}]
    await call(mine, "add_messages", session_id=sid, user_id=user, messages=said)
    fact = (await call(mine, "get_profile", user_id=user))["facts"][0]["id"]
    before = (
        await call(mine, "get_profile", user_id=user),
        await call(mine, "get_context", session_id=sid),
    )
    asks: list[tuple[str, dict[str, str]]] = [
        ("get_context", {"session_id": "{s}"}),
        ("search_memory", {"user_id": "{u}", "query": "locker code"}),
        ("get_profile", {"user_id": "{u}"}),
        ("add_fact", {"user_id": "{u}", "attribute": "job", "value": "x"}),
        ("update_fact", {"user_id": "{u}", "fact_id": "{f}", "value": "x"}),
        ("delete_fact", {"user_id": "{u}", "fact_id": "{f}"}),
        ("delete_session", {"session_id": "{s}"}),
    ]
    nowhere = "f_00000000000000000000"

    def fill(args: dict[str, str], s: str, u: str, f: str) -> dict[str, str]:
        return {k: v.replace("{s}", s).replace("{u}", u).replace("{f}", f) for k, v in args.items()}

    for tool, args in asks:
        a = await refused(theirs, tool, **fill(args, sid, user, fact))
        b = await refused(theirs, tool, **fill(args, "zz", "uz", nowhere))
        assert blank(a, sid, user, fact) == blank(b, "zz", "uz", nowhere), tool
        assert "4471" not in a
    assert (await call(theirs, "list_sessions", user_id=user))["sessions"] == []
    for uri in (f"convomem://sessions/{sid}/transcript", f"convomem://users/{user}/profile"):
        try:
            await theirs.read_resource(uri)
        except Exception as exc:  # the SDK raises the protocol error: not found
            assert "4471" not in str(exc) and "no " in str(exc)
        else:
            raise AssertionError(f"{uri} was readable by another tenant")
    after = (
        await call(mine, "get_profile", user_id=user),
        await call(mine, "get_context", session_id=sid),
    )
    assert after == before


async def long_session(client: Client, *, budget: int, user: str = "lea") -> None:
    """A session much longer than its budget: every context stays within it."""
    text = "we compared the delivery options and the weather in the harbour again"
    for start in range(0, 240, 60):
        batch = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {text} {i}"}
            for i in range(start, start + 60)
        ]
        await call(client, "add_messages", session_id="long", user_id=user, messages=batch)
    full = await call(client, "get_context", session_id="long")
    acc = full["accounting"]
    assert acc["log_messages"] == 240 and acc["summarized"] > 0
    assert acc["tokens"] <= acc["budget"] == budget
    assert full["context"][-1]["content"].startswith("turn 239:")
    small = await call(
        client, "get_context", session_id="long", budget=budget // 2, query="harbour"
    )
    assert small["accounting"]["tokens"] <= budget // 2 and small["accounting"]["fits"]
    # the current turn (the newest user message) and the newest reply are sent
    assert [m["content"][:9] for m in small["context"][-2:]] == ["turn 238:", "turn 239:"]
