"""A pack's result as text: why it does not fit, and its decisions as a table.

``PackResult.problems`` and ``PackResult.explain`` (packing/result.py) say what a pack
decided in sentences and a table; the rendering lives here, apart from the result's
data, and reads only plain values: the decisions (``Row``), the input messages, the
pins that could not be sent and the copies sent in place of messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol

from ..model import REDUCED_KEY, Message

__all__ = ["Row", "decision_table", "lost_pin_problems", "over_budget"]

_LOST: Final = {
    "orphan": "a tool result whose call is not in the list (or a repeat of a call still open)",
    "unanswered": "part of a tool call that was never answered",
    "start_on": "no user turn before it to start the list on",
}


class Row(Protocol):
    """What the text reads of a decision (``packing.Decision``)."""

    @property
    def index(self) -> int: ...
    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def kept(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def tokens(self) -> int: ...


def lost_pin_problems(lost_pins: Mapping[int, str], messages: Sequence[Message]) -> list[str]:
    """One sentence per reason pinned messages were not sent, naming them."""
    by: dict[str, list[str]] = {}
    for i, reason in lost_pins.items():
        by.setdefault(reason, []).append(messages[i].id)
    out: list[str] = []
    for reason, ids in by.items():
        why = _LOST.get(reason, reason)
        out.append(f"{len(ids)} pinned message(s) not sent ({why}): {_ids(ids)}")
    return out


def over_budget(
    token_count: int,
    budget: int,
    decisions: Sequence[Row],
    pinned_tokens: int | None,
    turn_tokens: int,
) -> str:
    """The sentence for a result over its budget: by how much, and what forced it (the
    pins, the current turn, ``min_keep``, ``start_on``). ``pinned_tokens`` None: counted
    from the decisions."""
    over = token_count - budget
    pinned = pinned_tokens
    if pinned is None:
        pinned = sum(d.tokens for d in decisions if d.kept and d.reason == "pinned")
    turn = turn_tokens
    causes = []
    if pinned > budget:
        causes.append(f"pinned messages alone need {pinned:,} tokens")
    elif turn and pinned + turn > budget:
        causes.append(
            "the current turn (the newest user message and its open exchange) "
            f"needs {turn:,} tokens beside {pinned:,} pinned"
        )
    for reason, what in (
        ("min_keep", "min_keep kept {n} message(s) that do not fit"),
        ("start_on", "start_on kept {n} message(s) so the list starts on a user turn"),
    ):
        n = sum(1 for d in decisions if d.kept and d.reason == reason)
        if n:
            causes.append(what.format(n=n))
    cause = "; ".join(causes) if causes else "the kept messages need more"
    return f"over budget by {over:,} tokens: {cause}"


def decision_table(
    decisions: Sequence[Row],
    messages: Sequence[Message],
    lost_pins: Mapping[int, str],
    repairs: Mapping[int, Message],
    extras: Sequence[tuple[Message, str]],
    count: Callable[[Message], int],
) -> list[str]:
    """The table's lines: a header, one row per decision (a lost pin or a copy sent in
    a message's place says so), then one row per synthetic message sent (``extras``:
    the message and what it is, e.g. ``"summary"``), counted with ``count``."""
    width = max([8, *(len(d.id) for d in decisions[:10_000])])
    width = min(width, 40)
    lines = [f"{'#':>6}  {'id':<{width}}  {'role':<9}  {'tokens':>6}  kept  reason"]
    for d in decisions:
        ident = d.id if len(d.id) <= width else d.id[: width - 1] + "…"
        reason = d.reason
        if d.index in lost_pins:
            reason += " (PINNED: not sent)"
        elif d.index in repairs:
            reason += f" ({_stray(messages[d.index], repairs[d.index])})"
        lines.append(
            f"{d.index:>6}  {ident:<{width}}  {d.role:<9}  {d.tokens:>6}  "
            f"{'yes' if d.kept else 'no':<4}  {reason}"
        )
    for m, what in extras:
        ident = m.id if len(m.id) <= width else m.id[: width - 1] + "…"
        lines.append(f"{'+':>6}  {ident:<{width}}  {m.role:<9}  {count(m):>6}  yes   {what}")
    return lines


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
