"""The mid- and long-term tiers of a ConversationMemory: recall, user facts, drift.

``Tiers`` holds what a memory adds on top of its view when it is given ``recall=``,
``extractor=`` or ``drift=``: the user's ``FactHistory`` (read from the recall index's
facts table, shared by the user's sessions, saved back compare-and-set), the recall
index (or a ``GuardedRecall`` around it) that receives everything the view evicts, and a
``DriftDetector``. Its I/O is requested as ``TierOp`` steps that the session's drivers
hand to ``perform`` (sync) or ``aperform`` (async), like the store and summarizer calls.

No tier ever fails a session's operation: a failed search answers without recall
(``status`` "failed" / "timeout" / "open"), a failed extraction, drift check or facts save
is recorded (``last_error``) and the session goes on. Ingest is background
(``submit``); ``flush`` waits for it and reports a failure.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Any, Final

from .._io import maybe_await
from ..errors import ConcurrentUpdate, ConfigError, ConvomemError, TransientError
from ..model import Message
from ..recall.guarded import AsyncGuardedRecall, GuardedRecall
from ..summaries.keyed import KeyedFact
from ..summaries.supersession import FactHistory
from ..tokens import Tokenizer
from ._tier_render import render_tiers, snippets_of

SAVE_RACES: Final = 8
"""Lost facts saves (another session of the user saved first) one save survives."""
FACTS_SHARE: Final = 0.10
RECALL_SHARE: Final = 0.15
RECALL_K: Final = 10
"""Snippets a context recalls by default: on the LongMem dev set (MiniLM) the
QA-context hit rate was 85.8% at 5, 91.7% at 8, 92.5% at 10 and 12 (bench/README.md)."""
NEIGHBOURS: Final = 1
"""Turns on each side of a recalled hit shown with it: an answer is often the reply to
(or the question before) the turn that matched."""
_GUARD: Final = "_convomem_guard"


@dataclass(frozen=True, slots=True)
class TierOp:
    """A tier's I/O: ``what`` is one of ``load``, ``extract``, ``save``, ``search``,
    ``ingest``, ``drift``, ``flush``."""

    what: str
    args: tuple[Any, ...] = ()


def _guard(recall: Any) -> tuple[Any, Any, bool]:
    """``(searcher, index, guarded)``: a plain index is wrapped in a ``GuardedRecall``
    (deadline, circuit breaker), one per index, so the memories sharing an index share
    its guard: one breaker per backend, and no worker threads per memory."""
    if isinstance(recall, GuardedRecall | AsyncGuardedRecall):
        return recall, recall.index, True
    guard = getattr(recall, _GUARD, None)
    if guard is None:
        guard = AsyncGuardedRecall(recall) if _is_async(recall) else GuardedRecall(recall)
        with contextlib.suppress(AttributeError, TypeError):  # a slotted index: one each
            setattr(recall, _GUARD, guard)
    return guard, recall, True


def _takes_neighbours(index: Any) -> bool:
    """Whether ``index.search`` accepts ``neighbours=`` (a custom index may not)."""
    try:
        params = inspect.signature(index.search).parameters
    except (TypeError, ValueError):
        return False
    return "neighbours" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _is_async(index: Any) -> bool:
    return type(index).__name__.startswith("Async")


class Tiers:
    """The tiers of one memory (see the module docstring). ``limit`` is the memory's
    budget less its reply reserve and priming; ``scope`` the store's user, tenant and
    session."""

    def __init__(
        self,
        *,
        recall: Any,
        recall_k: int,
        extractor: Any,
        drift: Any,
        shares: Any,
        tokenizer: Tokenizer,
        limit: int,
        scope: tuple[str | None, str | None, str],
    ) -> None:
        self.user_id, self.tenant, self.session_id = scope
        self.searcher: Any = None
        self.index: Any = None
        self.guarded = False
        if recall is not None:
            if self.user_id is None:
                raise ConfigError(
                    f"recall={recall!r}: needs a store scoped to a user: "
                    "store=db.session(session_id, user_id=..., tenant=...)"
                )
            self.searcher, self.index, self.guarded = _guard(recall)
        self.is_async = self.index is not None and _is_async(self.index)
        self.neighbours = NEIGHBOURS if recall is not None and _takes_neighbours(self.index) else 0
        self.k = recall_k
        self.extractor = extractor
        self.drift = drift
        self.facts_on = recall is not None or extractor is not None
        facts_share = FACTS_SHARE if shares is None else float(shares.facts_share)
        recall_share = RECALL_SHARE if shares is None else float(shares.recall_share)
        self.facts_cap = int(limit * facts_share) if self.facts_on else 0
        self.recall_cap = int(limit * recall_share) if recall is not None else 0
        self.tok = tokenizer
        self.history: FactHistory | None = None
        self.version = 0
        self.pending: list[str] = []  # ids extracted since the last save
        self.facts_tokens = 0  # what the facts take rendered at their share (the reserve)
        self.breaks: set[str] = set()  # drift boundaries: a summary segment starts there
        self.widen = False
        self.last_user: Message | None = None
        self.last_recall: dict[str, Any] = {"status": "off" if recall is None else "ok"}
        self.last_error: BaseException | None = None
        self.saves = self.conflicts = self.segments_started = self.widened = 0
        self.extracted = 0  # messages this memory handed to the extractor
        self.split: dict[str, int] = {}

    @property
    def on(self) -> bool:
        return self.facts_on or self.index is not None or self.drift is not None

    def reserve(self) -> int:
        """Tokens the compaction keeps free for the tiers: the facts as they render now
        (an unused facts share goes to the history) and the recall share."""
        return self.facts_tokens + self.recall_cap

    def note(self, m: Message) -> None:
        """A message entered the view: the newest user text is the default query."""
        if m.role == "user" and m.text().strip():
            self.last_user = m

    # -- derived state ----------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        """What a durable session keeps of the tiers: drift state and boundaries."""
        if self.drift is None:
            return None
        return {"drift": self.drift.state(), "breaks": sorted(self.breaks), "widen": self.widen}

    def load_state(self, data: Any) -> None:
        """Restore ``state()`` (None or unusable: start over; the log is replayed)."""
        if self.drift is None:
            return
        self.drift.reset()
        self.breaks, self.widen = set(), False
        if not isinstance(data, dict):
            return
        with contextlib.suppress(ConfigError, TypeError, KeyError):
            self.drift.load_state(data["drift"])
            self.breaks = set(map(str, data["breaks"]))
            self.widen = bool(data["widen"])

    def _refacts(self) -> None:
        h = self.history
        self.facts_tokens = 0
        if h is not None and len(h):
            text = h.render(max(0, self.facts_cap - 8))
            self.facts_tokens = min(self.facts_cap, self.tok.count(text) + 8) if text else 0

    def drifted(self, result: Any, m: Message) -> None:
        """Act on a drift check of the user message ``m``."""
        if result.action == "new_segment":
            self.breaks.add(m.id)
            self.segments_started += 1
        elif result.action == "widen_recall":
            self.widen = True

    # -- I/O ----------------------------------------------------------------------------

    def perform(self, op: TierOp) -> Any:
        try:
            return getattr(self, "_" + op.what)(*op.args)
        except ConvomemError as exc:
            return self._failed(op, exc)

    async def aperform(self, op: TierOp) -> Any:
        try:
            return await getattr(self, "_a" + op.what)(*op.args)
        except ConvomemError as exc:
            return self._failed(op, exc)

    def _failed(self, op: TierOp, exc: ConvomemError) -> Any:
        if op.what == "flush" or isinstance(exc, ConfigError):
            raise exc  # a misuse (a sync call on an async index), or flush's report
        self.last_error = exc
        if op.what == "search":
            return [], "failed", str(exc)
        return None

    def _sync_index(self) -> Any:
        if self.is_async:
            raise ConfigError(
                f"recall={self.index!r}: is async; use the memory's async methods "
                "(aadd, acontext, wait)"
            )
        return self.index

    def _load(self) -> None:
        if self.index is None:
            self._loaded(FactHistory(extractor=self.extractor, tokenizer=self.tok))
            return
        idx = self._sync_index()
        self._loaded(idx.facts(self.user_id, tenant=self.tenant, **self._options()))

    async def _aload(self) -> None:
        if self.index is None or not self.is_async:
            return self._load()
        h = await self.index.facts(self.user_id, tenant=self.tenant, **self._options())
        self._loaded(h)

    def _options(self) -> dict[str, Any]:
        return {"extractor": self.extractor, "tokenizer": self.tok}

    def _loaded(self, h: FactHistory) -> None:
        self.history, self.version, self.pending = h, int(getattr(h, "version", 0)), []
        self._refacts()

    def _extract(self, messages: list[Message]) -> None:
        h = self.history
        if h is None:
            return
        new = h.unseen(messages)
        if new:
            changed = h.add_messages(new, session_id=self.session_id)
            self.extracted += len(new)
            self.pending += [m.id for m in new]
            if changed:
                self._refacts()

    async def _aextract(self, messages: list[Message]) -> None:
        h = self.history
        if h is None:
            return
        new = h.unseen(messages)
        if new:
            changed = await h.aadd_messages(new, session_id=self.session_id)
            self.extracted += len(new)
            self.pending += [m.id for m in new]
            if changed:
                self._refacts()

    def _merged(self, fresh: FactHistory) -> FactHistory:
        """``fresh`` (another session's save) plus what this one extracted since its
        last save: the same messages are not extracted again."""
        mine = self.history
        assert mine is not None
        ids = set(self.pending)
        state = fresh.state()
        state["seen"] = [*state["seen"], *(i for i in self.pending if i not in fresh)]
        out = type(fresh).from_state(state, **self._options())
        rows = mine.state()["facts"]
        out.add(KeyedFact.from_dict(r, "facts") for r in rows if r.get("message_id") in ids)
        return out

    def _save(self) -> None:
        if self.index is None or not self.pending or self.history is None:
            return
        idx = self._sync_index()
        for _ in range(SAVE_RACES):
            try:
                self.version = idx.save_facts(
                    self.user_id, self.history, tenant=self.tenant, expected_version=self.version
                )
                self.pending, self.saves = [], self.saves + 1
                return
            except ConcurrentUpdate:
                self.conflicts += 1
                fresh = idx.facts(self.user_id, tenant=self.tenant, **self._options())
                self.history, self.version = self._merged(fresh), fresh.version
                self._refacts()

    async def _asave(self) -> None:
        if self.index is None or not self.is_async:
            return self._save()
        if not self.pending or self.history is None:
            return
        idx = self.index
        for _ in range(SAVE_RACES):
            try:
                self.version = await idx.save_facts(
                    self.user_id, self.history, tenant=self.tenant, expected_version=self.version
                )
                self.pending, self.saves = [], self.saves + 1
                return
            except ConcurrentUpdate:
                self.conflicts += 1
                fresh = await idx.facts(self.user_id, tenant=self.tenant, **self._options())
                self.history, self.version = self._merged(fresh), fresh.version
                self._refacts()

    def _search_args(self, query: str, k: int) -> dict[str, Any]:
        args: dict[str, Any] = {"user_id": self.user_id, "tenant": self.tenant, "k": k}
        if self.neighbours:
            args["neighbours"] = self.neighbours
        return args

    def _outcome(self, got: Any) -> tuple[list[Any], str, str | None]:
        if isinstance(got, list):
            return got, "ok", None
        return list(got.hits), str(got.status), got.error

    def _search(self, query: str, k: int) -> tuple[list[Any], str, str | None]:
        if self.searcher is None:
            return [], "off", None
        if self.is_async:
            self._sync_index()
        try:
            return self._outcome(self.searcher.search(query, **self._search_args(query, k)))
        except TransientError as exc:
            return [], "failed", str(exc)

    async def _asearch(self, query: str, k: int) -> tuple[list[Any], str, str | None]:
        if self.searcher is None:
            return [], "off", None
        try:
            got = await maybe_await(self.searcher.search(query, **self._search_args(query, k)))
        except TransientError as exc:
            return [], "failed", str(exc)
        return self._outcome(got)

    def _ingest(self, messages: list[Message], kind: str | None, seqs: Any) -> None:
        if self.index is None or not messages:
            return
        idx = self._sync_index()
        add = getattr(idx, "submit", None) or idx.add
        add(
            messages,
            user_id=self.user_id,
            session_id=self.session_id,
            tenant=self.tenant,
            seqs=seqs,
            kind=kind,
        )

    async def _aingest(self, messages: list[Message], kind: str | None, seqs: Any) -> None:
        if self.index is None or not messages:
            return
        idx = self.index
        add = getattr(idx, "submit", None) or idx.add
        await maybe_await(
            add(
                messages,
                user_id=self.user_id,
                session_id=self.session_id,
                tenant=self.tenant,
                seqs=seqs,
                kind=kind,
            )
        )

    def _flush(self) -> None:
        if self.index is not None:
            self._sync_index().flush()
        self._save()

    async def _aflush(self) -> None:
        if self.index is not None:
            idx = self.index
            await maybe_await(idx.aflush() if hasattr(idx, "aflush") else idx.flush())
        await self._asave()

    def _drift(self, m: Message) -> None:
        self.drifted(self.drift.check(m), m)

    async def _adrift(self, m: Message) -> None:
        self.drifted(await self.drift.acheck(m), m)

    # -- the context --------------------------------------------------------------------

    def query_for(self, query: str | None) -> str | None:
        if query is not None:
            if not isinstance(query, str):
                raise ConfigError(f"query={query!r}: must be a string or None")
            return query
        return None if self.last_user is None else self.last_user.text()

    def k_now(self) -> int:
        """k for this context: doubled after a ``widen_recall`` suggestion (once)."""
        if self.widen:
            self.widened += 1
            self.widen = False
            return self.k * 2
        return self.k

    def message(
        self, room: int, hits: list[Any], in_view: Any
    ) -> tuple[Message | None, int, int, list[Any]]:
        """The facts and snippets message within ``room`` tokens: facts within their
        share, snippets within theirs (hits already in the view left out). Returns the
        message, the facts' and the snippets' tokens, and the hits shown. A hit's
        neighbouring turns (``Hit.context``) follow the hits, each shown once, in the
        room the hits leave."""
        snippets = snippets_of(hits, in_view)
        facts_room = min(self.facts_cap, room)
        h = self.history if self.facts_on else None
        msg, facts, recalled, lines = render_tiers(
            self.tok, h, snippets, facts_room, min(self.recall_cap, room), room, self.session_id
        )
        return msg, facts, recalled, [s for s in lines if not s.neighbour]
