"""The article's ``llm`` argument: chat models and their answers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from convomem.compat._llm import ChatModel, is_chat_model, response_text, summarizer_for
from convomem.errors import AsyncSummarizerError, ConfigError, SummarizerError
from convomem.summaries import ExtractiveSummarizer


class Answer:
    def __init__(self, content: Any) -> None:
        self.content = content


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ("plain", "plain"),
        (Answer("from .content"), "from .content"),
        (Answer(["a", {"type": "text", "text": "b"}, {"type": "image"}]), "ab"),
    ],
)
def test_response_text(response: object, text: str) -> None:
    assert response_text(response, "llm") == text


@pytest.mark.parametrize("response", [None, 3, Answer(None), Answer({"text": "x"})])
def test_response_text_rejects_what_is_not_text(response: object) -> None:
    with pytest.raises(SummarizerError, match="llm returned"):
        response_text(response, "llm")


def test_a_sync_model_runs_in_a_worker_thread_from_async_code() -> None:
    threads: list[int] = []

    class Model:
        model_name = "fake-1"

        def invoke(self, prompt: str) -> str:
            threads.append(threading.get_ident())
            return prompt.upper()

    chat = ChatModel(Model())
    assert chat.name == "fake-1" and not chat.needs_loop
    assert chat.ask("hi") == "HI"
    assert asyncio.run(chat.aask("yo")) == "YO"
    assert threads[0] == threading.get_ident() != threads[1]


def test_an_async_model_is_awaited() -> None:
    class Model:
        async def ainvoke(self, prompt: str) -> Answer:
            return Answer(prompt[::-1])

    chat = ChatModel(Model())
    assert chat.needs_loop and chat.ask("abc") == "cba"
    assert asyncio.run(chat.aask("xyz")) == "zyx"


def test_what_an_llm_argument_stands_for() -> None:
    adapter, model = summarizer_for(None, lambda m, p: "")
    assert isinstance(adapter.fn, ExtractiveSummarizer) and model is None
    adapter, model = summarizer_for(lambda messages: "x", lambda m, p: "")
    assert model is None and adapter([]) == "x"
    assert not is_chat_model(print) and is_chat_model(
        Answer.__new__(type("M", (), {"invoke": len}))
    )
    with pytest.raises(ConfigError, match="llm=3"):
        summarizer_for(3, lambda m, p: "")
    with pytest.raises(ConfigError, match="invoke or ainvoke"):
        ChatModel(object())


def test_an_invoke_that_returns_a_coroutine() -> None:
    class Model:
        def invoke(self, prompt: str) -> Any:
            async def answer() -> str:
                return "late"

            return answer()

    chat = ChatModel(Model())
    assert chat.ask("x") == "late"  # no loop running: run it

    async def inside() -> None:
        with pytest.raises(AsyncSummarizerError, match="async method"):
            chat.ask("x")  # inside a loop: refused, and the coroutine closed (no warning)

    asyncio.run(inside())
