"""LLMSummarizer against a local server that speaks the Chat Completions protocol.

The server is stdlib ``http.server`` on 127.0.0.1 (port 0) in a thread; nothing
leaves the machine and the API key is a dummy string.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from convomem.errors import ConfigError, MissingDependency, SummarizerError, TransientError
from convomem.model import Message
from convomem.summaries import RunningSummary, Summary, as_summarizer
from convomem.summaries.llm import DEFAULT_PROMPT, NO_PREVIOUS, LLMSummarizer


def completion(content: Any, *, usage: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    return body


class FakeChat:
    """A Chat Completions endpoint: answers from a queue and records the requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.replies: list[tuple[int, bytes]] = []
        self.default: tuple[int, bytes] = (200, json.dumps(completion("A summary.")).encode())
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                chat.paths.append(self.path)
                chat.requests.append(json.loads(self.rfile.read(n)))
                status, payload = chat.replies.pop(0) if chat.replies else chat.default
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def reply(self, status: int, body: Any) -> None:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.replies.append((status, payload))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChat]:
    srv = FakeChat()
    yield srv
    srv.close()


@pytest.fixture
def chat(server: FakeChat) -> FakeChat:
    server.requests.clear()
    server.paths.clear()
    server.replies.clear()
    return server


def make(chat: FakeChat, **kw: Any) -> LLMSummarizer:
    return LLMSummarizer("tiny", base_url=chat.base_url, api_key="dummy-key", **kw)


NEW = [
    Message("u1", "user", content="My order 1182 never arrived."),
    Message("a1", "assistant", content="I opened ticket #A-77 for you."),
]
PREV = Summary("The user is Dana; she prefers email.")


def test_request_carries_previous_summary_and_new_messages(chat: FakeChat) -> None:
    chat.reply(200, completion("  Dana's order 1182 is missing; ticket #A-77.  "))
    llm = make(chat, max_tokens=200, temperature=0)
    assert llm(NEW, PREV) == "Dana's order 1182 is missing; ticket #A-77."
    assert chat.paths == ["/v1/chat/completions"]
    body = chat.requests[0]
    assert body["model"] == "tiny" and body["max_tokens"] == 200 and body["temperature"] == 0
    prompt = body["messages"][0]["content"]
    assert "The user is Dana; she prefers email." in prompt
    assert "user: My order 1182 never arrived." in prompt
    assert "assistant: I opened ticket #A-77 for you." in prompt
    assert "names" in prompt and "preference" in prompt and "unresolved" in prompt
    assert llm.usage.calls == 1 and llm.usage.prompt_tokens == 40
    assert llm.usage.completion_tokens == 9
    assert llm.name == "llm:tiny"


def test_without_previous_the_prompt_says_so(chat: FakeChat) -> None:
    llm = make(chat)
    llm(NEW)
    assert NO_PREVIOUS in chat.requests[0]["messages"][0]["content"]
    assert "temperature" not in chat.requests[0] and "max_tokens" not in chat.requests[0]


async def test_async_twin_sends_the_same_request(chat: FakeChat) -> None:
    chat.reply(200, completion("async summary"))
    llm = make(chat)
    assert await llm.acall(NEW, PREV) == "async summary"
    assert chat.requests[0] == llm.build_request(NEW, PREV)
    assert await as_summarizer(llm).acall(NEW, PREV) == "A summary."  # adapter uses acall
    assert len(chat.requests) == 2


def test_prompt_placeholders_are_filled_in_one_pass(chat: FakeChat) -> None:
    llm = make(chat, prompt="P={previous} M={messages}")
    text = llm.render_prompt([Message("x", "user", content="{previous}")], Summary("{messages}"))
    assert text == "P={messages} M=user: {previous}"


@pytest.mark.parametrize("status", [500, 502, 503, 429, 408])
def test_transient_http_errors(chat: FakeChat, status: int) -> None:
    chat.reply(status, {"error": {"message": "try later"}})
    with pytest.raises(TransientError, match=f"HTTP {status}"):
        make(chat)(NEW)


@pytest.mark.parametrize("status", [400, 401, 404])
def test_permanent_http_errors(chat: FakeChat, status: int) -> None:
    chat.reply(status, {"error": {"message": "no"}})
    with pytest.raises(SummarizerError, match=f"HTTP {status}"):
        make(chat)(NEW)


@pytest.mark.parametrize(
    "body",
    [
        b"this is not json",
        {"unexpected": True},
        {"choices": []},
        completion(None),
        completion("   "),
        completion(42),
    ],
)
def test_malformed_responses_are_summarizer_errors(chat: FakeChat, body: Any) -> None:
    chat.reply(200, body)
    llm = make(chat)
    with pytest.raises(SummarizerError):
        llm(NEW)
    assert llm.usage.calls == 0


async def test_async_errors_are_typed_too(chat: FakeChat) -> None:
    chat.reply(503, {"error": {"message": "busy"}})
    chat.reply(200, b"garbage")
    llm = make(chat)
    with pytest.raises(TransientError):
        await llm.acall(NEW)
    with pytest.raises(SummarizerError):
        await llm.acall(NEW)


def test_connection_refused_is_transient() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = LLMSummarizer("tiny", base_url=f"http://127.0.0.1:{port}/v1", api_key="dummy")
    with pytest.raises(TransientError):
        llm(NEW)


def test_running_summary_retries_then_falls_back(chat: FakeChat) -> None:
    for _ in range(3):
        chat.reply(500, {"error": {"message": "down"}})
    sleeps: list[float] = []
    rs = RunningSummary(make(chat), retries=2, sleep=sleeps.append)
    s = rs.fold(NEW)
    assert s is not None and s.degraded and "1182" in s.text
    assert len(chat.requests) == 3 and sleeps == [0.5, 1.0]
    s = rs.fold([Message("u2", "user", content="Any news on it?")])
    assert s is not None and "A summary." in s.text
    assert len(chat.requests) == 4  # u1/a1 were not sent again


async def test_running_summary_async_with_the_llm(chat: FakeChat) -> None:
    rs = RunningSummary(make(chat))
    s = await rs.afold(NEW, background=True)
    assert s is not None and s.degraded
    await rs.wait()
    now = rs.current()
    assert now is not None and not now.degraded and now.text == "A summary."
    assert len(chat.requests) == 1


def test_reused_clients_are_used(chat: FakeChat) -> None:
    import openai

    client = openai.OpenAI(api_key="dummy", base_url=chat.base_url, max_retries=0)
    llm = LLMSummarizer("tiny", client=client, async_client=openai.AsyncOpenAI(api_key="d"))
    assert llm(NEW) == "A summary."  # no base_url: only the given client reaches the fake


def test_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="api_key=None"):
        LLMSummarizer("gpt-4o-mini")
    LLMSummarizer("local", base_url="http://127.0.0.1:9/v1")  # a local server needs no key
    with pytest.raises(ConfigError, match="model=''"):
        LLMSummarizer("", api_key="k")
    with pytest.raises(ConfigError, match="prompt="):
        LLMSummarizer("m", api_key="k", prompt="only {messages}")
    with pytest.raises(ConfigError, match="timeout=0"):
        LLMSummarizer("m", api_key="k", timeout=0)
    with pytest.raises(ConfigError, match="max_tokens=0"):
        LLMSummarizer("m", api_key="k", max_tokens=0)
    with pytest.raises(ConfigError, match="max_retries=-1"):
        LLMSummarizer("m", api_key="k", max_retries=-1)
    assert "{previous}" in DEFAULT_PROMPT and "{messages}" in DEFAULT_PROMPT


def test_missing_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(MissingDependency, match=r"convomem\[llm\]"):
        LLMSummarizer("m", api_key="k")
