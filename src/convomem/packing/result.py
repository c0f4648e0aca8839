"""What a pack decided: the kept messages, the dropped ones, and why."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import ConfigError, ConvomemError
from ..model import Message
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
    The only synthetic messages are ``summary`` (if any) and the ``stubs`` answering
    calls that were never answered (``unanswered="stub"``); both are in ``kept``.
    ``token_count`` is the tokenizer's count of ``kept``; ``headroom`` is
    ``budget - token_count`` (negative when pins or ``min_keep`` forced an overflow).
    ``dropped`` and ``decisions`` are computed on first access.
    """

    __slots__ = (
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
        "strategy",
        "stubs",
        "summary",
        "token_count",
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
    ) -> None:
        self._messages = messages
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
        """True when ``token_count <= budget``."""
        return self.token_count <= self.budget

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
            count = self._tokenizer.count_message
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
                        count(m),
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

    def explain(self) -> str:
        """The decisions as a readable table, with a one-line summary on top."""
        ds = self.decisions
        state = "fits" if self.fits else "OVER BUDGET"
        lines = [
            f"{self.strategy or 'pack'}: kept {len(ds) - len(self.dropped)} of {len(ds)} "
            f"messages, {self.token_count:,} of {self.budget:,} tokens "
            f"({state}, headroom {self.headroom:,})"
        ]
        width = max([8, *(len(d.id) for d in ds[:10_000])])
        width = min(width, 40)
        lines.append(f"{'#':>6}  {'id':<{width}}  {'role':<9}  {'tokens':>6}  kept  reason")
        for d in ds:
            ident = d.id if len(d.id) <= width else d.id[: width - 1] + "…"
            lines.append(
                f"{d.index:>6}  {ident:<{width}}  {d.role:<9}  {d.tokens:>6}  "
                f"{'yes' if d.kept else 'no':<4}  {d.reason}"
            )
        count = self._tokenizer.count_message
        for m in self.kept:
            if m is self.summary:
                what = "summary"
            elif any(m is s for s in self.stubs):
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
