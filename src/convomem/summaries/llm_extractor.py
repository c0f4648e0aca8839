"""LLMExtractor: keyed facts from a chat model behind an OpenAI-compatible endpoint.

The model gets the messages numbered, with their role and date, and answers JSON that a
JSON schema constrains (``response_format={"type": "json_schema", ...}``): a list of
``{"message": i, "attribute": ..., "value": ...}``. Provenance (message id, role, time)
is attached here, never taken from the model. Transient failures (timeouts, dropped
connections, 408/409/425/429, 5xx) are retried with a ``convomem.retry.RetryPolicy``;
when the retries run out, or the answer is malformed, the batch goes to the
``fallback`` extractor (``OfflineExtractor`` by default), ``fallbacks`` counts it and
``degraded`` says so until a batch is extracted by the model again. A ``breaker``
(``retry.CircuitBreaker``) stops calling a model that keeps failing.
Uses the ``openai`` client (extra ``llm``); the sync and async twins share request
building and parsing, only the client call differs.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from .. import _check
from ..errors import ConfigError, ConvomemError, ExtractionError
from ..retry import CircuitBreaker, RetryPolicy
from ._openai_chat import ChatClients
from .extraction import source_role
from .extractor import Extractor, OfflineExtractor, facts_of
from .keyed import KeyedFact

if TYPE_CHECKING:
    from ..model import Message

__all__ = ["FACTS_SCHEMA", "LLMExtractor"]

log = logging.getLogger(__name__)

PROMPT: Final = """\
Extract durable facts about the user from the numbered messages below: who they are \
(name, nickname, city, address, email, phone, age, job, employer, diet), how to contact \
them and how not to (attribute "contact:<channel>", e.g. "contact:phone call", value \
"never", "not before 10 am" or "preferred"), what they like or dislike (attribute \
"pref:<thing>", value "likes", "dislikes" or "avoids"), allergies (attribute \
"allergy:<thing>", value "yes"), health (attribute "health:<condition>", value the \
condition), people and pets by name (attribute "<relation>:<name>", e.g. "sister:anika" \
or "dog:biscuit", value the name and what it is, "Biscuit, a beagle"; "husband", \
"boss", "landlord" alone when there is one), counts ("kids": "2"), codes and numbers \
they give ("order number": "1182"), dated events (resolve relative dates against the \
message's date; value YYYY-MM-DD), and the fields a tool result states. Read each \
clause on its own ("allergic to peanuts and live in Oslo" is two facts); a move or a \
correction gives the new value. Use short lowercase English attributes; copy values as \
written (numbers as digits). Use only what the messages say; no facts about the \
assistant. Answer JSON only.

Messages:
{messages}"""

FACTS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["facts"],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["message", "attribute", "value"],
                "properties": {
                    "message": {"type": "integer"},
                    "attribute": {"type": "string"},
                    "value": {"type": "string"},
                },
            },
        }
    },
}
"""The JSON schema of the model's answer."""


class LLMExtractor:
    """An ``Extractor`` backed by a chat model (OpenAI-compatible Chat Completions).

    ``LLMExtractor("gpt-4o-mini")`` uses api.openai.com with ``OPENAI_API_KEY``; a
    ``base_url`` of a local server (Ollama, vLLM, llama.cpp) needs no key. ``retry``
    defaults to three attempts on ``TransientError``; ``fallback`` extracts a batch the
    model could not (default ``"offline"``: a new ``OfflineExtractor()``; ``None``: raise
    the ``ExtractionError`` or ``TransientError``). ``batch`` messages go in one request.
    ``calls`` counts requests sent, ``fallbacks`` batches given to the fallback;
    ``degraded`` is True while the last batch was the fallback's (``last_error`` says
    why). ``breaker``: see ``LLMSummarizer``; while it is open a batch goes to the
    fallback without a request.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        async_client: Any = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        fallback: Extractor | Literal["offline"] | None = "offline",
        batch: int = 20,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model={model!r}: must be a non-empty string")
        if base_url is not None and (not isinstance(base_url, str) or not base_url):
            raise ConfigError(f"base_url={base_url!r}: must be a non-empty string or None")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        if fallback == "offline":
            fallback = OfflineExtractor()
        if fallback is not None and not callable(getattr(fallback, "extract", None)):
            raise ConfigError(f"fallback={fallback!r}: must have an extract(messages) method")
        self.model = model
        self.base_url = base_url
        self.timeout = float(_check.number("timeout", timeout, minimum=0.0, low_open=True))
        self.batch = _check.positive_int("batch", batch)
        self.retry = RetryPolicy() if retry is None else retry
        self.fallback: Extractor | None = fallback
        self.calls = 0
        self.fallbacks = 0
        self.degraded = False
        self.last_error: ConvomemError | None = None
        self._clients = ChatClients(
            "LLMExtractor",
            base_url=base_url,
            api_key=api_key,
            client=client,
            async_client=async_client,
            timeout=self.timeout,
            max_retries=0,  # retried here, with ``retry``
            error=ExtractionError,
            breaker=breaker,
        )

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"LLMExtractor({self.model!r}{where})"

    # -- shared logic ------------------------------------------------------------------

    def build_request(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one batch."""
        lines = []
        for i, m in enumerate(messages):
            when = ""
            if m.created_at is not None:
                day = dt.datetime.fromtimestamp(m.created_at, dt.UTC).strftime("%Y-%m-%d %A")
                when = f" ({day})"
            lines.append(f"[{i}] {source_role(m)}{when}: {m.text()}")
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": PROMPT.format(messages="\n".join(lines))}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "facts", "strict": True, "schema": FACTS_SCHEMA},
            },
            "temperature": 0,
        }

    def parse_response(self, response: Any, messages: Sequence[Message]) -> list[KeyedFact]:
        """The facts of a response, with each message's provenance; a malformed answer
        raises ``ExtractionError``."""
        try:
            content = _get(_get(_get(response, "choices")[0], "message"), "content")
            rows = json.loads(content)["facts"]
            pairs: dict[int, list[tuple[str, str]]] = {}
            for row in rows:
                i, attr, value = row["message"], row["attribute"], row["value"]
                ok = isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(messages)
                if not (ok and isinstance(attr, str) and isinstance(value, str)):
                    raise ExtractionError(f"{self!r}: bad fact row {row!r}")
                pairs.setdefault(i, []).append((attr, value))
        except ExtractionError:
            raise
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise ExtractionError(f"{self!r}: malformed answer: {exc!r}") from exc
        return [f for i, m in enumerate(messages) for f in facts_of(m, pairs.get(i, []))]

    def _batches(self, messages: Sequence[Message]) -> list[Sequence[Message]]:
        return [messages[i : i + self.batch] for i in range(0, len(messages), self.batch)]

    def _failed(self, error: ConvomemError) -> Extractor:
        """The fallback a failed batch goes to (the error raised without one)."""
        if self.fallback is None:
            raise error
        self.fallbacks += 1
        if not self.degraded:  # once an outage, not once a batch
            log.warning(
                "%r: %s; the fallback extractor reads messages until it answers", self, error
            )
        self.degraded, self.last_error = True, error
        return self.fallback

    def _extracted(self, facts: list[KeyedFact]) -> list[KeyedFact]:
        if self.degraded:
            log.info("%r answers again", self)
        self.degraded = False
        return facts

    # -- the twins ---------------------------------------------------------------------

    def _once(self, batch: Sequence[Message]) -> list[KeyedFact]:
        request = self.build_request(batch)
        with self._clients.guard(repr(self)):
            self.calls += 1
            response = self._clients.sync().chat.completions.create(**request)
            return self.parse_response(response, batch)

    async def _aonce(self, batch: Sequence[Message]) -> list[KeyedFact]:
        request = self.build_request(batch)
        with self._clients.guard(repr(self)):
            self.calls += 1
            response = await self._clients.async_().chat.completions.create(**request)
            return self.parse_response(response, batch)

    def extract(self, messages: Sequence[Message]) -> list[KeyedFact]:
        """The facts of ``messages`` (blocking), batch by batch, in message order."""
        out: list[KeyedFact] = []
        for batch in self._batches(list(messages)):
            try:
                out.extend(self._extracted(self.retry.call(self._once, batch)))
            except ConvomemError as error:
                out.extend(self._failed(error).extract(batch))
        return out

    async def aextract(self, messages: Sequence[Message]) -> list[KeyedFact]:
        """Async twin of ``extract`` (uses ``AsyncOpenAI``)."""
        out: list[KeyedFact] = []
        for batch in self._batches(list(messages)):
            try:
                out.extend(self._extracted(await self.retry.acall(self._aonce, batch)))
            except ConvomemError as error:
                fallback = self._failed(error)
                aextract = getattr(fallback, "aextract", None)
                out.extend(
                    await aextract(batch) if aextract is not None else fallback.extract(batch)
                )
        return out


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)
