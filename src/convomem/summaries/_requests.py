"""The requests RunningSummary's generators yield for a summarizer: the call (counted
in ``stats`` when it is made) and the pause before a retry (``sleep`` when one was given,
sync or async; else ``_io.Sleep``)."""

from __future__ import annotations

from collections.abc import Callable

from .._io import Call, Sleep
from ..model import Message
from ..tokens import Tokenizer
from .adapter import SummarizerAdapter
from .stats import SummaryStats
from .summary import Summary


class _Requesting:
    """Makes the I/O requests of ``RunningSummary`` (state lives on the summary)."""

    _stats: SummaryStats
    _tok: Tokenizer
    _sleep: Callable[[float], object] | None

    def _call(
        self,
        adapter: SummarizerAdapter,
        messages: list[Message],
        previous: Summary | None,
        fallback: bool = False,
    ) -> Call:
        """The request to summarize, counted now (calls, input tokens)."""
        stats = self._stats
        stats.summarizer_calls += 1
        if fallback:
            stats.fallback_calls += 1
        else:
            stats.primary_calls += 1
        n = self._tok.count_messages(messages)
        if previous is not None:
            n += previous.tokens if previous.tokens is not None else self._tok.count(previous.text)
        stats.input_tokens += n
        return Call(adapter, (messages, previous), afn=adapter.acall)

    def _pause(self, seconds: float) -> Call | Sleep:
        """The wait before a retry: ``sleep`` when one was given (sync or async)."""
        if self._sleep is None or seconds <= 0:
            return Sleep(seconds)
        return Call(self._sleep, (seconds,))
