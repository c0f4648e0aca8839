"""What a pack decided: the kept messages, the dropped ones, and why."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import ConfigError, ConvomemError
from ..model import REDUCED_KEY, Message
from ..tokens import Tokenizer, get_tokenizer

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
        if self.lost_pins:
            by: dict[str, list[str]] = {}
            for i, reason in self.lost_pins.items():
                by.setdefault(reason, []).append(self._messages[i].id)
            for reason, ids in by.items():
                why = _LOST.get(reason, reason)
                out.append(f"{len(ids)} pinned message(s) not sent ({why}): {_ids(ids)}")
        if self.token_count > self.budget:
            over = self.token_count - self.budget
            ds = self.decisions
            pinned = self.pinned_tokens
            if pinned is None:
                pinned = sum(d.tokens for d in ds if d.kept and d.reason == "pinned")
            turn = self.turn_tokens
            causes = []
            if pinned > self.budget:
                causes.append(f"pinned messages alone need {pinned:,} tokens")
            elif turn and pinned + turn > self.budget:
                causes.append(
                    "the current turn (the newest user message and its open exchange) "
                    f"needs {turn:,} tokens beside {pinned:,} pinned"
                )
            for reason, what in (
                ("min_keep", "min_keep kept {n} message(s) that do not fit"),
                ("start_on", "start_on kept {n} message(s) so the list starts on a user turn"),
            ):
                n = sum(1 for d in ds if d.kept and d.reason == reason)
                if n:
                    causes.append(what.format(n=n))
            cause = "; ".join(causes) if causes else "the kept messages need more"
            out.append(f"over budget by {over:,} tokens: {cause}")
        return out

    def explain(self) -> str:
        """The decisions as a readable table, with a summary on top saying whether the
        result fits and, when it does not, why."""
        ds = self.decisions
        problems = self.problems()
        state = "fits" if not problems else "DOES NOT FIT: " + "; ".join(problems)
        lines = [
            f"{self.strategy or 'pack'}: kept {len(ds) - len(self.dropped)} of {len(ds)} "
            f"messages, {self.token_count:,} of {self.budget:,} tokens "
            f"({state}, headroom {self.headroom:,})"
        ]
        width = max([8, *(len(d.id) for d in ds[:10_000])])
        width = min(width, 40)
        lines.append(f"{'#':>6}  {'id':<{width}}  {'role':<9}  {'tokens':>6}  kept  reason")
        lost = self.lost_pins
        for d in ds:
            ident = d.id if len(d.id) <= width else d.id[: width - 1] + "…"
            reason = d.reason
            if d.index in lost:
                reason += " (PINNED: not sent)"
            elif d.index in self.repairs:
                reason += f" ({_stray(self._messages[d.index], self.repairs[d.index])})"
            lines.append(
                f"{d.index:>6}  {ident:<{width}}  {d.role:<9}  {d.tokens:>6}  "
                f"{'yes' if d.kept else 'no':<4}  {reason}"
            )
        count = self._tokenizer.count_message
        stubs = {id(s) for s in self.stubs}
        for m in self.kept:
            if m is self.summary:
                what = "summary"
            elif id(m) in stubs:
                what = "stub"
            else:
                continue
            ident = m.id if len(m.id) <= width else m.id[: width - 1] + "…"
            lines.append(f"{'+':>6}  {ident:<{width}}  {m.role:<9}  {count(m):>6}  yes   {what}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"PackResult(kept={len(self.kept)}, dropped={len(self._messages) - len(self._kept_idx)}"
            f", token_count={self.token_count}, budget={self.budget}, fits={self.fits})"
        )


_LOST: Final = {
    "orphan": "a tool result whose call is not in the list (or a repeat of a call still open)",
    "unanswered": "part of a tool call that was never answered",
    "start_on": "no user turn before it to start the list on",
}


def _ids(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:5])
    return shown + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def _stray(original: Message, copy: Message) -> str:
    """What a repaired (or reduced) copy left out."""
    left = Counter(original.tool_result_ids()) - Counter(copy.tool_result_ids())
    ids = ", ".join(repr(r) for r in sorted(left.elements()))
    calls = Counter(original.tool_use_ids()) - Counter(copy.tool_use_ids())
    repeats = ", ".join(repr(c) for c in sorted(calls.elements()))
    what = [f"results for {ids} answer no open call"] if ids else []
    what += [f"calls {repeats} repeat an open call"] if repeats else []
    out = [f"sent repaired: {' and '.join(what)}, left out"] if what else []
    info = copy.metadata.get(REDUCED_KEY)
    if info is not None:
        out.append(
            f"sent reduced: results over {info['limit']:,} tokens cut to their head and tail"
        )
    return "; ".join(out)
