"""The OpenAI-compatible chat client that the LLM parts share (``LLMSummarizer``,
``LLMExtractor``): the lazy import of the ``llm`` extra, the API-key rule, clients built
once on first use, which failures are transient (with the server's ``Retry-After``), and
the circuit breaker that stops calling a model that keeps failing."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any, Final

from ..errors import ConfigError, ConvomemError, MissingDependency, TransientError
from ..retry import CircuitBreaker, breaker_open, parse_retry_after

__all__ = ["ChatClients", "import_openai"]

_TRANSIENT_STATUS: Final = frozenset({408, 409, 425, 429})


def import_openai(owner: str) -> Any:
    """The ``openai`` package; ``MissingDependency`` naming ``owner`` and the extra."""
    try:
        import openai
    except ImportError:
        raise MissingDependency(owner, "llm", "openai") from None
    return openai


class ChatClients:
    """The sync and async clients of one endpoint, made once each (or the ones given).

    An API key is ``api_key``, else ``OPENAI_API_KEY``; a local ``base_url`` needs none.
    The key is kept out of every repr and message. ``error`` is the owner's error type
    (a failure that is not transient); ``breaker`` (a ``retry.CircuitBreaker``), when
    given, is asked before each call: while it is open the call is not made and
    ``breaker_open`` says so, so a caller with a fallback answers at once.
    """

    def __init__(
        self,
        owner: str,
        *,
        base_url: str | None,
        api_key: str | None,
        client: Any,
        async_client: Any,
        timeout: float,
        max_retries: int,
        error: type[ConvomemError],
        breaker: CircuitBreaker | None = None,
    ) -> None:
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise ConfigError(f"breaker={breaker!r}: must be a CircuitBreaker or None")
        self.owner = owner
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.error = error
        self.breaker = breaker
        self._client = client
        self._async_client = async_client
        self._lock = threading.Lock()
        self.openai: Any = None
        self._api_key: str | None = None
        if client is None or async_client is None:
            self.openai = import_openai(owner)
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if key is None and base_url is not None:
                key = "unused"  # local OpenAI-compatible servers need no key
            if key is None:
                raise ConfigError(
                    "api_key=None: pass api_key=..., set OPENAI_API_KEY, or give the "
                    "base_url of a server that needs no key"
                )
            self._api_key = key

    def _options(self) -> dict[str, Any]:
        return {
            "api_key": self._api_key,
            "base_url": self.base_url,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }

    def sync(self) -> Any:
        """The ``openai.OpenAI`` client."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self.openai.OpenAI(**self._options())
        return self._client

    def async_(self) -> Any:
        """The ``openai.AsyncOpenAI`` client."""
        if self._async_client is None:
            with self._lock:
                if self._async_client is None:
                    self._async_client = self.openai.AsyncOpenAI(**self._options())
        return self._async_client

    def failure(self, exc: Exception) -> tuple[bool, str]:
        """Whether ``exc`` is transient (a timeout, a dropped connection, HTTP 408, 409,
        425, 429 or 5xx), and its name with the HTTP status for a message."""
        status = getattr(exc, "status_code", None)
        transient = isinstance(status, int) and (status in _TRANSIENT_STATUS or status >= 500)
        openai = self.openai
        if openai is None:
            try:
                openai = import_openai(self.owner)
            except MissingDependency:
                openai = None
        if openai is not None and isinstance(
            exc, openai.APITimeoutError | openai.APIConnectionError
        ):
            transient = True
        transient = transient or isinstance(exc, TimeoutError | ConnectionError)
        return transient, type(exc).__name__ + (f" (HTTP {status})" if status else "")

    def typed(self, exc: Exception, what: str) -> ConvomemError:
        """``exc`` as a ``TransientError`` (with the server's ``Retry-After``) or the
        owner's ``error``; ``what`` names the caller in the message."""
        if isinstance(exc, ConvomemError):
            return exc
        transient, kind = self.failure(exc)
        if not transient:
            return self.error(f"{what}: {kind}: {exc}")
        out = TransientError(f"{what}: {kind}: {exc}")
        out.retry_after = parse_retry_after(
            getattr(getattr(exc, "response", None), "headers", None)
        )
        return out

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """One call to the model (sync or async body): the breaker asked first and told
        how it went; any failure leaves typed (``typed``)."""
        breaker = self.breaker
        if breaker is not None and not breaker.allow():
            raise breaker_open(what, breaker)
        try:
            yield
        except Exception as exc:
            if breaker is not None:
                breaker.record_failure()
            if isinstance(exc, ConvomemError):
                raise
            raise self.typed(exc, what) from exc
        if breaker is not None:
            breaker.record_success()
