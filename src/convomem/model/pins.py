"""Pins: which messages a view must never evict, and what a turn is.

One ``PinPolicy`` serves every view (``History``, the ``Packer``'s table and
``ConversationMemory``), so a spec means the same thing everywhere:

- ``"system"``: every system message;
- ``"first_user"``: the first user message;
- ``"last_user"``: the newest user message (it moves: the previous one is released);
- ``"tool_results"``: every message carrying a tool result;
- an integer: a position in the conversation (negative ones count from the newest and
  move as messages arrive).

Priority-2 messages are always pinned. Specs *add to* the default pin: where the default
is ``("system",)`` (Packer, ConversationMemory, the CLI), ``pin=("last_user",)`` pins the
system prompt and the last user message; only an explicit ``pin=()`` pins nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, TypeAlias

from ..errors import ConfigError
from .chunks import group_pairs
from .messages import Message

PinSpec: TypeAlias = str | int
PIN_NAMES: Final = ("system", "first_user", "last_user", "tool_results")
COMPRESSED_KEY: Final = "convomem_compressed"
"""Metadata key of a priority-1 message compressed in a view (it stands for its turn as a
summary would, so it does not start a turn)."""

SYSTEM: Final[tuple[PinSpec, ...]] = ("system",)


def starts_turn(message: Message) -> bool:
    """Whether ``message`` starts a turn: a user message that is neither a tool result nor
    a compressed stand-in. The one definition every view and window uses."""
    if message.role != "user" or COMPRESSED_KEY in message.metadata:
        return False
    return type(message.content) is str or not message.has_tool_result()


def opens_exchange(message: Message) -> bool:
    """Whether a chunk whose first message is ``message`` is a tool exchange: it calls a
    tool (or, in a view that keeps no tool pairs, carries a result)."""
    return type(message.content) is not str and (
        message.has_tool_use() or message.has_tool_result()
    )


def current_turn(messages: Sequence[Message]) -> tuple[int, list[int]]:
    """The current turn of ``messages``: ``(turn, exchange)``.

    ``turn`` is the position of the newest message that starts a turn (``starts_turn``),
    or -1; ``exchange`` the positions of the *open exchange*, sorted: the tool exchanges
    (``ChunkBuilder`` chunks of an assistant's calls and every result answering them so
    far) that started after the turn of the newest call, while they await a result
    (calls running while the user types, several at once) or are the newest chunk that
    is not an orphan; ``[]`` when there is none (the assistant answered in plain text,
    or the user spoke after the results). A call of an earlier turn still awaiting its
    result when a newer turn made calls is abandoned: a view may let it go, and a late
    result to it then answers nothing the view holds.

    Every view keeps the current turn: ``History`` never drops it, the ``Packer`` keeps
    it before anything else (reason ``"turn"``), a session never evicts it, and when it
    does not fit alone the view says so rather than sending something without it. The
    views track it incrementally; this is the definition they agree with.
    """
    turn = next((i for i in range(len(messages) - 1, -1, -1) if starts_turn(messages[i])), -1)
    chunks = [c for c in group_pairs(messages) if not c.orphan]
    exchanges = [c for c in chunks if opens_exchange(c.messages[0])]
    if not exchanges:
        return turn, []
    calls = (
        i for c in exchanges for m, i in zip(c.messages, c.indices, strict=True) if m.has_tool_use()
    )
    call = max(calls, default=-1)
    since = next((i for i in range(call - 1, -1, -1) if starts_turn(messages[i])), -1)
    open_ = [c for c in exchanges if c.start > since and (c.pending or c is chunks[-1])]
    return turn, sorted(i for c in open_ for i in c.indices)


def check_pins(pin: Iterable[PinSpec] | PinSpec | None) -> tuple[PinSpec, ...]:
    """Validate pin specs; a bare string or int is one spec; duplicates are dropped."""
    if pin is None:
        return ()
    if isinstance(pin, str | int) or not isinstance(pin, Iterable):
        pin = (pin,)  # a bare spec (a wrong one is reported below, naming it)
    specs = tuple(pin)
    for spec in specs:
        if isinstance(spec, bool) or not (isinstance(spec, int) or spec in PIN_NAMES):
            raise ConfigError(
                f"pin={spec!r}: unknown pin spec; use an index or one of {list(PIN_NAMES)}"
            )
    return tuple(dict.fromkeys(specs))


class PinPolicy:
    """Parsed pin specs: which messages are pinned, fixed or moving.

    ``PinPolicy(pin, default=("system",))``: specs add to ``default``; ``pin=()`` (or
    None) means no pins at all. Static pins (``system``, ``first_user``,
    ``tool_results``, non-negative indices, priority 2) are decided when a message
    arrives, by ``static``; moving pins (``last_user``, negative indices) by
    ``moving_positions`` over the positions seen so far.
    """

    __slots__ = (
        "first_user",
        "indices",
        "last_user",
        "moving",
        "negative",
        "specs",
        "system",
        "tool_results",
    )

    def __init__(
        self,
        pin: Iterable[PinSpec] | PinSpec | None = SYSTEM,
        *,
        default: tuple[PinSpec, ...] = SYSTEM,
    ) -> None:
        given = check_pins(pin)
        specs = check_pins((*default, *given)) if given else ()
        self.specs: tuple[PinSpec, ...] = specs
        self.system = "system" in specs
        self.first_user = "first_user" in specs
        self.last_user = "last_user" in specs
        self.tool_results = "tool_results" in specs
        self.indices = frozenset(s for s in specs if isinstance(s, int) and s >= 0)
        self.negative = tuple(sorted(-s for s in specs if isinstance(s, int) and s < 0))
        self.moving = self.last_user or bool(self.negative)

    def static(self, message: Message, index: int, seen_user: bool) -> bool:
        """Whether a pin that never moves selects ``message`` at position ``index``.

        ``seen_user`` tells whether a user message came before it.
        """
        if message.priority == 2 or index in self.indices:
            return True
        role = message.role
        if role == "system" and self.system:
            return True
        if role == "user" and self.first_user and not seen_user:
            return True
        return self.tool_results and message.has_tool_result()

    def moving_positions(self, n: int, last_user: int) -> set[int]:
        """Positions held by moving pins when ``n`` messages were seen (newest user at
        ``last_user``, or -1)."""
        out = {n - k for k in self.negative if n - k >= 0}
        if self.last_user and last_user >= 0:
            out.add(last_user)
        return out

    def resolve(self, messages: Sequence[Message]) -> set[int]:
        """Indices of ``messages`` this policy pins (the batch form)."""
        out: set[int] = set()
        seen_user = False
        last_user = -1
        for i, m in enumerate(messages):
            if self.static(m, i, seen_user):
                out.add(i)
            if m.role == "user":
                seen_user = True
                last_user = i
        return out | self.moving_positions(len(messages), last_user)

    def __repr__(self) -> str:
        return f"PinPolicy({self.specs!r})"


def resolve_pins(messages: Sequence[Message], pin: Iterable[PinSpec]) -> set[int]:
    """Indices of the messages the pin specs select (priority-2 messages always).

    Exactly the given specs (no default added); see ``PinPolicy`` for their meaning.
    Out-of-range indices are ignored.
    """
    return PinPolicy(pin, default=()).resolve(messages)
