"""Validators as RunningSummary calls them: ``RunningSummary(validate=...)``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Sequence
from typing import Any

from .._io import Call
from ..errors import AsyncSummarizerError, ConfigError, SummarizerError
from ..model import Message
from .stats import SummaryStats
from .summary import Summary
from .validation import SummaryValidation, validate_summary

ValidationLike = Callable[..., Any]
"""``(messages, summary_text) -> SummaryValidation | number`` (sync or async), or an
object with such a ``__call__`` and optionally an async ``acall`` (``LLMSummaryJudge``)."""


def as_validation(value: Any, who: str) -> SummaryValidation:
    """A validator's answer as a ``SummaryValidation`` (a bare number is a score)."""
    if isinstance(value, SummaryValidation):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100:
        return SummaryValidation(round(value), judge=who)
    raise SummarizerError(
        f"validator {who!r} returned {value!r}: expected a SummaryValidation or a 0-100 score"
    )


class Validator:
    """A validator called uniformly: ``v(messages, text)`` or ``await v.acall(...)``.

    ``True`` means the offline ``validate_summary``. An async validator is awaited by
    ``acall`` and run with ``asyncio.run`` by the sync call outside an event loop; a sync
    one runs in a worker thread under ``acall``.
    """

    __slots__ = ("_acall", "fn", "name")

    def __init__(self, fn: ValidationLike | bool) -> None:
        if fn is True:
            fn = validate_summary
        if not callable(fn):
            raise ConfigError(
                f"validate={fn!r}: must be True, False, None or a function "
                "(messages, summary_text) -> SummaryValidation"
            )
        self.fn = fn
        self.name = "offline" if fn is validate_summary else _name(fn)
        twin = getattr(fn, "acall", None)
        self._acall = twin if callable(twin) and inspect.iscoroutinefunction(twin) else None

    def __call__(self, messages: Sequence[Message], text: str) -> SummaryValidation:
        result = self.fn(messages, text)
        if inspect.isawaitable(result):
            result = _run(result)
        return as_validation(result, self.name)

    async def acall(self, messages: Sequence[Message], text: str) -> SummaryValidation:
        if self._acall is not None:
            return as_validation(await self._acall(messages, text), self.name)
        if self.fn is validate_summary:
            return validate_summary(messages, text)  # CPU only, and quick
        if inspect.iscoroutinefunction(self.fn):
            return as_validation(await self.fn(messages, text), self.name)
        result = await asyncio.to_thread(self.fn, messages, text)
        if inspect.isawaitable(result):
            result = await result
        return as_validation(result, self.name)


def _name(fn: Any) -> str:
    name = getattr(fn, "name", None)
    if isinstance(name, str):
        return name
    return str(getattr(fn, "__qualname__", type(fn).__name__))


def _run(awaitable: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> Any:
            return await awaitable

        return asyncio.run(wait())
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    raise AsyncSummarizerError(
        "the validator is async and an event loop is running: use afold / acompress"
    )


class _Validating:
    """``RunningSummary``'s validation step (state lives on the summary)."""

    _validator: Validator | None
    _stats: SummaryStats
    min_score: float
    last_validation: SummaryValidation | None
    last_error: BaseException | None

    def _validate_gen(
        self, messages: list[Message], previous: Summary | None, text: str, carried: str
    ) -> Generator[Call, Any, str | None]:
        """None if ``text`` passes the validator (or there is none), else the reason.
        A validator that fails is counted and does not reject the text."""
        if self._validator is None:
            return None
        source = list(messages)
        if previous is not None and previous.text:
            source.insert(0, Message("previous_summary", "system", content=previous.text))
        shown = text
        if carried:
            # The ledger's facts are shown beside the text: kept, and never a contradiction
            # (they are the source's own words, possibly from earlier messages).
            shown = f"{text}\n\n{carried}"
            source.append(Message("carried_facts", "system", content=carried))
        try:
            validator = self._validator
            result: SummaryValidation = yield Call(validator, (source, shown), afn=validator.acall)
        except AsyncSummarizerError:
            raise
        except Exception as exc:
            self._stats.validation_errors += 1
            self.last_error = exc
            return None
        self._stats.validations += 1
        self.last_validation = result
        if result.score >= self.min_score:
            return None
        self._stats.rejections += 1
        why = "; ".join(result.reasons[:3])
        return f"summary rejected: score {result.score} < min_score={self.min_score}" + (
            f" ({why})" if why else ""
        )
