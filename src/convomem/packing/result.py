"""What a pack decided: the kept messages, the dropped ones, and why."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import ConfigError, ConvomemError
from ..model import REDUCED_KEY, Message
from ..tokens import Tokenizer, get_tokenizer
from ._report import decision_table, lost_pin_problems, over_budget

REASONS: Final = (
    "pinned",
    "recent",
    "fits",
    "min_keep",
    "budget",
    "duplicate",
    "orphan",
    "unanswered",
    "summarized",
    "max_turns",
    "max_age",
    "head_tail",
    "filtered",
    "start_on",
    "turn",
)
"""Every reason a built-in stage gives for keeping or dropping a message."""


def check_budget(budget: object, name: str = "budget") -> int:
    """A budget is a positive int; anything else is a ConfigError naming the value."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ConfigError(f"{name}={budget!r}: budget must be positive (a positive integer)")
    return budget


class _Positions:
    """Where each object sits in a list, by identity (an object may occur twice)."""

    __slots__ = ("_at",)

    def __init__(self, items: Sequence[object]) -> None:
        at: dict[int, list[int]] = {}
        for i, m in enumerate(items):
            at.setdefault(id(m), []).append(i)
        self._at = at

    def after(self, m: object, last: int) -> int:
        """The first position of ``m`` after ``last``, or -1."""
        spots = self._at.get(id(m))
        if not spots:
            return -1
        k = bisect_right(spots, last)
        return spots[k] if k < len(spots) else -1


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one input message was kept or dropped."""

    index: int
    id: str
    role: str
    kept: bool
    reason: str
    tokens: int


class PackResult:
    """What a strategy decided: ``kept`` is what to send, in order.

    ``kept`` and ``dropped`` hold the original message objects in their original order.
    The synthetic messages in ``kept`` are ``summary`` (if any), the ``stubs`` answering
    calls that were never answered (``unanswered="stub"``) and the ``repaired`` copies:
    a tool message that also carried results answering no call is sent without them, in
    its own place (``repairs`` maps its input index to the copy).
    A tool message whose result was over the Packer's ``result_limit`` is sent as a
    reduced copy (its head and tail, ``model.reduce_results``), also in ``repairs``
    (``reduced`` lists those). The current turn (the newest user message and its open
    exchange) is kept before anything else, reason ``"turn"``.
    ``token_count`` is the tokenizer's count of ``kept``; ``headroom`` is
    ``budget - token_count`` (negative when pins, the current turn, ``min_keep`` or
    ``start_on`` forced an overflow). ``lost_pins`` maps the input index of each pinned
    message that could not be sent (a pinned tool result without its call...) to the
    reason; ``unstartable`` is True when ``start_on`` found no user turn to start on;
    ``fits`` is False in both cases too, and ``problems()`` and ``explain()`` say why.
    ``dropped`` and ``decisions`` are computed on first access.
    """

    __slots__ = (
        "_counts",
        "_decisions",
        "_default",
        "_dropped",
        "_explicit",
        "_kept_idx",
        "_kept_reason",
        "_messages",
        "_ranges",
        "_tokenizer",
        "budget",
        "kept",
        "lost_pins",
        "pinned_tokens",
        "repairs",
        "strategy",
        "stubs",
        "summary",
        "token_count",
        "turn_tokens",
        "unstartable",
    )

    def __init__(
        self,
        *,
        messages: Sequence[Message],
        kept: list[Message],
        kept_indices: list[int],
        kept_reasons: list[str],
        token_count: int,
        budget: int,
        tokenizer: Tokenizer,
        summary: Message | None = None,
        stubs: Sequence[Message] = (),
        explicit: Mapping[int, str] | None = None,
        ranges: Sequence[tuple[int, int, str]] = (),
        default_reason: str = "budget",
        strategy: str = "",
        repairs: Mapping[int, Message] | None = None,
        lost_pins: Mapping[int, str] | None = None,
        counts: Sequence[int] | None = None,
        unstartable: bool = False,
        pinned_tokens: int | None = None,
        turn_tokens: int = 0,
    ) -> None:
        self._messages = messages
        self.pinned_tokens = pinned_tokens
        """Tokens of the pinned chunks sent (None: not known, counted from decisions)."""
        self.turn_tokens = turn_tokens
        """Tokens of the current turn's chunks sent (reason ``"turn"``)."""
        self.kept = kept
        self._kept_idx = kept_indices
        self._kept_reason = kept_reasons
        self.token_count = token_count
        self.budget = budget
        self._tokenizer = tokenizer
        self.summary = summary
        self.stubs = tuple(stubs)
        self._explicit = explicit or {}
        self._ranges = tuple(ranges)
        self._default = default_reason
        self.strategy = strategy
        self._dropped: list[Message] | None = None
        self._decisions: list[Decision] | None = None
        self.repairs: dict[int, Message] = dict(repairs) if repairs else {}
        self.lost_pins: dict[int, str] = dict(sorted(lost_pins.items())) if lost_pins else {}
        self._counts = counts
        self.unstartable = unstartable

    @classmethod
    def from_kept(
        cls,
        messages: Sequence[Message],
        kept: Iterable[Message],
        *,
        budget: int,
        tokenizer: str | Tokenizer = "approx",
        reasons: Mapping[int, str] | None = None,
        kept_reason: str = "fits",
        dropped_reason: str = "budget",
        summary: Message | None = None,
        strategy: str = "custom",
    ) -> PackResult:
        """Build a result from the messages a custom strategy keeps (the same objects).

        ``reasons`` maps input indices to a reason; the others get ``kept_reason`` or
        ``dropped_reason``. ``summary`` may appear in ``kept``; if not, it goes first.
        """
        check_budget(budget)
        tok = get_tokenizer(tokenizer)
        msgs = list(messages)
        where = _Positions(msgs)
        out: list[Message] = []
        idx: list[int] = []
        last = -1
        for m in kept:
            if summary is not None and m is summary:
                out.append(m)
                continue
            i = where.after(m, last)
            if i < 0:
                raise ConvomemError(
                    f"strategy {strategy!r}: kept message {m!r} is not one of the input "
                    "messages, or is out of order; keep the original objects in order"
                )
            last = i
            out.append(m)
            idx.append(i)
        if summary is not None and not any(m is summary for m in out):
            out.insert(0, summary)
        reasons = reasons or {}
        return cls(
            messages=msgs,
            kept=out,
            kept_indices=idx,
            kept_reasons=[reasons.get(i, kept_reason) for i in idx],
            token_count=tok.count_messages(out),
            budget=budget,
            tokenizer=tok,
            summary=summary,
            explicit={i: r for i, r in reasons.items() if 0 <= i < len(msgs)},
            default_reason=dropped_reason,
            strategy=strategy,
        )

    @property
    def fits(self) -> bool:
        """True when ``token_count <= budget``, every pinned message is sent and, with
        ``start_on``, there is a user turn to start on."""
        return self.token_count <= self.budget and not self.lost_pins and not self.unstartable

    @property
    def messages(self) -> Sequence[Message]:
        """The input messages (the list that was packed)."""
        return self._messages

    @property
    def kept_indices(self) -> list[int]:
        """Input indices of the kept input messages, in order (repaired ones included)."""
        return self._kept_idx

    @property
    def repaired(self) -> tuple[Message, ...]:
        """The repaired copies in ``kept``, in input order."""
        return tuple(self.repairs[i] for i in sorted(self.repairs))

    @property
    def reduced(self) -> dict[int, Message]:
        """The reduced copies in ``kept`` (a tool result over ``result_limit``), by the
        input index of the message each stands for."""
        return {i: m for i, m in self.repairs.items() if REDUCED_KEY in m.metadata}

    @property
    def headroom(self) -> int:
        """``budget - token_count``: room left (negative when over budget)."""
        return self.budget - self.token_count

    @property
    def dropped(self) -> list[Message]:
        """The input messages not sent, in their original order."""
        if self._dropped is None:
            keep = set(self._kept_idx)
            self._dropped = [m for i, m in enumerate(self._messages) if i not in keep]
        return self._dropped

    def _drop_reason(self, i: int) -> str:
        r = self._explicit.get(i)
        if r is not None:
            return r
        for lo, hi, reason in self._ranges:
            if lo <= i < hi:
                return reason
        return self._default

    @property
    def decisions(self) -> list[Decision]:
        """One ``Decision`` per input message, in input order."""
        if self._decisions is None:
            kept = dict(zip(self._kept_idx, self._kept_reason, strict=True))
            counts = self._counts
            if counts is None or len(counts) != len(self._messages):
                counts = list(map(self._tokenizer.count_message, self._messages))
            out = []
            for i, m in enumerate(self._messages):
                r = kept.get(i)
                out.append(
                    Decision(
                        i,
                        m.id,
                        m.role,
                        r is not None,
                        r if r is not None else self._drop_reason(i),
                        counts[i],
                    )
                )
            self._decisions = out
        return self._decisions

    def reason_counts(self) -> dict[str, int]:
        """How many input messages each reason accounts for."""
        counts: dict[str, int] = {}
        for d in self.decisions:
            counts[d.reason] = counts.get(d.reason, 0) + 1
        return counts

    def problems(self) -> list[str]:
        """Why the result does not fit, one sentence each (empty when it fits)."""
        out: list[str] = []
        if self.unstartable:
            out.append("no user turn to start on: only system messages are kept")
        out += lost_pin_problems(self.lost_pins, self._messages)
        if self.token_count > self.budget:
            out.append(
                over_budget(
                    self.token_count,
                    self.budget,
                    self.decisions,
                    self.pinned_tokens,
                    self.turn_tokens,
                )
            )
        return out

    def explain(self) -> str:
        """The decisions as a readable table, with a summary on top saying whether the
        result fits and, when it does not, why."""
        ds = self.decisions
        problems = self.problems()
        state = "fits" if not problems else "DOES NOT FIT: " + "; ".join(problems)
        head = (
            f"{self.strategy or 'pack'}: kept {len(ds) - len(self.dropped)} of {len(ds)} "
            f"messages, {self.token_count:,} of {self.budget:,} tokens "
            f"({state}, headroom {self.headroom:,})"
        )
        stubs = {id(s) for s in self.stubs}
        extras = [
            (m, "summary" if m is self.summary else "stub")
            for m in self.kept
            if m is self.summary or id(m) in stubs
        ]
        table = decision_table(
            ds, self._messages, self.lost_pins, self.repairs, extras, self._tokenizer.count_message
        )
        return "\n".join([head, *table])

    def __repr__(self) -> str:
        return (
            f"PackResult(kept={len(self.kept)}, dropped={len(self._messages) - len(self._kept_idx)}"
            f", token_count={self.token_count}, budget={self.budget}, fits={self.fits})"
        )
