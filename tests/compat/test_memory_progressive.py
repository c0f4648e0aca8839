"""ProgressiveSummarizer: the article's behaviours, any summarizer in place of the llm."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.compat import ProgressiveSummarizer
from convomem.errors import AsyncSummarizerError, ConfigError, InvalidMessage, SummarizerError
from convomem.model import Message
from convomem.summaries import Summary


class FakeResponse:
    def __init__(self, content: Any) -> None:
        self.content = content


class FakeChatModel:
    """What the article passes: ``await llm.ainvoke(prompt)`` -> ``.content``."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def ainvoke(self, prompt: str) -> FakeResponse:
        self.prompts.append(prompt)
        return FakeResponse(f"summary {len(self.prompts)}")


class Recorder:
    """A convomem summarizer: ``(messages, previous) -> str``; records what it got."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls.append(([m.text() for m in messages], previous.text if previous else None))
        return f"S{len(self.calls)}"


def exchange(i: int) -> tuple[str, str]:
    return f"question {i}", f"answer {i}"


async def feed(mem: ProgressiveSummarizer, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        await mem.add_exchange(*exchange(i))


def test_the_articles_flow_with_a_chat_model() -> None:
    llm = FakeChatModel()
    mem = ProgressiveSummarizer(llm, summarize_threshold=3)
    asyncio.run(feed(mem, 2))
    assert llm.prompts == [] and mem.summary == "" and mem.turn_count == 2
    assert mem.get_context() == (
        "[Recent Conversation]\nuser: question 0\nassistant: answer 0\n"
        "user: question 1\nassistant: answer 1"
    )
    asyncio.run(feed(mem, 1, start=2))  # the 3rd exchange: summarize
    assert llm.prompts == [
        "Previous summary:\n(none)\n\nRecent conversation:\nuser: question 0\n"
        "assistant: answer 0\n\nCreate a concise summary that integrates the previous "
        "summary with\nthe recent conversation, preserving key information. Include user "
        "names,\npreferences, and unresolved issues."
    ]
    assert mem.summary == "summary 1"
    # The last two exchanges stay verbatim (the article's recent_messages[-4:]).
    assert mem.recent_messages == [
        {"role": "user", "content": "question 1"},
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "question 2"},
        {"role": "assistant", "content": "answer 2"},
    ]
    assert mem.get_context() == (
        "[Conversation Summary]\nsummary 1\n\n[Recent Conversation]\n"
        "user: question 1\nassistant: answer 1\nuser: question 2\nassistant: answer 2"
    )
    asyncio.run(feed(mem, 3, start=3))  # the 6th: the previous summary goes in the prompt
    assert len(llm.prompts) == 2
    assert llm.prompts[1].startswith("Previous summary:\nsummary 1\n\nRecent conversation:\n")
    assert "question 1" in llm.prompts[1] and "question 4" not in llm.prompts[1]
    assert mem.summary == "summary 2" and mem.summarized_messages == 8


def test_an_empty_context() -> None:
    assert ProgressiveSummarizer(Recorder()).get_context() == ""


@settings(max_examples=60)
@given(
    threshold=st.integers(1, 6),
    keep_turns=st.integers(0, 3),
    turns=st.integers(0, 30),
)
def test_each_message_is_summarized_once_and_nothing_is_lost(
    threshold: int, keep_turns: int, turns: int
) -> None:
    rec = Recorder()
    mem = ProgressiveSummarizer(rec, threshold, keep_turns=keep_turns)
    for i in range(turns):
        mem.add_exchange_sync(*exchange(i))
    everything = [t for i in range(turns) for t in exchange(i)]
    folded = [t for texts, _ in rec.calls for t in texts]
    recent = [m["content"] for m in mem.recent_messages]
    assert folded + recent == everything  # a partition, in order: none twice, none lost
    assert mem.summarized_messages == len(folded)
    # Folds happen every `threshold` exchanges, when something is older than the tail.
    due = [k for k in range(1, turns + 1) if k % threshold == 0 and 2 * k > 2 * keep_turns]
    assert len(rec.calls) == mem.calls == len(due)
    # Each fold gets the previous summary.
    expected = [None, *(f"S{k}" for k in range(1, len(due)))]
    assert [prev for _, prev in rec.calls] == expected[: len(due)]
    if due:
        assert len(recent) == 2 * keep_turns + 2 * (turns - due[-1])


def test_any_summarizer_callable_sync_or_async() -> None:
    async def summarize(messages: Sequence[Message]) -> str:
        return " / ".join(m.text() for m in messages)

    mem = ProgressiveSummarizer(summarize, summarize_threshold=3, keep_turns=1)
    asyncio.run(feed(mem, 3))
    assert mem.summary == "question 0 / answer 0 / question 1 / answer 1"
    mem.add_exchange_sync("x", "y")  # the sync twin runs the async summarizer too
    assert mem.turn_count == 4


def test_no_llm_is_the_offline_extractive_summarizer() -> None:
    mem = ProgressiveSummarizer(None, summarize_threshold=2, keep_turns=0)
    mem.add_exchange_sync("My order 1182 never arrived.", "Sorry, I will check order 1182.")
    mem.add_exchange_sync("I prefer email updates.", "Noted: email.")
    assert "1182" in mem.summary and mem.recent_messages == []
    assert not mem.degraded


def test_a_sync_only_chat_model_and_content_parts() -> None:
    class SyncModel:
        def invoke(self, prompt: str) -> FakeResponse:
            return FakeResponse([{"type": "text", "text": "part one, "}, "part two"])

    mem = ProgressiveSummarizer(SyncModel(), summarize_threshold=1, keep_turns=0)
    mem.add_exchange_sync("hi", "hello")
    assert mem.summary == "part one, part two"
    asyncio.run(mem.add_exchange("again", "sure"))  # async path: invoke in a worker thread
    assert mem.summarized_messages == 4


def test_an_async_only_model_is_refused_by_the_sync_twin_inside_a_loop() -> None:
    llm = FakeChatModel()
    mem = ProgressiveSummarizer(llm, summarize_threshold=1, keep_turns=0)
    mem.add_exchange_sync("outside a loop", "fine")  # asyncio.run on ainvoke
    assert mem.summary == "summary 1"

    async def inside() -> None:
        with pytest.raises(AsyncSummarizerError, match="async method"):
            mem.add_exchange_sync("inside a loop", "refused")

    asyncio.run(inside())
    assert mem.turn_count == 1 and mem.recent_messages == []  # nothing changed


def test_a_failing_llm_falls_back_then_retries_when_both_fail() -> None:
    class Broken:
        async def ainvoke(self, prompt: str) -> FakeResponse:
            raise TimeoutError("model down")

    mem = ProgressiveSummarizer(Broken(), summarize_threshold=1, keep_turns=0)
    mem.add_exchange_sync("My order 1182 is late.", "Checking order 1182.")
    assert mem.degraded and "1182" in mem.summary
    assert (mem.calls, mem.fallbacks, mem.failures) == (2, 1, 0)
    assert isinstance(mem.last_error, TimeoutError)

    fail = {"on": True}

    def flaky_fallback(messages: Sequence[Message]) -> str:
        if fail["on"]:
            raise RuntimeError("fallback down too")
        return "recovered"

    mem2 = ProgressiveSummarizer(Broken(), 1, keep_turns=0, fallback=flaky_fallback)
    mem2.add_exchange_sync("first", "one")
    assert mem2.pending and mem2.summary == "" and mem2.failures == 1
    assert isinstance(mem2.last_error, SummarizerError)
    assert len(mem2.last_error.errors) == 2
    assert [m["content"] for m in mem2.recent_messages] == ["first", "one"]  # nothing lost
    fail["on"] = False
    mem2.add_exchange_sync("second", "two")  # retried: everything folds
    assert not mem2.pending and mem2.summary == "recovered" and mem2.summarized_messages == 4


def test_a_model_answer_that_is_not_text_is_a_failure() -> None:
    class Odd:
        def invoke(self, prompt: str) -> int:
            return 42

    mem = ProgressiveSummarizer(Odd(), 1, keep_turns=0, fallback=False)
    mem.add_exchange_sync("a", "b")
    assert mem.pending and isinstance(mem.last_error, SummarizerError)
    assert "returned int" in str(mem.last_error)


def test_bad_input_changes_nothing() -> None:
    mem = ProgressiveSummarizer(Recorder(), 1)
    with pytest.raises(InvalidMessage, match="user_msg=None"):
        mem.add_exchange_sync(None, "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="ai_msg=3"):
        asyncio.run(mem.add_exchange("x", 3))  # type: ignore[arg-type]
    assert mem.turn_count == 0 and mem.get_context() == ""


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((None, 0), {}, "summarize_threshold=0"),
        ((None, True), {}, "summarize_threshold=True"),
        ((None, 3), {"keep_turns": -1}, "keep_turns=-1"),
        ((42, 3), {}, "llm=42"),
        ((None, 3), {"fallback": "x"}, "fallback='x'"),
    ],
)
def test_bad_options(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProgressiveSummarizer(*args, **kwargs)
