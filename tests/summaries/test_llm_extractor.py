"""LLMExtractor against a local fake OpenAI-compatible server started in the test."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from convomem.errors import ConfigError, ExtractionError, TransientError
from convomem.model import Message
from convomem.retry import RetryPolicy, stop_after_attempt, wait_none
from convomem.summaries.extractor import AsyncExtractor, Extractor, OfflineExtractor
from convomem.summaries.llm_extractor import FACTS_SCHEMA, LLMExtractor
from convomem.summaries.supersession import FactHistory


class FakeServer:
    """Answers POST /v1/chat/completions from a script of (status, body) replies; the
    last reply repeats. Records every request body."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                i = min(len(server.requests) - 1, len(server.replies) - 1)
                status, reply = server.replies[i]
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(facts: list[dict[str, Any]] | str) -> dict[str, Any]:
    content = facts if isinstance(facts, str) else json.dumps({"facts": facts})
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
    }


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    try:
        yield s
    finally:
        s.close()


def _extractor(server: FakeServer, **kw: Any) -> LLMExtractor:
    retry = RetryPolicy(stop=stop_after_attempt(3), wait=wait_none())
    return LLMExtractor("fake", base_url=server.url, retry=retry, timeout=5.0, **kw)


MSGS = [
    Message("m1", "user", content="I live in Lisbon.", created_at=1_772_704_800.0),
    Message("m2", "assistant", content="Noted."),
    Message("m3", "user", content="I don't like olives.", created_at=1_772_704_900.0),
]


def test_facts_come_back_with_provenance_from_the_message_not_the_model(server: FakeServer):
    server.replies = [
        (200, completion([
            {"message": 0, "attribute": "City", "value": "Lisbon"},
            {"message": 2, "attribute": "pref:olives", "value": "dislikes"},
        ]))
    ]  # fmt: skip
    ex = _extractor(server)
    facts = ex.extract(MSGS)
    assert [(f.key[1], f.value, f.message_id, f.source_role) for f in facts] == [
        ("city", "Lisbon", "m1", "user"),
        ("pref:olives", "dislikes", "m3", "user"),
    ]
    assert facts[0].valid_from == MSGS[0].created_at
    req = server.requests[0]
    assert req["response_format"]["json_schema"]["schema"] == FACTS_SCHEMA
    assert "[2] user (2026-03-05 Thursday): I don't like olives." in req["messages"][0]["content"]
    assert (ex.calls, ex.fallbacks) == (1, 0)
    assert isinstance(ex, Extractor) and isinstance(ex, AsyncExtractor)


def test_transient_failures_are_retried_then_answered(server: FakeServer):
    server.replies = [(503, {"error": "busy"}), (429, {"error": "slow down"})]
    server.replies.append((200, completion([{"message": 0, "attribute": "city", "value": "X"}])))
    ex = _extractor(server)
    assert [f.value for f in ex.extract(MSGS)] == ["X"]
    assert (len(server.requests), ex.fallbacks) == (3, 0)


def test_retries_run_out_then_the_offline_fallback_answers(server: FakeServer):
    server.replies = [(500, {"error": "down"})]
    ex = _extractor(server)
    facts = ex.extract(MSGS)
    assert len(server.requests) == 3  # the policy's three attempts, no client retries
    assert ex.fallbacks == 1
    assert facts == OfflineExtractor().extract(MSGS)


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps({"nope": []}), json.dumps({"facts": [{"message": 9}]})],
)
def test_a_malformed_answer_is_not_retried_and_falls_back(server: FakeServer, content: str):
    server.replies = [(200, completion(content))]
    ex = _extractor(server)
    assert ex.extract(MSGS) == OfflineExtractor().extract(MSGS)
    assert (len(server.requests), ex.fallbacks) == (1, 1)


def test_without_a_fallback_the_typed_error_is_raised(server: FakeServer):
    server.replies = [(200, completion("[]"))]
    with pytest.raises(ExtractionError):
        _extractor(server, fallback=None).extract(MSGS)
    server.replies = [(502, {"error": "bad gateway"})]
    with pytest.raises(TransientError):
        _extractor(server, fallback=None).extract(MSGS)


def test_async_twin_sends_the_same_request_and_parses_the_same(server: FakeServer):
    server.replies = [
        (200, completion([{"message": 2, "attribute": "pref:olives", "value": "dislikes"}]))
    ]
    ex = _extractor(server)
    sync = ex.extract(MSGS)
    asynced = asyncio.run(ex.aextract(MSGS))
    assert sync == asynced
    assert server.requests[0] == server.requests[1]


def test_each_message_is_sent_once_through_fact_history(server: FakeServer):
    server.replies = [(200, completion([{"message": 0, "attribute": "city", "value": "Lisbon"}]))]
    ex = _extractor(server, batch=2)
    history = FactHistory(extractor=ex)
    history.add_messages(MSGS)
    history.add_messages(MSGS)  # a re-fold: nothing new
    history.add_messages([*MSGS, Message("m4", "user", content="hi")])
    sent = [r["messages"][0]["content"] for r in server.requests]
    assert len(server.requests) == ex.calls == 3  # [m1, m2], [m3], [m4]
    assert sum(c.count("I live in Lisbon.") for c in sent) == 1
    assert history.get("city") is not None


def test_bad_configuration_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="model="):
        LLMExtractor("", base_url="http://x")
    with pytest.raises(ConfigError, match="batch="):
        LLMExtractor("m", base_url="http://x", batch=0)
    with pytest.raises(ConfigError, match="fallback="):
        LLMExtractor("m", base_url="http://x", fallback=object())  # type: ignore[arg-type]
