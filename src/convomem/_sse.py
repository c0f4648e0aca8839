"""Server-sent events, sans-I/O: an incremental parser and the encoder of one event.

The chat endpoint streams its reply as events, reads an OpenAI-compatible upstream's
stream the same way, and the Python client parses what the endpoint sends: one parser
for the three, fed whatever chunks the transport delivers (an event may be split
anywhere, even inside a ``\\r\\n``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Event", "EventParser", "encode_event"]


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event: its type (``"message"`` when the stream names none), its
    data (the ``data:`` lines joined by newlines) and its id, if any."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        """The data decoded as JSON (raises ``ValueError`` when it is not JSON)."""
        return json.loads(self.data)


class EventParser:
    """Feed text chunks; get the events they complete (the WHATWG event-stream rules:
    ``field: value`` lines, comments starting with ``:``, a blank line dispatches, an
    event without data is not dispatched)."""

    __slots__ = ("_buffer", "_data", "_event", "_id", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = ""
        self._pending_cr = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: str) -> list[Event]:
        """Parse ``chunk`` (any part of the stream) and return the events it completes."""
        if not chunk:
            return []
        if self._pending_cr and chunk.startswith("\n"):
            chunk = chunk[1:]  # the \n of a \r\n split across two chunks
        self._pending_cr = chunk.endswith("\r")
        text = self._buffer + chunk
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop()
        events: list[Event] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[Event]:
        """End of stream: an unterminated last event is discarded, as the spec says."""
        self._buffer = ""
        self._event, self._data, self._id = "", [], None
        return []

    def _line(self, line: str) -> Event | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = Event(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


def encode_event(event: str, data: Any) -> str:
    """One event as stream text: ``data`` is sent as compact JSON on one line."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n"
