"""A local fake of an OpenAI-compatible chat completions server, streaming its replies.

``FakeUpstream`` listens on a free loopback port in a thread (so an in-process app and a
``convomem serve`` subprocess reach it alike) and answers ``POST .../chat/completions``
with ``stream: true`` as OpenAI does: ``data: {chunk}`` events, a last chunk with
``usage`` when ``stream_options.include_usage`` is set, then ``data: [DONE]``. Each
request's JSON body and headers are kept in ``requests``. ``mode`` makes it fail:
``"status"`` answers 500 at once, ``"cut"`` closes the connection after the first
deltas, ``"error"`` sends an error object mid-stream; ``hold`` (a ``threading.Event``)
pauses the stream after the first delta until it is set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeUpstream:
    reply: str = "Hello from the fake model."
    pieces: int = 4
    mode: str | None = None
    hold: threading.Event | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    sent: threading.Event = field(default_factory=threading.Event)
    """Set once the first delta of a response was written."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def deltas(self) -> list[str]:
        """The reply cut into ``pieces`` nearly equal parts (the stream's deltas)."""
        n = max(1, min(self.pieces, len(self.reply)))
        size = -(-len(self.reply) // n)
        return [self.reply[i : i + size] for i in range(0, len(self.reply), size)]


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _handler(fake: FakeUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append(body)
            fake.headers.append({k.lower(): v for k, v in self.headers.items()})
            if not self.path.endswith("/chat/completions") or fake.mode == "status":
                payload = json.dumps({"error": {"message": "fake failure", "type": "server"}})
                self.send_response(500 if fake.mode == "status" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())
                return
            model = str(body.get("model", "fake"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(_chunk(model, {"role": "assistant", "content": ""}))
            for i, piece in enumerate(fake.deltas()):
                self.wfile.write(_chunk(model, {"content": piece}))
                self.wfile.flush()
                if i == 0:
                    fake.sent.set()
                    if fake.hold is not None:
                        fake.hold.wait(30)
                    if fake.mode == "cut":
                        self.close_connection = True
                        return
                    if fake.mode == "error":
                        err = {"error": {"message": "the model overloaded", "type": "overloaded"}}
                        self.wfile.write(b"data: " + json.dumps(err).encode() + b"\n\n")
                        return
            self.wfile.write(_chunk(model, {}, "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {
                    "prompt_tokens": 11,
                    "completion_tokens": len(fake.deltas()),
                    "total_tokens": 11 + len(fake.deltas()),
                }
                chunk = {"id": "chatcmpl-fake", "choices": [], "usage": usage, "model": model}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def start(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    """Serve ``fake`` until the generator is closed (a fixture's body)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        if fake.hold is not None:
            fake.hold.set()
        server.shutdown()
        server.server_close()
