"""SummaryEvict: drop like ``Recency`` and send one summary message for what was dropped.

The strategy keeps the pinned chunks and the newest chunks that fit ``budget - reserve``
(its ``fallback`` decides, ``Recency(contiguous=True)`` by default), hands the dropped
messages to a summarizer and puts the summary, a synthetic system message, into the
room it reserved.
Unlike convopack's ``SummaryEvict`` it never goes over budget because of the summary
(a long summary is clipped to the room left, with the packer's tokenizer), can keep
the system prompt first (``placement="after_system"``, so a provider's prompt-cache
prefix stays intact), and calls the summarizer only when the dropped set changed: the
text is cached by the dropped messages' ids, so a caller that rebuilds its ``Message``
objects every turn still gets the cached summary. When the new dropped set extends a
cached one and the summarizer takes ``(messages, previous)``, only the newly dropped
messages are summarized, folded into the previous text: no message is summarized twice.

The default fallback keeps a strict suffix: the summary then stands for a contiguous
range of the log, and as an agent loop appends messages the dropped set only grows,
so every fold applies. With gaps (``fallback=Recency()``) an old short message kept in
a gap is dropped later, out of order, and the whole dropped set is summarized afresh.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import attrgetter
from typing import Any, Final

from ..errors import AsyncSummarizerError, ConfigError, ConvomemError, TokenizerError
from ..model import Message
from ..packing import Call, ChunkStrategy, ChunkTable, Placement, PlanGen, Selection, as_strategy
from ..summaries import (
    SUMMARY_HEADER,
    SummarizerAdapter,
    SummarizerLike,
    Summary,
    as_summarizer,
    clip_to_tokens,
    render_summary,
)
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer
from .budget import Recency

SUMMARY_KEY: Final = "convomem_summary"
"""Metadata key (value True) marking the summary message SummaryEvict adds."""

_CACHE_ENTRIES: Final = 16  # dropped sets remembered (a strategy may serve a few sessions)
_FIT_ROUNDS: Final = 4  # re-clips when a custom tokenizer's message overhead is not constant
_INDICES: Final = attrgetter("indices")
_ID: Final = attrgetter("id")


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


def _check_reserve(reserve: object) -> int | None:
    if reserve is None:
        return None
    if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 1:
        raise ConfigError(
            f"reserve={reserve!r}: must be a positive integer (tokens kept for the summary) "
            "or None for budget // 10"
        )
    return reserve


def _check_placement(placement: object) -> Placement:
    if placement == "head":
        return "head"
    if placement == "after_system":
        return "after_system"
    raise ConfigError(f"placement={placement!r}: must be 'head' or 'after_system'")


def _used(sel: Selection) -> int:
    """Tokens of what a selection sends (pinned and kept chunks, stubs included)."""
    cost = sel.table.cost
    return sel.table.pinned_cost() + sum(cost[p] for p in sel.kept)


def _dropped_mask(sel: Selection) -> bytearray:
    """1 for each free chunk a selection drops without a reason of its own."""
    mask = bytearray(sel.table.free)
    for p in chain(sel.kept, sel.dropped):
        mask[p] = 0
    return mask


def _indices(sel: Selection, mask: bytearray) -> list[int]:
    """Input indices of the messages in the chunks flagged by ``mask`` (notes excluded)."""
    chunks = map(sel.table.chunks.__getitem__, compress(range(len(mask)), mask))
    idx = list(chain.from_iterable(map(_INDICES, chunks)))
    if sel.notes:
        idx = [i for i in idx if i not in sel.notes]
    return idx


@dataclass(slots=True)
class _Entry:
    """A summarizer result for one dropped set (ids in order), and its rendered messages."""

    ids: tuple[str, ...]
    text: str
    rendered: dict[int, tuple[Tokenizer, Message | None]] = field(default_factory=dict)


class SummaryEvict(ChunkStrategy):
    """Drop like ``Recency`` and replace the dropped messages by one summary message.

    ``summarizer`` is ``(messages) -> str`` or ``(messages, previous) -> str``, sync or
    async (``summaries.as_summarizer``). ``reserve`` is the room, in tokens, kept for
    the summary (default ``budget // 10``); the messages are packed into
    ``budget - reserve`` and a longer summary is clipped to fit, so the summary never
    takes the result over budget. A reserve that is not below the budget raises
    ``ConfigError`` when packing. When nothing is dropped there is no summary and no
    call; when no summary fits (pins or ``min_keep`` filled the budget, or the text is
    empty) the dropped messages keep reason ``"budget"``.

    ``placement="head"`` puts the summary first in ``kept`` (convopack's behaviour);
    ``"after_system"`` puts it right after the leading system messages. ``fallback``
    (default ``Recency(contiguous=True)``: a strict suffix, so the summary covers one
    contiguous range and folds incrementally) decides what is dropped; the
    messages it drops without a reason of their own get reason ``"summarized"``
    (orphans, unanswered calls, duplicates and window drops keep theirs and are not
    summarized). The summary is a system message with ``metadata[SUMMARY_KEY] = True``
    and a ``"summary"`` entry giving its coverage (``PackResult.summary``).

    The summarizer runs only when the dropped set (by message ids, in order) differs
    from one seen recently. ``pack()`` with an async summarizer inside a running event
    loop raises ``RuntimeError``: use ``pack_async``, which awaits async summarizers
    and runs sync ones in a worker thread.
    """

    name = "summary_evict"

    def __init__(
        self,
        summarizer: SummarizerLike | SummarizerAdapter,
        *,
        reserve: int | None = None,
        placement: Placement = "head",
        fallback: object = None,
    ) -> None:
        self.summarizer = as_summarizer(summarizer)
        self.reserve = _check_reserve(reserve)
        self.placement: Placement = _check_placement(placement)
        self.fallback = check_fallback(fallback, Recency(contiguous=True))
        if isinstance(self.fallback, SummaryEvict):
            raise ConfigError(f"fallback={fallback!r}: a SummaryEvict cannot fall back to another")
        self._incremental = self.summarizer._pass != "no"  # takes (messages, previous)
        self._entries: OrderedDict[tuple[str, ...], _Entry] = OrderedDict()
        self._last: _Entry | None = None  # the entry used last
        self._lock = threading.Lock()

    def reserve_for(self, budget: int) -> int:
        """The reserve used for ``budget`` (ConfigError if it leaves no room for messages)."""
        reserve = budget // 10 if self.reserve is None else self.reserve
        if reserve >= budget:
            raise ConfigError(
                f"reserve={reserve!r}: must be less than the budget ({budget}); the budget "
                "holds the reserve for the summary plus the messages"
            )
        return reserve

    # -- the plan ------------------------------------------------------------------

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        reserve = self.reserve_for(budget)
        sel = yield from self.fallback.plan(table, budget - reserve)
        self._check_selection(sel)
        ids, dropped = self._dropped(sel)
        if not ids:
            return sel  # nothing dropped: no summary, no call
        tokenizer = sel.table.tokenizer
        room = min(reserve, budget - _used(sel))
        if room <= _counted(self._render("", ()), tokenizer)[1]:
            return sel  # not even an empty summary fits (pins or min_keep overflowed)
        entry = self._lookup(ids)
        if entry is None:
            entry = yield from self._summarize(ids, dropped or self._messages(sel))
        hit = entry.rendered.get(room)
        if hit is not None and hit[0] is tokenizer:
            summary = hit[1]
        else:
            summary = self._fit(entry.text, ids, room, tokenizer)
            with self._lock:
                if len(entry.rendered) >= _CACHE_ENTRIES:
                    entry.rendered.clear()
                entry.rendered[room] = (tokenizer, summary)
        if summary is not None:
            sel.summary = summary
            sel.placement = self.placement
            sel.default = "summarized"
        return sel

    def _dropped(self, sel: Selection) -> tuple[tuple[str, ...], list[Message] | None]:
        """The ids of the messages to summarize, in order (and the messages, if at hand).

        Each chunk's ids are kept in the table's memo, so in a Packer's table the key is
        built by C-level passes over the chunks, without touching the messages.
        """
        t = sel.table
        mask = _dropped_mask(sel)
        if sel.notes:
            dropped = list(map(t.messages.__getitem__, _indices(sel, mask)))
            return tuple(map(_ID, dropped)), dropped
        memo = t.memo(self)
        chunks = t.chunks
        for p in range(len(memo), len(chunks)):
            memo.append(tuple(map(_ID, chunks[p].messages)))
        return tuple(chain.from_iterable(compress(memo, mask))), None

    def _messages(self, sel: Selection) -> list[Message]:
        return list(map(sel.table.messages.__getitem__, _indices(sel, _dropped_mask(sel))))

    def _check_selection(self, sel: Selection) -> None:
        if sel.summary is not None:
            raise ConvomemError(
                f"{self!r}: its fallback {self.fallback!r} produced a summary of its own; "
                "a stage list may hold only one summarizing strategy"
            )

    # -- the summarizer and its cache ----------------------------------------------

    def _lookup(self, ids: tuple[str, ...]) -> _Entry | None:
        last = self._last
        if last is not None and last.ids == ids:
            return last  # the common case: compared element by element, never hashed
        with self._lock:
            entry = self._entries.get(ids)
            if entry is not None:
                self._entries.move_to_end(ids)
                self._last = entry
            return entry

    def _previous(self, ids: tuple[str, ...]) -> _Entry | None:
        """The longest cached dropped set that ``ids`` extends with newer messages."""
        if not self._incremental:
            return None
        with self._lock:
            entries = list(self._entries.values())
        best: _Entry | None = None
        for e in entries:
            k = len(e.ids)
            if k < len(ids) and (best is None or k > len(best.ids)) and ids[:k] == e.ids:
                best = e
        return best

    def _summarize(
        self, ids: tuple[str, ...], dropped: list[Message]
    ) -> Generator[Call, Any, _Entry]:
        """One summarizer call (only the new messages when folding a cached text)."""
        prev = self._previous(ids)
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
            text = yield Call(
                adapter.acall if adapter.is_async else adapter,
                (given, previous),
                async_fn=adapter.acall,
                what=what,
            )
        except AsyncSummarizerError as exc:  # a sync callable that returned an awaitable
            raise AsyncSummarizerError(
                f"{what} is async and an event loop is running: use `await "
                "packer.pack_async(...)` (or the strategy's pack_async) instead of pack()"
            ) from exc
        entry = _Entry(ids, text)
        with self._lock:
            self._entries[ids] = entry
            while len(self._entries) > _CACHE_ENTRIES:
                self._entries.popitem(last=False)
            self._last = entry
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

    def _fit(
        self, text: str, ids: tuple[str, ...], room: int, tokenizer: Tokenizer
    ) -> Message | None:
        """The summary message for ``text``, clipped to cost at most ``room`` tokens."""
        if not text.strip():
            return None
        msg, cost = _counted(self._render(text, ids), tokenizer)
        if cost <= room:
            return msg
        overhead = cost - tokenizer.count(msg.countable_text())

        def count(t: str) -> int:
            return tokenizer.count(render_summary(SUMMARY_HEADER, "", t))

        target = room - overhead
        for _ in range(_FIT_ROUNDS):
            clipped = clip_to_tokens(text, target, count)
            if not clipped.strip():
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


def _counted(message: Message, tokenizer: Tokenizer) -> tuple[Message, int]:
    """``message`` and its cost; a tokenizer that needs given counts gets one set."""
    try:
        return message, tokenizer.count_message(message)
    except TokenizerError:
        n = tokenizer.count(message.countable_text()) + PER_MESSAGE_TOKENS
        return message.replace(tokens=n), n
