"""ConvomemMemory under LlamaIndex's own FunctionAgent, and ConvomemChatStore against
LlamaIndex's SimpleChatStore.

The agent's LLM is llama-index-core's ``MockFunctionCallingLLM`` with a scripted response
generator (a tool call when asked for the weather, an answer quoting a tool result, an
acknowledgement otherwise) that records every input. 32 runs, tool calls included, with a
restart half-way (a new memory over a newly opened database on the same SQLite file);
every input is checked against the budget and the tool-pair rule.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lazy import lazy
from convomem import aopen_store, open_store
from convomem.errors import ConfigError, InvalidMessage
from convomem.recall import AsyncRecallIndex, RecallIndex

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ChatMessage

    from convomem.integrations.llamaindex import ConvomemMemory

# LlamaIndex (and the adapter, which subclasses its types), imported by the tests that run
adapter = lazy("convomem.integrations.llamaindex")
li = lazy("llama_index.core.base.llms.types")
workflow, llms, memories = (
    lazy("llama_index.core.agent.workflow"),
    lazy("llama_index.core.llms"),
    lazy("llama_index.core.memory"),
)
chat_stores, tools = lazy("llama_index.core.storage.chat_store"), lazy("llama_index.core.tools")

# FunctionAgent's construction inspects its own (pydantic) members: LlamaIndex's warnings
pytestmark = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecatedSince20",
    "ignore::pydantic.warnings.PydanticDeprecatedSince211",
)
BUDGET = 700
RUNS = 32
WEATHER = re.compile(r"weather in (\w+)")


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class Script:
    """The mock LLM's responses, and what it was sent."""

    def __init__(self) -> None:
        self.calls: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.calls.append(list(messages))
        n = len(self.calls)
        last = messages[-1]
        if last.role.value == "tool":
            return li.ChatMessage(role="assistant", content=f"The tool said: {last.content}")
        if last.role.value == "user" and (match := WEATHER.search(last.content or "")):
            call = li.ToolCallBlock(
                tool_call_id=f"call-{n}", tool_name="weather", tool_kwargs={"city": match[1]}
            )
            return li.ChatMessage(role="assistant", blocks=[call])
        return li.ChatMessage(role="assistant", content=f"Noted ({n}).")


def problems(messages: Sequence[ChatMessage]) -> list[str]:
    """Tool results without their call just before, calls left unanswered."""
    out: list[str] = []
    open_calls: set[str] = set()
    for m in messages:
        if m.role.value == "tool":
            cid = m.additional_kwargs.get("tool_call_id")
            if cid not in open_calls:
                out.append(f"result without call: {cid}")
            open_calls.discard(cid)
            continue
        out += [f"unanswered: {c}" for c in open_calls]
        open_calls = {b.tool_call_id for b in m.blocks if isinstance(b, li.ToolCallBlock)}
    return out + [f"unanswered: {c}" for c in open_calls]


def user_turn(i: int) -> str:
    if i == 0:
        return "Hello, I am Petra and my favourite colour is teal."
    if i % 3 == 1:
        return f"What is the weather in {['Oslo', 'Rome', 'Lima'][i % 3]}?"
    return f"Run {i}: tell me about subject number {i} in a few sentences, please."


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_function_agent_runs_with_tools_and_a_restart(tmp_path: Path, mode: str) -> None:
    url = f"sqlite:///{tmp_path}/agent.db"
    script = Script()
    llm = llms.MockFunctionCallingLLM(response_generator=script)
    agent = workflow.FunctionAgent(tools=[tools.FunctionTool.from_defaults(weather)], llm=llm)

    async def open_memory() -> tuple[Any, ConvomemMemory]:
        db = await aopen_store(url) if mode == "async" else open_store(url)
        recall = AsyncRecallIndex(db) if mode == "async" else RecallIndex(db)
        memory = adapter.ConvomemMemory.from_defaults(
            db=db,
            session_id="s1",
            user_id="petra",
            budget=BUDGET,
            memory_options={"recall": recall},
        )
        return db, memory

    db, memory = await open_memory()
    for i in range(RUNS):
        if i == RUNS // 2:
            await db.aclose() if mode == "async" else db.close()
            db, memory = await open_memory()
        await agent.run(user_turn(i), memory=memory)
        assert memory.memory.stats().context_tokens <= BUDGET
    for sent in script.calls:
        assert problems(sent) == []
    assert "Petra" in str(script.calls[-1]) and "teal" in str(script.calls[-1])
    log = await memory.aget_all()
    assert sum(m.role.value == "user" for m in log) == RUNS
    calls = [b for m in log for b in m.blocks if isinstance(b, li.ToolCallBlock)]
    results = [m for m in log if m.role.value == "tool"]
    assert len(calls) == len(results) == sum(i % 3 == 1 for i in range(RUNS))
    assert problems(log) == []
    assert max(len(s) for s in script.calls) < len(log) // 2  # the view, bounded
    assert memory.memory.stats().summarized_messages > 0
    if mode == "sync":
        assert [m.content for m in memory.get_all()] == [m.content for m in log]
        assert memory.get(input="colour")[0].role.value == "system"
        await memory.memory.aflush()
        db.close()
    else:
        await memory.memory.aflush()
        await db.aclose()


def test_put_get_set_reset() -> None:
    with open_store("sqlite://") as db:
        memory = adapter.ConvomemMemory.from_defaults(db=db, session_id="s", budget=300)
        memory.put(li.ChatMessage(role="user", content="hi"))
        memory.put_messages(
            [
                li.ChatMessage(role="assistant", content="hello"),
                li.ChatMessage(role="user", content="hi"),
            ]
        )
        assert [m.content for m in memory.get_all()] == ["hi", "hello", "hi"]
        with pytest.raises(InvalidMessage):
            memory.set([li.ChatMessage(role="user", content="x"), "nope"])  # type: ignore[list-item]
        assert len(memory.get_all()) == 3  # a bad set changes nothing
        memory.set([li.ChatMessage(role="system", content="S"), li.ChatMessage(content="q")])
        assert [m.content for m in memory.get()] == ["S", "q"]
        assert memory.get(input="q") == memory.get()  # no recall here: input is not searched
        memory.reset()
        assert memory.get_all() == []
        with pytest.raises(ConfigError, match="budget"):
            adapter.ConvomemMemory.from_defaults(
                db=db, session_id="s", memory_options={"budget": 1}
            )


keys = st.sampled_from(["k1", "k2"])
store_ops = st.one_of(
    st.tuples(st.just("set"), keys, st.lists(st.sampled_from(["a", "b"]), max_size=3)),
    st.tuples(st.just("add"), keys, st.sampled_from(["c", "d"])),
    st.tuples(st.just("delete_all"), keys),
    st.tuples(st.just("delete_at"), keys, st.integers(-1, 3)),
    st.tuples(st.just("delete_last"), keys),
)


def texts(messages: Sequence[ChatMessage] | ChatMessage | None) -> Any:
    if messages is None:
        return None
    if isinstance(messages, li.ChatMessage):
        return messages.content
    return [m.content for m in messages]


@settings(max_examples=30)
@given(st.lists(store_ops, max_size=12))
def test_chat_store_is_llamaindexs_simple_chat_store(ops: list[Any]) -> None:
    oracle = chat_stores.SimpleChatStore()
    with open_store("sqlite://") as db:
        ours = adapter.ConvomemChatStore(db=db, user_id="u1")
        for op, key, *rest in ops:
            if op == "set":
                batch = [li.ChatMessage(content=t) for t in rest[0]]
                ours.set_messages(key, batch)
                oracle.set_messages(key, batch)
            elif op == "add":
                ours.add_message(key, li.ChatMessage(content=rest[0]))
                oracle.add_message(key, li.ChatMessage(content=rest[0]))
            elif op == "delete_all":
                assert texts(ours.delete_messages(key)) == texts(oracle.delete_messages(key))
            elif op == "delete_at" and rest[0] >= 0:
                got = ours.delete_message(key, rest[0])
                want = (
                    oracle.delete_message(key, rest[0])
                    if rest[0] < len(oracle.get_messages(key))
                    else None
                )
                assert texts(got) == texts(want)
            elif op == "delete_last":
                want = oracle.delete_last_message(key) if oracle.get_messages(key) else None
                assert texts(ours.delete_last_message(key)) == texts(want)
            assert texts(ours.get_messages(key)) == texts(oracle.get_messages(key))
        assert sorted(ours.get_keys()) == sorted(oracle.get_keys())


async def test_chat_store_async_and_under_chat_memory_buffer() -> None:
    adb = await aopen_store("sqlite://")
    try:
        store = adapter.ConvomemChatStore(db=adb, user_id="u1")
        await store.async_add_message("k", li.ChatMessage(content="one"))
        await store.aset_messages("k2", [li.ChatMessage(content="a"), li.ChatMessage(content="b")])
        assert texts(await store.aget_messages("k2")) == ["a", "b"]
        assert texts(await store.adelete_message("k2", 0)) == "a"
        assert texts(await store.adelete_last_message("k2")) == "b"
        assert sorted(await store.aget_keys()) == ["k", "k2"]
        assert texts(await store.adelete_messages("k")) == ["one"]
        with pytest.raises(ConfigError, match="async"):
            store.get_messages("k2")
    finally:
        await adb.aclose()
    with open_store("sqlite://") as db:
        buffer = memories.ChatMemoryBuffer.from_defaults(
            token_limit=1000, chat_store=adapter.ConvomemChatStore(db=db), chat_store_key="user-7"
        )
        buffer.put(li.ChatMessage(role="user", content="remember me"))
        again = memories.ChatMemoryBuffer.from_defaults(
            token_limit=1000, chat_store=adapter.ConvomemChatStore(db=db), chat_store_key="user-7"
        )
        assert texts(again.get()) == ["remember me"]


def test_nothing_downloads() -> None:
    """The adapter (LlamaIndex included) works with every socket refused."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network access attempted')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from convomem import open_store\n"
        "from convomem.integrations.llamaindex import ConvomemMemory\n"
        "from llama_index.core.llms import ChatMessage\n"
        "from llama_index.core.memory import ChatMemoryBuffer\n"
        "from llama_index.core.agent.workflow import FunctionAgent\n"
        "m = ConvomemMemory.from_defaults(db=open_store('sqlite://'), session_id='s')\n"
        "m.put(ChatMessage(content='hi'))\n"
        "b = ChatMemoryBuffer.from_defaults(token_limit=50)\n"
        "b.put(ChatMessage(content='hi there'))\n"
        "assert [x.content for x in m.get()] == ['hi'] and len(b.get()) == 1\n"
        "print('offline ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("NLTK_DATA", "TIKTOKEN_CACHE_DIR")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "offline ok" in done.stdout
