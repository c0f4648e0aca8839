"""LLMSummarizer: summaries from any OpenAI-compatible Chat Completions endpoint.

Uses the official ``openai`` client (extra ``llm``), imported when the summarizer
is created. The sync call and its async twin ``acall`` share request building and
response parsing; only the client differs. Failures are typed: timeouts, dropped
connections, 408/409/429 and 5xx answers raise ``TransientError`` (worth a retry; a
``Retry-After`` is kept as its ``retry_after``); anything else, including a malformed
response, raises ``SummarizerError``. ``summaries.specs.summarizer_from("openai:MODEL")``
makes one configured for a service: a retry policy of its own and a circuit breaker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from .. import _check
from ..errors import ConfigError, SummarizerError
from ..model import Message
from ..retry import CircuitBreaker, RetryPolicy
from ._openai_chat import ChatClients
from .summary import Summary, transcript

T = TypeVar("T")

DEFAULT_PROMPT: Final = """\
You maintain the running summary of a conversation between a user and an assistant.

Summary so far:
{previous}

New messages:
{messages}

Write the updated summary: fold the new messages into the summary so far. Keep all \
names, stated preferences, decisions and numbers (order, ticket and invoice numbers, ids, \
dates, amounts) exactly as written, and every unresolved issue or open question. Drop \
greetings and small talk. Be concise. Reply with the summary only."""
"""The default prompt; ``{previous}`` and ``{messages}`` are filled in."""

NO_PREVIOUS: Final = "(none yet)"

_PLACEHOLDER = re.compile(r"\{(previous|messages)\}")


@dataclass(slots=True)
class LLMUsage:
    """Token usage reported by the endpoint, summed over calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMSummarizer:
    """A summarizer backed by a chat model behind an OpenAI-compatible endpoint.

    ``LLMSummarizer("gpt-4o-mini")`` uses api.openai.com with ``OPENAI_API_KEY``;
    ``base_url="http://localhost:11434/v1"`` (Ollama, vLLM, llama.cpp ...) needs no
    key. ``prompt`` must contain ``{previous}`` and ``{messages}``. Pass ``client`` /
    ``async_client`` to reuse configured ``openai.OpenAI`` / ``AsyncOpenAI`` clients.
    ``max_retries`` is the client's own retry count, 0 by default because
    ``RunningSummary`` retries with its own backoff and fallback. ``retry``, when given,
    is the policy a ``RunningSummary`` retries this summarizer with (instead of its own
    default): e.g. ``retry.hinted_policy()``, which retries only transient failures and
    honours ``Retry-After``. ``breaker`` (a ``retry.CircuitBreaker``) stops calling the
    endpoint after repeated failures: a call while it is open raises ``SummarizerError``
    at once, so the fallback answers without waiting on a dead model.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        prompt: str = DEFAULT_PROMPT,
        client: Any = None,
        async_client: Any = None,
        timeout: float = 60.0,
        max_tokens: int | None = None,
        temperature: float | None = None,
        max_retries: int = 0,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model={model!r}: must be a non-empty string")
        if not isinstance(prompt, str) or {m.group(1) for m in _PLACEHOLDER.finditer(prompt)} != {
            "previous",
            "messages",
        }:
            raise ConfigError(f"prompt={prompt!r}: must contain {{previous}} and {{messages}}")
        timeout = _check.number("timeout", timeout, minimum=0.0, low_open=True)
        _check.optional_positive_int("max_tokens", max_tokens)
        if temperature is not None:
            _check.number("temperature", temperature)
        _check.non_negative_int("max_retries", max_retries)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        if base_url is not None and (not isinstance(base_url, str) or not base_url):
            raise ConfigError(f"base_url={base_url!r}: must be a non-empty string or None")
        self.model = model
        self.name = f"llm:{model}"
        self.base_url = base_url
        self.prompt = prompt
        self.timeout = float(timeout)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_retries = max_retries
        self.retry = retry
        self.usage = LLMUsage()
        self._clients = ChatClients(
            "LLMSummarizer",
            base_url=base_url,
            api_key=api_key,
            client=client,
            async_client=async_client,
            timeout=self.timeout,
            max_retries=max_retries,
            error=SummarizerError,
            breaker=breaker,
        )

    @property
    def breaker(self) -> CircuitBreaker | None:
        """The circuit breaker in front of the endpoint (None: every call is made)."""
        return self._clients.breaker

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"LLMSummarizer({self.model!r}{where})"

    # -- shared logic ----------------------------------------------------------------

    def render_prompt(self, messages: Sequence[Message], previous: Summary | None) -> str:
        """The prompt text for these messages and previous summary."""
        values = {
            "previous": previous.text if previous is not None and previous.text else NO_PREVIOUS,
            "messages": transcript(messages) or "(no text)",
        }
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.prompt)

    def build_request(
        self, messages: Sequence[Message], previous: Summary | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one summary."""
        req: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": self.render_prompt(messages, previous)}],
        }
        if self.max_tokens is not None:
            req["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            req["temperature"] = self.temperature
        return req

    def parse_response(self, response: Any) -> str:
        """The summary text of a Chat Completions response; records usage."""
        try:
            choices = _get(response, "choices")
            content = _get(_get(choices[0], "message"), "content")
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise SummarizerError(
                f"{self.name}: malformed response (no choices[0].message.content): "
                f"{_preview(response)}"
            ) from exc
        if not isinstance(content, str) or not content.strip():
            raise SummarizerError(f"{self.name}: the response has no summary text: {content!r}")
        self.usage.calls += 1
        usage = _get(response, "usage", None)
        if usage is not None:
            for field in ("prompt_tokens", "completion_tokens"):
                n = _get(usage, field, None)
                if isinstance(n, int):
                    setattr(self.usage, field, getattr(self.usage, field) + n)
        return content.strip()

    # -- the twins -------------------------------------------------------------------

    def complete(self, request: dict[str, Any], parse: Callable[[Any], T]) -> T:
        """One Chat Completions call with ``request``, its answer read by ``parse``:
        the breaker asked first and told how it went, a failure typed (blocking)."""
        with self._clients.guard(self.name):
            return parse(self._clients.sync().chat.completions.create(**request))

    async def acomplete(self, request: dict[str, Any], parse: Callable[[Any], T]) -> T:
        """Async twin of ``complete`` (uses ``AsyncOpenAI``)."""
        with self._clients.guard(self.name):
            return parse(await self._clients.async_().chat.completions.create(**request))

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        """Summarize ``messages`` folded into ``previous`` (blocking)."""
        return self.complete(self.build_request(messages, previous), self.parse_response)

    async def acall(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        """Async twin of ``__call__`` (uses ``AsyncOpenAI``)."""
        return await self.acomplete(self.build_request(messages, previous), self.parse_response)


_MISSING: Any = object()


def _get(obj: Any, name: str, default: Any = _MISSING) -> Any:
    if isinstance(obj, Mapping):
        if default is _MISSING:
            return obj[name]
        return obj.get(name, default)
    if default is _MISSING:
        return getattr(obj, name)
    return getattr(obj, name, default)


def _preview(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 200 else text[:197] + "..."
