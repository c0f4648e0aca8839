"""OpenAIEmbedder against a fake OpenAI-compatible server started here (no network)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from convomem.errors import ConfigError, EmbeddingError, TransientError
from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall.openai_embeddings import OpenAIEmbedder
from convomem.retry import RetryPolicy

HASH = HashingEmbedder(dim=24)


class FakeServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[str | None] = []
        self.fail: list[int] = []  # statuses to answer with, first come first served
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.headers.append(self.headers.get("Authorization"))
                if fake.fail:
                    status = fake.fail.pop(0)
                    payload = json.dumps({"error": {"message": f"status {status}"}}).encode()
                elif self.path != "/v1/embeddings":
                    status, payload = 404, b"not found"
                else:
                    status = 200
                    data = [
                        {"index": i, "embedding": HASH.embed(t), "object": "embedding"}
                        for i, t in enumerate(body["input"])
                    ][::-1]  # out of order: the client must sort by index
                    payload = json.dumps({"data": data, "model": body["model"]}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def fast_retry() -> RetryPolicy:
    return RetryPolicy(wait=lambda state: 0.0)


def test_batches_in_order_with_the_key(server: FakeServer) -> None:
    emb = OpenAIEmbedder("m", base_url=server.url, api_key="sk-x", batch_size=2, dimensions=24)
    texts = ["a cat", "a dog", "blue", "", "red"]
    assert emb.embed_batch(texts) == [HASH.embed(t) for t in texts]
    assert [r["input"] for r in server.requests] == [["a cat", "a dog"], ["blue", ""], ["red"]]
    assert {r["model"] for r in server.requests} == {"m"}
    assert {r["dimensions"] for r in server.requests} == {24}
    assert server.headers == ["Bearer sk-x"] * 3
    assert "sk-x" not in repr(emb)


def test_transient_failures_are_retried_others_are_not(server: FakeServer) -> None:
    emb = OpenAIEmbedder("m", base_url=server.url, api_key="", retry=fast_retry())
    server.fail = [429, 503]
    assert emb.embed("x") == HASH.embed("x")
    assert emb.requests == 3 and server.headers[-1] is None
    server.fail = [500, 500, 500]
    with pytest.raises(TransientError, match="HTTP 500"):
        emb.embed("x")
    server.fail = [400]
    with pytest.raises(EmbeddingError, match=r"HTTP 400: .*status 400"):
        emb.embed("x")
    bad = OpenAIEmbedder("m", base_url=server.url + "/nope", api_key="")
    with pytest.raises(EmbeddingError, match="404"):
        bad.embed("x")
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIEmbedder(base_url="ftp://x")


async def test_async_twin_and_recall_index_end_to_end(server: FakeServer) -> None:
    emb = OpenAIEmbedder("m", base_url=server.url, api_key="k", retry=fast_retry())
    server.fail = [502]
    assert await emb.aembed_batch(["p", "q"]) == [HASH.embed("p"), HASH.embed("q")]
    server.requests.clear()
    with RecallIndex("sqlite://", embedder=emb) as idx:
        msgs = [Message(f"m{i}", "user", content=f"note {i} about peanuts") for i in range(5)]
        idx.add(msgs, user_id="u", session_id="s")
        idx.add(msgs, user_id="u", session_id="s")
        assert [h.message_id for h in idx.search("note 3", user_id="u", k=1)] == ["m3"]
    assert [len(r["input"]) for r in server.requests] == [5, 1]  # one batch, then the query
