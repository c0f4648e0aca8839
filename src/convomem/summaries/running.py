"""Summaries: the Summary artifact, summarizers, and the incremental RunningSummary.

A ``Summary`` is a derived system message that stands for a range of the log. A
*summarizer* is any callable ``(messages, previous) -> str`` (sync or async); the
older ``(messages) -> str`` form works too. ``as_summarizer`` adapts either form
once, so every caller (RunningSummary, the Packer's summary strategy) runs
summarizers the same way, sync or async.

``RunningSummary`` is the incremental summary of one conversation: each fold
summarizes only newly evicted messages into a new *segment*; the oldest segments are
merged only when the summary outgrows its token reserve, and a ledger of key facts
is carried verbatim beside the segments, so details survive any number of folds.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import threading
import time
from collections.abc import Callable, Generator, Iterable, KeysView
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias, TypeVar

from .._io import adrive, drive
from ..errors import AsyncSummarizerError, ConfigError, InvalidMessage, SummarizerError
from ..model import Message
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer, get_tokenizer
from .adapter import SummarizerAdapter, SummarizerLike, as_summarizer
from .extractive import ExtractiveSummarizer
from .facts import (
    Fact,
    FactLedger,
    extract_from_messages,
)
from .summary import SEGMENT_KEY, SUMMARY_HEADER, Summary, clip_to_tokens, render_summary

T = TypeVar("T")

# -- RunningSummary ------------------------------------------------------------------


@dataclass(slots=True)
class SummaryStats:
    """Work done by a RunningSummary (cumulative; failed attempts included)."""

    folds: int = 0
    """Folds that covered new messages."""
    summarizer_calls: int = 0
    """Every summarizer invocation: retries, fallbacks and merges included."""
    input_tokens: int = 0
    """Tokens passed to summarizers: the messages plus the previous summary, per call."""
    merges: int = 0
    truncations: int = 0
    retries: int = 0
    fallbacks: int = 0
    failures: int = 0
    """Folds and compressions aborted with SummarizerError (state left unchanged)."""
    compressions: int = 0
    """Successful ``compress`` calls (messages summarized on their own)."""
    skipped: int = 0
    """Messages passed to fold that were already covered (never re-summarized)."""
    background_replaced: int = 0
    background_discarded: int = 0
    background_failures: int = 0


@dataclass(frozen=True, slots=True)
class _Seg:
    summary: Summary
    seq: int


@dataclass(frozen=True, slots=True)
class _Call:
    adapter: SummarizerAdapter
    messages: list[Message]
    previous: Summary | None


@dataclass(frozen=True, slots=True)
class _Sleep:
    seconds: float


_Step: TypeAlias = _Call | _Sleep
_Gen: TypeAlias = Generator[_Step, Any, T]


class RunningSummary:
    """The incremental summary of one conversation.

    ``fold(evicted)`` summarizes only the messages it has not covered yet (by id) into
    a new segment; a covered message is never passed to a summarizer again. When the
    rendered summary exceeds ``reserve`` tokens (or there are more than
    ``max_segments`` segments), the two *oldest* segments are merged by calling the
    summarizer with ``previous`` = the oldest and the next one's text as the message;
    that is the only time summary text is re-summarized. Segments are summarized with
    ``previous=None`` on purpose: handing the whole summary to every fold would invite
    the summarizer to rewrite (and erode) it each time. With ``facts=True`` a
    ``FactLedger`` of key facts from the evicted messages is rendered verbatim in up to
    ``facts_share`` of the reserve; facts are never summarized.

    Failure never loses data: a failing summarizer is retried ``retries`` times with
    exponential ``backoff`` (``sleep`` is injectable); then ``fallback`` is used and the
    summary is marked ``degraded``; if the fallback fails too the fold raises
    ``SummarizerError`` and the RunningSummary is exactly as before (``stats`` still
    counts the attempts). ``afold`` is the async twin (same logic; only I/O differs)
    and with ``background=True`` it commits a fallback summary at once and replaces it
    when the real one arrives (``await wait()`` for pending work).

    Defaults: ``summarizer`` and ``fallback`` are ``ExtractiveSummarizer`` sized to
    ``1/max_segments`` of the segments' share of the reserve (the reserve minus the
    facts share and the header); ``fallback=False`` disables the fallback.

    Concurrency: sync folds are serialized by a lock, async folds by an asyncio lock;
    use one RunningSummary per conversation.
    """

    def __init__(
        self,
        summarizer: SummarizerLike | None = None,
        *,
        reserve: int = 1024,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        fallback: SummarizerLike | Literal[False] | None = None,
        retries: int = 2,
        backoff: float = 0.5,
        sleep: Callable[[float], object] | None = None,
        facts: bool = True,
        facts_share: float = 0.3,
        max_segments: int = 4,
        max_facts: int = 10_000,
        header: str = SUMMARY_HEADER,
    ) -> None:
        tok = get_tokenizer(tokenizer)
        if not isinstance(header, str):
            raise ConfigError(f"header={header!r}: must be a string")
        overhead = int(getattr(tok, "per_message", PER_MESSAGE_TOKENS))
        floor = tok.count(header) + overhead + 32
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < floor:
            raise ConfigError(f"reserve={reserve!r}: must be an integer of at least {floor}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"retries={retries!r}: must be a non-negative integer")
        if (
            isinstance(backoff, bool)
            or not isinstance(backoff, int | float)
            or not math.isfinite(backoff)
            or backoff < 0
        ):
            raise ConfigError(f"backoff={backoff!r}: must be a non-negative number of seconds")
        if not isinstance(facts, bool):
            raise ConfigError(f"facts={facts!r}: must be a bool")
        if (
            isinstance(facts_share, bool)
            or not isinstance(facts_share, int | float)
            or not 0 <= facts_share <= 0.8
        ):
            raise ConfigError(f"facts_share={facts_share!r}: must be a number from 0 to 0.8")
        if isinstance(max_segments, bool) or not isinstance(max_segments, int) or max_segments < 1:
            raise ConfigError(f"max_segments={max_segments!r}: must be a positive integer")
        if sleep is not None and not callable(sleep):
            raise ConfigError(f"sleep={sleep!r}: must be callable")
        self.reserve = reserve
        self.retries = retries
        self.backoff = float(backoff)
        self.facts = facts
        self.facts_share = float(facts_share)
        self.max_segments = max_segments
        self.header = header
        self._tok = tok
        self._overhead = overhead
        self._facts_budget = min(int(reserve * facts_share), reserve - floor + 28) if facts else 0
        seg_share = reserve - floor + 32 - self._facts_budget
        # Each fold adds one segment; sized so max_segments of them fill the share, which
        # keeps a merge (two segments in) cheap next to the messages folded.
        default_size = max(16, seg_share // max_segments)
        self._primary = as_summarizer(
            ExtractiveSummarizer(default_size, tok) if summarizer is None else summarizer
        )
        self._fallback: SummarizerAdapter | None
        if fallback is False:
            self._fallback = None
        elif fallback is None:
            self._fallback = as_summarizer(ExtractiveSummarizer(default_size, tok))
        else:
            self._fallback = as_summarizer(fallback)
        self._sleep = sleep
        self._ledger = FactLedger(tokenizer=tok, max_facts=max_facts)
        self._segments: tuple[_Seg, ...] = ()
        self._covered: dict[str, None] = {}
        self._version = 0
        self._seq = 0
        self._current: Summary | None = None
        self._message: Message | None = None
        self._stats = SummaryStats()
        self._tlock = threading.RLock()
        self._alock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.last_error: BaseException | None = None
        """The last error of a background summarization (it never raises elsewhere)."""

    # -- read side -------------------------------------------------------------------

    def current(self) -> Summary | None:
        """The current summary (segments joined, facts attached), or None if empty."""
        return self._current

    def message(self) -> Message | None:
        """The summary as a system message (facts ledger verbatim + segments), or None.

        The same state returns the same Message object, so it is cache-friendly.
        """
        return self._message

    @property
    def segments(self) -> tuple[Summary, ...]:
        """The segments, oldest first; each is a Summary of a contiguous part."""
        return tuple(s.summary for s in self._segments)

    @property
    def ledger(self) -> FactLedger:
        """The key-facts ledger (read it; do not modify it)."""
        return self._ledger

    @property
    def covered_ids(self) -> KeysView[str]:
        """Ids of every message folded in, in fold order (a live read-only view)."""
        return self._covered.keys()

    def covers(self, message_id: str) -> bool:
        """True if the message with this id is already summarized."""
        return message_id in self._covered

    @property
    def stats(self) -> SummaryStats:
        """A snapshot of the work counters."""
        return replace(self._stats)

    @property
    def summarizer(self) -> SummarizerAdapter:
        return self._primary

    @property
    def fallback(self) -> SummarizerAdapter | None:
        return self._fallback

    @property
    def pending(self) -> int:
        """Background summarizations not finished yet."""
        return len(self._pending)

    def __repr__(self) -> str:
        tokens = self._current.tokens if self._current else 0
        return (
            f"<RunningSummary {len(self._covered)} messages, {len(self._segments)} segments, "
            f"{tokens}/{self.reserve} tokens>"
        )

    # -- measuring -------------------------------------------------------------------

    def _facts_block(self, ledger: FactLedger) -> str:
        return ledger.render(self._facts_budget) if self.facts else ""

    def _measure_text(self, text: str, facts_block: str) -> int:
        return self._tok.count(render_summary(self.header, facts_block, text)) + self._overhead

    def _measure_with(self, ledger: FactLedger, text: str) -> int:
        return self._measure_text(text, self._facts_block(ledger))

    @staticmethod
    def _join(segments: Iterable[_Seg]) -> str:
        return "\n\n".join(s.summary.text for s in segments if s.summary.text)

    def _measure(self, segments: tuple[_Seg, ...], ledger: FactLedger) -> int:
        return self._measure_text(self._join(segments), self._facts_block(ledger))

    def _make_seg(
        self,
        text: str,
        first_id: str | None,
        last_id: str | None,
        count: int,
        summarizer: str,
        degraded: bool,
    ) -> _Seg:
        self._seq += 1
        summary = Summary(
            text,
            first_id,
            last_id,
            count,
            summarizer,
            self._measure_text(text, ""),
            time.time(),
            degraded,
            header=self.header,
        )
        return _Seg(summary, self._seq)

    def _segment_message(self, seg: _Seg) -> Message:
        return Message(
            f"summary_segment_{seg.seq}",
            "system",
            self._tok.count(seg.summary.text) + self._overhead,
            content=seg.summary.text,
            metadata={SEGMENT_KEY: True},
        )

    # -- the shared logic (generators; drivers do the I/O) ---------------------------

    def _summarize_gen(
        self,
        messages: list[Message],
        previous: Summary | None,
        *,
        primary: bool = True,
        fallback: bool = True,
        primary_adapter: SummarizerAdapter | None = None,
    ) -> _Gen[tuple[str, bool, str]]:
        """Primary with retries and backoff, then the fallback; SummarizerError if all fail."""
        errors: list[BaseException] = []
        first = self._primary if primary_adapter is None else primary_adapter
        if primary:
            for attempt in range(self.retries + 1):
                if attempt:
                    self._stats.retries += 1
                    yield _Sleep(self.backoff * 2 ** (attempt - 1))
                try:
                    text = yield _Call(first, messages, previous)
                    return text, False, first.name
                except AsyncSummarizerError:
                    raise
                except Exception as exc:
                    errors.append(exc)
        if fallback and self._fallback is not None:
            try:
                text = yield _Call(self._fallback, messages, previous)
                self._stats.fallbacks += 1
                return text, True, self._fallback.name
            except AsyncSummarizerError:
                raise
            except Exception as exc:
                errors.append(exc)
        who = [first.name] if primary else []
        if fallback and self._fallback is not None:
            who.append(f"fallback {self._fallback.name}")
        last = errors[-1] if errors else None
        raise SummarizerError(
            f"summarization failed ({' and '.join(who) or 'no summarizer'}; "
            f"{len(errors)} attempts): {last!r}",
            errors=tuple(errors),
        )

    def _enforce_gen(
        self, segments: tuple[_Seg, ...], ledger: FactLedger, *, primary: bool
    ) -> _Gen[tuple[_Seg, ...]]:
        """Merge the oldest segments (then truncate) until the summary fits the reserve."""
        while len(segments) > self.max_segments or self._measure(segments, ledger) > self.reserve:
            if len(segments) >= 2:
                a, b = segments[0], segments[1]
                text, degraded, name = yield from self._summarize_gen(
                    [self._segment_message(b)], a.summary, primary=primary
                )
                self._stats.merges += 1
                merged = self._make_seg(
                    text,
                    a.summary.first_id,
                    b.summary.last_id,
                    a.summary.count + b.summary.count,
                    name,
                    degraded or a.summary.degraded or b.summary.degraded,
                )
                segments = (merged, *segments[2:])
            else:
                only = segments[0].summary
                text = clip_to_tokens(
                    only.text, self.reserve, functools.partial(self._measure_with, ledger)
                )
                self._stats.truncations += 1
                # Same coverage, same seq: a pending background replacement still applies.
                tokens = self._measure_text(text, "")
                return (_Seg(replace(only, text=text, tokens=tokens), segments[0].seq),)
        return segments

    def _new_messages(self, messages: list[Message]) -> list[Message]:
        seen: set[str] = set()
        out: list[Message] = []
        for m in messages:
            if m.id not in self._covered and m.id not in seen:
                seen.add(m.id)
                out.append(m)
        return out

    def _fold_gen(
        self, messages: list[Message], *, background: bool
    ) -> _Gen[tuple[Summary | None, _Seg | None, list[Message]]]:
        new = self._new_messages(messages)
        self._stats.skipped += len(messages) - len(new)
        if not new:
            return self._current, None, []
        text, degraded, name = yield from self._summarize_gen(new, None, primary=not background)
        seg = self._make_seg(text, new[0].id, new[-1].id, len(new), name, degraded)
        found = extract_from_messages(new) if self.facts else []
        while True:
            version = self._version
            if any(m.id in self._covered for m in new):
                # A concurrent fold covered some of these meanwhile: fold the rest.
                return (yield from self._fold_gen(new, background=background))
            ledger = self._ledger.copy()
            ledger.add(found)
            segments = yield from self._enforce_gen(
                (*self._segments, seg), ledger, primary=not background
            )
            with self._tlock:
                if self._version == version:
                    self._commit(segments, ledger, new)
                    return self._current, seg, new
            # The state changed during a merge: redo the merge on the fresh state.

    def _replace_gen(self, seq: int, new: list[Message]) -> _Gen[None]:
        """Background: summarize with the primary and replace the fallback segment."""
        text, _, name = yield from self._summarize_gen(new, None, fallback=False)
        while True:
            version = self._version
            idx = next((i for i, s in enumerate(self._segments) if s.seq == seq), None)
            if idx is None:
                self._stats.background_discarded += 1  # merged or cleared meanwhile
                return
            old = self._segments[idx].summary
            seg = self._make_seg(text, old.first_id, old.last_id, old.count, name, False)
            segments = (*self._segments[:idx], seg, *self._segments[idx + 1 :])
            segments = yield from self._enforce_gen(segments, self._ledger, primary=True)
            with self._tlock:
                if self._version == version:
                    self._commit(segments, self._ledger, [])
                    self._stats.background_replaced += 1
                    return

    def _commit(self, segments: tuple[_Seg, ...], ledger: FactLedger, new: list[Message]) -> None:
        self._segments = segments
        self._ledger = ledger
        covered = self._covered
        for m in new:
            covered[m.id] = None
        self._version += 1
        if new:
            self._stats.folds += 1
        self._rebuild()

    def _rebuild(self) -> None:
        segs = self._segments
        facts, omitted = self._ledger.select(self._facts_budget) if self.facts else ((), 0)
        if not segs and not facts and not omitted:
            self._current = None
            self._message = None
            return
        names: list[str] = []
        for s in segs:
            if s.summary.summarizer not in names:
                names.append(s.summary.summarizer)
        text = self._join(segs)
        summary = Summary(
            text,
            segs[0].summary.first_id if segs else None,
            segs[-1].summary.last_id if segs else None,
            sum(s.summary.count for s in segs),
            "+".join(names) or "facts",
            self._measure(segs, self._ledger),
            time.time(),
            any(s.summary.degraded for s in segs),
            facts,
            omitted,
            self.header,
        )
        self._current = summary
        self._message = summary.to_message()

    # -- drivers -----------------------------------------------------------------------

    def _count_call(self, step: _Call) -> None:
        self._stats.summarizer_calls += 1
        n = self._tok.count_messages(step.messages)
        if step.previous is not None:
            prev = step.previous
            n += prev.tokens if prev.tokens is not None else self._tok.count(prev.text)
        self._stats.input_tokens += n

    def _perform(self, step: _Sleep | _Call) -> Any:
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

    async def _aperform(self, step: _Sleep | _Call) -> Any:
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
        loop = asyncio.get_running_loop()
        if self._alock is None or self._alock[0] is not loop:
            self._alock = (loop, asyncio.Lock())
        return self._alock[1]

    # -- write side --------------------------------------------------------------------

    @staticmethod
    def _check(messages: Iterable[Message]) -> list[Message]:
        if isinstance(messages, Message | str | bytes) or not isinstance(messages, Iterable):
            raise InvalidMessage("messages", messages, "must be an iterable of Message")
        out = list(messages)
        for i, m in enumerate(out):
            if not isinstance(m, Message):
                raise InvalidMessage(f"messages[{i}]", m, "must be a Message")
        return out

    def fold(self, messages: Iterable[Message]) -> Summary | None:
        """Fold newly evicted messages in; already covered ones are skipped.

        Returns the current summary (None only if nothing was ever folded). Raises
        ``SummarizerError`` (state unchanged) if the summarizer and the fallback fail.
        """
        msgs = self._check(messages)
        with self._tlock:
            try:
                summary, _, _ = self._drive(self._fold_gen(msgs, background=False))
            except SummarizerError:
                self._stats.failures += 1
                raise
        return summary

    async def afold(
        self, messages: Iterable[Message], *, background: bool = False
    ) -> Summary | None:
        """Async twin of ``fold``.

        ``background=True`` summarizes with the fallback now (the summary is marked
        degraded) and starts a task that replaces that segment with the primary
        summarizer's when it arrives; ``await wait()`` awaits it. If the segment was
        merged in the meantime the late result is discarded (the merge already
        covers those messages).
        """
        msgs = self._check(messages)
        if background and self._fallback is None:
            raise ConfigError("background=True: needs a fallback summarizer (fallback=False)")
        async with self._lock():
            try:
                summary, seg, new = await self._adrive(self._fold_gen(msgs, background=background))
            except SummarizerError:
                self._stats.failures += 1
                raise
        if background and seg is not None:
            task = asyncio.get_running_loop().create_task(self._background(seg.seq, new))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
        return summary

    async def _background(self, seq: int, new: list[Message]) -> None:
        try:
            await self._adrive(self._replace_gen(seq, new))
        except Exception as exc:  # the degraded fallback summary stays in place
            self.last_error = exc
            self._stats.background_failures += 1

    async def wait(self) -> None:
        """Wait until every background summarization has finished."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def _compress_gen(
        self, messages: list[Message], summarizer: SummarizerAdapter | None
    ) -> _Gen[Summary]:
        text, degraded, name = yield from self._summarize_gen(
            messages, None, primary_adapter=summarizer
        )
        facts: dict[tuple[str, str], Fact] = {}
        if self.facts:
            for f in extract_from_messages(messages):
                facts.setdefault(f.key, f)
        summary = Summary(
            text,
            messages[0].id,
            messages[-1].id,
            len(messages),
            name,
            None,
            time.time(),
            degraded,
            tuple(facts.values()),
            header="",
        )
        self._stats.compressions += 1
        return replace(summary, tokens=self._tok.count(summary.content) + self._overhead)

    def _check_compress(
        self, messages: Iterable[Message], summarizer: SummarizerLike | None
    ) -> tuple[list[Message], SummarizerAdapter | None]:
        msgs = self._check(messages)
        if not msgs:
            raise InvalidMessage("messages", msgs, "must not be empty")
        return msgs, None if summarizer is None else as_summarizer(summarizer)

    def compress(
        self, messages: Iterable[Message], *, summarizer: SummarizerLike | None = None
    ) -> Summary:
        """Summarize messages on their own, outside the running summary.

        For messages that must shrink but stay in view (priority-1 compression). The
        result covers exactly ``messages``, has no header, and carries every key fact
        found in them (when ``facts`` is on); segments, coverage and the ledger are not
        touched. ``summarizer`` replaces the primary for this call; retries and the
        fallback apply as for a fold, and ``SummarizerError`` is raised if both fail.
        Counted in ``stats`` (calls, input tokens, ``compressions``).
        """
        msgs, adapter = self._check_compress(messages, summarizer)
        with self._tlock:
            try:
                return self._drive(self._compress_gen(msgs, adapter))
            except SummarizerError:
                self._stats.failures += 1
                raise

    async def acompress(
        self, messages: Iterable[Message], *, summarizer: SummarizerLike | None = None
    ) -> Summary:
        """Async twin of ``compress``."""
        msgs, adapter = self._check_compress(messages, summarizer)
        try:
            return await self._adrive(self._compress_gen(msgs, adapter))
        except SummarizerError:
            self._stats.failures += 1
            raise

    def set_text(self, text: str) -> Summary:
        """Replace the narrative with text from outside (``summarizer="external"``).

        Coverage and the facts ledger are kept, so folds go on after it. Raises
        ``ConfigError`` (state unchanged) if the text does not fit the reserve.
        """
        if not isinstance(text, str):
            raise InvalidMessage("text", text, "must be a string")
        with self._tlock:
            segs = self._segments
            seg = self._make_seg(
                text,
                segs[0].summary.first_id if segs else None,
                segs[-1].summary.last_id if segs else None,
                sum(s.summary.count for s in segs),
                "external",
                False,
            )
            tokens = self._measure((seg,), self._ledger)
            if tokens > self.reserve:
                preview = text if len(text) <= 40 else text[:37] + "..."
                raise ConfigError(
                    f"text={preview!r}: the summary would take {tokens} tokens, "
                    f"over reserve={self.reserve}"
                )
            self._commit((seg,), self._ledger, [])
            assert self._current is not None
            return self._current

    def clear(self) -> None:
        """Forget the summary, the facts and the coverage (stats are kept)."""
        with self._tlock:
            for task in list(self._pending):
                task.cancel()
            self._segments = ()
            self._ledger = FactLedger(tokenizer=self._tok, max_facts=self._ledger.max_facts)
            self._covered = {}
            self._version += 1
            self._current = None
            self._message = None
