"""``OpenAIEmbedder``: an OpenAI-compatible ``/embeddings`` client, with no dependency.

Works with any server that speaks the OpenAI embeddings API (OpenAI, Azure-style
gateways, vLLM, llama.cpp, Ollama, LiteLLM...). Texts go in batches of ``batch_size``
per request; the request building and the response checking are shared by the sync
(``embed_batch``) and async (``aembed_batch``) faces, which differ only in transport
(``urllib`` on the calling thread, or in a worker thread). Rate limits (429), server
errors (5xx), timeouts and dropped connections are a ``TransientError`` (a
``Retry-After`` kept as its ``retry_after``), retried by ``retry`` (a ``RetryPolicy``);
any other failure, a malformed answer included, is an ``EmbeddingError`` naming the
status and the server's message. A ``breaker`` (``retry.CircuitBreaker``) stops calling
an endpoint that keeps failing: while it is open a request fails at once
(``retry.breaker_open``). The API key is never shown.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Final

from .. import _check
from ..errors import ConfigError, ConvomemError, EmbeddingError, TransientError
from ..retry import CircuitBreaker, RetryPolicy, breaker_open, parse_retry_after

__all__ = ["OPENAI_URL", "OpenAIEmbedder"]

OPENAI_URL: Final = "https://api.openai.com/v1"
"""OpenAI's API root, the default ``base_url``."""


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint (see the module docstring).

    ``model`` names the model; ``base_url`` the API root (default OpenAI's);
    ``api_key`` defaults to ``$OPENAI_API_KEY`` (None: no Authorization header, for
    local servers); ``dimensions`` asks models that support it for shorter vectors.
    ``fusion_weight``: a trained model's cosines lead the hybrid fusion, as MiniLM's do
    (the same weight; not measured with OpenAI's models here: no network).
    ``recall_keys``: a ``RecallIndex`` embeds each message under its text, its sentences,
    the exchange a reply answers and a user's facts, as with MiniLM (``recall.keys``): ~2.5x the
    texts (and tokens billed) of the text alone; ``RecallIndex(keys=["message"])`` embeds
    each message once. ``breaker``: see the module docstring.
    """

    fusion_weight: float = 4.0
    recall_keys: tuple[str, ...] = ("message", "sentences", "exchange", "facts")

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str = OPENAI_URL,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model={model!r}: must be a non-empty string")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url={base_url!r}: must be an http:// or https:// URL")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise ConfigError(f"breaker={breaker!r}: must be a CircuitBreaker or None")
        key = os.environ.get("OPENAI_API_KEY") if api_key is None else api_key
        if key is not None and not isinstance(key, str):
            raise ConfigError("api_key: must be a string or None")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.dimensions = (
            None if dimensions is None else _check.positive_int("dimensions", dimensions)
        )
        self.batch_size = _check.positive_int("batch_size", batch_size)
        self.timeout = _check.number("timeout", timeout, minimum=0.0, low_open=True)
        self.retry = RetryPolicy() if retry is None else retry
        self.breaker = breaker
        self._key = key or None
        self.requests = 0
        self.name = f"openai({model}, dimensions={self.dimensions})"

    # -- shared: what is sent and what comes back -----------------------------------

    def _request(self, texts: Sequence[str]) -> urllib.request.Request:
        body: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return urllib.request.Request(
            f"{self.base_url}/embeddings",
            data=json.dumps(body).encode(),
            headers=headers,
            method="POST",
        )

    def _parse(self, raw: bytes, count: int) -> list[list[float]]:
        try:
            data = json.loads(raw)["data"]
            rows = sorted(data, key=lambda d: d["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"{self.base_url}/embeddings: not an embeddings response ({exc!r}): {raw[:200]!r}"
            ) from None
        if len(vectors) != count:
            raise EmbeddingError(
                f"{self.base_url}/embeddings: {len(vectors)} embeddings for {count} texts"
            )
        return vectors

    def _post(self, texts: Sequence[str]) -> list[list[float]]:
        """One request (no retry), the breaker asked first and told how it went: the
        transport both faces use."""
        breaker = self.breaker
        where = f"{self.base_url}/embeddings"
        if breaker is not None and not breaker.allow():
            raise breaker_open(where, breaker)
        try:
            vectors = self._parse(self._send(texts, where), len(texts))
        except ConvomemError:
            if breaker is not None:
                breaker.record_failure()
            raise
        if breaker is not None:
            breaker.record_success()
        return vectors

    def _send(self, texts: Sequence[str], where: str) -> bytes:
        self.requests += 1
        try:
            with urllib.request.urlopen(self._request(texts), timeout=self.timeout) as resp:
                raw: bytes = resp.read()
                return raw
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            if exc.code in (408, 429) or exc.code >= 500:
                error = TransientError(f"{where}: HTTP {exc.code}: {detail}")
                error.retry_after = parse_retry_after(exc.headers)
                raise error from None
            raise EmbeddingError(f"{where}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            # refused, reset, timed out, cut mid-answer
            raise TransientError(f"{where}: {type(exc).__name__}: {exc}") from None

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise EmbeddingError(f"texts[{i}]={t!r}: must be a string")
        size = self.batch_size
        return [list(texts[i : i + size]) for i in range(0, len(texts), size)]

    # -- the two faces ---------------------------------------------------------------

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """The embeddings of ``texts``, in order (``batch_size`` texts a request)."""
        out: list[list[float]] = []
        for batch in self._batches(texts):
            out += self.retry.call(self._post, batch)
        return out

    def embed(self, text: str) -> list[float]:
        """The embedding of one text."""
        return self.embed_batch([text])[0]

    async def aembed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """The async twin of ``embed_batch`` (each request in a worker thread)."""
        out: list[list[float]] = []
        for batch in self._batches(texts):

            async def post(b: list[str] = batch) -> list[list[float]]:
                return await asyncio.to_thread(self._post, b)

            out += await self.retry.acall(post)
        return out

    async def aembed(self, text: str) -> list[float]:
        """The async twin of ``embed``."""
        return (await self.aembed_batch([text]))[0]

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"
