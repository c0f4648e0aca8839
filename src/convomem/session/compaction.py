"""When and how a session's view is compacted, and the summarizer calls it makes.

``Compactor`` owns the compaction of one session: the reserve it keeps free beside the
history (the summary's, the tiers'), the trigger (``due``), and the compaction itself:
``SessionView.plan`` decides the victims and yields the summarizer work (a fold of the
evicted messages into the running summary, a priority-1 message compressed on its own),
then ``SessionView.commit`` applies it. Nothing changes before the commit: a summarizer
that fails (its fallback too) leaves the view as it was, and the compaction is retried on
the next add (``pending_retry``). What a committed compaction evicted goes to the tiers
(to be indexed) and the log book forgets the seqs of messages that left.

An *emergency* compaction (``emergency``) folds the oldest history by a deficit: the
tiers' reserve (the facts as they render now, the recall share) no longer fits beside the
view (facts merged in from another session, pins grown).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from .._io import Call, Gen, call
from ..errors import SummarizerError
from ..model import COMPRESSED_KEY, Message
from ..summaries import RunningSummary, SummarizerLike
from ..tokens import Tokenizer
from ._ops import compressed_message
from .state import LogBook
from .tiers import Tiers, evicted
from .view import SessionView

CACHE_TURNS: Final = 16
"""Turns of the recent average size a compaction leaves room for by default
(``Compactor.goal``): the context's prefix then holds for ~20 turns between compactions
(95% of turns), where the budget allows."""


class Compactor:
    """The compaction of one session (see the module docstring), with its counters."""

    def __init__(
        self,
        *,
        view: SessionView,
        summary: RunningSummary,
        summarize: bool,
        tiers: Tiers | None,
        book: LogBook,
        tokenizer: Tokenizer,
        compressor: SummarizerLike | None,
        background: bool,
        cache_turns: int = CACHE_TURNS,
    ) -> None:
        self.cache_turns = cache_turns
        self.view = view
        self.summary = summary
        self.summarize = summarize
        self.tiers = tiers
        self.book = book
        self.tokenizer = tokenizer
        self.compressor = compressor
        self.background = background
        self.compactions = self.failures = self.compressions = self.emergencies = 0
        self.pending_retry = False
        self.last_error: BaseException | None = None

    def reserve(self) -> int:
        """What a compaction keeps free beside the history: the summary's reserve (or the
        summary set from outside, with summaries off) and the tiers' reserve."""
        tiers = 0 if self.tiers is None else self.tiers.reserve()
        if self.summarize:
            return self.summary.reserve + tiers
        msg = self.summary.message()
        return (0 if msg is None else self.tokenizer.count_message(msg)) + tiers

    def due(self) -> bool:
        """Whether the history passed its trigger (or the turn limit)."""
        return self.view.over(self.reserve())

    def goal(self) -> float:
        """The target of a compaction due now: the view's, or lower, so that it leaves room
        for ``cache_turns`` turns of the view's average size before the next one. Each
        compaction rewrites the context's prefix (a provider's prompt cache misses once);
        at a small budget the 30% a 0.8 -> 0.5 cut frees lasts a few turns, so it cuts
        deeper there and the prefix holds for ~16 turns in a row."""
        view = self.view
        share = view.share(self.reserve())
        turns = max(1, view.log.turns)
        if share <= 0 or not self.cache_turns:
            return view.target
        grown = view.free_tokens() + (0 if self.tiers is None else self.tiers.turn_tokens())
        room = view.trigger * share - self.cache_turns * grown / turns
        return max(0.0, min(view.target, room / share))

    def run(self, target: float | None = None) -> Gen[None]:
        """Evict down to the target (``goal()``; ``target`` overrides it: 0 folds all that
        can go): plan (summarizer calls), then commit; all or nothing."""
        if target is None:
            target = self.goal()
        before = self.summary.segments
        breaks = frozenset() if self.tiers is None else self.tiers.breaks
        try:
            plan = yield from self.view.plan(
                self.reserve(),
                summarize=self.summarize,
                target=target,
                breaks=breaks,
                fold=self._fold,
                compress=self._compress,
            )
        except SummarizerError as exc:
            self.failures += 1
            self.pending_retry = True
            self.last_error = exc
            return
        self.pending_retry = False
        if not plan.victims and not plan.rewrites and not plan.folded:
            return
        self.compressions += sum(
            1 for _, msgs, _ in plan.rewrites for m in msgs if COMPRESSED_KEY in m.metadata
        )
        self.view.commit(plan)
        self.compactions += 1
        if self.tiers is not None:
            old = set(map(id, before))
            new = [s for s in self.summary.segments if id(s) not in old]
            self.tiers.collect(plan, new, self.book.seqs_of(evicted(plan)))
        keep = {m.id for m in self.view.log.kept()} | {m.id for m in self.view.to_fold}
        self.book.compacted(self.summary.segments, keep)

    def emergency(self, deficit: int) -> Gen[bool]:
        """Fold the oldest history until ``deficit`` more tokens are free (nothing when
        none are missing or nothing can go); whether the view changed."""
        if deficit <= 0 or next(iter(self.view.log.evictable()), None) is None:
            return False
        self.emergencies += 1
        view = self.view
        share = view.share(self.reserve())
        free = view.free_tokens()
        target = 0.0 if share <= 0 else min(1.0, max(0.0, (free - deficit) / share))
        before = self.compactions
        yield from self.run(target=target)
        return self.compactions != before

    def _fold(self, messages: list[Message]) -> Call:
        return call(
            self.summary.fold,
            messages,
            afn=functools.partial(self.summary.afold, background=self.background),
        )

    def _compress(self, m: Message) -> Call:
        def stand_in(s: Any) -> Message:
            return compressed_message(m, s, self.tokenizer)

        async def acompress() -> Message:
            return stand_in(await self.summary.acompress([m], summarizer=self.compressor))

        def compress() -> Message:
            return stand_in(self.summary.compress([m], summarizer=self.compressor))

        return call(compress, afn=acompress)
