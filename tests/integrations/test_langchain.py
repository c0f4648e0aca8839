"""ConvomemChatMessageHistory under LangChain's own RunnableWithMessageHistory.

A scripted chat model (``_langchain_support.ScriptedChat``) runs 40 turns, tool calls
included, with a restart half-way (new history objects over a newly opened database on the
same SQLite file); the whole log is checked against what the chain actually exchanged, and
every model input against the budget and the tool-pair rule. Without a budget the history
is held to LangChain's ``InMemoryChatMessageHistory`` as an oracle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from _langchain_support import ScriptedChat, unanswered_calls
from convomem import aopen_store, open_store
from convomem.errors import ConfigError, InvalidMessage
from convomem.formats.langchain import to_langchain
from convomem.integrations.langchain import ConvomemChatMessageHistory
from convomem.recall import AsyncRecallIndex, RecallIndex

pytestmark = [
    pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated"),
    pytest.mark.filterwarnings("ignore:The class `InMemoryChatMessageHistory` was deprecated"),
]
BUDGET = 600
TURNS = 40


def user_turn(i: int) -> str:
    if i == 0:
        return "Hello, my name is Zora and I live in Lisbon."
    if i % 4 == 1:
        return f"What is the weather in {['Oslo', 'Rome', 'Lima'][i % 3]} today?"
    return f"Turn {i}: tell me something about subject number {i} in a few sentences."


def chain_over(histories: dict[str, ConvomemChatMessageHistory], model: ScriptedChat) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), MessagesPlaceholder("input")]
    )
    return RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: histories[session_id],
        input_messages_key="input",
        history_messages_key="history",
    )


def turn_inputs(reply: AIMessage, i: int) -> list[list[BaseMessage]]:
    """The inputs after a model reply: its tool results, or nothing."""
    return [
        [ToolMessage(f"sunny, {20 + i} C", tool_call_id=c["id"], name="weather")]
        for c in reply.tool_calls
    ]


async def converse(url: str, mode: str, tmp: Path) -> None:
    model = ScriptedChat()
    exchanged: list[BaseMessage] = []  # the oracle: every message the chain stored

    async def open_all() -> tuple[Any, dict[str, ConvomemChatMessageHistory]]:
        db = await aopen_store(url) if mode == "async" else open_store(url)
        recall = AsyncRecallIndex(db) if mode == "async" else RecallIndex(db)
        history = ConvomemChatMessageHistory(
            "chat-1", db, user_id="zora", budget=BUDGET, memory_options={"recall": recall}
        )
        return db, {"chat-1": history}

    async def invoke(chain: Any, messages: list[BaseMessage]) -> AIMessage:
        config = {"configurable": {"session_id": "chat-1"}}
        if mode == "async":
            reply = await chain.ainvoke({"input": messages}, config)
        else:
            reply = chain.invoke({"input": messages}, config)
        exchanged.extend([*messages, reply])
        return reply

    db, histories = await open_all()
    for i in range(TURNS):
        if i == TURNS // 2:  # restart: new objects over the same file
            await db.aclose() if mode == "async" else db.close()
            db, histories = await open_all()
        chain = chain_over(histories, model)
        reply = await invoke(chain, [HumanMessage(user_turn(i))])
        for results in turn_inputs(reply, i):
            await invoke(chain, results)
        memory = histories["chat-1"].memory
        assert memory.stats().context_tokens <= BUDGET
    for sent in model.calls:
        assert unanswered_calls(sent) == []
        assert isinstance(sent[0], SystemMessage) and sent[0].content == "You are terse."
    assert max(len(sent) for sent in model.calls) < len(exchanged) // 2  # bounded
    history = histories["chat-1"]
    stats = history.memory.stats()
    assert stats.summarized_messages > 0  # compacted (counters restart with the object)
    if mode == "async":
        log = to_langchain(await history.memory.amessages())
        await history.memory.aflush()
    else:
        log = history.all_messages()
    assert log == exchanged  # every message, tool calls and results, ids, metadata
    assert "Zora" in str(model.calls[-1])  # the user's facts reach the model
    await db.aclose() if mode == "async" else db.close()


async def test_forty_turns_with_tools_and_a_restart(tmp_path: Path) -> None:
    await converse(f"sqlite:///{tmp_path}/chat.db", "sync", tmp_path)


async def test_forty_turns_async(tmp_path: Path) -> None:
    await converse(f"sqlite:///{tmp_path}/chat.db", "async", tmp_path)


def test_tool_calls_and_results_survive_a_new_process_object(tmp_path: Path) -> None:
    """What langchain-redis loses: an AIMessage's tool_calls and the ToolMessages."""
    url = f"sqlite:///{tmp_path}/chat.db"
    sent: list[BaseMessage] = [
        SystemMessage("sys"),
        HumanMessage("weather in Oslo and Rome?"),
        AIMessage(
            "",
            id="run-1",
            tool_calls=[
                {"name": "weather", "args": {"city": "Oslo"}, "id": "c1"},
                {"name": "weather", "args": {"city": "Rome"}, "id": "c2"},
            ],
            response_metadata={"model_name": "m"},
            usage_metadata={"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
        ),
        ToolMessage("rain", tool_call_id="c1", artifact={"raw": [1, 2]}),
        ToolMessage("boom", tool_call_id="c2", status="error"),
        AIMessage("Oslo: rain; Rome: unknown.", id="run-2"),
    ]
    with open_store(url) as db:
        ConvomemChatMessageHistory("s", db).add_messages(sent)
    with open_store(url) as db:
        assert ConvomemChatMessageHistory("s", db).messages == sent


@settings(max_examples=25)
@given(
    st.lists(
        st.one_of(
            st.lists(st.sampled_from(["hi", "there", "again"]), min_size=1, max_size=3),
            st.just("clear"),
        ),
        max_size=8,
    )
)
def test_without_budget_it_is_langchains_in_memory_history(ops: list[Any]) -> None:
    with open_store("sqlite://") as db:
        ours = ConvomemChatMessageHistory("s", db)
        oracle = InMemoryChatMessageHistory()
        for op in ops:
            if op == "clear":
                ours.clear()
                oracle.clear()
            else:
                batch = [HumanMessage(t) if j % 2 == 0 else AIMessage(t) for j, t in enumerate(op)]
                ours.add_messages(batch)
                oracle.add_messages(batch)
            assert ours.messages == oracle.messages


async def test_bad_input_changes_nothing() -> None:
    with open_store("sqlite://") as db:
        history = ConvomemChatMessageHistory("s", db)
        history.add_messages([HumanMessage("kept")])
        with pytest.raises(InvalidMessage, match=r"messages\[1\]"):
            history.add_messages([HumanMessage("not kept"), "a string"])  # type: ignore[list-item]
        assert [m.content for m in history.messages] == ["kept"]
        with pytest.raises(ConfigError, match="budget"):
            ConvomemChatMessageHistory("s", db, memory_options={"budget": 10})
    adb = await aopen_store("sqlite://")
    try:
        history = ConvomemChatMessageHistory("s", adb)
        await history.aadd_messages([HumanMessage("async")])
        assert [m.content for m in await history.aget_messages()] == ["async"]
        with pytest.raises(ConfigError):
            history.add_messages([HumanMessage("sync over an async store")])
        await history.aclear()
        assert await history.aget_messages() == []
    finally:
        await adb.aclose()
