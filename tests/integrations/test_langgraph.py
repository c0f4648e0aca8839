"""ConvomemContext as the pre/post-model hooks of LangGraph's own react agent.

A scripted chat model (``_langchain_support.ScriptedChat``) runs 36 turns with tool calls
through ``create_react_agent``, with a restart half-way (new hook objects and a new graph
over a newly opened database on the same SQLite file): once with a checkpointer (the
session must equal the graph's thread, message for message) and once without (convomem is
the thread's only memory), sync and async. Every model input is checked against the
budget and the tool-pair rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent

from _langchain_support import ScriptedChat, unanswered_calls
from convomem import aopen_store, open_store
from convomem.errors import ConfigError, InvalidMessage
from convomem.formats.langchain import to_langchain
from convomem.integrations.langgraph import ConvomemContext
from convomem.recall import AsyncRecallIndex, RecallIndex

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BUDGET = 700
TURNS = 36
CONFIG = {"configurable": {"thread_id": "t1", "user_id": "u1"}}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def user_turn(i: int) -> str:
    if i == 0:
        return "Hi, my name is Ingrid and I am allergic to peanuts."
    if i % 3 == 1:
        return f"What is the weather in {['Oslo', 'Rome', 'Lima'][i % 3]}?"
    return f"Turn {i}: explain subject number {i} to me in a few sentences please."


async def open_db(url: str, mode: str) -> tuple[Any, Any]:
    if mode == "async":
        db = await aopen_store(url)
        return db, AsyncRecallIndex(db)
    db = open_store(url)
    return db, RecallIndex(db)


async def close_db(db: Any) -> None:
    await db.aclose() if hasattr(db, "aclose") else db.close()


async def run_agent(url: str, mode: str, checkpointer: InMemorySaver | None) -> None:
    model = ScriptedChat()
    ran: list[BaseMessage] = []  # what the runs produced, in order (no checkpointer)
    db, recall = await open_db(url, mode)
    for i in range(TURNS):
        if i == TURNS // 2:  # restart: new objects over the same file
            await close_db(db)
            db, recall = await open_db(url, mode)
        context = ConvomemContext(db, budget=BUDGET, memory_options={"recall": recall})
        agent = create_react_agent(
            model,
            [weather],
            prompt="Be brief.",
            pre_model_hook=context.pre_model_hook,
            post_model_hook=context.post_model_hook,
            checkpointer=checkpointer,
        )
        payload = {"messages": [HumanMessage(user_turn(i))]}
        out = (
            await agent.ainvoke(payload, CONFIG)
            if mode == "async"
            else agent.invoke(payload, CONFIG)
        )
        ran.extend(out["messages"] if checkpointer is None else [])
        memory = context.memory(CONFIG)
        assert memory.stats().context_tokens <= BUDGET
    for sent in model.calls:
        assert unanswered_calls(sent) == []
        assert isinstance(sent[0], SystemMessage) and sent[0].content == "Be brief."
    assert "Ingrid" in str(model.calls[-1])  # the user's facts reach the model
    assert "peanuts" in str(model.calls[-1])
    log = to_langchain(await memory.amessages() if mode == "async" else memory.messages())
    if checkpointer is not None:
        state = agent.get_state(CONFIG).values["messages"]
        assert log == state  # the session is the thread, message for message
    else:
        assert log == ran  # every run's messages, the final answers included
        # each run's model saw the answer of the run before (convomem is the memory)
        answers = [m for m in ran if isinstance(m, AIMessage) and not m.tool_calls]
        assert any(answers[-2].content == m.content for m in model.calls[-1])
    assert max(len(sent) for sent in model.calls) < len(log) // 2  # bounded
    stats = memory.stats()
    assert stats.summarized_messages > 0  # compacted (counters restart with the object)
    if mode == "async":
        await memory.aflush()
    await close_db(db)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_react_agent_with_a_checkpointer(tmp_path: Path, mode: str) -> None:
    await run_agent(f"sqlite:///{tmp_path}/g.db", mode, InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_react_agent_with_convomem_as_its_only_memory(tmp_path: Path, mode: str) -> None:
    await run_agent(f"sqlite:///{tmp_path}/g.db", mode, None)


class State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    context: list[BaseMessage]


def test_the_node_in_a_graph_of_ones_own() -> None:
    model = ScriptedChat()

    def call_model(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["context"])]}

    with open_store("sqlite://") as db:
        context = ConvomemContext(db, budget=400, output="context")
        graph = StateGraph(State)
        graph.add_node("context", context.node)
        graph.add_node("model", call_model)
        graph.add_node("record", context.post_model_hook)
        graph.add_edge(START, "context")
        graph.add_edge("context", "model")
        graph.add_edge("model", "record")
        graph.add_edge("record", END)
        app = graph.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "own"}}
        for i in range(30):
            app.invoke({"messages": [HumanMessage(f"message {i} " + "padding " * 10)]}, config)
        log = context.memory(config).messages()
        assert to_langchain(log) == app.get_state(config).values["messages"]
        assert len(log) == 60
        assert len(model.calls[-1]) < 20  # the view, not the thread


def test_configuration_errors_are_named() -> None:
    with open_store("sqlite://") as db:
        context = ConvomemContext(db)
        with pytest.raises(ConfigError, match=r"configurable\.thread_id"):
            context.context({"messages": []}, {"configurable": {}})
        with pytest.raises(ConfigError, match="output='messages'"):
            ConvomemContext(db, output="messages")
        with pytest.raises(ConfigError, match="budget"):
            ConvomemContext(db, memory_options={"budget": 5})
        with pytest.raises(InvalidMessage, match="add_messages"):
            context.context({"messages": [HumanMessage("no id")]}, CONFIG)
        assert context.memory(CONFIG).messages() == []  # nothing was written


def test_a_turns_work_does_not_grow_with_the_thread() -> None:
    """Store statements and rows read per turn stay flat while the checkpointed thread
    grows (the hooks convert and append only what is new, and read the view)."""
    with open_store("sqlite://") as db:
        context = ConvomemContext(db, budget=800)
        agent = create_react_agent(
            ScriptedChat(),
            [],
            pre_model_hook=context.pre_model_hook,
            post_model_hook=context.post_model_hook,
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "long"}}
        work = []
        for i in range(150):
            before = db.stats()
            agent.invoke({"messages": [HumanMessage(f"turn {i} " + "word " * 20)]}, config)
            after = db.stats()
            work.append((after.statements - before.statements, after.rows_read - before.rows_read))
        assert context.memory(config).stats().summarized_messages > 200
        early, late = work[20:40], work[130:150]
        assert max(s for s, _ in late) <= max(s for s, _ in early)
        assert max(r for _, r in late) <= max(r for _, r in early)
