"""Atomic units of a conversation: tool exchanges kept whole.

A chunk is the smallest thing a window or strategy may keep or drop. An assistant
message that calls tools and every result answering those calls form one chunk,
whatever order parallel results arrive in; every other message is a chunk of its own.
When a result arrives after unrelated messages, everything from its call to it joins
one chunk, so a view can never separate a call from its results.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Final, Literal

from ..errors import ConfigError
from .blocks import Block, ToolResultBlock, ToolUseBlock
from .messages import Message

_NONE: Final[frozenset[str]] = frozenset()


@dataclass(eq=False)
class Chunk:
    """Messages that enter or leave a view together.

    ``pending`` holds the ids of tool calls in the chunk still awaiting a result;
    ``orphan`` marks a tool result whose call is not in the history.
    """

    messages: list[Message]
    indices: list[int]
    pinned: bool = False
    tokens: int = 0
    pending: set[str] = field(default_factory=set)
    orphan: bool = False
    pinned_at: list[int] = field(default_factory=list)
    """Positions of the messages pinned on their own (the chunk is pinned for them)."""

    @property
    def start(self) -> int:
        return self.indices[0]

    @property
    def stop(self) -> int:
        return self.indices[-1] + 1

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        flags = "".join(
            f" {name}" for name, on in (("pinned", self.pinned), ("orphan", self.orphan)) if on
        )
        pending = f" pending={sorted(self.pending)}" if self.pending else ""
        ids = [m.id for m in self.messages]
        return f"Chunk({ids}, tokens={self.tokens}{flags}{pending})"


class ChunkBuilder:
    """Groups messages into chunks as they arrive, in amortized O(1) per message.

    ``chunks`` is the live deque; a consumer (the incremental window) may pop finished
    business from its left, calling ``discard`` so that results to the discarded calls
    later arrive as orphans rather than rejoining a chunk that is gone.
    """

    def __init__(self) -> None:
        self.chunks: deque[Chunk] = deque()
        self._open: dict[str, Chunk] = {}

    def add(self, message: Message, index: int, *, tokens: int = 0, pinned: bool = False) -> Chunk:
        """Place ``message`` (at position ``index``); return the chunk now holding it.

        A message that answers an open call and also carries results answering no open
        call (a call made nowhere, or answered already) joins the exchange as a copy
        without those stray results, so no view ever sends a result without its call.
        Likewise a call repeating the id of a call still open (a re-sent assistant turn)
        is left out of a copy, so no view makes one call twice; a message that is nothing
        but such repeats is an orphan (never sent), like a result answering nothing.
        """
        result_ids = message.tool_result_ids()
        calls = message.tool_use_ids()
        open_ = self._open
        pinned_at = [index] if pinned else []
        if calls and open_ and not result_ids and self.repeats(message):
            chunk = Chunk([message], [index], pinned, tokens, orphan=True, pinned_at=pinned_at)
            self.chunks.append(chunk)
            return chunk
        if result_ids:
            target = self.joins(message)
            if target is None:
                chunk = Chunk([message], [index], pinned, tokens, orphan=True, pinned_at=pinned_at)
                self.chunks.append(chunk)
                return chunk
            if any(r not in open_ for r in result_ids) or len(set(result_ids)) < len(result_ids):
                # Results answering no open call (made nowhere, or answered already) would
                # be orphans in any view: the chunk holds a copy without them.
                message = _without_stray_results(message, set(open_))
                result_ids = message.tool_result_ids()
            if calls and (open_ or len(set(calls)) < len(calls)):
                message, calls = self._without_repeats(message, calls, set(result_ids))
            self._merge_tail_into(target)
            target.pinned_at.extend(pinned_at)
            target.messages.append(message)
            target.indices.append(index)
            target.tokens += tokens
            target.pinned = target.pinned or pinned
            for r in result_ids:
                if open_.get(r) is target:
                    del open_[r]
                    target.pending.discard(r)
            chunk = target
        else:
            if calls and (open_ or len(set(calls)) < len(calls)):
                message, calls = self._without_repeats(message, calls, _NONE)
            chunk = Chunk([message], [index], pinned, tokens, pinned_at=pinned_at)
            self.chunks.append(chunk)
        for call_id in calls:
            chunk.pending.add(call_id)
            open_[call_id] = chunk
        return chunk

    def joins(self, message: Message) -> Chunk | None:
        """The live chunk ``message`` would join: the oldest open call it answers.

        None for a message that answers no open call (no results, or an orphan). A
        consumer that moved chunks out of ``chunks`` puts the returned chunk and every
        newer one back before calling ``add``.
        """
        open_ = self._open
        targets = [open_[r] for r in message.tool_result_ids() if r in open_]
        return min(targets, key=lambda c: c.indices[0]) if targets else None

    def repeats(self, message: Message) -> bool:
        """Whether ``message`` is nothing but calls repeating the ids of open calls (an
        orphan: a view never sends it). False for a message that answers a call."""
        open_ = self._open
        content = message.content
        if not open_ or type(content) is str or not content:
            return False
        return all(isinstance(b, ToolUseBlock) and b.id in open_ for b in content)

    def _without_repeats(
        self, message: Message, calls: list[str], answered: AbstractSet[str]
    ) -> tuple[Message, list[str]]:
        """``message`` (and its ``calls``) without the calls whose id is open
        (``answered`` apart: this message closes those) or repeated within it; the same
        objects when there is none."""
        open_ = self._open
        if len(set(calls)) == len(calls) and all(c not in open_ or c in answered for c in calls):
            return message, calls
        taken = {c for c in open_ if c not in answered}
        kept: list[Block] = []
        for b in message.blocks:
            if isinstance(b, ToolUseBlock):
                if b.id in taken:
                    continue
                taken.add(b.id)
            kept.append(b)
        copy = message.replace(content=kept, tokens=message.tokens)
        return copy, copy.tool_use_ids()

    def has_open_calls(self) -> bool:
        """True while some tool call in a live chunk still awaits its result."""
        return bool(self._open)

    def open_calls(self) -> list[tuple[str, Chunk]]:
        """The calls awaiting a result, with the chunk holding each (for a snapshot)."""
        return list(self._open.items())

    def restore(self, chunks: Iterable[Chunk], open_calls: Mapping[str, Chunk]) -> None:
        """Put a snapshot's live chunks and open calls in place (see ``open_calls``)."""
        self.chunks = deque(chunks)
        self._open = dict(open_calls)

    def _merge_tail_into(self, target: Chunk) -> None:
        chunks = self.chunks
        newer: list[Chunk] = []
        while chunks[-1] is not target:
            newer.append(chunks.pop())
        orphans: list[Chunk] = []
        for c in reversed(newer):
            if c.orphan:  # an orphan stays an orphan: it never joins a valid exchange
                orphans.append(c)
                continue
            target.messages.extend(c.messages)
            target.indices.extend(c.indices)
            target.tokens += c.tokens
            target.pinned = target.pinned or c.pinned
            target.pinned_at.extend(c.pinned_at)
            for call_id in c.pending:
                target.pending.add(call_id)
                self._open[call_id] = target
        chunks.extend(orphans)

    def discard(self, chunk: Chunk) -> None:
        """Forget the open calls of a chunk that left the window."""
        for call_id in chunk.pending:
            if self._open.get(call_id) is chunk:
                del self._open[call_id]


def group_pairs(messages: Sequence[Message], pinned_indices: Iterable[int] = ()) -> list[Chunk]:
    """Split ``messages`` into chunks; a chunk holding a pinned index is pinned whole."""
    builder = ChunkBuilder()
    pinned = set(pinned_indices)
    for i, m in enumerate(messages):
        builder.add(m, i, pinned=i in pinned)
    return list(builder.chunks)


@dataclass(frozen=True)
class PairProblem:
    """A broken tool exchange: a result without its call, a call without its result, or
    a call repeating the id of a call still unanswered."""

    kind: Literal["orphan_result", "missing_result", "repeated_call"]
    index: int
    tool_use_id: str

    def __str__(self) -> str:
        if self.kind == "orphan_result":
            return (
                f"message {self.index} answers tool call {self.tool_use_id!r}, made nowhere before"
            )
        if self.kind == "repeated_call":
            return (
                f"message {self.index} calls tool {self.tool_use_id!r} again, while that call "
                "is still unanswered"
            )
        return f"message {self.index} calls tool {self.tool_use_id!r}, which no result answers"


def validate_pairs(messages: Sequence[Message]) -> list[PairProblem]:
    """Every tool-pair problem in ``messages``, in order of position."""
    pending: dict[str, int] = {}
    problems: list[PairProblem] = []
    for i, m in enumerate(messages):
        for r in m.tool_result_ids():
            if pending.pop(r, None) is None:
                problems.append(PairProblem("orphan_result", i, r))
        for c in m.tool_use_ids():
            if c in pending:
                problems.append(PairProblem("repeated_call", i, c))
            pending[c] = i
    problems.extend(PairProblem("missing_result", i, c) for c, i in pending.items())
    problems.sort(key=lambda p: p.index)
    return problems


STUB_RESULT: Final = "[no result: this tool call was never answered]"


def stub_result(call_id: str) -> Message:
    """A synthetic error result for a tool call that was never answered.

    Its id is derived from the call id, so repairing the same history twice gives the
    same messages (and id-keyed caches downstream keep working).
    """
    return Message(
        f"stub_{call_id}",
        "tool",
        content=[ToolResultBlock(call_id, STUB_RESULT, is_error=True)],
        metadata={"convomem_stub": True},
    )


def repair_pairs(
    messages: Sequence[Message], dangling: Literal["drop", "stub"] = "drop"
) -> list[Message]:
    """A valid copy of ``messages``: orphan results dropped, unanswered calls fixed.

    ``dangling="drop"`` drops a tool exchange whose calls were not all answered;
    ``"stub"`` keeps it and adds an error result for each missing answer.
    """
    if dangling not in ("drop", "stub"):
        raise ConfigError(f"dangling={dangling!r}: must be 'drop' or 'stub'")
    out: list[Message] = []
    for chunk in group_pairs(messages):
        if chunk.orphan or (chunk.pending and dangling == "drop"):
            continue
        open_calls: set[str] = set()
        for m in chunk.messages:
            if m.has_tool_result():
                m = _without_stray_results(m, open_calls)
            open_calls.update(m.tool_use_ids())
            out.append(m)
        out.extend(stub_result(c) for c in sorted(chunk.pending))
    return out


def _without_stray_results(message: Message, open_calls: set[str]) -> Message:
    """``message`` minus results that answer no open call (a repeat, or a call made nowhere).

    A message joins an exchange when one of its results matches; any other result it
    carries would still be an orphan. Returns the original object when nothing is stray.
    """
    kept: list[Block] = []
    for b in message.blocks:
        if isinstance(b, ToolResultBlock):
            if b.tool_use_id not in open_calls:
                continue
            open_calls.discard(b.tool_use_id)
        kept.append(b)
    if len(kept) == len(message.blocks):
        return message
    # A given count stays: it bounds the copy (it only lost results), and the view was
    # budgeted with it.
    return message.replace(content=kept, tokens=message.tokens)
