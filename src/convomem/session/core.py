"""The state machine of a ConversationMemory, written once as generators.

``SessionCore`` holds a session's state (the view engine, the ids in the log, the
pending-retry flag, counters) and its logic: each operation is a generator that yields
its I/O (``StoreOp``, ``FoldOp``, ``CompressOp``) and gets the result sent back.
``_run`` drives one synchronously and ``_arun`` in an event loop; that is the only place
the sync and async twins of ``ConversationMemory`` differ.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from .. import _check
from .._io import LoopLock, adrive, drive, maybe_await
from ..errors import (
    ClearIncomplete,
    ConcurrentUpdate,
    ConfigError,
    InvalidMessage,
    SummarizerError,
)
from ..formats.openai import from_openai
from ..model import COMPRESSED_KEY, Message, is_derived_id
from ..stores import AsyncStore, Store, check_limit
from ..summaries import RunningSummary, SummarizerLike
from ..tokens import Tokenizer
from ._ops import Gen, PauseOp, StoreOp, compressed_message, render_context
from ._tiered import TieredCore, insert_tiers
from ._tiers import TierOp, Tiers
from .durable import Durable
from .view import CompressOp, FoldOp, SessionView, View

T = TypeVar("T")


def _session_name(store: object) -> str:
    return str(getattr(store, "session_id", "default"))


def _shifted(field: str, by: int) -> str:
    """``field`` of a converted run (``messages[j]...``) named in the whole batch."""
    head = re.match(r"messages\[(\d+)\]", field)
    return field if head is None else f"messages[{int(head[1]) + by}]{field[head.end() :]}"


def _checked_batch(batch: object, single: bool) -> tuple[list[Message], list[str]]:
    """``batch`` as Messages (runs of OpenAI dicts converted with ``from_openai``) and
    the name of each item's place for errors; ``InvalidMessage`` naming the item."""
    if single:
        m = batch[0]  # type: ignore[index]
        if isinstance(m, Mapping):
            got = from_openai([m])
            if len(got) != 1:
                raise InvalidMessage("message", m, "is not one OpenAI message")
            return got, ["message"]
        if not isinstance(m, Message):
            raise InvalidMessage("message", m, f"must be a Message, not {type(m).__name__}")
        return [m], ["message"]
    if isinstance(batch, str | bytes | Mapping) or not isinstance(batch, Sequence):
        raise InvalidMessage("messages", batch, "must be a list of Messages or OpenAI dicts")
    out: list[Message] = []
    wheres: list[str] = []
    run: list[Mapping[str, Any]] = []
    for i, item in enumerate([*batch, None]):
        if isinstance(item, Mapping):
            run.append(item)
            continue
        if run:  # converted together: ids are distinct within one conversion
            first = i - len(run)
            try:
                out += from_openai(run)
            except InvalidMessage as exc:
                field = _shifted(exc.field, first)
                raise InvalidMessage(field, exc.value, exc.problem) from None
            wheres += [f"messages[{j}]" for j in range(first, i)]
            run = []
        if i == len(batch):
            break
        if not isinstance(item, Message):
            raise InvalidMessage(
                f"messages[{i}]",
                item,
                f"must be a Message or an OpenAI dict, not {type(item).__name__}",
            )
        out.append(item)
        wheres.append(f"messages[{i}]")
    seen: set[str] = set()
    for m, where in zip(out, wheres, strict=True):
        if m.id in seen and not is_derived_id(m.id):
            raise InvalidMessage(f"{where}.id", m.id, "appears twice in the batch")
        seen.add(m.id)
    return out, wheres


class SessionCore(Durable, TieredCore):
    """State and logic of a session (see the module docstring); ``ConversationMemory``
    adds its options and public methods; ``Durable`` the state kept in a
    ``SessionStore``."""

    _store: Store | AsyncStore
    _store_async: bool
    _rs: RunningSummary
    _tok: Tokenizer
    _summary_on: bool
    _scorer: Callable[[Message], int] | None
    _background: bool
    _compressor: SummarizerLike | None
    _view_engine: SessionView
    _tlock: threading.RLock
    _alock: LoopLock
    _compactions: int
    _failures: int
    _compressions: int
    _prefix_breaks: int
    _reids: int
    last_error: BaseException | None
    _tiers: Tiers | None
    _emergencies: int

    def _reset(self) -> None:
        self._view_engine.reset()
        self._loaded = False
        self._ids: set[str] = set()
        self._pending_retry = False
        self._cache: tuple[int, Message | None, View] | None = None
        self._rendered: dict[int, tuple[Message, list[dict[str, Any]]]] = {}
        self._prev: list[Message] | None = None
        self._prefix_kept: bool | None = None
        self._to_index: list[tuple[list[Message], str | None, list[int] | None]] = []
        tiers = getattr(self, "_tiers", None)
        if tiers is not None:
            tiers.last_user = None

    def _summary_reserve(self) -> int:
        """What the compaction keeps free beside the history: the summary's reserve and
        the tiers' (facts, recall)."""
        if self._summary_on:
            return self._rs.reserve + self._tiers_reserve()
        msg = self._rs.message()
        return (0 if msg is None else self._tok.count_message(msg)) + self._tiers_reserve()

    def _compactions_now(self) -> int:
        return self._compactions

    def _view(self) -> View:
        summary = self._rs.message()
        engine = self._view_engine
        cache = self._cache
        if cache is not None and cache[0] == engine.version and cache[1] is summary:
            return cache[2]
        view = engine.render(summary)
        self._cache = (engine.version, summary, view)
        return view

    # -- the shared logic (generators; the drivers do the I/O) -------------------------

    def _prepare(
        self, message: Message, where: str = "message", taken: AbstractSet[str] = frozenset()
    ) -> tuple[Message, int]:
        """Re-id, score and count a new message (``taken``: ids of its batch so far);
        nothing is changed."""
        m = message
        if (m.id in self._ids or m.id in taken) and not self._durable:  # a durable store decides
            if not is_derived_id(m.id):
                raise InvalidMessage(f"{where}.id", m.id, "is already in the log")
            n = len(self._ids)
            while f"{m.id}~{n}" in self._ids or f"{m.id}~{n}" in taken:
                n += 1
            m = m.replace(id=f"{m.id}~{n}")
        if self._scorer is not None:
            p = self._scorer(m)
            if isinstance(p, bool) or p not in (0, 1, 2):
                raise ConfigError(
                    f"scorer={self._scorer!r}: returned {p!r} for message id={m.id!r}; "
                    "must return 0, 1 or 2"
                )
            if p != m.priority:
                m = m.replace(priority=p)
        return m, self._view_engine.log.count(m)

    def _apply(self, m: Message, t: int) -> None:
        """Put an accepted (logged) message into the view."""
        self._ids.add(m.id)
        self._view_engine.add(m, t)
        if self._tiers is not None:
            self._tiers.note(m)

    def _load_gen(self) -> Gen[None]:
        """Replay the store's messages into the view, once."""
        if self._loaded:
            return
        if self._durable:
            yield from self._dload_gen()
            yield from self._tier_fit_gen()
            return
        items = yield StoreOp("get_items")
        seen: set[str] = set()
        counted: list[tuple[Message, int]] = []
        log = self._view_engine.log
        for i, m in enumerate(items):
            if not isinstance(m, Message):
                raise InvalidMessage(f"store item [{i}]", m, "must be a Message")
            if m.id in seen:
                raise InvalidMessage(f"store item [{i}].id", m.id, "appears twice in the log")
            seen.add(m.id)
            counted.append((m, log.count(m)))
        self._reset()
        self._loaded = True
        if self._tiers is not None:
            self._tiers.load_state(None)  # the drift detector follows the replay
        for m, t in counted:
            yield from self._tier_drift_gen(m)
            self._apply(m, t)
            if self._view_engine.over(self._summary_reserve()):
                yield from self._compact_gen()
        yield from self._tier_loaded_gen([m for m, _ in counted])
        yield from self._tier_fit_gen()

    def _add_gen(
        self, batch: Sequence[object], expected_seq: int | None = None, *, single: bool = False
    ) -> Gen[list[Message]]:
        """The one add path: ``batch`` appended in one store call, all or nothing (a
        single ``add`` is a batch of one). ``expected_seq``: the newest seq the caller
        saw (over a plain ``Store``, the number of messages in the log); a mismatch
        raises ``ConcurrentUpdate`` and writes nothing."""
        messages, wheres = _checked_batch(batch, single)
        if expected_seq is not None:
            expected_seq = _check.non_negative_int("expected_seq", expected_seq)
        if self._durable:
            return (yield from self._dadd_gen(messages, wheres, expected_seq))
        yield from self._load_gen()
        if expected_seq is not None and expected_seq != len(self._ids):
            raise ConcurrentUpdate(_session_name(self._store), "seq", expected_seq, len(self._ids))
        prepared: list[tuple[Message, int]] = []
        taken: set[str] = set()
        for given, where in zip(messages, wheres, strict=True):
            m, t = self._prepare(given, where, taken)
            taken.add(m.id)
            prepared.append((m, t))
        yield StoreOp("add_items", ([m for m, _ in prepared],))
        before = self._compactions
        for (m, t), given in zip(prepared, messages, strict=True):
            if m.id != given.id:
                self._reids += 1
            yield from self._tier_drift_gen(m)
            self._apply(m, t)
            yield from self._tier_extract_gen(m)
            if self._view_engine.over(self._summary_reserve()):
                yield from self._compact_gen()
        yield from self._tier_after_gen(self._compactions != before)
        yield from self._tier_fit_gen()
        return [m for m, _ in prepared]

    def _set_summary_gen(self, text: str) -> Gen[Any]:
        yield from self._load_gen()
        summary = self._rs.set_text(text)
        yield from self._dsave_gen()
        return summary

    def _compact_gen(self, target: float | None = None) -> Gen[None]:
        """Evict down to the target: plan (summarizer calls), then commit; all or nothing."""
        engine = self._view_engine
        before = self._rs.segments
        breaks = frozenset() if self._tiers is None else self._tiers.breaks
        try:
            plan = yield from engine.plan(
                self._summary_reserve(), summarize=self._summary_on, target=target, breaks=breaks
            )
        except SummarizerError as exc:
            self._failures += 1
            self._pending_retry = True
            self.last_error = exc
            return
        self._pending_retry = False
        if not plan.victims and not plan.rewrites and not plan.folded:
            return
        self._compressions += sum(
            1 for _, msgs, _ in plan.rewrites for m in msgs if COMPRESSED_KEY in m.metadata
        )
        engine.commit(plan)
        self._compactions += 1
        self._tier_collect(plan, before)
        self._after_compaction()

    def _context_gen(self, format: str, query: str | None = None) -> Gen[Any]:
        if format not in ("openai", "anthropic", "messages"):
            raise ConfigError(
                f"format={format!r}: must be one of ['openai', 'anthropic', 'messages']"
            )
        yield from self._load_gen()
        v = self._view()
        prev = self._prev
        if prev is not None:
            kept = v.messages is prev or (
                len(prev) <= len(v.messages) and v.messages[: len(prev)] == prev
            )
            self._prefix_kept = kept
            if not kept:
                self._prefix_breaks += 1
        self._prev = v.messages
        tm: Message | None = None
        if self._tiers is not None and (self._tiers.facts_on or self._tiers.index is not None):
            v, tm = yield from self._tier_context_gen(v, query)
        elif query is not None:
            raise ConfigError(f"query={query!r}: needs recall= (or extractor=) on the memory")
        msgs = v.anthropic if format == "anthropic" and v.anthropic is not None else v.messages
        if tm is not None:
            msgs = insert_tiers(msgs, self._rs.message(), tm)
        return render_context(msgs, format, self._rendered, stand_in=v.stand_in)

    def _pop_gen(self) -> Gen[Message | None]:
        """Remove the newest message from the log; the view is rebuilt from the log on
        next use (the summary keeps what it covers: nothing is summarized twice)."""
        yield from self._load_gen()
        popped: Message | None = yield StoreOp("pop_item")
        if popped is not None:
            self._reset()  # a durable memory reloads: a state that holds it is stale
        return popped

    def _messages_gen(self, limit: int | None) -> Gen[list[Message]]:
        items: list[Message] = yield StoreOp("get_items", (check_limit(limit),))
        return items

    def _clear_gen(self, keep_system: bool) -> Gen[None]:
        """Empty the log but its leading system messages, all or nothing.

        One atomic call when it can be (``clear_session``, or a store's optional
        ``truncate(keep)``); else the newest messages are popped one by one and, if the
        store fails half-way, put back before the error is raised. When putting them
        back fails too, ``ClearIncomplete`` says what the store holds, and the view is
        rebuilt from the store on next use (as after ``pop``).
        """
        _check.flag("keep_system", keep_system)
        items: list[Message] = yield StoreOp("get_items")
        keep: list[Message] = []
        for m in items if keep_system else ():
            if m.role != "system":
                break
            keep.append(m)
        if not keep:
            yield StoreOp("clear_session")
        elif callable(getattr(self._store, "truncate", None)):
            yield StoreOp("truncate", (len(keep),))
        else:
            popped: list[Message] = []
            try:
                for _ in range(len(items) - len(keep)):
                    popped.append((yield StoreOp("pop_item")))
            except Exception as exc:
                removed = [m for m in reversed(popped) if m is not None]
                if removed:
                    try:
                        yield StoreOp("add_items", (removed,))
                    except Exception as again:
                        self._reset()
                        remaining = len(items) - len(removed)
                        raise ClearIncomplete(remaining, removed, exc) from again
                raise
        self._rs.clear()
        self._reset()
        self._view_engine.compressions.clear()
        if self._tiers is not None:
            self._tiers.load_state(None)  # a new conversation: a new opening topic
        if self._durable:  # the stored state described the cleared log
            yield from self._dclear_state_gen()
            return
        self._loaded = True
        for m in keep:
            self._apply(m, self._view_engine.log.count(m))

    def __getstate__(self) -> dict[str, Any]:
        """Pickling a memory over an in-memory store carries its log, view and summary
        (the summarizer and tokenizer must pickle too). A memory over a durable session
        store is not pickled: the store is its persistence (``ConfigError``)."""
        if self._durable:
            raise ConfigError(
                f"store={self._store!r}: a ConversationMemory over a durable session is "
                "not pickled; the store keeps it: open ConversationMemory(store="
                "db.session(session_id, ...)) where it is needed and it resumes exactly"
            )
        if self._tiers is not None:
            raise ConfigError(
                "a ConversationMemory with recall=, extractor= or drift= is not pickled (an "
                "index, an embedder); open it over a durable session where it is needed"
            )
        with self._tlock:
            state = self.__dict__.copy()
        del state["_tlock"], state["_alock"]
        state["_cache"], state["_rendered"], state["_prev"] = None, {}, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tlock = threading.RLock()
        self._alock = LoopLock()

    # -- drivers -----------------------------------------------------------------------

    def _perform(self, step: StoreOp | FoldOp | CompressOp | PauseOp | TierOp) -> Any:
        if isinstance(step, TierOp):
            assert self._tiers is not None
            return self._tiers.perform(step)
        if isinstance(step, PauseOp):
            time.sleep(step.seconds)
            return None
        if isinstance(step, StoreOp):
            if self._store_async:
                raise ConfigError(
                    f"store={self._store!r}: is an AsyncStore; use the async "
                    "methods (aadd, aadd_message, acontext, amessages, aclear)"
                )
            return step.checked(getattr(self._store, step.method)(*step.args, **step.kwargs))
        if isinstance(step, FoldOp):
            return self._rs.fold(step.messages)
        s = self._rs.compress([step.message], summarizer=self._compressor)
        return compressed_message(step.message, s, self._tok)

    async def _aperform(self, step: StoreOp | FoldOp | CompressOp | PauseOp | TierOp) -> Any:
        if isinstance(step, TierOp):
            assert self._tiers is not None
            return await self._tiers.aperform(step)
        if isinstance(step, PauseOp):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, StoreOp):
            r = await maybe_await(getattr(self._store, step.method)(*step.args, **step.kwargs))
            return step.checked(r)
        if isinstance(step, FoldOp):
            return await self._rs.afold(step.messages, background=self._background)
        s = await self._rs.acompress([step.message], summarizer=self._compressor)
        return compressed_message(step.message, s, self._tok)

    def _run(self, gen: Gen[T]) -> T:
        with self._tlock:
            return drive(gen, self._perform, passthrough=(ConfigError,))

    async def _arun(self, gen: Gen[T]) -> T:
        async with self._alock.get():
            return await adrive(gen, self._aperform)
