"""A fake LangChain chat model for the LangChain and LangGraph adapter tests.

``ScriptedChat`` answers by a fixed policy, so a conversation of any length is scripted:
a user message asking for "weather in <city>" gets a tool call; a tool result gets an
answer quoting it; anything else an acknowledgement. Every input it receives is kept
(``calls``), so a test can check what the model was shown, turn by turn.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

WEATHER = re.compile(r"weather in (\w+)")


class ScriptedChat(BaseChatModel):
    """A deterministic chat model that records what it is sent."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)
    counter: Any = Field(default_factory=lambda: itertools.count(1))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        n = next(self.counter)
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"The tool said: {last.content}", id=f"ai-{n}")
        elif isinstance(last, HumanMessage) and (match := WEATHER.search(str(last.content))):
            call = {"name": "weather", "args": {"city": match[1]}, "id": f"call-{n}"}
            reply = AIMessage("", tool_calls=[call], id=f"ai-{n}")
        else:
            reply = AIMessage(f"Noted ({n}): {str(last.content)[:40]}", id=f"ai-{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def unanswered_calls(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool calls in ``messages`` with no ``ToolMessage`` answering them right after, and
    tool messages answering no call before them: what a provider rejects."""
    problems: list[str] = []
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_calls:
                problems.append(f"result without call: {m.tool_call_id}")
            open_calls.discard(m.tool_call_id)
            continue
        problems += [f"call without result: {c}" for c in sorted(open_calls)]
        open_calls = {c["id"] for c in getattr(m, "tool_calls", None) or [] if c["id"]}
    return problems + [f"call without result: {c}" for c in sorted(open_calls)]
