"""An OpenAI-compatible chat completions client that streams, on httpx.

The chat endpoint sends the assembled context to ``Settings.upstream_url`` (``.../v1``
or the full ``.../chat/completions`` URL) with ``stream: true`` and relays the deltas.
One ``Upstream`` per app keeps one connection pool. Any failure (refused, a non-2xx
answer, an error object in the stream, a stream that ends before its last chunk) is a
``TransientError`` naming what went wrong; the caller stores nothing of a failed reply.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._sse import EventParser
from ..errors import ConfigError, MissingDependency, TransientError

__all__ = ["Finished", "Upstream"]


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of a reply: why the model stopped and the usage it reported (``{}`` when
    the upstream reports none)."""

    finish_reason: str | None
    usage: dict[str, Any] = field(default_factory=dict)


def _endpoint(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(f"upstream_url={url!r}: must be an http:// or https:// URL")
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


class Upstream:
    """Streams chat completions from one OpenAI-compatible server and model."""

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        transport: Any = None,
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise MissingDependency("the chat endpoint", "server", "httpx") from None
        if not isinstance(model, str) or not model:
            raise ConfigError(f"upstream_model={model!r}: must be a non-empty string")
        self.url = _endpoint(url)
        self.model = model
        self._headers = {"Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=10.0), transport=transport
        )

    async def stream(
        self, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> AsyncIterator[str | Finished]:
        """Yield the reply's text deltas, then one ``Finished``; raise ``TransientError``
        when the upstream fails at any point. ``options`` go into the request body."""
        body = {
            **options,
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        httpx = self._httpx
        try:
            async with self._http.stream(
                "POST", self.url, json=body, headers=self._headers
            ) as response:
                if response.status_code >= 300:
                    text = (await response.aread())[:300].decode("utf-8", "replace")
                    raise TransientError(
                        f"the upstream answered HTTP {response.status_code}: {text}"
                    )
                async for item in _chunks(response.aiter_text()):
                    yield item
        except httpx.HTTPError as e:
            raise TransientError(f"the upstream failed: {type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()


async def _chunks(text: AsyncIterator[str]) -> AsyncIterator[str | Finished]:
    parser = EventParser()
    reason: str | None = None
    usage: dict[str, Any] = {}
    async for piece in text:
        for event in parser.feed(piece):
            if event.data.strip() == "[DONE]":
                yield Finished(reason, usage)
                return
            try:
                chunk = json.loads(event.data)
            except ValueError:
                raise TransientError(
                    f"the upstream sent a chunk that is not JSON: {event.data[:200]!r}"
                ) from None
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk:
                raise TransientError(f"the upstream failed mid-stream: {chunk['error']!r:.300}")
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta") or {}
                content = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(content, str) and content:
                    yield content
                if choice.get("finish_reason"):
                    reason = str(choice["finish_reason"])
    if reason is None:
        raise TransientError("the upstream's stream ended before the reply was finished")
    # Some servers close after the last chunk without [DONE]: the reply is whole.
    yield Finished(reason, usage)
