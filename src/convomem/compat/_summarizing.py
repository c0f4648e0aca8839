"""What the article's summarizing memories share: the ``llm``, the fallback, the books.

``llm`` is what the article passes (a chat model with ``ainvoke``/``invoke``, prompted
with the article's prompts), any convomem summarizer in its place (``(messages,
previous) -> str``, sync or async), or None for the offline ``ExtractiveSummarizer``.

Failure never loses data: a failing summarizer is replaced by ``fallback`` (default
extractive; the result is marked degraded); when that fails too the messages stay
where they were, ``last_error`` says why, and the step is retried on the next
exchange. ``add_exchange`` is async as in the article; ``add_exchange_sync`` is its
twin (the same generator logic, run by the shared sync and async drivers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any, Literal, TypeAlias

from ..errors import ConfigError, InvalidMessage, SummarizerError
from ..model import Message
from ..summaries import (
    ExtractiveSummarizer,
    SummarizerAdapter,
    SummarizerLike,
    Summary,
    as_summarizer,
)
from ._llm import Step, Summarize, arun, check_sync_use, run, summarizer_for

__all__ = ["Gen", "SummarizingMemory", "exchange", "lines"]

log = logging.getLogger("convomem.compat")

Gen: TypeAlias = Generator[Step, Any, Any]


def lines(messages: Sequence[Message]) -> str:
    """Messages as the article writes them into prompts and contexts: ``role: text``."""
    return "\n".join(f"{m.role}: {m.text()}" for m in messages)


def exchange(user_msg: object, ai_msg: object) -> tuple[Message, Message]:
    """The two messages of an exchange, or ``InvalidMessage`` naming the bad argument."""
    if not isinstance(user_msg, str):
        raise InvalidMessage("user_msg", user_msg, "must be a string")
    if not isinstance(ai_msg, str):
        raise InvalidMessage("ai_msg", ai_msg, "must be a string")
    return Message(role="user", content=user_msg), Message(role="assistant", content=ai_msg)


class SummarizingMemory:
    """What both designs share: summarizer, fallback, counters, sync/async twins."""

    def __init__(
        self,
        llm: object,
        render: Callable[[Sequence[Message], Summary | None], str],
        fallback: SummarizerLike | Literal[False] | None,
    ) -> None:
        self.llm = llm
        self._primary, self._chat = summarizer_for(llm, render)
        self._fallback: SummarizerAdapter | None
        if fallback is False:
            self._fallback = None
        elif fallback is None:
            self._fallback = as_summarizer(ExtractiveSummarizer())
        elif callable(fallback):
            self._fallback = as_summarizer(fallback)
        else:
            raise ConfigError(f"fallback={fallback!r}: must be a summarizer, None or False")
        self.calls = 0
        """Every summarizer and model call (fallbacks and profile extractions included)."""
        self.fallbacks = 0
        self.failures = 0
        """Steps that failed with both summarizers (retried on the next exchange)."""
        self.last_error: BaseException | None = None
        self._busy = False

    def _add_gen(self, pair: tuple[Message, Message]) -> Gen:
        raise NotImplementedError

    async def add_exchange(self, user_msg: str, ai_msg: str) -> None:
        """Record one exchange (a user message and the reply); summarize when due."""
        await arun(self._add_gen(exchange(user_msg, ai_msg)))

    def add_exchange_sync(self, user_msg: str, ai_msg: str) -> None:
        """The sync twin of ``add_exchange`` (outside a running event loop, or with a
        sync summarizer)."""
        pair = exchange(user_msg, ai_msg)
        for adapter in (self._primary, self._fallback):
            if adapter is not None:
                check_sync_use(adapter, "await add_exchange(...)")
        run(self._add_gen(pair))

    def _summarize_gen(
        self, messages: list[Message], previous: Summary | None
    ) -> Generator[Step, Any, tuple[str, bool, str] | None]:
        """Primary, then fallback; None (state untouched, error kept) when both fail."""
        errors: list[BaseException] = []
        for adapter, degraded in ((self._primary, False), (self._fallback, True)):
            if adapter is None:
                continue
            self.calls += 1
            try:
                text = yield Summarize(adapter, messages, previous)
            except Exception as exc:
                errors.append(exc)
                continue
            if degraded:
                self.fallbacks += 1
                self.last_error = errors[-1]
            return text, degraded, adapter.name
        self.failures += 1
        self.last_error = SummarizerError(
            f"summarization failed ({len(errors)} attempts): {errors[-1]!r}", errors=tuple(errors)
        )
        log.warning("%s: %s; retrying on the next exchange", type(self).__name__, self.last_error)
        return None
