"""The chat stream's events, sans-I/O: deltas in, the finished reply out.

The endpoint sends ``event: delta`` (``{"content": "..."}``) while the upstream
answers, then ``event: done`` (the stored message's id, its seq and the usage) or
``event: error`` (a problem document; nothing of the reply was stored).
"""

from __future__ import annotations

from typing import Any

from .._sse import Event
from ..errors import ServiceError, ServiceUnavailable
from ._wire import Response, error_for

__all__ = ["ChatReply"]


class ChatReply:
    """What a chat stream delivered so far; ``done`` is set by its last event."""

    __slots__ = ("_parts", "done")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self.done: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The reply's text received so far (the whole reply once ``done``)."""
        return "".join(self._parts)

    @property
    def message_id(self) -> str | None:
        """The id of the stored assistant message (once ``done``)."""
        value = (self.done or {}).get("message_id")
        return value if isinstance(value, str) else None

    @property
    def usage(self) -> dict[str, Any]:
        """Token usage of the turn as the endpoint reported it (once ``done``)."""
        value = (self.done or {}).get("usage")
        return dict(value) if isinstance(value, dict) else {}

    def on_event(self, event: Event) -> str | None:
        """Take one event: a delta's text is returned; an error event is raised."""
        try:
            data = event.json()
        except ValueError:
            data = None
        if event.event == "delta":
            text = data.get("content") if isinstance(data, dict) else None
            if isinstance(text, str) and text:
                self._parts.append(text)
                return text
            return None
        if event.event == "done":
            self.done = data if isinstance(data, dict) else {}
            return None
        if event.event == "error":
            problem = data if isinstance(data, dict) else {"detail": event.data}
            status = problem.get("status")
            code = status if isinstance(status, int) and 400 <= status < 600 else 502
            raise error_for(Response(code, {}, event.data.encode()))
        return None

    def finish(self) -> None:
        """The stream ended: without a ``done`` event the reply was cut (not stored)."""
        if self.done is None:
            raise ServiceUnavailable(
                502,
                {
                    "title": "chat stream cut",
                    "detail": "the chat stream ended before its done event; "
                    "the reply was not stored",
                },
            )


def stream_error(status: int, headers: dict[str, str], body: bytes) -> ServiceError:
    """The typed error of a chat request refused before it streamed."""
    return error_for(Response(status, headers, body))
