"""LLMSummaryJudge against a local server that speaks the Chat Completions protocol.

The server is stdlib ``http.server`` on 127.0.0.1 (port 0) in a thread, started by the
test; nothing leaves the machine and the API key is a dummy string.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from convomem.errors import ConfigError, SummarizerError, TransientError
from convomem.model import Message
from convomem.summaries import RunningSummary
from convomem.summaries.validation_llm import JUDGE_PROMPT, LLMSummaryJudge

SOURCE = [
    Message("u1", "user", content="My order number is 1182. Never call me."),
    Message("a1", "assistant", content="Noted: order 1182, email only."),
]


def completion(content: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "judge",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }


VERDICT = {
    "score": 35,
    "dropped": ["Never call me."],
    "contradicted": [{"fact": "order 1182", "summary": "order 1183"}],
    "reasons": ["The order number is wrong.", "The no-call preference is missing."],
}


class FakeJudge:
    """Answers from a queue (default: VERDICT) and records the requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: list[tuple[int, bytes]] = []
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                judge.requests.append(json.loads(self.rfile.read(n)))
                if judge.replies:
                    status, payload = judge.replies.pop(0)
                else:
                    status, payload = 200, json.dumps(completion(json.dumps(VERDICT))).encode()
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
        self.replies.append((status, json.dumps(body).encode()))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[FakeJudge]:
    s = FakeJudge()
    yield s
    s.close()


def test_the_judge_asks_for_json_and_reads_the_verdict(server: FakeJudge) -> None:
    judge = LLMSummaryJudge("judge", base_url=server.base_url, api_key="x")
    v = judge(SOURCE, "The user asked about order 1183.")
    req = server.requests[0]
    assert req["model"] == "judge" and req["response_format"] == {"type": "json_object"}
    assert req["temperature"] == 0.0 and req["messages"][0]["content"] == JUDGE_PROMPT
    user = req["messages"][1]["content"]
    assert "user: My order number is 1182." in user and "order 1183" in user
    assert v.score == 35 and v.judge == "llm:judge"
    assert [i.fact for i in v.dropped] == ["Never call me."]
    assert v.contradicted[0].fact == "order 1182" and v.contradicted[0].summary_value == (
        "order 1183"
    )
    assert any("order 1183" in r for r in v.reasons)
    assert judge.usage.calls == 1 and judge.usage.prompt_tokens == 50


def test_async_twin(server: FakeJudge) -> None:
    judge = LLMSummaryJudge("judge", base_url=server.base_url, api_key="x")
    v = asyncio.run(judge.acall("My order number is 1182.", "order 1183"))
    assert v.score == 35 and len(server.requests) == 1


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"score": 101}),
        json.dumps({"score": "high"}),
        json.dumps({"score": 50, "dropped": "everything"}),
        json.dumps({"score": 50, "contradicted": [7]}),
    ],
)
def test_a_malformed_verdict_is_a_summarizer_error(server: FakeJudge, content: str) -> None:
    server.reply(200, completion(content))
    judge = LLMSummaryJudge("judge", base_url=server.base_url, api_key="x")
    with pytest.raises(SummarizerError, match="llm:judge"):
        judge(SOURCE, "s")


def test_server_errors_are_typed(server: FakeJudge) -> None:
    judge = LLMSummaryJudge("judge", base_url=server.base_url, api_key="x")
    server.reply(503, {"error": {"message": "busy"}})
    with pytest.raises(TransientError):
        judge(SOURCE, "s")
    server.reply(400, {"error": {"message": "bad"}})
    with pytest.raises(SummarizerError, match="HTTP 400"):
        judge(SOURCE, "s")
    with pytest.raises(ConfigError, match="prompt"):
        LLMSummaryJudge("judge", base_url=server.base_url, prompt="  ")


def test_running_summary_rejects_a_fold_the_judge_scores_low(server: FakeJudge) -> None:
    judge = LLMSummaryJudge("judge", base_url=server.base_url, api_key="x")
    rs = RunningSummary(lambda messages: "Order 1183.", validate=judge, min_score=60)
    summary = rs.fold(SOURCE)
    assert summary is not None and summary.degraded and "1183" not in summary.text
    assert rs.stats.rejections == 1 and rs.last_validation is not None
    assert rs.last_validation.judge == "llm:judge"
    server.reply(200, completion(json.dumps({"score": 90})))

    async def run() -> bool:
        rs2 = RunningSummary(lambda messages: "Order 1182.", validate=judge, min_score=60)
        out = await rs2.afold(SOURCE)
        return out is not None and out.degraded

    assert asyncio.run(run()) is False
    assert len(server.requests) == 2


def test_the_seed_interface_takes_chat_dicts(server: FakeJudge) -> None:
    judge = LLMSummaryJudge("judge", base_url=server.base_url, api_key="x")
    dicts = [{"role": "user", "content": "My order number is 1182."}]
    out = asyncio.run(judge.validate_summary(dicts, "order 1183"))
    assert out["score"] == 35 and out["judge"] == "llm:judge"
    assert out["contradicted"][0]["fact"] == "order 1182"
    assert "user: My order number is 1182." in server.requests[0]["messages"][1]["content"]
    assert json.loads(json.dumps(out)) == out
