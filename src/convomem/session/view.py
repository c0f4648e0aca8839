"""A session's view: the shared chunk log plus what a session adds on top.

``SessionView`` owns a ``views.log.ChunkLog`` (no limit of its own: the session plans
each compaction, because evicted messages are summarized before they leave) and adds:
the leading system prompt (sent before the summary), orphan results waiting to be
folded, the compaction policy (trigger/target hysteresis over the history's share, a
turn limit, cuts preferring a turn start, priority-1 compression before eviction), and
the rendering of the view as a context, cached between turns.

The current turn (``model.current_turn``: the newest user message and the open exchange
after it) is never evicted nor left out of a context; a tool result over the log's
``result_limit`` is held reduced (``model.reduce_results``), so a large result shrinks
before anything of the turn would have to go. When the turn does not fit even so, the
context still sends it, ``fits`` is False and ``View.problems`` says why.

Compaction is a generator that yields the summarizer calls it needs (``_io.Call``) and
returns a ``Plan``; nothing changes until ``commit(plan)``, so a failing summarizer leaves
the view exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .._io import Call
from ..model import REDUCED_KEY, Chunk, Message, PinPolicy, starts_turn
from ..tokens import Tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS
from ..views.log import ChunkLog, Unit, unit_messages
from ._fit import Fit, Part
from ._turns import STAND_IN, answers_first, needs_stand_in, opens_turn, stand_in_tokens

__all__ = [  # the ordering rules live in ``_turns``; these names stay importable from here
    "STAND_IN",
    "Plan",
    "SessionView",
    "View",
    "answers_first",
    "needs_stand_in",
    "opens_turn",
    "stand_in_tokens",
]


@dataclass(slots=True)
class Plan:
    """A compaction decided but not applied: victims to drop, chunks to rewrite."""

    victims: list[Unit] = field(default_factory=list)
    rewrites: list[tuple[Chunk, list[Message], int]] = field(default_factory=list)
    folded: list[Message] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class View:
    """What ``context()`` sends now, and what it cost to decide."""

    messages: list[Message]
    tokens: int
    omitted: int
    waiting: int
    fits: bool
    stand_in: bool = False
    """Whether an Anthropic request (which must start with a user turn) needs
    ``STAND_IN`` before ``anthropic``; it is budgeted."""
    anthropic: list[Message] | None = None
    """What an Anthropic request sends (None: ``messages``). It differs when the view's
    first turn cannot lead: room is made for the stand-in there, not in the other
    requests. ``tokens`` is the larger of the two, so ``fits`` holds for both."""
    turn_tokens: int = 0
    """What the current turn (the newest user message, its open exchange) costs in it."""
    reduced: int = 0
    """Tool results it sends reduced (``model.REDUCED_KEY``)."""
    problems: tuple[str, ...] = ()
    """Why it does not fit, one sentence each (empty when it fits)."""


PlanGen: TypeAlias = Generator[Call, Any, Plan]


def _tokens(unit: Unit) -> int:
    return unit.tokens if isinstance(unit, Chunk) else unit[1]


def _turns(messages: list[Message]) -> int:
    return sum(1 for m in messages if starts_turn(m))


class SessionView:
    """The view engine of one session (see the module docstring). Not thread-safe."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        pins: PinPolicy,
        *,
        limit: int,
        trigger: float,
        target: float,
        max_turns: int | None,
        result_limit: int | None = None,
        keep_turn: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.keep_turn = keep_turn
        self.pins = pins
        self.limit = limit
        self.result_limit = result_limit
        self.trigger = trigger
        self.target = target
        self.max_turns = max_turns
        self.goal_turns = None if max_turns is None else max(1, int(max_turns * target))
        # Priority-1 messages compressed, by id: a message is compressed once, even when a
        # plan fails or the view is rebuilt from the log; only ``clear`` forgets them.
        self.compressions: dict[str, Message] = {}
        self.reset()

    def reset(self) -> None:
        """Forget everything (the log is the store's; this is only the view)."""
        self.log = ChunkLog(
            self.tokenizer, self.pins, result_limit=self.result_limit, keep_turn=self.keep_turn
        )
        self.head = 0  # the log's leading pinned system messages (sent before the summary)
        self.head_tokens = 0
        self.to_fold: list[Message] = []  # orphan results: never in view, summarized later
        self.version = 0

    # -- snapshot ----------------------------------------------------------------------

    def snapshot(self, ref: Callable[[Message, bool], str]) -> dict[str, Any]:
        """The view as plain JSON data (``ChunkLog.snapshot`` plus the leading system
        prompt, the orphans waiting to be folded and the compressed stand-ins);
        ``ValueError`` for a shape it cannot express."""
        data = self.log.snapshot(ref)
        data["head"] = [self.head, self.head_tokens]
        data["to_fold"] = [ref(m, False) for m in self.to_fold]
        # Apart from the units: a message may wait in the view as it is while its
        # compressed stand-in (made by a compaction that failed) waits here.
        data["compressions"] = {
            k: m.to_dict() for k, m in self.compressions.items() if k in self.log
        }
        return data

    def restore(self, data: Mapping[str, Any], message: Callable[[str], Message]) -> None:
        """Put a ``snapshot`` in place (after ``reset``); ``ValueError`` (or ``KeyError``,
        ``TypeError``, ``IndexError`` for malformed data) leaves the view reset."""
        try:
            self.log.restore(data, message)
            self.head, self.head_tokens = (int(x) for x in data["head"])
            self.to_fold = [message(r) for r in data["to_fold"]]
            self.compressions = {
                str(k): Message.from_dict(d) for k, d in data["compressions"].items()
            }
        except BaseException:
            self.reset()
            raise
        self.version += 1

    # -- adding ------------------------------------------------------------------------

    def add(self, message: Message, tokens: int) -> None:
        """Put an accepted message into the view (cannot fail: it was validated)."""
        log = self.log
        index = log.position
        if (
            index == self.head
            and message.role == "system"
            and self.pins.static(message, index, False)
            and (type(message.content) is str or not message.has_tool_result())
            and not message.has_tool_use()
        ):
            self.head += 1
            self.head_tokens += tokens
        if message.id in log.add(message, tokens):
            self.to_fold.append(message)  # an orphan result
        self.version += 1

    # -- the budget ----------------------------------------------------------------------

    def share(self, summary_tokens: int) -> int:
        """Tokens the unpinned history may take (negative when pins overflow)."""
        return self.limit - self.log.pinned_tokens - summary_tokens

    def free_tokens(self) -> int:
        """Tokens of the units no static pin holds."""
        return self.log.total() - self.log.pinned_tokens

    def over(self, summary_tokens: int) -> bool:
        """Whether a compaction is due."""
        if self.free_tokens() > self.trigger * self.share(summary_tokens):
            return True
        return self.max_turns is not None and self.log.turns > self.max_turns

    # -- compaction ----------------------------------------------------------------------

    def _last_units(self) -> tuple[Unit | None, Unit | None]:
        """The newest evictable unit, and the newest evictable unit starting a turn."""
        newest: Unit | None = None
        last_turn: Unit | None = None
        log = self.log
        for u in log.units_newest_first():
            if log.keeps(u):
                continue
            if newest is None:
                newest = u
            if starts_turn(unit_messages(u)[0]):
                last_turn = u
                break
        return newest, last_turn

    def plan(
        self,
        summary_tokens: int,
        *,
        summarize: bool,
        fold: Callable[[list[Message]], Call],
        compress: Callable[[Message], Call],
        target: float | None = None,
        breaks: AbstractSet[str] = frozenset(),
    ) -> PlanGen:
        """Decide a compaction down to the target (``target`` overrides it: 0 folds all
        that can go); yields its summarizer work: ``fold(messages)`` (summarize evicted
        messages into the running summary) and ``compress(message)`` (a priority-1 message
        on its own, once). A message whose id is in ``breaks`` starts a fold of its own (a
        new summary segment: the topic changed there)."""
        share = self.share(summary_tokens)
        goal = (self.target if target is None else target) * share
        goal_turns = self.goal_turns
        free = self.free_tokens()
        turns = self.log.turns
        newest, last_turn = self._last_units()
        past_last_turn = last_turn is None
        plan = Plan()
        staged: list[Chunk] = []
        for u in self.log.evictable():
            need = free > goal or (goal_turns is not None and turns > goal_turns)
            msgs = unit_messages(u)
            if not need and (past_last_turn or starts_turn(msgs[0])):
                break  # at the target, and at the start of a turn (or past the last)
            if u is newest and _tokens(u) <= share:
                break  # the newest unit stays when it fits the share on its own
            if u is last_turn:
                past_last_turn = True
            if isinstance(u, Chunk) and any(m.priority == 1 for m in msgs):
                out = []
                for m in msgs:
                    if m.priority == 1:
                        cm = self.compressions.get(m.id)
                        if cm is None:  # kept across a failed compaction: done once
                            cm = self.compressions[m.id] = yield compress(m)
                        m = cm
                    out.append(m)
                tokens = self.tokenizer.count_messages(out)
                plan.rewrites.append((u, out, tokens))
                staged.append(u)
                free -= u.tokens - tokens
                turns -= _turns(msgs) - _turns(out)
                continue
            plan.victims.append(u)
            free -= _tokens(u)
            turns -= _turns(msgs)
        # The turn limit is hard: compressed chunks go too when the rest did not suffice.
        while self.max_turns is not None and turns > self.max_turns and staged:
            u = staged.pop(0)
            plan.rewrites = [r for r in plan.rewrites if r[0] is not u]
            plan.victims.append(u)
            turns -= _turns(u.messages)
        plan.victims = self._in_order(plan.victims)
        folded = [m for v in plan.victims for m in unit_messages(v)]
        folded.extend(self.to_fold)
        if summarize and folded:
            start = 0
            for i in range(1, len(folded) + 1):
                if i == len(folded) or folded[i].id in breaks:
                    yield fold(folded[start:i])
                    start = i
        plan.folded = folded
        return plan

    def commit(self, plan: Plan) -> list[str]:
        """Apply a plan; return the evicted ids."""
        for chunk, msgs, tokens in plan.rewrites:
            self.log.replace(chunk, msgs, tokens)
        dropped = self.log.evict(plan.victims)
        self.to_fold.clear()
        self.version += 1
        return dropped

    def _in_order(self, victims: list[Unit]) -> list[Unit]:
        if len(victims) < 2:
            return victims
        rank = {id(u): i for i, u in enumerate(self.log.units())}
        return sorted(victims, key=lambda v: rank[id(v)])

    # -- rendering -----------------------------------------------------------------------

    def _sendable(self, unit: Unit) -> tuple[list[Message], int, int]:
        """A unit's messages that can be sent now, their tokens, and how many wait.

        A chunk whose tool calls still await results waits, except its messages pinned
        on their own that carry no tool blocks (a system prompt, the last user message)
        and the newest user message (the current turn's).
        """
        if not isinstance(unit, Chunk):
            return [unit[0]], unit[1], 0
        if not unit.pending:
            return answers_first(unit.messages), unit.tokens, 0
        log = self.log
        pinned = set(unit.pinned_at)
        pinned.add(log.turn_position)
        out = [
            m
            for m, i in zip(unit.messages, unit.indices, strict=True)
            if (i in pinned or log.pinned_now(i))
            and (type(m.content) is str or not (m.has_tool_use() or m.has_tool_result()))
        ]
        return out, self.tokenizer.count_messages(out), len(unit.messages) - len(out)

    def render(self, summary: Message | None) -> View:
        """The context: leading system prompt, summary, then the kept history.

        Within budget: while a failed compaction waits for a retry, the oldest
        unprotected units are left out of this context (not evicted), then the summary.
        When the view's first turn cannot lead, an Anthropic request of it must start
        with ``STAND_IN``: ``anthropic`` is then the view made with room for it (``stand_in``
        says it still needs it), and ``tokens`` / ``fits`` hold for both requests.
        """
        s_tok = 0 if summary is None else self.tokenizer.count_message(summary)
        parts: list[Part] = []
        waiting = 0
        log = self.log
        turn = [0, 0]  # tokens of the current turn, and of what else may not be left out
        for u in log.units():
            msgs, tokens, wait = self._sendable(u)
            waiting += wait
            if msgs:
                parts.append((u, msgs, tokens))
                if log.in_turn(u):
                    turn[0] += tokens
                elif log.protected(u):
                    turn[1] += tokens
        full = s_tok + sum(p[2] for p in parts)
        fit = Fit(log, self.head, self.limit)
        out, total, omitted, join = fit.joined(parts, full, summary, s_tok, 0)
        anthropic, a_total, stand_in = out, total + join, False
        if needs_stand_in(out):  # rare: the Anthropic request gets a view of its own
            reserve = stand_in_tokens(self.tokenizer)
            anthropic, a_total, _, join = fit.joined(parts, full, summary, s_tok, reserve)
            stand_in = needs_stand_in(anthropic)
            a_total += join + (reserve if stand_in else 0)
        tokens = max(total, a_total)
        fits = tokens <= self.limit
        reduced = sum(1 for m in out if REDUCED_KEY in m.metadata)
        why = () if fits else self._why(tokens, turn[0], turn[1], reduced)
        return View(
            out,
            tokens + REPLY_PRIMING_TOKENS,
            omitted,
            waiting,
            fits,
            stand_in,
            anthropic,
            turn[0],
            reduced,
            why,
        )

    def _why(self, tokens: int, turn: int, pinned: int, reduced: int) -> tuple[str, ...]:
        """Why a context of ``tokens`` does not fit (``View.problems``); ``reduced``: how
        many messages it sends with their tool results reduced."""
        limit = self.limit
        if pinned > limit:
            why = f"pinned messages alone need {pinned:,} tokens"
        elif pinned + turn > limit:
            cap = self.result_limit
            hint = "" if not reduced else f" (tool results over {cap:,} tokens reduced)"
            why = (
                "the current turn (the newest user message and its open exchange) needs "
                f"{turn:,} tokens{hint} beside {pinned:,} pinned"
            )
        else:
            why = f"the context needs {tokens:,} tokens"
        return (f"{why}, of the {limit:,} a context may use: sent anyway",)
