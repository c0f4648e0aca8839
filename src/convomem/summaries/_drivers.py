"""The drivers of RunningSummary, its background task and its input checks.

``_engine`` yields ``_io`` requests; this mixin runs them with ``_io.run`` (blocking; an
async summarizer, validator or sleep is run to completion when no event loop is running)
or ``_io.arun`` (awaited: the async twins, sync summarizers in worker threads), and
checks what callers pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from .._io import Call, Gen, arun, run
from ..errors import AsyncSummarizerError, ConfigError, InvalidMessage, SummarizerError
from ..model import Message
from ..retry import RetryPolicy, retry_always, stop_after_attempt, wait_exponential
from ._engine import T, _Engine
from ._fact import Fact
from .adapter import SummarizerAdapter, SummarizerLike, as_summarizer


def retry_policy(
    summarizer: object, retry: RetryPolicy | None, retries: int, backoff: float
) -> RetryPolicy:
    """The policy a summary retries its summarizer with: ``retry``; else the
    summarizer's own (when the ``retries`` / ``backoff`` shorthands are left alone: it
    knows which of its failures are worth a retry); else ``retries`` retries of any
    error, waiting ``backoff * 2**k`` seconds."""
    own = getattr(summarizer, "retry", None)
    if retry is None and isinstance(own, RetryPolicy) and (retries, backoff) == (2, 0.5):
        return own
    if retry is None:
        return RetryPolicy(
            stop=stop_after_attempt(retries + 1),
            wait=wait_exponential(multiplier=backoff),
            retry=retry_always(),
        )
    if not isinstance(retry, RetryPolicy):
        raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
    if (retries, backoff) != (2, 0.5):
        raise ConfigError(
            f"retries={retries!r}, backoff={backoff!r}: pass either retry=RetryPolicy(...) "
            "or the retries/backoff shorthands, not both"
        )
    return retry


def _refused(step: Call) -> AsyncSummarizerError:
    name = getattr(step.fn, "__qualname__", repr(step.fn))
    return AsyncSummarizerError(
        f"{name} is async and an event loop is running: use afold / acompress"
    )


class _Driven(_Engine):
    """Drivers and checks shared by the public methods of ``RunningSummary``."""

    _pending: set[asyncio.Task[None]]

    # -- drivers -----------------------------------------------------------------------

    def _drive(self, gen: Gen[T]) -> T:
        return run(gen, refuse=_refused, complete=True)

    async def _adrive(self, gen: Gen[T]) -> T:
        return await arun(gen)

    def _lock(self) -> asyncio.Lock:
        return self._alock.get()

    @staticmethod
    def _check(messages: Iterable[Message]) -> list[Message]:
        if isinstance(messages, Message | str | bytes) or not isinstance(messages, Iterable):
            raise InvalidMessage("messages", messages, "must be an iterable of Message")
        out = list(messages)
        for i, m in enumerate(out):
            if not isinstance(m, Message):
                raise InvalidMessage(f"messages[{i}]", m, "must be a Message")
        return out

    @staticmethod
    def _check_facts(
        facts: Mapping[str, Iterable[Fact]] | None,
    ) -> dict[str, tuple[Fact, ...]] | None:
        if facts is None:
            return None
        if not isinstance(facts, Mapping):
            raise ConfigError(f"facts={facts!r}: must map message ids to their facts")
        out: dict[str, tuple[Fact, ...]] = {}
        for key, values in facts.items():
            items = tuple(values) if isinstance(values, Iterable) else (values,)
            for i, f in enumerate(items):
                if not isinstance(f, Fact):
                    raise ConfigError(f"facts[{key!r}][{i}]={f!r}: must be a Fact")
            out[key] = items
        return out

    def _check_compress(
        self, messages: Iterable[Message], summarizer: SummarizerLike | None
    ) -> tuple[list[Message], SummarizerAdapter | None]:
        msgs = self._check(messages)
        if not msgs:
            raise InvalidMessage("messages", msgs, "must not be empty")
        return msgs, None if summarizer is None else as_summarizer(summarizer)

    async def _background(self, seq: int, new: list[Message]) -> None:
        failure: SummarizerError | None = None
        text: str | None = None
        name = ""
        try:
            try:
                gen = self._summarize_gen(new, None, fallback=False)
                text, _, name = await self._adrive(gen)
            except SummarizerError as exc:
                failure = exc  # the fallback's segment stays: settle it as it is
            async with self._lock():
                installed = await self._adrive(self._install_gen(seq, text, name))
            if failure is not None:
                raise failure
            if installed:
                self._stats.background_replaced += 1
            else:
                self._stats.background_discarded += 1  # cleared or replaced meanwhile
        except Exception as exc:  # the degraded fallback summary stays in place
            with self._tlock:
                if seq in self._pending_seqs:
                    self._pending_seqs.discard(seq)
                    self._version += 1
                    self._rebuild()
            self.last_error = exc
            self._stats.background_failures += 1
