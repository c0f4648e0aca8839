"""SummaryEvict: drop like ``Recency`` and send one summary message for what was dropped.

The strategy keeps the pinned chunks and the newest chunks that fit ``budget - reserve``
(its ``fallback`` decides, ``Recency(contiguous=True)`` by default), hands the dropped
messages to a summarizer and puts the summary, a synthetic system message, into the
room left: the reserve plus whatever the kept chunks leave unused, so a summary is
sent whenever one fits at all.
Unlike convopack's ``SummaryEvict`` it never goes over budget because of the summary
(a long summary is clipped to the room left, with the packer's tokenizer), can keep
the system prompt first (``placement="after_system"``, so a provider's prompt-cache
prefix stays intact), and calls the summarizer only when the dropped set changed: the
text is cached by the dropped messages themselves (ids to find it, every field to
prove it), so a caller that rebuilds its ``Message`` objects every turn still gets the
cached summary while a strategy shared by many conversations never serves one
conversation's summary to another. When the new dropped set extends a cached one and
the summarizer takes ``(messages, previous)``, only the newly dropped messages are
summarized, folded into the previous text: no message is summarized twice.

The default fallback keeps a strict suffix: the summary then stands for a contiguous
range of the log, and as an agent loop appends messages the dropped set only grows,
so every fold applies. With gaps (``fallback=Recency()``) an old short message kept in
a gap is dropped later, out of order, and the whole dropped set is summarized afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from itertools import chain, compress
from operator import attrgetter
from typing import Any, Final, Literal, TypeAlias

from .. import _check
from ..errors import AsyncSummarizerError, ConfigError, ConvomemError, TokenizerError
from ..model import Message
from ..packing import Call, ChunkStrategy, ChunkTable, Placement, PlanGen, Selection, as_strategy
from ..summaries import (
    SUMMARY_HEADER,
    TRUNCATION_MARKER,
    SummarizerAdapter,
    SummarizerLike,
    Summary,
    as_summarizer,
    clip_to_tokens,
    render_summary,
)
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer
from ._summary_cache import ENTRIES, CachedSummary, SummaryCache
from .budget import Recency

SUMMARY_KEY: Final = "convomem_summary"
"""Metadata key (value True) marking the summary message SummaryEvict adds."""

OnError: TypeAlias = Literal["raise", "drop"]

log = logging.getLogger("convomem.strategies")

_FIT_ROUNDS: Final = 4  # re-clips when a custom tokenizer's message overhead is not constant
_MESSAGES: Final = attrgetter("messages")
_ID: Final = attrgetter("id")
_SHORTEST: Final = "x"  # the shortest text a summary can have: one character
_SHORTENED: Final = " ".join(["word"] * 8) + TRUNCATION_MARKER
"""The text of the shortest summary room is made for: a few words and the marker."""


def check_fallback(fallback: object, default: ChunkStrategy | None = None) -> ChunkStrategy:
    """The budget strategy a stage delegates to (``default``, else ``Recency()``, if None)."""
    if fallback is None:
        return Recency() if default is None else default
    try:
        return as_strategy(fallback)
    except ConfigError as exc:
        raise ConfigError(
            f"fallback={fallback!r}: must be a budget strategy such as Recency() ({exc})"
        ) from None


def _used(sel: Selection) -> int:
    """Tokens of what a selection sends (pinned and kept chunks, stubs included)."""
    cost = sel.table.cost
    return sel.table.pinned_cost() + sum(cost[p] for p in sel.kept)


def _dropped(sel: Selection) -> list[Message]:
    """The messages to summarize, in order: those in free chunks the selection drops
    without a reason of its own (earlier stages' notes excluded).

    The chunks' own message lists are chained at C level, without touching a message.
    """
    t = sel.table
    mask = bytearray(t.free)
    for p in chain(sel.kept, sel.dropped):
        mask[p] = 0
    chunks = compress(t.chunks, mask)
    notes = sel.notes
    if not notes:
        return list(chain.from_iterable(map(_MESSAGES, chunks)))
    # A stage before us (dedup) noted some messages: skip those.
    return [m for c in chunks for m, i in zip(c.messages, c.indices, strict=True) if i not in notes]


def _counted(message: Message, tokenizer: Tokenizer) -> tuple[Message, int]:
    """``message`` and its cost; a tokenizer that needs given counts gets one set."""
    try:
        return message, tokenizer.count_message(message)
    except TokenizerError:
        n = tokenizer.count(message.countable_text()) + PER_MESSAGE_TOKENS
        return message.replace(tokens=n), n


class SummaryEvict(ChunkStrategy):
    """Drop like ``Recency`` and replace the dropped messages by one summary message.

    ``summarizer`` is ``(messages) -> str`` or ``(messages, previous) -> str``, sync or
    async (``summaries.as_summarizer``). ``reserve`` is the room, in tokens, kept for
    the summary (default ``budget // 10``): the messages are packed into
    ``budget - reserve``, and the summary may use the reserve plus whatever budget the
    kept chunks leave unused. A longer summary is clipped to fit (ending with ``" […]"``),
    so the summary never takes the result over budget. When that room cannot hold even
    a shortened summary (``least_room``: the header and a few words), the messages are
    packed into ``budget - least_room`` instead: older ones are dropped too, so a
    shortened summary is sent rather than none. A reserve that is not below the budget
    raises ``ConfigError`` when packing. When nothing is dropped there is no summary and
    no call; when not even a one-character summary fits (pins or ``min_keep`` filled
    the budget) there is no call, and when the text is blank there is no summary: the
    dropped messages then keep reason ``"budget"``.

    ``placement="head"`` puts the summary first in ``kept`` (convopack's behaviour);
    ``"after_system"`` puts it right after the leading system messages. ``fallback``
    (default ``Recency(contiguous=True)``: a strict suffix, so the summary covers one
    contiguous range and folds incrementally) decides what is dropped; the
    messages it drops without a reason of their own get reason ``"summarized"``
    (orphans, unanswered calls, duplicates and window drops keep theirs and are not
    summarized). The summary is a system message with ``metadata[SUMMARY_KEY] = True``
    and a ``"summary"`` entry giving its coverage (``PackResult.summary``).

    The summarizer runs only when the dropped set differs from one seen recently (the
    same messages: ids and every field, so a strategy shared by many conversations
    never serves one's summary to another). A summarizer that raises is not cached,
    and the next pack tries again; with ``on_error="raise"`` (the default) the error
    propagates, with ``on_error="drop"`` it is logged (logger ``convomem.strategies``)
    and the pack goes on without a summary, the dropped messages with reason
    ``"budget"``. ``pack()`` with an async summarizer inside a running event loop
    raises ``AsyncSummarizerError`` (a ``RuntimeError``), whatever ``on_error`` says:
    use ``pack_async``, which awaits async summarizers and runs sync ones in a worker
    thread.
    """

    name = "summary_evict"

    def __init__(
        self,
        summarizer: SummarizerLike | SummarizerAdapter,
        *,
        reserve: int | None = None,
        placement: Placement = "head",
        fallback: object = None,
        on_error: OnError = "raise",
    ) -> None:
        self.summarizer = as_summarizer(summarizer)
        self.reserve = _check.optional_positive_int("reserve", reserve)
        self.placement: Placement = _check.one_of("placement", placement, ("head", "after_system"))
        self.on_error: OnError = _check.one_of("on_error", on_error, ("raise", "drop"))
        self.fallback = check_fallback(fallback, Recency(contiguous=True))
        if isinstance(self.fallback, SummaryEvict):
            raise ConfigError(f"fallback={fallback!r}: a SummaryEvict cannot fall back to another")
        self._incremental = self.summarizer.takes_previous
        self.cache = SummaryCache(ENTRIES)
        self._shortest: tuple[Tokenizer, int, int] | None = None

    def reserve_for(self, budget: int) -> int:
        """The reserve used for ``budget`` (ConfigError if it leaves no room for messages)."""
        reserve = budget // 10 if self.reserve is None else self.reserve
        if reserve >= budget:
            raise ConfigError(
                f"reserve={reserve!r}: must be less than the budget ({budget}); the budget "
                "holds the reserve for the summary plus the messages"
            )
        return reserve

    def shortest_summary(self, tokenizer: Tokenizer) -> int:
        """Tokens of the smallest summary message: the header and one character.

        A summary is sent whenever something is dropped and this much room is left
        (given a summarizer that returns text); with less, the summarizer is not called.
        """
        return self._sizes(tokenizer)[0]

    def least_room(self, tokenizer: Tokenizer) -> int:
        """Tokens of a shortened summary: the header, a few words and ``" […]"``.

        When the reserve and what the kept chunks leave unused are less than this, the
        messages are packed into ``budget - least_room`` instead (older ones dropped
        too), so the summary sent says something; unless pins or ``min_keep`` fill that
        room as well.
        """
        return self._sizes(tokenizer)[1]

    def _sizes(self, tokenizer: Tokenizer) -> tuple[int, int]:
        hit = self._shortest
        if hit is None or hit[0] is not tokenizer:
            shortest = _counted(self._render(_SHORTEST, ()), tokenizer)[1]
            shortened = _counted(self._render(_SHORTENED, ()), tokenizer)[1]
            hit = self._shortest = (tokenizer, shortest, max(shortest, shortened))
        return hit[1], hit[2]

    # -- the plan ------------------------------------------------------------------

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        reserve = self.reserve_for(budget)
        sel = yield from self.fallback.plan(table, budget - reserve)
        self._check_selection(sel)
        dropped = _dropped(sel)
        if not dropped:
            return sel  # nothing dropped: no summary, no call
        tokenizer = sel.table.tokenizer
        shortest, least = self._sizes(tokenizer)
        room = budget - _used(sel)  # the reserve plus what the kept chunks leave unused
        if room < least < budget:  # too little for a shortened summary: make that room
            wider = yield from self.fallback.plan(table, budget - least)
            self._check_selection(wider)
            if budget - _used(wider) >= least:
                sel, dropped, room = wider, _dropped(wider), budget - _used(wider)
        if room < shortest:
            return sel  # not even the shortest summary fits (pins or min_keep overflowed)
        entry = self.cache.get(dropped)
        if entry is None:
            try:
                entry = yield from self._summarize(tuple(map(_ID, dropped)), dropped)
            except AsyncSummarizerError:
                raise  # a misuse, not a failure of the summarizer
            except Exception as exc:
                if self.on_error == "raise":
                    raise
                log.warning(
                    "summarizer %r failed (%s: %s); %d messages dropped without a summary",
                    self.summarizer.name,
                    type(exc).__name__,
                    exc,
                    len(dropped),
                )
                return sel
        summary = self._message(entry, room, tokenizer)
        if summary is not None:
            sel.summary = summary
            sel.placement = self.placement
            sel.default = "summarized"
        return sel

    def _check_selection(self, sel: Selection) -> None:
        if sel.summary is not None:
            raise ConvomemError(
                f"{self!r}: its fallback {self.fallback!r} produced a summary of its own; "
                "a stage list may hold only one summarizing strategy"
            )

    # -- the summarizer ------------------------------------------------------------

    def _summarize(
        self, ids: tuple[str, ...], dropped: list[Message]
    ) -> Generator[Call, Any, CachedSummary]:
        """One summarizer call (only the new messages when folding a cached text)."""
        prev = self.cache.longest_prefix(ids, dropped) if self._incremental else None
        previous: Summary | None = None
        given = dropped
        if prev is not None:
            given = dropped[len(prev.ids) :]
            previous = Summary(
                text=prev.text,
                first_id=prev.ids[0],
                last_id=prev.ids[-1],
                count=len(prev.ids),
                summarizer=self.summarizer.name,
            )
        adapter = self.summarizer
        what = f"summarizer {adapter.name!r}"
        try:
            # The adapter itself in sync packs: an async summarizer inside a running
            # loop then raises AsyncSummarizerError, which is told from a failure.
            text = yield Call(adapter, (given, previous), afn=adapter.acall)
        except AsyncSummarizerError as exc:
            raise AsyncSummarizerError(
                f"{what} is async and an event loop is running: use `await "
                "packer.pack_async(...)` (or the strategy's pack_async) instead of pack()"
            ) from exc
        entry = CachedSummary(tuple(dropped), ids, text.strip())
        self.cache.put(entry)
        return entry

    # -- the summary message -------------------------------------------------------

    def _render(self, text: str, ids: Sequence[str]) -> Message:
        m = Summary(
            text=text,
            first_id=ids[0] if ids else None,
            last_id=ids[-1] if ids else None,
            count=len(ids),
            summarizer=self.summarizer.name,
        ).to_message()
        return m.replace(metadata={**m.metadata, SUMMARY_KEY: True})

    def _message(self, entry: CachedSummary, room: int, tokenizer: Tokenizer) -> Message | None:
        """The summary message of ``entry`` costing at most ``room`` (None: none fits)."""
        full = entry.full
        if full is None or full[0] is not tokenizer:
            if entry.text:
                msg, cost = _counted(self._render(entry.text, entry.ids), tokenizer)
                full = entry.full = (tokenizer, msg, cost)
            else:
                full = entry.full = (tokenizer, None, 0)
        if full[1] is None or full[2] <= room:
            return full[1]  # blank, or the whole text fits
        hit = entry.clipped.get(room)
        if hit is not None and hit[0] is tokenizer:
            return hit[1]
        clipped = self._clip(entry.text, entry.ids, room, full[2], tokenizer)
        if len(entry.clipped) >= ENTRIES:
            entry.clipped.clear()
        entry.clipped[room] = (tokenizer, clipped)
        return clipped

    def _clip(
        self, text: str, ids: tuple[str, ...], room: int, cost: int, tokenizer: Tokenizer
    ) -> Message | None:
        """The summary message of ``text`` clipped to cost at most ``room`` tokens.

        A clipped text keeps at least one character before the truncation marker: a
        marker alone says nothing, and no summary is better than an empty one.
        """
        overhead = cost - tokenizer.count(render_summary(SUMMARY_HEADER, "", text))

        def count(t: str) -> int:
            return tokenizer.count(render_summary(SUMMARY_HEADER, "", t))

        target = room - overhead
        for _ in range(_FIT_ROUNDS):
            clipped = clip_to_tokens(text, target, count)
            if not clipped.removesuffix(TRUNCATION_MARKER).strip():
                return None
            msg, cost = _counted(self._render(clipped, ids), tokenizer)
            if cost <= room:
                return msg
            target -= cost - room
        return None

    def __repr__(self) -> str:
        return (
            f"SummaryEvict({self.summarizer.name}, reserve={self.reserve!r}, "
            f"placement={self.placement!r}, fallback={self.fallback!r})"
        )
