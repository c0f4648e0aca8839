"""What can be sent of each chunk: its status, its cost, and the copies sent in its place.

A chunk from ``model.ChunkBuilder`` is classified once (the Packer's table keeps the
result across calls):

- ``OK``: sendable as it is, or with *repaired* copies: a tool message that answers an
  open call and also carries results answering no open call (a call made nowhere, or one
  answered already) is sent as a copy without those stray results, so the valid
  exchange survives instead of being dropped whole;
- ``STUBBED``: calls never answered get an error result (``unanswered="stub"``);
- ``ORPHAN`` / ``UNANSWERED``: never sent. A message of such a chunk that carries no tool
  block (a system prompt or a user message that arrived while a call was running) is
  split off into a chunk of its own, a *candidate*: sent when it is pinned, otherwise
  dropped with the chunk's reason.

Token counts come from ``tokens.checked_count_many``: every count a tokenizer returns
is checked (a non-negative int), so a broken custom tokenizer is a ``TokenizerError``,
never a negative or fractional budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Final, Literal, TypeAlias

from ..errors import ConfigError, TokenizerError
from ..model import Chunk, Message, stub_result
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer, checked_count, checked_count_many

Unanswered: TypeAlias = Literal["drop", "stub"]
Stubber: TypeAlias = Callable[[str], Message]

# Chunk status in a ChunkTable.
OK: Final = 0
ORPHAN: Final = 1
UNANSWERED: Final = 2
STUBBED: Final = 3


@dataclass(eq=False, repr=False)
class TableChunk(Chunk):
    """A chunk as a table holds it when it differs from the builder's.

    ``messages`` are what is sent: ``repairs`` maps the input indices of repaired messages
    to the copies in their place. ``pinned_at`` (as in every chunk) lists the input
    indices pinned on their own (for an unsendable chunk: the pins it loses). The facts
    travel with the chunk, so every table made from another (subsets, strategy views)
    keeps them.
    """

    repairs: dict[int, Message] | None = None


Entry: TypeAlias = tuple[Chunk, int, int, tuple[Message, ...], bool]
"""One table chunk: (chunk, status, cost, stubs, candidate); ``candidate`` marks a
tool-free message split off an unsendable chunk (sent only when pinned)."""


def check_unanswered(value: object) -> Unanswered:
    if value not in ("drop", "stub") or not isinstance(value, str):
        raise ConfigError(f"unanswered={value!r}: must be 'drop' or 'stub'")
    return "drop" if value == "drop" else "stub"


# ------------------------------------------------------------------------------ counting


def count_checked(tokenizer: Tokenizer, messages: Sequence[Message]) -> list[int]:
    """Token counts of ``messages``, batched where the tokenizer can, each checked.

    ``tokens.checked_count_many``: a count that is negative, fractional, None or not a
    number is a ``TokenizerError`` naming the tokenizer, the message and the value.
    """
    return checked_count_many(tokenizer, messages) if messages else []


def count_one(tokenizer: Tokenizer, message: Message) -> int:
    """``count_checked`` for one message (``tokens.checked_count``)."""
    return checked_count(tokenizer, message)


def countable_stub(call_id: str, tokenizer: Tokenizer) -> Message:
    """``chunks.stub_result(call_id)``, with a token count when the tokenizer needs one.

    The ``given`` tokenizer cannot count a message without ``tokens``; a stub is text
    convomem wrote, so it is estimated with the tokenizer's text count plus overhead.
    """
    stub = stub_result(call_id)
    try:
        count_one(tokenizer, stub)
    except TokenizerError:
        stub = stub.replace(tokens=tokenizer.count(stub.countable_text()) + PER_MESSAGE_TOKENS)
        count_one(tokenizer, stub)
    return stub


# -------------------------------------------------------------------------- classifying


def is_tool_free(message: Message) -> bool:
    """True for a message that neither calls a tool nor carries a result."""
    if message.role == "tool":
        return False
    if message.content.__class__ is str:
        return True
    return not (message.has_tool_use() or message.has_tool_result())


def repairs_of(chunk: Chunk, msgs: Sequence[Message]) -> dict[int, Message] | None:
    """The repaired copies in a valid chunk: ``model.ChunkBuilder`` puts a copy without
    stray results (or repeated calls) in place of a message that carries some (it keeps
    a given count)."""
    if all(map(is_, chunk.messages, map(msgs.__getitem__, chunk.indices))):
        return None
    return {i: m for m, i in zip(chunk.messages, chunk.indices, strict=True) if m is not msgs[i]}


def classify(
    chunk: Chunk,
    msgs: Sequence[Message],
    counts: Sequence[int],
    pinned: Callable[[int], bool],
    unanswered: Unanswered,
    stubber: Stubber,
    tokenizer: Tokenizer,
) -> list[Entry]:
    """The table chunks of one builder chunk (see the module docstring)."""
    if chunk.orphan:
        return split_bad(chunk, msgs, counts, pinned, ORPHAN)
    if chunk.pending and unanswered == "drop":
        return split_bad(chunk, msgs, counts, pinned, UNANSWERED)
    repairs = repairs_of(chunk, msgs)
    cost = chunk.tokens
    if repairs:
        for i, copy in repairs.items():
            cost += count_one(tokenizer, copy) - counts[i]
        chunk = TableChunk(
            list(chunk.messages),
            list(chunk.indices),
            chunk.pinned,
            cost,
            pending=set(chunk.pending),
            repairs=repairs,
        )
    if not chunk.pending:
        return [(chunk, OK, cost, (), False)]
    stubs = tuple(stubber(c) for c in sorted(chunk.pending))
    cost += sum(count_one(tokenizer, s) for s in stubs)
    return [(chunk, STUBBED, cost, stubs, False)]


def split_bad(
    chunk: Chunk,
    msgs: Sequence[Message],
    counts: Sequence[int],
    pinned: Callable[[int], bool],
    status: int,
) -> list[Entry]:
    """An unsendable chunk: its tool-free messages as candidates, the rest as one chunk
    that records which of its messages were pinned (the pins it loses)."""
    out: list[Entry] = []
    rest_idx: list[int] = []
    for i in chunk.indices:
        m = msgs[i]
        if is_tool_free(m):
            pin = pinned(i)
            single = TableChunk([m], [i], pin, counts[i], pinned_at=[i] if pin else [])
            out.append((single, OK if pin else status, counts[i], (), True))
        else:
            rest_idx.append(i)
    rest = TableChunk(
        [msgs[i] for i in rest_idx],
        rest_idx,
        False,
        sum(counts[i] for i in rest_idx),
        pending=set(chunk.pending),
        orphan=chunk.orphan,
        pinned_at=list(filter(pinned, rest_idx)),
    )
    rest.pinned = bool(rest.pinned_at)
    out.append((rest, status, rest.tokens, (), False))
    if len(out) > 1:
        out.sort(key=lambda e: e[0].indices[0])
    return out
