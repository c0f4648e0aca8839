"""RunningSummary: the incremental summary of one conversation.

A ``Summary`` is a derived system message that stands for a range of the log. A
*summarizer* is any callable ``(messages, previous) -> str`` (sync or async); the
older ``(messages) -> str`` form works too. ``as_summarizer`` adapts either form once.

Each fold summarizes only newly evicted messages into a new *segment*; the oldest
segments are merged only when the summary outgrows its token reserve, and a ledger of
key facts is carried verbatim beside the segments, so details survive any number of
folds. The logic lives in ``_engine`` (generators); this module holds the options, the
sync and async drivers and the public methods; ``state`` holds persistence.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, KeysView, Mapping
from dataclasses import replace
from typing import Any, Literal

from .. import _check
from .._io import LoopLock
from ..errors import ConfigError, InvalidMessage, SummarizerError
from ..model import Message
from ..retry import RetryPolicy, retry_always, stop_after_attempt, wait_exponential
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer, get_tokenizer
from . import state as _state
from ._drivers import _Driven
from ._fact import Fact
from ._validator import ValidationLike, Validator
from .adapter import SummarizerAdapter, SummarizerLike, as_summarizer
from .extractive import ExtractiveSummarizer
from .ledger import FactLedger
from .stats import SummaryStats
from .summary import SUMMARY_HEADER, Summary

__all__ = ["RunningSummary", "SummaryStats"]


class RunningSummary(_Driven):
    """The incremental summary of one conversation.

    ``fold(evicted)`` summarizes only the messages it has not covered yet (by id) into
    a new segment; a covered message is never passed to a summarizer again. When the
    rendered summary exceeds ``reserve`` tokens (or there are more than
    ``max_segments`` segments), the two *oldest* segments are merged by calling the
    summarizer with ``previous`` = the oldest and the next one's text as the message;
    that is the only time summary text is re-summarized. Segments are summarized with
    ``previous=None`` on purpose: handing the whole summary to every fold would invite
    the summarizer to rewrite (and erode) it each time. With ``facts=True`` a
    ``FactLedger`` of key facts from the evicted messages (at most ``max_facts``) is
    rendered verbatim in up to ``facts_share`` of the reserve; facts are never
    summarized, and each message's text is scanned for them once (``stats.extractions``).
    A fold's work does not grow with the length of the conversation.

    Failure never loses data: a failing summarizer is retried by ``retry`` (a
    ``RetryPolicy``; by default the summarizer's own ``retry`` when it has one, as a
    configured ``LLMSummarizer`` does, else ``retries`` retries of any error, waiting
    ``backoff * 2**k`` seconds; ``sleep`` is injectable); then ``fallback`` is used and
    the summary is marked ``degraded``; if the fallback fails too the fold raises
    ``SummarizerError`` and the RunningSummary is exactly as before (``stats`` still
    counts the attempts). ``afold`` is the async twin (same logic; only I/O differs).

    ``validate`` (True: the offline ``validate_summary``; or any ``(messages, text) ->
    SummaryValidation | score``, e.g. ``LLMSummaryJudge``) checks each primary summary
    against its messages (facts the ledger carries count as kept): below ``min_score``
    the fallback's is used (``degraded``; without a fallback the primary's is kept).
    Counted in ``stats``; ``last_validation`` is the last result; a failing validator
    does not reject.

    Background (``afold(background=True)``): the fold commits the fallback's segment at
    once (degraded) and a task asks the primary for that segment, once; its text
    replaces the fallback's and only then is the segment merged with others. So after
    ``await wait()`` with a working primary nothing is degraded. Until then pending
    segments are not merged: the summary may hold more than ``max_segments`` segments
    and its narrative is clipped to the reserve when rendered. If the primary fails,
    the fallback segment stays (degraded) and is merged like any other.

    Defaults: ``summarizer`` and ``fallback`` are ``ExtractiveSummarizer`` sized to
    ``1/max_segments`` of the segments' share of the reserve (the reserve minus the
    facts share and the header); ``fallback=False`` disables the fallback.

    Concurrency: sync folds are serialized by a lock, async folds by an asyncio lock;
    use one RunningSummary per conversation. ``state()`` / ``from_state`` persist it.
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
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], object] | None = None,
        facts: bool = True,
        facts_share: float = 0.3,
        max_segments: int = 4,
        max_facts: int = 10_000,
        header: str = SUMMARY_HEADER,
        validate: ValidationLike | bool | None = None,
        min_score: float = 60,
    ) -> None:
        tok = get_tokenizer(tokenizer)
        if not isinstance(header, str):
            raise ConfigError(f"header={header!r}: must be a string")
        overhead = int(getattr(tok, "per_message", PER_MESSAGE_TOKENS))
        floor = tok.count(header) + overhead + 32
        self.reserve = _check.integer("reserve", reserve, minimum=floor)
        self.retries = _check.non_negative_int("retries", retries)
        self.backoff = _check.number("backoff", backoff, minimum=0.0)
        own = getattr(summarizer, "retry", None)
        if retry is None and isinstance(own, RetryPolicy) and (retries, backoff) == (2, 0.5):
            retry = own  # the summarizer knows which of its failures are worth a retry
        if retry is None:
            retry = RetryPolicy(
                stop=stop_after_attempt(self.retries + 1),
                wait=wait_exponential(multiplier=self.backoff),
                retry=retry_always(),
            )
        elif not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        elif (retries, backoff) != (2, 0.5):
            raise ConfigError(
                f"retries={retries!r}, backoff={backoff!r}: pass either retry=RetryPolicy(...) "
                "or the retries/backoff shorthands, not both"
            )
        self.retry = retry
        self.facts = _check.flag("facts", facts)
        self.facts_share = _check.number("facts_share", facts_share, minimum=0.0, maximum=0.8)
        self.max_segments = _check.positive_int("max_segments", max_segments)
        self.max_facts = _check.positive_int("max_facts", max_facts)
        if sleep is not None:
            _check.function("sleep", sleep, "seconds -> None")
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
        self._validator = None if validate in (None, False) else Validator(validate)
        self.min_score = _check.number("min_score", min_score, minimum=0.0, maximum=100.0)
        self.last_validation = None
        self._sleep = sleep
        self._ledger = FactLedger(tokenizer=tok, max_facts=max_facts, budget=self._facts_budget)
        self._segments = ()
        self._covered = {}
        self._covered_runs: Any = None  # state._encode_covered's cache
        self._pending_seqs = set()
        self._version = 0
        self._seq = 0
        self._current = None
        self._message = None
        self._stats = SummaryStats()
        self._tlock = threading.RLock()
        self._alock = LoopLock()
        self._pending: set[asyncio.Task[None]] = set()
        self.last_error = None
        """The last error of a background summarization (it never raises elsewhere)."""
        self._owner = _check.Owner()

    def claim(self, owner: object) -> None:
        """Bind this summary to the one memory that folds into it (``ConfigError`` for a
        second): a summary holds one conversation's segments and facts."""
        self._owner.claim(owner, "summarizer", self)

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

    # -- write side --------------------------------------------------------------------

    def fold(
        self, messages: Iterable[Message], *, facts: Mapping[str, Iterable[Fact]] | None = None
    ) -> Summary | None:
        """Fold newly evicted messages in; already covered ones are skipped.

        ``facts`` maps message ids to facts already extracted (the ``Summary.facts`` of
        a compression that stands for the message): those messages are not scanned.
        Returns the current summary (None only if nothing was ever folded). Raises
        ``SummarizerError`` (state unchanged) if the summarizer and the fallback fail.
        """
        msgs, given = self._check(messages), self._check_facts(facts)
        with self._tlock:
            try:
                summary, _, _ = self._drive(self._fold_gen(msgs, background=False, given=given))
            except SummarizerError:
                self._stats.failures += 1
                raise
        return summary

    async def afold(
        self,
        messages: Iterable[Message],
        *,
        background: bool = False,
        facts: Mapping[str, Iterable[Fact]] | None = None,
    ) -> Summary | None:
        """Async twin of ``fold``.

        ``background=True`` summarizes with the fallback now (the summary is marked
        degraded) and starts a task that asks the primary for the same messages once
        and puts its text in place of the fallback's; ``await wait()`` awaits it (see
        the class docstring).
        """
        msgs, given = self._check(messages), self._check_facts(facts)
        if background and self._fallback is None:
            raise ConfigError("background=True: needs a fallback summarizer (fallback=False)")
        async with self._lock():
            try:
                gen = self._fold_gen(msgs, background=background, given=given)
                summary, seg, new = await self._adrive(gen)
            except SummarizerError:
                self._stats.failures += 1
                raise
        if background and seg is not None:
            task = asyncio.get_running_loop().create_task(self._background(seg.seq, new))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
        return summary

    async def wait(self) -> None:
        """Wait until every background summarization has finished."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def compress(
        self, messages: Iterable[Message], *, summarizer: SummarizerLike | None = None
    ) -> Summary:
        """Summarize messages on their own, outside the running summary.

        For messages that must shrink but stay in view (priority-1 compression). The
        result covers exactly ``messages``, has no header, and carries every key fact
        found in them (when ``facts`` is on); segments, coverage and the ledger are not
        touched. ``summarizer`` replaces the primary for this call; retries and the
        fallback apply as for a fold, and ``SummarizerError`` is raised if both fail.

        The contract: the result never has empty content. When the summarizer returns
        nothing (an extractive summarizer finds no sentence that fits) or a text that,
        with its facts, is not shorter than the messages' transcript, the result has
        ``kept_original=True``, ``text`` is the transcript unchanged and ``facts`` is
        empty: keep the messages as they are. Counted in ``stats`` (calls, input tokens,
        ``compressions`` or ``compressions_kept``, ``extractions``).
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
            tokens = self._measure_text(text, self._facts_block())
            if tokens > self.reserve:
                preview = text if len(text) <= 40 else text[:37] + "..."
                raise ConfigError(
                    f"text={preview!r}: the summary would take {tokens} tokens, "
                    f"over reserve={self.reserve}"
                )
            self._pending_seqs.clear()
            self._commit((seg,), [], [], None)
            assert self._current is not None
            return self._current

    def clear(self) -> None:
        """Forget the summary, the facts and the coverage (stats are kept)."""
        with self._tlock:
            for task in list(self._pending):
                task.cancel()
            self._segments = ()
            self._ledger.clear()
            self._covered = {}
            self._pending_seqs = set()
            self._version += 1
            self._current = None
            self._message = None

    # -- persistence -------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Pickling: everything but the locks (made anew); background summaries must
        have finished (``await wait()``), since a task cannot travel."""
        if self._pending:
            raise ConfigError(
                f"{self!r}: {len(self._pending)} background summaries are running; "
                "await wait() before pickling"
            )
        with self._tlock:
            state = self.__dict__.copy()
        for key in ("_tlock", "_alock", "_pending"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tlock = threading.RLock()
        self._alock = LoopLock()
        self._pending = set()

    def state(self) -> dict[str, Any]:
        """The summary as plain JSON data: segments (coverage, summarizer, degraded),
        the facts ledger and the covered ids (run-length encoded). ``load_state`` or
        ``RunningSummary.from_state`` rebuild it without calling any summarizer."""
        with self._tlock:
            return _state.dump(self)

    def load_state(self, data: Mapping[str, Any], *, lazy: bool = False) -> None:
        """Replace this summary's content with ``state()`` data (a summary configured
        with the same reserve, header, facts, facts_share, max_segments and
        max_facts). Bad data raises ``ConfigError`` naming the field; nothing changes.

        ``lazy``: decode the covered ids on first use, not now (a resume that only
        renders never needs them); a repeated covered id is then not reported."""
        with self._tlock:
            _state.load(self, data, lazy=lazy)

    @classmethod
    def from_state(
        cls, data: Mapping[str, Any], summarizer: SummarizerLike | None = None, **options: Any
    ) -> RunningSummary:
        """A RunningSummary configured as the one that saved ``data``, with its content.

        ``summarizer`` and ``options`` (tokenizer, fallback, retry, sleep ...) are code,
        not state: pass them again. No summarizer is called.
        """
        config = _state.config_of(data)
        clash = sorted(set(config) & set(options))
        if clash:
            raise ConfigError(f"{clash[0]}={options[clash[0]]!r}: comes from the state")
        rs = cls(summarizer, **config, **options)
        rs.load_state(data)
        return rs
