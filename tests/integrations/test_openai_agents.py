"""ConvomemSession under the Agents SDK's own Runner, against the SDK's SQLiteSession.

The SDK's ``SQLiteSession`` is the oracle: the same scripted runs and the same operation
sequences give the same items through ours, on every store backend, sync and async.
Examples per property: ``CONVOMEM_AGENTS_EXAMPLES`` (default 20).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _lazy import lazy
from _store_backends import Backend
from convomem import ConversationMemory, aopen_store, open_store
from convomem.errors import InvalidMessage, SessionOwnerMismatch
from convomem.integrations.openai_agents import ConvomemSession
from convomem.model import ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from agents.testing import ScriptedModel

sdk, scripted, sdk_memory = lazy("agents"), lazy("agents.testing"), lazy("agents.memory")
EXAMPLES = int(os.environ.get("CONVOMEM_AGENTS_EXAMPLES", "20"))


@pytest.fixture(autouse=True, scope="module")
def offline() -> None:
    sdk.set_tracing_disabled(True)  # no trace export


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def script() -> ScriptedModel:
    """Turn 1: a tool call, then an answer; turn 2: an answer."""
    return scripted.ScriptedModel(
        [
            [scripted.function_call("get_weather", {"city": "Paris"}, call_id="call_1")],
            [scripted.assistant_message("It is sunny in Paris.")],
            [scripted.assistant_message("You asked about Paris.")],
        ]
    )


async def two_turns(session: Any) -> tuple[ScriptedModel, list[Any]]:
    model = script()
    agent = sdk.Agent(name="weather", model=model, tools=[sdk.function_tool(get_weather)])
    await sdk.Runner.run(agent, "Weather in Paris?", session=session)
    await sdk.Runner.run(agent, "What did I ask?", session=session)
    model.assert_complete()
    return model, [c.input for c in model.calls]


async def open_db(url: str, mode: str) -> Any:
    return await aopen_store(url) if mode == "async" else open_store(url)


async def close_db(db: Any) -> None:
    if hasattr(db, "aclose"):
        await db.aclose()
    else:
        db.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_runner_two_turns_with_a_tool_call(backend: Backend, mode: str) -> None:
    url = backend.fresh_url()
    db = await open_db(url, mode)
    try:
        ours = ConvomemSession("chat-1", db, user_id="u1")
        assert isinstance(ours, sdk_memory.Session)
        _, inputs = await two_turns(ours)
        _, oracle_inputs = await two_turns(sdk.SQLiteSession("chat-1"))
        assert inputs == oracle_inputs  # what the model saw, call by call
        second_turn = inputs[-1]
        kinds = [i.get("type") for i in second_turn]
        assert kinds.index("function_call") < kinds.index("function_call_output")
        assert second_turn[0] == {"role": "user", "content": "Weather in Paris?"}
        assert second_turn[-1] == {"role": "user", "content": "What did I ask?"}
        items = await ours.get_items()
        assert items == await two_turns_items()
        # The same session is a convomem log: a tool exchange, readable by the memory.
        messages = await _maybe(ours.store.get_items())
        assert messages[1].content == (ToolUseBlock("call_1", "get_weather", '{"city":"Paris"}'),)
        assert messages[2].content == (ToolResultBlock("call_1", "sunny in Paris"),)
    finally:
        await close_db(db)


async def two_turns_items() -> list[Any]:
    oracle = sdk.SQLiteSession("oracle")
    await two_turns(oracle)
    return await oracle.get_items()


async def _maybe(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


async def test_a_new_process_resumes_the_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/agents.db"
    db = open_store(url)
    await two_turns(ConvomemSession("chat-1", db, user_id="u1"))
    expected = await ConvomemSession("chat-1", db, user_id="u1").get_items()
    db.close()
    code = (
        "import asyncio, json, sys\n"
        "from convomem import open_store\n"
        "from convomem.integrations.openai_agents import ConvomemSession\n"
        f"db = open_store({url!r})\n"
        "s = ConvomemSession('chat-1', db, user_id='u1')\n"
        "print(json.dumps(asyncio.run(s.get_items())))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(done.stdout) == expected
    other = ConvomemSession("chat-1", open_store(url), user_id="someone-else")
    with pytest.raises(SessionOwnerMismatch):
        await other.get_items()


def test_importable_and_usable_without_the_sdk(tmp_path: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "sys.modules['agents'] = None  # the SDK is not installed\n"
        "from convomem import open_store\n"
        "from convomem.integrations.openai_agents import ConvomemSession\n"
        "s = ConvomemSession('s', open_store('sqlite://'))\n"
        "asyncio.run(s.add_items([{'role': 'user', 'content': 'hi'}]))\n"
        "print(asyncio.run(s.get_items()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[{'role': 'user', 'content': 'hi'}]"


async def test_bad_items_write_nothing(backend: Backend) -> None:
    db = open_store(backend.fresh_url())
    session = ConvomemSession("s", db)
    await session.add_items([{"role": "user", "content": "kept"}])
    with pytest.raises(InvalidMessage) as err:
        await session.add_items(
            [{"role": "user", "content": "not kept"}, {"type": "function_call", "name": "f"}]
        )
    assert err.value.field == "items[1].call_id"
    assert await session.get_items() == [{"role": "user", "content": "kept"}]
    db.close()


async def test_session_settings_limit_applies() -> None:
    from agents.memory import SessionSettings

    db = open_store("sqlite://")
    items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    for settings_ in (SessionSettings(limit=2), {"limit": 2}):
        session = ConvomemSession("s", db, session_settings=settings_)
        await session.clear_session()
        await session.add_items(items)
        assert await session.get_items() == items[-2:]
        assert await session.get_items(3) == items[-3:]
    db.close()


def test_a_store_database_is_required() -> None:
    from convomem.errors import ConfigError

    with pytest.raises(ConfigError, match="store database"):
        ConvomemSession("s", "sqlite://")


async def test_the_memory_reads_an_agent_session() -> None:
    db = open_store("sqlite://")
    session = ConvomemSession("chat-1", db)
    await two_turns(session)
    memory = ConversationMemory(store=db.session("chat-1"), max_tokens=10_000)
    sent = memory.context("openai")
    assert [m["role"] for m in sent] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == "call_1"
    db.close()


# -- the bounded view ---------------------------------------------------------------------


def long_script(turns: int) -> ScriptedModel:
    steps: list[Any] = []
    for t in range(turns):
        steps.append(
            [scripted.function_call("get_weather", {"city": f"city{t}"}, call_id=f"call_{t}")]
        )
        steps.append(
            [scripted.assistant_message(f"In city{t} it is sunny and warm, as reported. " * 2)]
        )
    return scripted.ScriptedModel(steps)


async def long_run(session: Any, turns: int) -> ScriptedModel:
    model = long_script(turns)
    agent = sdk.Agent(name="weather", model=model, tools=[sdk.function_tool(get_weather)])
    for t in range(turns):
        await sdk.Runner.run(
            agent, f"What is the weather in city{t}? I am user {t}.", session=session
        )
    model.assert_complete()
    return model


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_budget_bounds_what_the_model_sees(backend: Backend, mode: str) -> None:
    db = await open_db(backend.fresh_url(), mode)
    try:
        bounded = ConvomemSession("chat", db, budget=400)
        model = await long_run(bounded, 8)
        oracle = sdk.SQLiteSession("chat")
        oracle_model = await long_run(oracle, 8)
        for call, full in zip(model.calls, oracle_model.calls, strict=True):
            made = [i["call_id"] for i in call.input if i.get("type") == "function_call"]
            answered = [i["call_id"] for i in call.input if i.get("type") == "function_call_output"]
            assert made == answered  # never a call without its output, nor the reverse
            assert len(call.input) <= len(full.input)
        last = model.calls[-1].input
        assert len(last) < len(oracle_model.calls[-1].input)
        assert last[0]["role"] == "system" and "Summary" in last[0]["content"]
        everything = ConvomemSession("chat", db)  # the log keeps every item
        assert await everything.get_items() == await oracle.get_items()
        popped = await bounded.pop_item()
        assert popped == (await oracle.get_items())[-1]
        assert len(await everything.get_items()) == len(await oracle.get_items()) - 1
        await bounded.clear_session()
        assert await everything.get_items() == [] == await bounded.get_items()
    finally:
        await close_db(db)


def test_memory_options_need_a_budget() -> None:
    from convomem.errors import ConfigError

    with pytest.raises(ConfigError, match="budget"):
        ConvomemSession("s", open_store("sqlite://"), memory_options={"pin": ()})


# -- every operation, against the SDK's SQLiteSession --------------------------------------

item_batches = st.lists(
    st.sampled_from(
        [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "hi"},  # the same item twice: stored twice
            {"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "x"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "gA"},
            {
                "id": "__fake_id__",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "yo", "annotations": []}],
            },
        ]
    ),
    max_size=4,
)
operations = st.lists(
    st.tuples(
        st.integers(0, 1),  # which of two handles on the session does it
        st.one_of(
            st.tuples(st.just("add"), item_batches),
            st.tuples(st.just("get"), st.none() | st.integers(0, 5)),
            st.tuples(st.just("pop"), st.none()),
            st.tuples(st.just("clear"), st.none()),
        ),
    ),
    max_size=12,
)


async def run(sessions: list[Any], ops: list[tuple[int, tuple[str, Any]]]) -> list[Any]:
    """Each op on its session; then every session's items."""
    seen: list[Any] = []
    for which, (op, arg) in ops:
        session = sessions[which]
        if op == "add":
            await session.add_items(json.loads(json.dumps(arg)))
        elif op == "get":
            seen.append(await session.get_items(arg))
        elif op == "pop":
            seen.append(await session.pop_item())
        else:
            await session.clear_session()
    for session in sessions:
        seen.append(await session.get_items())
    return seen


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
@example(  # one handle reads, the other writes, the first reads again
    ops=[(0, ("get", None)), (1, ("add", [{"role": "user", "content": "hi"}])), (0, ("get", 1))]
)
async def test_operations_match_the_sdk_sqlite_session(
    backend: Backend, ops: list[tuple[int, tuple[str, Any]]]
) -> None:
    """Two ConvomemSession objects on one session (two processes, say), used in turns,
    read and write what one SDK session does: neither trusts a stale cache."""
    db = open_store(backend.fresh_url())
    try:
        ours = [ConvomemSession("s", db), ConvomemSession("s", db)]
        oracle = sdk.SQLiteSession("s")
        assert await run(ours, ops) == await run([oracle, oracle], ops)
    finally:
        db.close()


async def test_a_turn_reads_no_stored_message_again() -> None:
    db = open_store("sqlite://")
    session = ConvomemSession("s", db)
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(200)])
    await session.get_items()  # the one full read
    before = db.stats().rows_read
    for i in range(10):  # the SDK's turn: get_items, then add_items
        items = await session.get_items()
        await session.add_items([{"role": "user", "content": f"n{i}"}])
    assert len(items) == 209
    assert db.stats().rows_read - before <= 20  # the session row per check, no message
    other = ConvomemSession("s", db)  # another writer: the cache is not trusted
    await other.add_items([{"role": "user", "content": "from elsewhere"}])
    assert (await session.get_items())[-1] == {"role": "user", "content": "from elsewhere"}
