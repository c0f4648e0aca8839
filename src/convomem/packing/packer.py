"""The Packer: packs conversations with a strategy, reusing its work across calls."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, overload

from .._check import flag, one_of
from ..errors import OverBudget
from ..model import Message, PinPolicy, PinSpec, reduce_results
from ..model.pins import SYSTEM
from ..model.reduce import RESULT_SHARE
from ..model.reduce import result_limit as result_limit_of
from ..tokens import Tokenizer, get_tokenizer
from .classify import Unanswered, check_unanswered, countable_stub
from .live import LiveTable
from .plan import StartOn, assemble, run_plan, run_plan_async
from .provider import DictInput, Kind, PackedAnthropic, PackedOpenAI, as_items
from .recency import Recency
from .result import PackResult, check_budget
from .stages import ChunkStrategy, as_strategy
from .table import _as_messages

System = str | Sequence[Mapping[str, Any]] | None
"""An Anthropic ``system``: a string or a list of text blocks."""

_REDUCED_KEPT = 32  # oversized messages a Packer remembers, with their reduced copies
_UNSEEN: Any = object()


def _check_start_on(value: object) -> StartOn:
    return one_of("start_on", value, ("user", None))


class Packer:
    """Packs conversations into a token budget with a strategy; remembers its last call.

    ``Packer(budget=8000)`` keeps the system prompt and the most recent chunks that fit
    (``Recency()``). ``strategy`` is a strategy or a list of stages ending in one.
    ``pin`` adds to the system pin (``model.pins``): ``"first_user"``, ``"last_user"``,
    ``"tool_results"`` and indices (negative from the end); ``pin=()`` pins nothing.
    ``unanswered="stub"`` answers calls that were never answered with an error result
    instead of dropping them. ``start_on="user"`` makes the kept list start, after its
    system messages, at a user turn (the default of ``pack_anthropic``).

    The current turn (``model.current_turn``: the newest user message and the open
    exchange after it) is kept before anything else (reason ``"turn"``), over budget if
    need be (``fits``, ``problems()`` say so); ``keep_turn=False`` treats it as any
    other message (the plain algorithms of ``convomem.compat``). ``result_limit`` caps
    one tool result (a share of ``budget``, default 0.5, or tokens; None: never): a
    result over it is sent as a reduced copy (``model.reduce_results``;
    ``PackResult.reduced``), made once per message; priority 2 is never reduced.

    The Packer caches its previous call and is safe to share (a concurrent call works on
    a fresh table). The cache is used when the new list starts with the previous one:
    the same objects (cheap), or equal ``Message`` objects (one C-level compare per old
    message, no token counting). ``pack_openai`` / ``pack_anthropic`` remember the dicts
    they converted (private snapshots, ``packing.provider``): a list that grows by a
    dict per turn costs one C-level comparison of the old dicts and the conversion of
    the new one; ``assume_unchanged=True`` (like git's) compares identities only
    (cheaper; an in-place edit is then not seen). Between calls the Packer holds only
    what its cache describes (and the last few results it reduced), so a caller's old
    lists are freed by the caller.
    """

    def __init__(
        self,
        *,
        budget: int,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        strategy: object = None,
        pin: Iterable[PinSpec] | PinSpec | None = SYSTEM,
        unanswered: Unanswered = "drop",
        start_on: StartOn = None,
        assume_unchanged: bool = False,
        result_limit: float | int | None = RESULT_SHARE,
        keep_turn: bool = True,
    ) -> None:
        self._budget = check_budget(budget)
        self._keep_turn = flag("keep_turn", keep_turn)
        self._result_limit = result_limit_of(result_limit, self._budget)
        self._reduced: dict[Message, Message | None] = {}
        self._tokenizer = get_tokenizer(tokenizer)
        self._strategy = as_strategy(Recency() if strategy is None else strategy)
        self._policy = PinPolicy(pin)
        self._unanswered = check_unanswered(unanswered)
        self._start_on = _check_start_on(start_on)
        self._assume_unchanged = flag("assume_unchanged", assume_unchanged)
        self._stub_cache: dict[str, Message] = {}
        self._live = self._new_table()
        self._inputs: dict[Kind, DictInput] = {}
        self._lock = threading.Lock()

    @property
    def budget(self) -> int:
        return self._budget

    @property
    def tokenizer(self) -> Tokenizer:
        """The resolved tokenizer object."""
        return self._tokenizer

    @property
    def strategy(self) -> ChunkStrategy:
        """The strategy (a stage list becomes a ``Pipeline``)."""
        return self._strategy

    @property
    def pin(self) -> tuple[PinSpec, ...]:
        """The pin specs in force (the default system pin included)."""
        return self._policy.specs

    @property
    def unanswered(self) -> Unanswered:
        return self._unanswered

    @property
    def start_on(self) -> StartOn:
        return self._start_on

    @property
    def assume_unchanged(self) -> bool:
        return self._assume_unchanged

    @property
    def result_limit(self) -> int | None:
        """The most one tool result may take, in tokens (None: no limit)."""
        return self._result_limit

    def _stub(self, call_id: str) -> Message:
        stub = self._stub_cache.get(call_id)
        if stub is None:
            if len(self._stub_cache) > 10_000:
                self._stub_cache.clear()
            stub = self._stub_cache[call_id] = countable_stub(call_id, self._tokenizer)
        return stub

    def _reduce(self, message: Message, tokens: int) -> Message:
        """``message``'s reduced copy (the same object across calls, so it is counted once),
        or ``message`` when it has no result over ``result_limit``."""
        cache = self._reduced  # keyed by Message: its id, then equality (every field)
        hit = cache.get(message, _UNSEEN)
        if hit is _UNSEEN:
            limit = self._result_limit
            assert limit is not None
            copy = reduce_results(message, limit, self._tokenizer.count, tokens)
            hit = None if copy is message else copy  # None: nothing to reduce
            if len(cache) >= _REDUCED_KEPT:
                cache.clear()
            cache[message] = hit
        return message if hit is None else hit

    def _new_table(self) -> LiveTable:
        return LiveTable(
            self._tokenizer,
            self._policy,
            self._unanswered,
            self._stub,
            result_limit=self._result_limit,
            reduce=self._reduce,
            keep_turn=self._keep_turn,
        )

    # ------------------------------------------------------------------ one call

    def _enter(self, msgs: list[Message]) -> tuple[LiveTable, bool]:
        """The table describing ``msgs``: the cache when free, else a fresh one."""
        if self._lock.acquire(blocking=False):
            try:
                self._live.update(msgs)
            except BaseException:
                self._live.reset()
                self._lock.release()
                raise
            return self._live, True
        fresh = self._new_table()
        fresh.update(msgs)
        return fresh, False

    def _enter_dicts(
        self, kind: Kind, items: list[Any], system: Any
    ) -> tuple[LiveTable, bool, list[Message]]:
        """``_enter`` for provider dicts: only the dicts new since the last call convert."""
        if not self._lock.acquire(blocking=False):
            msgs = DictInput(kind, self._assume_unchanged).convert(items, system)[0]
            fresh = self._new_table()
            fresh.update(msgs)
            return fresh, False, msgs
        try:
            state = self._inputs.get(kind)
            if state is None:
                state = self._inputs[kind] = DictInput(kind, self._assume_unchanged)
            msgs, unchanged = state.convert(items, system)
            live = self._live
            # The table last described this input's previous list, which the new one
            # extends with the very same objects: no need to compare them again.
            trusted = state.live_version == live.version and unchanged >= len(live.base)
            try:
                live.update(msgs, trusted=trusted)
            except BaseException:
                live.reset()
                raise
            state.live_version = live.version
        except BaseException:
            self._lock.release()
            raise
        return live, True, msgs

    def _exit(self, locked: bool) -> None:
        if locked:
            self._live.release()
            self._lock.release()

    def _decide(self, table: LiveTable, start_on: StartOn) -> PackResult:
        sel = run_plan(self._strategy.plan(table, self._budget))
        return assemble(sel, self._budget, self._strategy.name, start_on=start_on)

    async def _decide_async(self, table: LiveTable, start_on: StartOn) -> PackResult:
        sel = await run_plan_async(self._strategy.plan(table, self._budget))
        return assemble(sel, self._budget, self._strategy.name, start_on=start_on)

    # ------------------------------------------------------------------ Message lists

    def pack(self, messages: Sequence[Message]) -> PackResult:
        """Decide what of ``messages`` to send."""
        table, locked = self._enter(_as_messages(messages))
        try:
            return self._decide(table, self._start_on)
        finally:
            self._exit(locked)

    async def pack_async(self, messages: Sequence[Message]) -> PackResult:
        """``pack`` for event loops: async summarizers and embedders are awaited."""
        table, locked = self._enter(_as_messages(messages))
        try:
            return await self._decide_async(table, self._start_on)
        finally:
            self._exit(locked)

    # ------------------------------------------------------------------ provider dicts

    @overload
    def pack_openai(
        self, messages: Iterable[Any], *, result: Literal[False] = ..., strict: bool = ...
    ) -> list[dict[str, Any]]: ...

    @overload
    def pack_openai(
        self, messages: Iterable[Any], *, result: Literal[True], strict: bool = ...
    ) -> PackedOpenAI: ...

    def pack_openai(
        self, messages: Iterable[Any], *, result: bool = False, strict: bool = False
    ) -> list[dict[str, Any]] | PackedOpenAI:
        """Pack OpenAI Chat Completions dicts; returns the dicts to send.

        The dicts of kept messages are your own objects (as ``trim_messages`` returns
        its input's); dicts are built only for what convomem wrote (summary, stubs,
        repaired tool messages). ``result=True`` returns ``(messages, result)`` (a
        ``PackedOpenAI``); ``strict=True`` raises ``OverBudget`` when the result does
        not fit. The start rule is the Packer's ``start_on``.
        """
        flag("result", result)
        flag("strict", strict)
        items = as_items(messages)
        table, locked, msgs = self._enter_dicts("openai", items, None)
        try:
            res = self._decide(table, self._start_on)
        finally:
            self._exit(locked)
        return _openai_out(res, items, msgs, result=result, strict=strict)

    async def pack_openai_async(
        self, messages: Iterable[Any], *, result: bool = False, strict: bool = False
    ) -> list[dict[str, Any]] | PackedOpenAI:
        """``pack_openai`` for event loops (async summarizers and embedders awaited)."""
        flag("result", result)
        flag("strict", strict)
        items = as_items(messages)
        table, locked, msgs = self._enter_dicts("openai", items, None)
        try:
            res = await self._decide_async(table, self._start_on)
        finally:
            self._exit(locked)
        return _openai_out(res, items, msgs, result=result, strict=strict)

    @overload
    def pack_anthropic(
        self,
        messages: Iterable[Any],
        system: System = ...,
        *,
        start_on: StartOn = ...,
        result: Literal[False] = ...,
        strict: bool = ...,
    ) -> tuple[Any, list[dict[str, Any]]]: ...

    @overload
    def pack_anthropic(
        self,
        messages: Iterable[Any],
        system: System = ...,
        *,
        start_on: StartOn = ...,
        result: Literal[True],
        strict: bool = ...,
    ) -> PackedAnthropic: ...

    def pack_anthropic(
        self,
        messages: Iterable[Any],
        system: System = None,
        *,
        start_on: StartOn = "user",
        result: bool = False,
        strict: bool = False,
    ) -> tuple[Any, list[dict[str, Any]]] | PackedAnthropic:
        """Pack an Anthropic Messages API request; returns ``(system, messages)`` to send.

        The kept messages start at a user turn (``start_on="user"``, as the API
        requires; ``start_on=None`` turns that off). ``result=True`` returns
        ``(system, messages, result)`` (a ``PackedAnthropic``); ``strict=True`` raises
        ``OverBudget`` when the result does not fit.
        """
        flag("result", result)
        flag("strict", strict)
        start = _check_start_on(start_on)
        items = as_items(messages)
        table, locked, _ = self._enter_dicts("anthropic", items, system)
        try:
            res = self._decide(table, start)
        finally:
            self._exit(locked)
        return _anthropic_out(res, result=result, strict=strict)

    async def pack_anthropic_async(
        self,
        messages: Iterable[Any],
        system: System = None,
        *,
        start_on: StartOn = "user",
        result: bool = False,
        strict: bool = False,
    ) -> tuple[Any, list[dict[str, Any]]] | PackedAnthropic:
        """``pack_anthropic`` for event loops (async summarizers and embedders awaited)."""
        flag("result", result)
        flag("strict", strict)
        start = _check_start_on(start_on)
        items = as_items(messages)
        table, locked, _ = self._enter_dicts("anthropic", items, system)
        try:
            res = await self._decide_async(table, start)
        finally:
            self._exit(locked)
        return _anthropic_out(res, result=result, strict=strict)

    def __repr__(self) -> str:
        return (
            f"Packer(budget={self._budget}, tokenizer={self._tokenizer.name!r}, "
            f"strategy={self._strategy!r}, pin={self.pin!r}, start_on={self._start_on!r})"
        )


def _openai_out(
    res: PackResult, items: list[Any], msgs: list[Message], *, result: bool, strict: bool
) -> list[dict[str, Any]] | PackedOpenAI:
    from ..formats.openai import order_tool_results, to_openai

    if strict and not res.fits:
        raise OverBudget(res)
    out: list[dict[str, Any]] = []
    idx = res.kept_indices
    n = len(idx)
    j = 0
    for m in res.kept:
        if j < n and m is msgs[idx[j]]:
            d = items[idx[j]]
            j += 1
            if d.__class__ is dict and "id" not in d:
                out.append(d)  # proved equal to what was converted: send it as it is
                continue
        elif j < n and m is res.repairs.get(idx[j]):
            j += 1
        out.extend(to_openai([m]))
    out = order_tool_results(out)  # each result after its own call, as the API requires
    return PackedOpenAI(out, res) if result else out


def _anthropic_out(
    res: PackResult, *, result: bool, strict: bool
) -> tuple[Any, list[dict[str, Any]]] | PackedAnthropic:
    from ..formats.anthropic import to_anthropic

    if strict and not res.fits:
        raise OverBudget(res)
    system, out = to_anthropic(res.kept)
    return PackedAnthropic(system, out, res) if result else (system, out)
