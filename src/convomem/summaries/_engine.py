"""The logic of RunningSummary, written once as generators; the drivers do the I/O.

Each generator yields a step (``_Call`` a summarizer, ``_Sleep`` before a retry) and
receives its result; ``running.py`` performs the steps synchronously or in an event
loop. The state lives on the object; a generator stages its changes and commits them
in one place (``_commit``) under the thread lock, after checking that nothing else
committed meanwhile (``_version``), so a failed or raced fold changes nothing.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeAlias, TypeVar

from .._io import LoopLock
from ..errors import AsyncSummarizerError, SummarizerError
from ..model import Message
from ..retry import RetryPolicy
from ..tokens import Tokenizer
from ._fact import Fact, render_facts
from ._validator import Validator, _Validate, _Validating
from .adapter import SummarizerAdapter
from .extraction import extract_message
from .ledger import FactLedger
from .stats import SummaryStats
from .summary import SEGMENT_KEY, Summary, fit_whole, join_unique, render_summary, transcript

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Seg:
    summary: Summary
    seq: int


@dataclass(frozen=True, slots=True)
class _Call:
    adapter: SummarizerAdapter
    messages: list[Message]
    previous: Summary | None
    fallback: bool = False


@dataclass(frozen=True, slots=True)
class _Sleep:
    seconds: float


_Step: TypeAlias = _Call | _Sleep | _Validate
_Gen: TypeAlias = Generator[_Step, Any, T]


class _Engine(_Validating):
    """State and shared logic of ``RunningSummary`` (see its docstring)."""

    reserve: int
    header: str
    facts: bool
    max_segments: int
    retry: RetryPolicy
    last_error: BaseException | None
    _tok: Tokenizer
    _overhead: int
    _facts_budget: int
    _primary: SummarizerAdapter
    _fallback: SummarizerAdapter | None
    _validator: Validator | None
    _ledger: FactLedger
    _segments: tuple[_Seg, ...]
    _covered_now: dict[str, None]
    _covered_lazy: list[Any] | None  # saved coverage not decoded yet (state.load lazy)
    _covered_runs: Any
    _pending_seqs: set[int]
    _version: int
    _seq: int
    _current: Summary | None
    _message: Message | None
    _stats: SummaryStats
    _tlock: threading.RLock
    _alock: LoopLock

    @property
    def _covered(self) -> dict[str, None]:
        """Ids of every message folded in (a dict as an ordered set), decoded from a
        lazily loaded state on first use."""
        if self._covered_lazy is not None:
            from .state import decode_covered  # state imports this module

            raw, self._covered_lazy = self._covered_lazy, None
            self._covered_now, self._covered_runs = decode_covered(raw)
        return self._covered_now

    @_covered.setter
    def _covered(self, value: dict[str, None]) -> None:
        self._covered_now = value
        self._covered_lazy = None

    # -- measuring -------------------------------------------------------------------

    def _facts_block(self) -> str:
        return self._ledger.render(self._facts_budget) if self.facts else ""

    def _measure_text(self, text: str, facts_block: str) -> int:
        return self._tok.count(render_summary(self.header, facts_block, text)) + self._overhead

    @staticmethod
    def _join(segments: Iterable[_Seg]) -> str:
        return join_unique(s.summary.text for s in segments if s.summary.text)

    def _make_seg(
        self,
        text: str,
        first_id: str | None,
        last_id: str | None,
        count: int,
        summarizer: str,
        degraded: bool,
        created_at: float | None = None,
    ) -> _Seg:
        self._seq += 1
        summary = Summary(
            text,
            first_id,
            last_id,
            count,
            summarizer,
            self._measure_text(text, ""),
            time.time() if created_at is None else created_at,
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

    # -- facts -------------------------------------------------------------------------

    def _facts_of(
        self, messages: list[Message], given: Mapping[str, tuple[Fact, ...]] | None
    ) -> list[Fact]:
        """The facts of ``messages``: passed in by the caller, else from the memo."""
        out: list[Fact] = []
        for m in messages:
            if given is not None and m.id in given:
                out.extend(given[m.id])
                continue
            found, scanned = extract_message(m)
            self._stats.extractions += scanned
            out.extend(found)
        return out

    # -- summarizing -------------------------------------------------------------------

    def _summarize_gen(
        self,
        messages: list[Message],
        previous: Summary | None,
        *,
        primary: bool = True,
        fallback: bool = True,
        primary_adapter: SummarizerAdapter | None = None,
        carried: str = "",
    ) -> _Gen[tuple[str, bool, str]]:
        """The primary under the retry policy, then the fallback; SummarizerError if all
        fail. Returns ``(text, made by the fallback, summarizer name)``. With a validator,
        the primary's text must score ``min_score`` (``carried``: the facts rendered
        beside it, credited to it), else the fallback's is used."""
        errors: list[BaseException] = []
        first = self._primary if primary_adapter is None else primary_adapter
        if primary:
            attempts = self.retry.attempts()
            while True:
                try:
                    text = yield _Call(first, messages, previous)
                except AsyncSummarizerError:
                    raise
                except Exception as exc:
                    errors.append(exc)
                    decision = attempts.failed(exc)
                    text = None
                if text is None:
                    if not decision.retry:
                        break
                    self._stats.retries += 1
                    yield _Sleep(decision.delay)
                    continue
                rejected = yield from self._validate_gen(messages, previous, text, carried)
                if rejected is None:
                    return text, False, first.name
                if not fallback or self._fallback is None:
                    if fallback:  # no fallback configured: the primary's text is all we have
                        return text, False, first.name
                    raise SummarizerError(f"{first.name}: {rejected}", errors=())
                errors.append(SummarizerError(rejected))
                break
        if fallback and self._fallback is not None:
            try:
                text = yield _Call(self._fallback, messages, previous, fallback=True)
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

    def _over(self, segments: tuple[_Seg, ...], block: str) -> bool:
        if len(segments) > self.max_segments:
            return True
        return self._measure_text(self._join(segments), block) > self.reserve

    def _enforce_gen(
        self, segments: tuple[_Seg, ...], block: str, pending: set[int]
    ) -> _Gen[tuple[_Seg, ...]]:
        """Merge the oldest adjacent settled segments (then truncate a lone one) until
        the summary fits. Segments awaiting a background summary (``pending``) are
        never merged: their text is about to be replaced. While they stand in the way
        the summary may hold more than ``max_segments`` and is clipped when rendered."""
        while self._over(segments, block):
            pair = next(
                (
                    i
                    for i in range(len(segments) - 1)
                    if segments[i].seq not in pending and segments[i + 1].seq not in pending
                ),
                None,
            )
            if pair is not None:
                a, b = segments[pair], segments[pair + 1]
                text, degraded, name = yield from self._summarize_gen(
                    [self._segment_message(b)], a.summary, carried=block
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
                segments = (*segments[:pair], merged, *segments[pair + 2 :])
            elif len(segments) == 1 and segments[0].seq not in pending:
                only = segments[0].summary
                measure = functools.partial(self._measure_text, facts_block=block)
                text = fit_whole(only.text, self.reserve, measure)
                self._stats.truncations += 1
                tokens = self._measure_text(text, "")
                return (_Seg(replace(only, text=text, tokens=tokens), segments[0].seq),)
            else:
                break
        return segments

    # -- folding -----------------------------------------------------------------------

    def _new_messages(self, messages: list[Message]) -> list[Message]:
        seen: set[str] = set()
        out: list[Message] = []
        for m in messages:
            if m.id not in self._covered and m.id not in seen:
                seen.add(m.id)
                out.append(m)
        return out

    def _fold_gen(
        self,
        messages: list[Message],
        *,
        background: bool,
        given: Mapping[str, tuple[Fact, ...]] | None = None,
    ) -> _Gen[tuple[Summary | None, _Seg | None, list[Message]]]:
        new = self._new_messages(messages)
        self._stats.skipped += len(messages) - len(new)
        if not new:
            return self._current, None, []
        # Facts first: the extractive summarizer then finds each text already scanned.
        found = self._facts_of(new, given) if self.facts else []
        carried = render_facts(found) if found and self._validator is not None else ""
        text, degraded, name = yield from self._summarize_gen(
            new, None, primary=not background, carried=carried
        )
        seg = self._make_seg(text, new[0].id, new[-1].id, len(new), name, degraded)
        while True:
            version = self._version
            if any(m.id in self._covered for m in new):
                # A concurrent fold covered some of these meanwhile: fold the rest.
                return (yield from self._fold_gen(new, background=background, given=given))
            with self._tlock:  # preview changes the ledger for a moment, then undoes it
                block = self._ledger.preview(found, self._facts_budget) if self.facts else ""
            segments: tuple[_Seg, ...] = (*self._segments, seg)
            if not background:  # a background fold leaves merging to its background task
                segments = yield from self._enforce_gen(segments, block, self._pending_seqs)
            with self._tlock:
                if self._version == version:
                    self._commit(segments, found, new, seg.seq if background else None)
                    return self._current, seg, new
            # The state changed during a merge: redo the merge on the fresh state.

    def _install_gen(self, seq: int, text: str | None, name: str) -> _Gen[bool]:
        """Background: put the primary's ``text`` in place of segment ``seq`` (or, with
        ``text=None`` after the primary failed, settle the fallback segment as it is),
        then merge as a fold would. False if the segment is gone (cleared, replaced)."""
        while True:
            version = self._version
            segments = self._segments
            idx = next((i for i, s in enumerate(segments) if s.seq == seq), None)
            if idx is None:
                return False
            if text is not None:
                old = segments[idx].summary
                seg = self._make_seg(
                    text, old.first_id, old.last_id, old.count, name, False, old.created_at
                )
                segments = (*segments[:idx], seg, *segments[idx + 1 :])
            pending = self._pending_seqs - {seq}
            segments = yield from self._enforce_gen(segments, self._facts_block(), pending)
            with self._tlock:
                if self._version == version:
                    self._pending_seqs.discard(seq)
                    self._commit(segments, [], [], None)
                    return True

    def _commit(
        self, segments: tuple[_Seg, ...], found: list[Fact], new: list[Message], pending: int | None
    ) -> None:
        self._segments = segments
        if found:
            self._ledger.add(found)
        covered = self._covered
        for m in new:
            covered[m.id] = None
        if pending is not None:
            self._pending_seqs.add(pending)
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
        block = self._facts_block()
        tokens = self._measure_text(text, block)
        if tokens > self.reserve:
            # Only while background summaries are pending: show a clipped narrative.
            text = fit_whole(text, self.reserve, lambda t: self._measure_text(t, block))
            tokens = self._measure_text(text, block)
        summary = Summary(
            text,
            segs[0].summary.first_id if segs else None,
            segs[-1].summary.last_id if segs else None,
            sum(s.summary.count for s in segs),
            "+".join(names) or "facts",
            tokens,
            time.time(),
            any(s.summary.degraded for s in segs),
            facts,
            omitted,
            self.header,
        )
        self._current = summary
        self._message = summary.to_message()

    # -- compressing -------------------------------------------------------------------

    def _compress_gen(
        self, messages: list[Message], summarizer: SummarizerAdapter | None
    ) -> _Gen[Summary]:
        found: dict[tuple[str, str], Fact] = {}
        if self.facts:
            for f in self._facts_of(messages, None):
                found.setdefault(f.key, f)
        carried = render_facts(found.values()) if found and self._validator is not None else ""
        text, degraded, name = yield from self._summarize_gen(
            messages, None, primary_adapter=summarizer, carried=carried
        )
        first, last, n = messages[0].id, messages[-1].id, len(messages)
        summary = Summary(
            text, first, last, n, name, None, time.time(), degraded, tuple(found.values()), 0, ""
        )
        # Compared with what the messages cost as they are (counts are cached: no copy of
        # a huge text is made unless it is kept).
        original_tokens = self._tok.count_messages(messages)
        tokens = self._tok.count(summary.content) + self._overhead
        if not text.strip() or tokens >= original_tokens:
            # Not shorter (or empty): the caller keeps the messages as they are.
            self._stats.compressions_kept += 1
            original = transcript(messages)
            kept = Summary(original, first, last, n, name, None, summary.created_at, degraded)
            tokens = self._tok.count(original) + self._overhead
            return replace(kept, header="", tokens=tokens, kept_original=True)
        self._stats.compressions += 1
        return replace(summary, tokens=tokens)
