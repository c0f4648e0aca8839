"""convomem_history under pydantic-ai's own Agent.run loop.

The model is pydantic-ai's ``FunctionModel`` with a scripted function (a tool call when
asked for the weather, an answer quoting a tool return, an acknowledgement otherwise)
that records every request. 32 runs with tool calls and a restart half-way (a new memory
and agent over a newly opened database on the same SQLite file), as a capability with and
without ``message_history``, over sync and async databases.
Every request is checked against the budget and the tool-pair rule; the session must hold
every message exactly once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from _lazy import lazy
from convomem import ConversationMemory, aopen_store, open_store
from convomem.errors import ConfigError
from convomem.formats.pydantic_ai import to_pydantic_ai
from convomem.recall import AsyncRecallIndex, RecallIndex

if TYPE_CHECKING:
    from pydantic_ai.models.function import AgentInfo

# pydantic-ai (and the adapter, which subclasses its capability), imported by the tests
# that run, not at collection
pai, pm = lazy("pydantic_ai"), lazy("pydantic_ai.messages")
adapter = lazy("convomem.integrations.pydantic_ai")
function_model, testing_model = lazy("pydantic_ai.models.function"), lazy("pydantic_ai.models.test")
BUDGET = 700
RUNS = 32
WEATHER = re.compile(r"weather in (\w+)")


def as_json(messages: Any) -> Any:
    return pm.ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class Script:
    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def __call__(self, messages: list[Any], info: AgentInfo) -> pm.ModelResponse:
        self.calls.append(list(messages))
        n = len(self.calls)
        last = messages[-1].parts[-1]
        if isinstance(last, pm.ToolReturnPart):
            return pm.ModelResponse(parts=[pm.TextPart(f"The tool said: {last.content}")])
        if isinstance(last, pm.UserPromptPart) and (m := WEATHER.search(str(last.content))):
            call = pm.ToolCallPart("weather", {"city": m[1]}, tool_call_id=f"call-{n}")
            return pm.ModelResponse(parts=[call])
        return pm.ModelResponse(parts=[pm.TextPart(f"Noted ({n}).")])


def problems(messages: list[Any]) -> list[str]:
    """Returns without their call in the response just before; calls left unanswered."""
    out: list[str] = []
    open_calls: set[str] = set()
    for m in messages:
        returns = {p.tool_call_id for p in m.parts if isinstance(p, pm.ToolReturnPart)}
        out += [f"return without call: {c}" for c in returns - open_calls]
        out += [f"unanswered: {c}" for c in open_calls - returns]
        open_calls = {p.tool_call_id for p in m.parts if isinstance(p, pm.ToolCallPart)}
    return out


def user_turn(i: int) -> str:
    if i == 0:
        return "Hi, I am Tomasz and I am allergic to shellfish."
    if i % 3 == 1:
        return f"What is the weather in {['Oslo', 'Rome', 'Lima'][i % 3]}?"
    return f"Run {i}: tell me about subject number {i} in a few sentences, please."


async def open_memory(url: str, db_mode: str) -> tuple[Any, ConversationMemory]:
    if db_mode == "async":
        db = await aopen_store(url)
        recall: Any = AsyncRecallIndex(db)
    else:
        db = open_store(url)
        recall = RecallIndex(db)
    memory = ConversationMemory(BUDGET, store=db.session("s1", user_id="tomasz"), recall=recall)
    return db, memory


async def close(db: Any, memory: ConversationMemory) -> None:
    await memory.aflush()
    await db.aclose() if hasattr(db, "aclose") else db.close()


@pytest.mark.parametrize("db_mode", ["sync", "async"])
@pytest.mark.parametrize("style", ["capability", "capability+history"])
async def test_agent_runs_with_tools_and_a_restart(
    tmp_path: Path, db_mode: str, style: str
) -> None:
    url = f"sqlite:///{tmp_path}/agent.db"
    script = Script()
    history: list[Any] | None = None
    db, memory = await open_memory(url, db_mode)
    for i in range(RUNS):
        if i == RUNS // 2:
            await close(db, memory)
            db, memory = await open_memory(url, db_mode)
        agent = pai.Agent(
            function_model.FunctionModel(script),
            tools=[weather],
            system_prompt="Be brief.",
            capabilities=[adapter.convomem_history(memory)],
        )
        result = await agent.run(user_turn(i), message_history=history)
        if style.endswith("+history"):
            history = result.all_messages()
        # the run's own history is untouched: none of convomem's summary or facts in it
        assert "convomem" not in str(as_json(result.all_messages()))
        assert memory.stats().context_tokens <= BUDGET
    for sent in script.calls:
        assert problems(sent) == []
    last = str(as_json(script.calls[-1]))
    assert "Tomasz" in last and "shellfish" in last  # the user's facts reach the model
    assert max(len(s) for s in script.calls) < RUNS  # the view, not the history
    log = await memory.amessages()
    prompts = [m.text() for m in log if m.role == "user"]
    assert prompts == [user_turn(i) for i in range(RUNS)]  # each once, in order
    assert [m.text() for m in log if m.role == "system"] == ["Be brief."]
    back = to_pydantic_ai(log)
    assert problems(back) == []
    answers = [p.content for r in back for p in r.parts if isinstance(p, pm.TextPart)]
    assert len(answers) == RUNS  # every final answer, the last run's included
    if style == "capability+history":
        assert as_json(back) == as_json(history)
    assert memory.stats().summarized_messages > 0
    await close(db, memory)


async def test_with_pydantic_ais_test_model() -> None:
    with open_store("sqlite://") as db:
        memory = ConversationMemory(300, store=db.session("t"))
        agent = pai.Agent(
            testing_model.TestModel(),
            tools=[weather],
            capabilities=[adapter.convomem_history(memory)],
        )
        for i in range(30):
            result = await agent.run(f"question {i} " + "more words " * 8)
            assert result.output
        log = memory.messages()
        assert [m.text() for m in log if m.role == "user"] == [
            f"question {i} " + "more words " * 8 for i in range(30)
        ]
        assert sum(m.role == "assistant" and not m.has_tool_use() for m in log) == 30
        assert any(m.role == "tool" for m in log) and problems(to_pydantic_ai(log)) == []
        assert memory.stats().context_tokens <= 300 and memory.stats().summarized_messages


def test_a_memory_is_required() -> None:
    with pytest.raises(ConfigError, match="ConversationMemory"):
        adapter.convomem_history("not a memory")  # type: ignore[arg-type]


def test_run_sync_works_the_same(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/sync.db"
    for attempt in range(2):  # the second is a restart over the same file
        with open_store(url) as db:
            memory = ConversationMemory(400, store=db.session("s", user_id="u"))
            agent = pai.Agent(
                testing_model.TestModel(call_tools=[]),
                capabilities=[adapter.convomem_history(memory)],
            )
            for i in range(15):
                agent.run_sync(f"sync question {attempt} {i} " + "filler " * 6)
            assert memory.stats().context_tokens <= 400
    with open_store(url) as db:
        log = ConversationMemory(400, store=db.session("s", user_id="u")).messages()
        assert len(log) == 60  # 30 prompts and 30 answers, each once
