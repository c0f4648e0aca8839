"""A local fake of an OpenAI-compatible model server: chat completions and embeddings.

``FakeOpenAI`` listens on a free loopback port in a thread (an in-process memory and a
``convomem serve`` subprocess reach it alike) and answers deterministically:

- ``POST /v1/chat/completions`` asked for the ``facts`` JSON schema (``LLMExtractor``):
  ``{"facts": [...]}`` with one fact per ``codeword: WORD`` said in a numbered message
  (attribute ``codeword``; the offline extractor knows no such rule, so a codeword in the
  facts shows the model read them);
- any other chat completion (``LLMSummarizer``): ``"MODEL SUMMARY: "`` and the words
  of the prompt's messages in brackets ``[..]`` (``MODEL SUMMARY`` never appears in an
  extractive summary);
- ``POST /v1/embeddings``: ``HashingEmbedder(dim=32)`` vectors of the inputs, listed in
  reverse order (a client must sort them by ``index``).

Faults, per kind (``chat`` / ``embeddings``), set with ``fail(kind, mode, times=None)``
(``times``: that many requests fail, then it answers again; None: until ``heal``):
``"timeout"`` (the answer waits ``delay`` seconds, by default until teardown: a client
with any timeout gives up first, however loaded the machine), ``"429"`` (with
``Retry-After: retry_after``), ``"500"``, ``"malformed"`` (a 200 whose body is cut-off
JSON) and ``"garbage"`` (well-formed JSON that is not the answer asked for: a completion
whose content is null). Every request's path and body is kept in ``requests``;
``count(kind)`` counts them.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from convomem.recall import HashingEmbedder

HASH = HashingEmbedder(dim=32)
MODES = ("timeout", "429", "500", "malformed", "garbage")
_CODEWORD = re.compile(r"codeword:\s*(\w+)", re.IGNORECASE)
_LINE = re.compile(r"^\[(\d+)\] (\w+)[^:]*: (.*)$", re.MULTILINE)


@dataclass
class _Fault:
    mode: str
    times: int | None


@dataclass
class FakeOpenAI:
    delay: float | None = None
    """Seconds a ``timeout`` answer waits (None: until teardown)."""
    retry_after: str = "0"
    """The ``Retry-After`` of a 429 answer."""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    """Each request's ``Authorization`` header."""
    port: int = 0
    _faults: dict[str, _Fault] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def fail(self, kind: str, mode: str, times: int | None = None) -> None:
        """Make ``kind`` ("chat", "embeddings" or "all") requests fail with ``mode``."""
        assert mode in MODES, mode
        for k in ("chat", "embeddings") if kind == "all" else (kind,):
            with self._lock:
                self._faults[k] = _Fault(mode, times)

    def heal(self) -> None:
        """Answer every request again."""
        with self._lock:
            self._faults.clear()

    def count(self, kind: str) -> int:
        path = "/v1/chat/completions" if kind == "chat" else "/v1/embeddings"
        return sum(1 for p, _ in self.requests if p == path)

    def _fault(self, kind: str) -> str | None:
        with self._lock:
            f = self._faults.get(kind)
            if f is None:
                return None
            if f.times is not None:
                f.times -= 1
                if f.times <= 0:
                    del self._faults[kind]
            return f.mode


def chat_answer(body: dict[str, Any]) -> str:
    """The content the fake model answers a chat request with (see the module docstring)."""
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    if schema.get("name") == "facts":
        facts = [
            {"message": int(i), "attribute": "codeword", "value": word.lower()}
            for i, role, text in _LINE.findall(prompt)
            if role == "user"
            for word in _CODEWORD.findall(text)
        ]
        return json.dumps({"facts": facts})
    words = re.findall(r"\w+", prompt.split("New messages:", 1)[-1])[-12:]
    return "MODEL SUMMARY: [" + " ".join(words) + "]"


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = [
        {"index": i, "object": "embedding", "embedding": HASH.embed(t)} for i, t in enumerate(texts)
    ][::-1]
    return {"object": "list", "data": data, "model": body.get("model", "fake")}


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append((self.path, body))
            fake.authorizations.append(self.headers.get("Authorization"))
            kind = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}.get(self.path)
            if kind is None:
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            mode = fake._fault(kind)
            if mode == "timeout":
                fake._closing.wait(fake.delay)  # the client gave up long before
            elif mode == "429":
                error = b'{"error": {"message": "rate limited", "type": "rate_limit"}}'
                self._send(429, error, {"Retry-After": fake.retry_after})
                return
            elif mode == "500":
                self._send(500, b'{"error": {"message": "boom", "type": "server_error"}}')
                return
            elif mode == "malformed":
                self._send(200, b'{"choices": [{"message": {"content": "cut')
                return
            elif mode == "garbage":  # no content (chat), no data (embeddings)
                answer = _completion("fake", "")
                answer["choices"][0]["message"]["content"] = None
                self._send(200, json.dumps(answer).encode())
                return
            if kind == "chat":
                answer = _completion(str(body.get("model", "fake")), chat_answer(body))
            else:
                answer = _embeddings(body)
            with contextlib.suppress(OSError):  # a client that timed out has left
                self._send(200, json.dumps(answer).encode())

    return Handler


def start(fake: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Serve ``fake`` until the generator is closed (a fixture's body)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield fake
    finally:
        fake._closing.set()
        server.shutdown()
        server.server_close()
