"""ConversationMemory: one session's log, its view under a token budget, and its summary.

Messages go in with ``add``; ``context()`` returns what to send, under ``budget``:

    [pinned system prompt] [running summary] [kept history, oldest first]

It is a composition: a ``Store`` holds the *log* (every message; eviction never touches
it), a ``SessionView`` (the shared ``views.log.ChunkLog`` engine plus the compaction
policy) holds the *view*, and a ``RunningSummary`` folds what the view evicts, once.
Compaction runs when the unpinned history passes ``trigger`` (80%) of its share of the
budget, or ``max_turns`` turns, and cuts to ``target`` (50%), keeping the newest units
(a tool call and its results leave together) and preferring a cut at the start of a
turn. Between compactions messages are only appended, so the context's prefix is
identical turn to turn and a provider's prompt cache keeps matching it.

Priorities: 2 is never evicted (a pin); 1 is compressed on its own (summarized alone,
keeping its key facts) the first time eviction reaches it, and evicted like 0 the next
time; 0 is evicted oldest first. A ``scorer`` may assign priorities.

Failure never loses data. The store is written first and the view changes only after
the store accepted a message. A summarizer is retried, then its fallback is used (the
summary is ``degraded``); when both fail the compaction is aborted, the view stays as it
was, and it is retried on the next ``add``. Until then ``context()`` still respects the
budget: it leaves out the oldest unsummarized messages of that turn's context without
evicting them (``stats().omitted`` counts them).

Sync and async twins (``add``/``aadd``, ``context``/``acontext``, ...) share one
implementation: generators that yield their I/O (store calls, summarizer calls), run by
``_io.drive`` or ``_io.adrive``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar, overload

from .. import _check
from .._io import LoopLock
from ..errors import ConcurrentUpdate, ConfigError, InvalidMessage
from ..model import COMPRESSED_KEY, Message, PinPolicy, PinSpec
from ..recall import AsyncGuardedRecall, AsyncRecallIndex, GuardedRecall, RecallIndex
from ..recall.drift import DriftDetector
from ..stores import AsyncStore, InMemoryStore, Store
from ..summaries import ExtractiveSummarizer, RunningSummary, SummarizerLike
from ..summaries.extractor import Extractor
from ..summaries.specs import extractor_from, summarizer_from
from ..tokens import Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS, ContextBudget
from ._ops import (
    Format,
    check_store,
    half_extractive,
    running_summary,
)
from ._tiered import make_tiers
from ._tiers import RECALL_K
from .core import SessionCore
from .stats import MemoryStats, snapshot
from .view import SessionView

__all__ = ["COMPRESSED_KEY", "ConversationMemory", "MemoryStats"]

T = TypeVar("T")
_FIELDS = frozenset({"id", "tokens", "name", "metadata", "created_at", "priority"})


class ConversationMemory(SessionCore):
    """The memory of one conversation: a complete log and a context under budget.

    ``budget`` (alias ``max_tokens``, the seeds' word) bounds what ``context()`` costs
    (per-message overhead and reply priming included), less ``response_reserve`` tokens
    kept for the reply. The budget is shared by the pinned messages, the summary
    (``summary_tokens``, default a fifth of it) and the unpinned history; compaction
    works on the history's share.

    Options (keyword-only):

    - ``tokenizer``: a spec or tokenizer (``"approx"``, ``"tiktoken:cl100k_base"``...).
    - ``store``: a ``Store`` or ``AsyncStore`` holding the log (default ``InMemoryStore``).
      Messages already in it are replayed into the view on first use. A durable
      session (``db.session(...)``, a ``SessionStore``) also keeps the derived state and
      each message's token count, so a memory opened on it later resumes exactly,
      reading only the view's rows (``session.durable``). With an ``AsyncStore`` use
      the async methods (sync ones raise ``ConfigError`` when they need the store). A
      sync store is called directly from the async methods.
    - ``summarizer``: a summarizer callable (sync or async; default
      ``ExtractiveSummarizer``), or a configured ``RunningSummary`` (then ``fallback``,
      ``facts`` and ``summary_tokens`` come from it and must not be given), or a spec:
      ``"extractive"`` or ``"openai:MODEL"`` (``summaries.specs.summarizer_from``).
      ``fallback``: used when the summarizer fails (default extractive; False: none).
    - ``summary``: fold evicted messages into the running summary (default True). With
      False evicted messages just leave the view (they stay in the log).
    - ``pin``: pin specs (``model.PinPolicy``); they add to the default ``("system",)``
      and ``pin=()`` pins nothing. Priority-2 messages are always pinned.
      ``"last_user"`` and negative indices protect the newest messages from eviction
      without reserving budget for them.
    - ``trigger`` / ``target``: compaction hysteresis, as fractions of the history share.
    - ``max_turns``: also compact when the view holds more turns than this
      (``model.starts_turn``); it then keeps ``max(1, int(max_turns * target))`` and
      never more than ``max_turns``. A compressed priority-1 message does not start a
      turn.
    - ``facts``: keep the key-facts ledger verbatim in the summary (default True).
    - ``scorer``: ``message -> 0 | 1 | 2`` assigning each new message's priority (the
      log stores the scored message).
    - ``background``: in the async methods, commit a fallback summary at once and
      replace it when the summarizer's arrives (``await wait()`` awaits it).
    - ``recall``: a ``RecallIndex`` (``AsyncRecallIndex`` for the async methods), used
      through a ``GuardedRecall`` (one per index; pass your own to set its deadline and
      breaker). Needs a store scoped to a user (``db.session(id, user_id=...)``): what
      the view evicts and each summary segment are indexed for that user in the
      background (``flush()`` / ``await wait()``), and ``context()`` recalls the
      ``recall_k`` best snippets for its query. The user's long-term facts are read from
      and saved to the index's facts table (``recall.facts(user_id)``: current values,
      and ``history(attr)`` for "what was my old address?").
    - ``extractor``: the ``Extractor`` of those facts (default ``OfflineExtractor``), or
      a spec: ``"offline"`` or ``"openai:MODEL"`` (``summaries.specs.extractor_from``);
      alone, without ``recall``, the facts are kept by this memory only.
    - ``drift``: a ``DriftDetector`` checking each user message; ``new_segment`` starts
      a summary segment there, ``widen_recall`` doubles ``recall_k`` for the next
      context. Its state is kept with a durable session's.
    - ``shares``: a ``ContextBudget`` whose ``facts`` / ``recall`` shares (default 10% /
      15% of what may be sent) the tiers take; what the facts leave unused goes to the
      history.

    A message whose id a format converter *derived* from its content
    (``model.is_derived_id``) and that is already in the log gets a fresh id: converting
    two equal texts one at a time never collides. A given id is kept as it is: adding
    it again raises ``InvalidMessage``, or, over a durable session (whose appends are
    idempotent), is a no-op when the content is the same and raises ``MessageConflict``
    when it is not.

    Sync calls are serialized by a lock and async calls by a per-loop asyncio lock; do
    not drive one memory from threads and event loops at once.
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        max_tokens: int | None = None,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        store: Store | AsyncStore | None = None,
        summarizer: SummarizerLike | RunningSummary | str | None = None,
        fallback: SummarizerLike | Literal[False] | None = None,
        summary: bool = True,
        pin: Iterable[PinSpec] | PinSpec | None = ("system",),
        trigger: float = 0.8,
        target: float = 0.5,
        max_turns: int | None = None,
        response_reserve: int = 0,
        summary_tokens: int | None = None,
        facts: bool = True,
        scorer: Callable[[Message], int] | None = None,
        background: bool = False,
        recall: RecallIndex | AsyncRecallIndex | GuardedRecall | AsyncGuardedRecall | None = None,
        recall_k: int = RECALL_K,
        extractor: Extractor | str | None = None,
        drift: DriftDetector | None = None,
        shares: ContextBudget | None = None,
    ) -> None:
        if budget is not None and max_tokens is not None:
            raise ConfigError("budget= and max_tokens= name the same thing: give one")
        if max_tokens is not None:
            budget = _check.positive_int("max_tokens", max_tokens)
        else:
            budget = _check.positive_int("budget", 4000 if budget is None else budget)
        response_reserve = _check.non_negative_int("response_reserve", response_reserve)
        limit = budget - response_reserve - REPLY_PRIMING_TOKENS
        if limit <= 0:
            raise ConfigError(
                f"response_reserve={response_reserve!r}: leaves no room under the "
                f"budget of {budget} (reply priming takes {REPLY_PRIMING_TOKENS})"
            )
        trigger = _check.fraction("trigger", trigger, low_open=True)
        target = _check.fraction("target", target)
        if target > trigger:
            raise ConfigError(f"target={target!r}: must not exceed trigger={trigger!r}")
        max_turns = _check.optional_positive_int("max_turns", max_turns)
        for name, value in (("summary", summary), ("facts", facts), ("background", background)):
            _check.flag(name, value)
        if scorer is not None:
            _check.function("scorer", scorer, "message -> 0, 1 or 2")
        pins = PinPolicy(pin)
        if isinstance(summarizer, str):
            summarizer = summarizer_from(summarizer)
        if isinstance(extractor, str):
            extractor = extractor_from(extractor)
        tok = get_tokenizer(tokenizer)
        self._store: Store | AsyncStore = InMemoryStore() if store is None else store
        self._store_async = check_store(self._store)
        rs = running_summary(
            summarizer,
            fallback=fallback,
            facts=facts,
            summary_tokens=summary_tokens,
            summary=summary,
            limit=limit,
            budget=budget,
            tokenizer=tok,
        )
        if background and rs.fallback is None:
            raise ConfigError("background=True: needs a fallback summarizer (fallback=False)")
        self._compressor: SummarizerLike | None = (
            half_extractive(tok) if isinstance(rs.summarizer.fn, ExtractiveSummarizer) else None
        )
        self.budget = budget
        self.response_reserve = response_reserve
        self.max_turns = max_turns
        self._tok = tok
        self._rs = rs
        self._summary_on = summary
        self._scorer = scorer
        self._background = background
        self._view_engine = SessionView(
            tok, pins, limit=limit, trigger=trigger, target=target, max_turns=max_turns
        )
        self._tlock = threading.RLock()
        self._alock = LoopLock()
        self._compactions = 0
        self._failures = 0
        self._compressions = 0
        self._prefix_breaks = 0
        self._reids = 0
        self.last_error: BaseException | None = None
        """The last error of a compaction (the summarizer's), kept for inspection."""
        self._tiers = make_tiers(
            self._store,
            recall=recall,
            recall_k=recall_k,
            extractor=extractor,
            drift=drift,
            shares=shares,
            tokenizer=tok,
            limit=limit,
            summary_reserve=rs.reserve if summary else 0,
        )
        self._emergencies = 0
        self._durable_init(
            {
                "budget": budget,
                "response_reserve": response_reserve,
                "trigger": trigger,
                "target": target,
                "max_turns": max_turns,
                "summary": summary,
                "pin": [
                    pins.system,
                    pins.first_user,
                    pins.last_user,
                    pins.tool_results,
                    sorted(pins.indices),
                    list(pins.negative),
                ],
                "tokenizer": getattr(tok, "name", None),
            }
        )
        self._reset()

    # -- read side -------------------------------------------------------------------

    @property
    def max_tokens(self) -> int:
        """The budget (the seeds' name for it)."""
        return self.budget

    @property
    def store(self) -> Store | AsyncStore:
        """The store holding the log."""
        return self._store

    @property
    def summary(self) -> RunningSummary:
        """The running summary (read it; fold into it only through this memory)."""
        return self._rs

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tok

    def stats(self) -> MemoryStats:
        """Counters and the state of the view now (and of the tiers, when on)."""
        with self._tlock:
            return snapshot(self)

    def __repr__(self) -> str:
        return (
            f"<ConversationMemory budget={self.budget} log={len(self._ids)} "
            f"view={len(self._view_engine.log)}>"
        )

    # -- public API: sync --------------------------------------------------------------

    @staticmethod
    def _build(role: object, content: object, fields: dict[str, Any]) -> Message:
        for key, value in fields.items():
            if key not in _FIELDS:
                raise InvalidMessage(key, value, f"unknown message field; use {sorted(_FIELDS)}")
        return Message(role=role, content=content, **fields)  # type: ignore[arg-type]

    def add(self, role: str, content: Any, **fields: Any) -> Message:
        """Add a message (``Message`` fields as keywords: ``priority=1``, ``name=``...).

        Returns the message as logged. Bad input raises ``InvalidMessage`` naming the
        field; a store error propagates and leaves the memory unchanged.
        """
        return self.add_message(self._build(role, content, fields))

    def add_message(self, message: Message) -> Message:
        """Add a ``Message``; see ``add``."""
        return self._run(self._add_gen(message))

    def set_summary(self, text: str) -> Any:
        """Provide the summary's narrative from outside (kept facts and coverage stay).

        Raises ``ConfigError`` (nothing changed) when it does not fit the summary's share.
        Over a durable session the summary is saved (``aset_summary`` with an async one).
        """
        if not self._durable:
            with self._tlock:
                return self._rs.set_text(text)
        return self._run(self._set_summary_gen(text))

    @overload
    def context(
        self, format: Literal["openai"] = "openai", *, query: str | None = None
    ) -> list[dict[str, Any]]: ...
    @overload
    def context(
        self, format: Literal["anthropic"], *, query: str | None = None
    ) -> dict[str, Any]: ...
    @overload
    def context(
        self, format: Literal["messages"], *, query: str | None = None
    ) -> list[Message]: ...
    def context(
        self, format: Format = "openai", *, query: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any] | list[Message]:
        """What to send now, under the budget.

        ``"openai"``: Chat Completions dicts; ``"anthropic"``: ``{"system": ...,
        "messages": [...]}`` for ``client.messages.create(**ctx)`` (system prompt, then
        the summary, in ``system``); ``"messages"``: convomem ``Message`` objects. Makes
        no summarizer call. A tool call still awaiting its result is left out until the
        result arrives (pinned messages that arrived meanwhile are sent).

        With ``recall=`` (or ``extractor=``): ``[system] [facts and recalled snippets,
        one system message] [summary] [recent]``; ``query`` (default: the newest user
        message) is searched among what left the view in the user's sessions. Read-only:
        tiers that do not fit are cut (snippets first); the emergency compaction that
        makes room for them runs on the next add (see ``session._tiered``).
        """
        result: list[dict[str, Any]] | dict[str, Any] | list[Message] = self._run(
            self._context_gen(format, query)
        )
        return result

    def flush(self) -> None:
        """Wait until what left the view is indexed (``recall=``), and save the user's
        facts. A failed background ingest raises here."""
        with self._tlock:
            if self._tiers is not None:
                self._run(self._tier_flush_gen())

    def messages(self, limit: int | None = None) -> list[Message]:
        """The log from the store, oldest first (with ``limit``, the newest ``limit``)."""
        return self._run(self._messages_gen(limit))

    def pop(self) -> Message | None:
        """Remove and return the newest message of the log (None when it is empty).

        The Agents SDK session's ``pop_item``: change a store shared with a live memory
        through the memory, so its view follows. The view is rebuilt from the log on
        next use; a failed pop changes nothing.
        """
        return self._run(self._pop_gen())

    def clear(self, keep_system: bool = True) -> None:
        """Empty the log, the view and the summary; keep the leading system messages.

        All or nothing: if the store fails, the memory is as before and a retry works.
        The one exception: on a store without ``truncate`` that keeps system messages,
        the newest messages are popped one by one and put back if a pop fails; if the
        put-back fails too, ``ClearIncomplete`` (a ``TransientError``) says what the
        store now holds (``.remaining``, ``.removed``) and the memory follows the store.
        """
        self._run(self._clear_gen(keep_system))

    # -- public API: async -------------------------------------------------------------

    async def aadd(self, role: str, content: Any, **fields: Any) -> Message:
        """Async twin of ``add``."""
        return await self.aadd_message(self._build(role, content, fields))

    async def aadd_message(self, message: Message) -> Message:
        """Async twin of ``add_message``."""
        return await self._arun(self._add_gen(message))

    @overload
    async def acontext(
        self, format: Literal["openai"] = "openai", *, query: str | None = None
    ) -> list[dict[str, Any]]: ...
    @overload
    async def acontext(
        self, format: Literal["anthropic"], *, query: str | None = None
    ) -> dict[str, Any]: ...
    @overload
    async def acontext(
        self, format: Literal["messages"], *, query: str | None = None
    ) -> list[Message]: ...
    async def acontext(
        self, format: Format = "openai", *, query: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any] | list[Message]:
        """Async twin of ``context``."""
        result: list[dict[str, Any]] | dict[str, Any] | list[Message] = await self._arun(
            self._context_gen(format, query)
        )
        return result

    async def amessages(self, limit: int | None = None) -> list[Message]:
        """Async twin of ``messages``."""
        return await self._arun(self._messages_gen(limit))

    async def apop(self) -> Message | None:
        """Async twin of ``pop``."""
        return await self._arun(self._pop_gen())

    async def aclear(self, keep_system: bool = True) -> None:
        """Async twin of ``clear``."""
        await self._arun(self._clear_gen(keep_system))

    async def aset_summary(self, text: str) -> Any:
        """Async twin of ``set_summary``."""
        return await self._arun(self._set_summary_gen(text))

    async def wait(self) -> None:
        """Wait for background summarizations (``background=True``) to finish; over a
        durable session, save the summary they completed (until then the saved state
        holds the fallback's text)."""
        await self._rs.wait()
        # Only background summaries change the state outside an add (which saves its
        # own): without them a save would rewrite the whole unchanged state each call.
        if self._background:
            with contextlib.suppress(ConcurrentUpdate):  # another writer's state wins
                await self._arun(self._dsave_gen())
        if self._tiers is not None:
            await self._arun(self._tier_flush_gen())
