"""ConversationMemory: one session's log, its view under a token budget, and its summary.

``context()`` returns ``[pinned system prompt] [facts and recall] [running summary] [kept
history]`` under ``budget``. The class is a thin face over one ``SessionEngine``
(``session.engine``): ``_options.build_engine`` checks the options and builds the parts (a
journal over the store, the ``SessionView``, the ``RunningSummary``, the tiers); this
module drives the engine's generators, synchronously (``_io.run``, under a lock) or in an
event loop (``_io.arun``, under a per-loop lock).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, TypeVar, overload

from .. import _check
from .._io import Gen, LoopLock, arun, run
from ..errors import ConcurrentUpdate, ConfigError
from ..model import COMPRESSED_KEY, Message, PinSpec
from ..model.reduce import RESULT_SHARE
from ..recall import AsyncGuardedRecall, AsyncRecallIndex, GuardedRecall, RecallIndex
from ..recall.drift import DriftDetector
from ..stores import AsyncStore, InMemoryStore, Store
from ..summaries import RunningSummary, SummarizerLike
from ..summaries.extractor import Extractor
from ..tokens import Tokenizer
from ..views.budget import ContextBudget
from ._calls import check_expected_seq, check_store, refusal
from ._ops import Format
from ._options import build_engine, built, check_picklable, checked_batch
from .compaction import CACHE_TURNS
from .stats import MemoryStats, snapshot
from .tiers import RECALL_K, Tiers
from .view import SessionView

__all__ = ["COMPRESSED_KEY", "ConversationMemory", "MemoryStats"]

T = TypeVar("T")


class ConversationMemory:
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
      reading only the view's rows (``session.state``). With an ``AsyncStore`` use
      the async methods (sync ones raise ``ConfigError`` when they need the store). A
      sync store is called directly from the async methods.
    - ``summarizer``: a summarizer callable (sync or async; default
      ``ExtractiveSummarizer``), or a configured ``RunningSummary`` (then ``fallback``,
      ``facts`` and ``summary_tokens`` come from it and must not be given), or a spec:
      ``"extractive"`` or ``"openai:MODEL"`` (``summaries.specs.summarizer_from``). A
      ``RunningSummary`` (like a ``DriftDetector``) holds one conversation: giving one to
      a second memory raises ``ConfigError``.
      ``fallback``: used when the summarizer fails (default extractive; False: none).
    - ``summary``: fold evicted messages into the running summary (default True). With
      False evicted messages just leave the view (they stay in the log).
    - ``pin``: pin specs (``model.PinPolicy``); they add to the default ``("system",)``
      and ``pin=()`` pins nothing. Priority-2 messages are always pinned.
      ``"last_user"`` and negative indices protect the newest messages from eviction
      without reserving budget for them.
    - ``trigger`` / ``target``: compaction hysteresis, as fractions of the history share.
    - ``cache_turns``: a compaction cuts below ``target`` when that is needed to leave room
      for this many turns of the recent average size (default 16; 0: ``target`` alone).
      Each compaction rewrites the context's prefix, so a provider's prompt cache misses
      once per compaction: at a small budget the default keeps ~95% of turns cached.
    - ``max_turns``: also compact when the view holds more turns than this
      (``model.starts_turn``); it then keeps ``max(1, int(max_turns * target))`` and
      never more than ``max_turns``. A compressed priority-1 message does not start a
      turn.
    - ``facts``: keep the key-facts ledger verbatim in the summary (default True).
    - ``scorer``: ``message -> 0 | 1 | 2`` assigning each new message's priority (the
      log stores the scored message).
    - ``background``: in the async methods, commit a fallback summary at once and
      replace it when the summarizer's arrives (``await aflush()`` awaits it).
    - ``recall``: a ``RecallIndex`` (``AsyncRecallIndex`` for the async methods), used
      through a ``GuardedRecall`` (one per index; pass your own to set its deadline and
      breaker). Needs a store scoped to a user (``db.session(id, user_id=...)``): what
      the view evicts and each summary segment are indexed for that user in the
      background (``flush()`` / ``await aflush()``), and ``context()`` recalls the
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
      15% of what may be sent) the tiers take; what facts leave unused goes to history.
    - ``result_limit``: the most one tool result may take in the context (a share of
      what may be sent, default 0.5, or tokens; None: no limit); a result over it is sent
      reduced (``model.reduce_results``), ``messages()`` returns it whole. Priority 2:
      never reduced. ``keep_turn=False``: no current turn (the seeds' plain windows).

    The current turn (the newest user message and the open exchange after it: the
    assistant's calls and every result answering them) is in every context, never
    evicted; when it does not fit even reduced, it is sent anyway and ``stats().fits``
    is False, with ``stats().problems`` saying why.

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
        cache_turns: int = CACHE_TURNS,
        result_limit: float | int | None = RESULT_SHARE,
        keep_turn: bool = True,
    ) -> None:
        self._store: Store | AsyncStore = InMemoryStore() if store is None else store
        self._async = check_store(self._store)
        self._tlock = threading.RLock()
        self._alock = LoopLock()
        self.engine = build_engine(
            self,
            self._store,
            budget=budget,
            max_tokens=max_tokens,
            tokenizer=tokenizer,
            summarizer=summarizer,
            fallback=fallback,
            summary=summary,
            pin=pin,
            trigger=trigger,
            target=target,
            max_turns=max_turns,
            response_reserve=response_reserve,
            summary_tokens=summary_tokens,
            facts=facts,
            scorer=scorer,
            background=background,
            recall=recall,
            recall_k=recall_k,
            extractor=extractor,
            drift=drift,
            shares=shares,
            cache_turns=cache_turns,
            result_limit=result_limit,
            keep_turn=keep_turn,
        )
        """The session engine this memory drives (``session.engine``): its view, summary,
        tiers and log bookkeeping, for reading (``timeline``, ``stats``)."""

    # -- read side -------------------------------------------------------------------

    @property
    def budget(self) -> int:
        """What ``context()`` may cost (per-message overhead and reply priming included)."""
        return int(self.engine.config["budget"])

    @property
    def max_tokens(self) -> int:
        """The budget (the seeds' name for it)."""
        return self.budget

    @property
    def response_reserve(self) -> int:
        """Tokens of the budget kept for the reply."""
        return int(self.engine.config["response_reserve"])

    @property
    def max_turns(self) -> int | None:
        """The turn limit of the view (None: none)."""
        turns: int | None = self.engine.config["max_turns"]
        return turns

    @property
    def store(self) -> Store | AsyncStore:
        """The store holding the log."""
        return self._store

    @property
    def summary(self) -> RunningSummary:
        """The running summary (read it; fold into it only through this memory)."""
        return self.engine.summary

    @property
    def tokenizer(self) -> Tokenizer:
        return self.engine.tokenizer

    @property
    def view(self) -> SessionView:
        """The view engine (read it; change it only through this memory)."""
        return self.engine.view

    @property
    def tiers(self) -> Tiers | None:
        """The tiers (facts, recall, drift) when any is on."""
        return self.engine.tiers

    @property
    def last_error(self) -> BaseException | None:
        """The last error of a compaction (the summarizer's), kept for inspection."""
        return self.engine.compactor.last_error

    @property
    def position(self) -> tuple[int, int] | None:
        """``(last_seq, state_version)`` of the log as this memory last read or wrote it
        (None before it was loaded, or after a failure made it re-read on next use): a
        cache of memories compares it with ``store.info()`` to reuse one."""
        e = self.engine
        return (e.book.last, e.book.version) if e.loaded else None

    @property
    def last_seq(self) -> int:
        """The newest seq of the log this memory knows (it wrote or read): an HTTP
        service's ETag, a caller's ``expected_seq``."""
        return self.engine.book.last

    def stats(self) -> MemoryStats:
        """Counters and the state of the view now (and of the tiers, when on); loads the
        session first (an async store: ``astats``)."""
        with self._tlock:
            if not self.engine.loaded and not self._async:
                self.run(self.engine.load())
            return snapshot(self.engine)

    async def astats(self) -> MemoryStats:
        """Async twin of ``stats``."""
        async with self._alock.get():
            await arun(self.engine.load())
            return snapshot(self.engine)

    def __repr__(self) -> str:
        e = self.engine
        return (
            f"<ConversationMemory budget={self.budget} log={e.book.count} view={len(e.view.log)}>"
        )

    # -- drivers ---------------------------------------------------------------------

    def run(self, gen: Gen[T]) -> T:
        """Drive one of the engine's generators synchronously, under this memory's lock."""
        with self._tlock:
            return run(gen, refuse=partial(refusal, self._store), passthrough=(ConfigError,))

    async def arun(self, gen: Gen[T]) -> T:
        """Drive one of the engine's generators in the running loop, under its lock."""
        async with self._alock.get():
            return await arun(gen)

    # -- public API ------------------------------------------------------------------

    def add(self, role: str, content: Any, **fields: Any) -> Message:
        """Add a message (``Message`` fields as keywords: ``priority=1``, ``name=``...).

        Returns the message as logged. Bad input raises ``InvalidMessage`` naming the
        field; a store error propagates and leaves the memory unchanged.
        """
        return self.add_message(built(role, content, fields))

    def add_message(self, message: Message | Mapping[str, Any]) -> Message:
        """Add a ``Message`` (or one OpenAI Chat Completions dict); see ``add``."""
        batch, wheres = checked_batch([message], single=True)
        return self.run(self.engine.add(batch, wheres, None))[0]

    def add_messages(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
    ) -> list[Message]:
        """Add a batch in one store append: all of it or nothing.

        ``messages``: ``Message`` objects or OpenAI Chat Completions dicts (a run of
        dicts is converted with ``from_openai``, so a tool call and its results pair up).
        Returns the messages as logged. Idempotent per id over a durable session (a
        message the log holds with the same content is not stored again; other content
        raises ``MessageConflict``). ``expected_seq``: the newest seq the caller saw
        (``position``, ``info().last_seq``; over a plain ``Store`` the log's length); a
        mismatch raises ``ConcurrentUpdate`` and writes nothing. Bad input raises
        ``InvalidMessage`` naming ``messages[i]`` and changes nothing.
        """
        batch, wheres = checked_batch(messages, single=False)
        seq = check_expected_seq(expected_seq)
        return self.run(self.engine.add(batch, wheres, seq))

    def set_summary(self, text: str) -> Any:
        """Provide the summary's narrative from outside (kept facts and coverage stay).

        Raises ``ConfigError`` (nothing changed) when it does not fit the summary's share.
        Over a durable session the summary is saved (``aset_summary`` with an async one).
        """
        return self.run(self.engine.set_summary(text))

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
        makes room for them runs on the next add.
        """
        result: list[dict[str, Any]] | dict[str, Any] | list[Message] = self.run(
            self.engine.context(format, query)
        )
        return result

    def flush(self) -> None:
        """Wait until what left the view is indexed (``recall=``), and save the user's
        facts. A failed background ingest raises here."""
        self.run(self.engine.flush())

    def messages(self, limit: int | None = None) -> list[Message]:
        """The log from the store, oldest first (with ``limit``, the newest ``limit``)."""
        return self.run(self.engine.messages(limit))

    def pop(self) -> Message | None:
        """Remove and return the newest message of the log (None when it is empty).

        The Agents SDK session's ``pop_item``: change a store shared with a live memory
        through the memory, so its view follows. The view is rebuilt from the log on
        next use; a failed pop changes nothing.
        """
        return self.run(self.engine.pop())

    def clear(self, keep_system: bool = True) -> None:
        """Empty the log, the view and the summary; keep the leading system messages.

        All or nothing: if the store fails, the memory is as before and a retry works.
        The one exception: on a store without ``truncate`` that keeps system messages,
        the newest messages are popped one by one and put back if a pop fails; if the
        put-back fails too, ``ClearIncomplete`` (a ``TransientError``) says what the
        store now holds (``.remaining``, ``.removed``) and the memory follows the store.
        """
        self.run(self.engine.clear(_check.flag("keep_system", keep_system)))

    # -- public API: async -------------------------------------------------------------

    async def aadd(self, role: str, content: Any, **fields: Any) -> Message:
        """Async twin of ``add``."""
        return await self.aadd_message(built(role, content, fields))

    async def aadd_message(self, message: Message | Mapping[str, Any]) -> Message:
        """Async twin of ``add_message``."""
        batch, wheres = checked_batch([message], single=True)
        return (await self.arun(self.engine.add(batch, wheres, None)))[0]

    async def aadd_messages(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
    ) -> list[Message]:
        """Async twin of ``add_messages``."""
        batch, wheres = checked_batch(messages, single=False)
        return await self.arun(self.engine.add(batch, wheres, check_expected_seq(expected_seq)))

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
        result: list[dict[str, Any]] | dict[str, Any] | list[Message] = await self.arun(
            self.engine.context(format, query)
        )
        return result

    async def amessages(self, limit: int | None = None) -> list[Message]:
        """Async twin of ``messages``."""
        return await self.arun(self.engine.messages(limit))

    async def apop(self) -> Message | None:
        """Async twin of ``pop``."""
        return await self.arun(self.engine.pop())

    async def aclear(self, keep_system: bool = True) -> None:
        """Async twin of ``clear``."""
        await self.arun(self.engine.clear(_check.flag("keep_system", keep_system)))

    async def aset_summary(self, text: str) -> Any:
        """Async twin of ``set_summary``."""
        return await self.arun(self.engine.set_summary(text))

    async def aflush(self) -> None:
        """Async twin of ``flush``; it also waits for background summarizations
        (``background=True``) and, over a durable session, saves the summary they
        completed (until then the saved state holds the fallback's text)."""
        await self.engine.summary.wait()
        # Only background summaries change the state outside an add (which saves its
        # own): without them a save would rewrite the whole unchanged state each call.
        if self.engine.background:
            with contextlib.suppress(ConcurrentUpdate):  # another writer's state wins
                await self.arun(self.engine.save())
        await self.arun(self.engine.flush())

    async def wait(self) -> None:
        """Deprecated: ``aflush`` (the async twin of ``flush``, one naming convention)."""
        warnings.warn(
            "ConversationMemory.wait() is deprecated; use aflush()", DeprecationWarning, 2
        )
        await self.aflush()

    # -- pickling ----------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Pickling a memory over an in-memory store carries its log, view and summary
        (the summarizer and tokenizer must pickle too). A memory over a durable session
        store is not pickled: the store is its persistence (``ConfigError``)."""
        check_picklable(self.engine)
        with self._tlock:
            state = self.__dict__.copy()
        del state["_tlock"], state["_alock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tlock = threading.RLock()
        self._alock = LoopLock()
        self.engine.summary.claim(self)
