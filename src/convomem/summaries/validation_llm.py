"""LLMSummaryJudge: summary validation by a chat model (the seed's SummaryValidator).

Any OpenAI-compatible Chat Completions endpoint, asked for a JSON object (``response_format
= {"type": "json_object"}``): ``{"score": 0-100, "dropped": [...], "contradicted":
[...], "reasons": [...]}``. The answer becomes the same ``SummaryValidation`` the offline
``validate_summary`` returns, so ``RunningSummary(validate=judge)`` takes either. Client
handling and error typing are ``LLMSummarizer``'s (extra ``llm``): timeouts, dropped
connections, 408/409/429 and 5xx raise ``TransientError``; anything else, a malformed
answer included, raises ``SummarizerError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import _check
from ..errors import ConfigError, SummarizerError
from ..model import Message
from .llm import LLMSummarizer, LLMUsage, _get, _preview
from .summary import Summary, transcript
from .validation import Issue, SummaryValidation, _source_texts, _summary_text

__all__ = ["JUDGE_PROMPT", "LLMSummaryJudge"]

JUDGE_PROMPT: Final = """\
You check the summary of a conversation against the conversation itself. List every \
fact of the conversation (names, numbers, codes, dates, amounts, preferences, decisions, \
negations) that the summary leaves out, and every fact the summary states differently \
from the conversation. Reply with a JSON object only:
{"score": <0-100, how faithfully the summary keeps the conversation's facts>,
 "dropped": [<each fact left out, as the conversation states it>],
 "contradicted": [{"fact": <as the conversation states it>, "summary": <as the summary \
states it>}],
 "reasons": [<one short sentence per problem>]}"""


class LLMSummaryJudge:
    """Validates summaries with a chat model behind an OpenAI-compatible endpoint.

    ``judge(messages, summary) -> SummaryValidation`` (blocking) and ``await
    judge.acall(messages, summary)``; ``messages`` may be a source text. The options
    are ``LLMSummarizer``'s (``base_url``, ``api_key``, ``client`` / ``async_client``,
    ``timeout``, ``max_retries``); ``temperature`` is 0 by default.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        prompt: str = JUDGE_PROMPT,
        client: Any = None,
        async_client: Any = None,
        timeout: float = 60.0,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        max_retries: int = 0,
    ) -> None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"prompt={prompt!r}: must be a non-empty string")
        self._llm = LLMSummarizer(
            model,
            base_url=base_url,
            api_key=api_key,
            client=client,
            async_client=async_client,
            timeout=timeout,
            max_tokens=max_tokens,
            temperature=temperature,
            max_retries=max_retries,
        )
        self.model = model
        self.name = f"llm:{model}"
        self.prompt = prompt
        self.max_tokens = _check.optional_positive_int("max_tokens", max_tokens)
        self.temperature = temperature

    @property
    def usage(self) -> LLMUsage:
        """Token usage reported by the endpoint, summed over calls."""
        return self._llm.usage

    def __repr__(self) -> str:
        where = f", base_url={self._llm.base_url!r}" if self._llm.base_url else ""
        return f"LLMSummaryJudge({self.model!r}{where})"

    # -- shared logic ------------------------------------------------------------------

    def build_request(
        self, messages: Sequence[Message] | str, summary: Summary | Message | str
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one judgement."""
        _source_texts(messages)  # the same input checks as validate_summary
        text = _summary_text(summary)
        source = messages if isinstance(messages, str) else transcript(messages)
        req: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self.prompt},
                {
                    "role": "user",
                    "content": f"Conversation:\n{source or '(empty)'}\n\n"
                    f"Summary:\n{text or '(empty)'}",
                },
            ],
            "response_format": {"type": "json_object"},
        }
        if self.max_tokens is not None:
            req["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            req["temperature"] = self.temperature
        return req

    def parse_response(self, response: Any) -> SummaryValidation:
        """The ``SummaryValidation`` in a Chat Completions response; records usage."""
        try:
            content = _get(_get(_get(response, "choices")[0], "message"), "content")
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise SummarizerError(
                f"{self.name}: malformed response (no choices[0].message.content): "
                f"{_preview(response)}"
            ) from exc
        self._llm.usage.calls += 1
        usage = _get(response, "usage", None)
        if usage is not None:
            for field in ("prompt_tokens", "completion_tokens"):
                n = _get(usage, field, None)
                if isinstance(n, int):
                    setattr(self.usage, field, getattr(self.usage, field) + n)
        try:
            data = json.loads(content) if isinstance(content, str) else None
        except ValueError:
            data = None
        if not isinstance(data, Mapping):
            raise SummarizerError(f"{self.name}: the answer is not a JSON object: {content!r}")
        return self._validation(data)

    def _validation(self, data: Mapping[str, Any]) -> SummaryValidation:
        score = data.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 100:
            raise SummarizerError(f"{self.name}: score={score!r}: expected a number in 0-100")
        dropped = tuple(
            Issue("dropped", fact, f"dropped {fact!r} ({self.name})")
            for fact in self._facts(data.get("dropped"), "dropped")
        )
        contradicted: list[Issue] = []
        for i, item in enumerate(self._list(data.get("contradicted"), "contradicted")):
            if isinstance(item, Mapping) and isinstance(item.get("fact"), str):
                said = item.get("summary")
                said = said if isinstance(said, str) else None
                why = f"contradicts the source: the summary says {said!r}, " if said else ""
                contradicted.append(
                    Issue(
                        "contradicted",
                        item["fact"],
                        f"{why or 'contradicts the source: '}the source says "
                        f"{item['fact']!r} ({self.name})",
                        said,
                    )
                )
            elif isinstance(item, str):
                contradicted.append(
                    Issue("contradicted", item, f"contradicts the source: {item} ({self.name})")
                )
            else:
                raise SummarizerError(f"{self.name}: contradicted[{i}]={item!r}: not a fact")
        return SummaryValidation(
            round(score), dropped, tuple(contradicted), len(dropped) + len(contradicted), self.name
        )

    def _list(self, value: Any, key: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise SummarizerError(f"{self.name}: {key}={value!r}: expected a list")
        return value

    def _facts(self, value: Any, key: str) -> list[str]:
        out: list[str] = []
        for i, item in enumerate(self._list(value, key)):
            if isinstance(item, Mapping) and isinstance(item.get("fact"), str):
                item = item["fact"]
            if not isinstance(item, str):
                raise SummarizerError(f"{self.name}: {key}[{i}]={item!r}: not a fact")
            out.append(item)
        return out

    # -- the seed's interface ------------------------------------------------------------

    async def validate_summary(
        self, original_messages: Sequence[Mapping[str, Any]], summary: str
    ) -> dict[str, Any]:
        """The seed's ``SummaryValidator.validate_summary``: Chat Completions dicts and a
        summary in, the verdict as a dict out (``SummaryValidation.as_dict``)."""
        from ..formats.openai import from_openai

        return (await self.acall(from_openai(original_messages), summary)).as_dict()

    # -- the twins ---------------------------------------------------------------------

    def __call__(
        self, messages: Sequence[Message] | str, summary: Summary | Message | str
    ) -> SummaryValidation:
        """Judge ``summary`` against ``messages`` (blocking)."""
        return self._llm.complete(self.build_request(messages, summary), self.parse_response)

    async def acall(
        self, messages: Sequence[Message] | str, summary: Summary | Message | str
    ) -> SummaryValidation:
        """Async twin of ``__call__`` (uses ``AsyncOpenAI``)."""
        request = self.build_request(messages, summary)
        return await self._llm.acomplete(request, self.parse_response)
