"""The I/O side of RunningSummary: sync and async drivers, the background task, input checks.

``_engine`` yields steps; this mixin performs them (a summarizer call, a sleep before a
retry) with blocking calls or awaits, counts the calls, and checks what callers pass.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._io import adrive, drive
from ..errors import ConfigError, InvalidMessage, SummarizerError
from ..model import Message
from ._engine import T, _Call, _Engine, _Gen, _Sleep
from ._fact import Fact
from ._validator import _Validate
from .adapter import SummarizerAdapter, SummarizerLike, as_summarizer


class _Driven(_Engine):
    """Drivers and checks shared by the public methods of ``RunningSummary``."""

    _sleep: Callable[[float], object] | None
    _pending: set[asyncio.Task[None]]

    # -- drivers -----------------------------------------------------------------------

    def _count_call(self, step: _Call) -> None:
        stats = self._stats
        stats.summarizer_calls += 1
        if step.fallback:
            stats.fallback_calls += 1
        else:
            stats.primary_calls += 1
        n = self._tok.count_messages(step.messages)
        if step.previous is not None:
            prev = step.previous
            n += prev.tokens if prev.tokens is not None else self._tok.count(prev.text)
        stats.input_tokens += n

    def _perform(self, step: _Sleep | _Call | _Validate) -> Any:
        if isinstance(step, _Validate):
            assert self._validator is not None
            return self._validator(step.messages, step.text)
        if isinstance(step, _Sleep):
            if step.seconds > 0:
                if self._sleep is None:
                    time.sleep(step.seconds)
                else:
                    r = self._sleep(step.seconds)
                    if inspect.iscoroutine(r):  # an async sleep given to a sync fold
                        r.close()
                        time.sleep(step.seconds)
            return None
        self._count_call(step)
        return step.adapter(step.messages, step.previous)

    async def _aperform(self, step: _Sleep | _Call | _Validate) -> Any:
        if isinstance(step, _Validate):
            assert self._validator is not None
            return await self._validator.acall(step.messages, step.text)
        if isinstance(step, _Sleep):
            if step.seconds > 0:
                if self._sleep is None:
                    await asyncio.sleep(step.seconds)
                else:
                    r = self._sleep(step.seconds)
                    if inspect.isawaitable(r):
                        await r
            return None
        self._count_call(step)
        return await step.adapter.acall(step.messages, step.previous)

    def _drive(self, gen: _Gen[T]) -> T:
        return drive(gen, self._perform)

    async def _adrive(self, gen: _Gen[T]) -> T:
        return await adrive(gen, self._aperform)

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
