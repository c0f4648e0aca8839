"""The timeline of a session: what became of each message of the log, and why.

``timeline(memory)`` (``atimeline`` for the async twin) explains a ``ConversationMemory``
as plain data: each message of the log with its role, tokens and *state*, the summary
segments with their coverage, the budget's split, the facts said in the session, and
the per-turn usage recorded in the log. It reads the memory's own view (the same one
``context()`` renders), so the states agree with what is sent:

- ``pinned``: in the context, held by a pin (the system prompt, priority 2, a pin spec,
  or a pinned message of the same tool exchange); never evicted;
- ``in_view``: in the context, among the newest messages that fit the history's share,
  or of the current turn (the newest user message and its open exchange: never
  evicted); a tool result over the memory's ``result_limit`` is sent reduced (its
  ``sent_tokens`` less than its ``tokens``, the reason says so);
- ``compressed``: in the context as a compressed stand-in (priority 1);
- ``waiting``: in the view but held back until a tool call it belongs to is answered;
- ``omitted``: in the view but left out of this context while a failed compaction waits
  for its retry (not evicted);
- ``summarized``: evicted and folded into summary segment N;
- ``dropped``: out of the view and in no segment (summaries off, or an orphan tool
  result waiting to be folded).

Every logged message has exactly one state, and the messages in state ``pinned``,
``in_view`` or ``compressed`` are exactly the log messages of ``context("messages")``.

Per-turn figures (context tokens, prompt-cache prefix, cost) are what whoever sent a
context recorded on the reply (``turn_records.record_turn``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from .._io import Gen
from ..model import COMPRESSED_KEY, REDUCED_KEY, Message
from ..stores import check_limit
from ..summaries.facts import FactHistory, KeyedFact
from ..summaries.keyed import SUBJECT_USER
from ..views.budget import REPLY_PRIMING_TOKENS
from ._timeline_read import held_ids, pin_reason, segments_of
from ._turns import STAND_IN
from .stats import MemoryStats
from .turn_records import TURN_KEY, TurnRow, check_price, record_turn, turn_rows

if TYPE_CHECKING:
    from .memory import ConversationMemory

__all__ = [
    "IN_CONTEXT",
    "STATES",
    "TURN_KEY",
    "BudgetSplit",
    "Entry",
    "FactRow",
    "SegmentInfo",
    "Timeline",
    "TurnRow",
    "atimeline",
    "record_turn",
    "timeline",
]

State = Literal["pinned", "in_view", "compressed", "waiting", "omitted", "summarized", "dropped"]
STATES: Final[tuple[State, ...]] = (
    "pinned",
    "in_view",
    "compressed",
    "waiting",
    "omitted",
    "summarized",
    "dropped",
)
IN_CONTEXT: Final = frozenset({"pinned", "in_view", "compressed"})
"""The states of messages that ``context()`` sends."""
PREVIEW: Final = 240


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of the log and what became of it."""

    position: int
    """Its position in the log (0 is the oldest message)."""
    id: str
    role: str
    tokens: int
    """Its own cost (the original message, per-message overhead included)."""
    state: State
    reason: str
    segment: int | None = None
    """The summary segment (index into ``Timeline.segments``) that holds it."""
    sent_tokens: int | None = None
    """What it costs in the context (a compressed stand-in costs less); None: not sent."""
    text: str = ""
    """The start of its text."""


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A summary segment: the messages it stands for and how it was made."""

    index: int
    first_id: str | None
    last_id: str | None
    count: int
    tokens: int | None
    summarizer: str
    degraded: bool
    text: str


@dataclass(frozen=True, slots=True)
class BudgetSplit:
    """How the budget is shared now (tokens): the context's parts, then what is left.

    ``pinned + summary + history + facts + recall + free + reply == budget`` (``free`` is
    negative when
    pinned messages alone overflow); ``summary_reserve`` and ``history_share`` are what
    the summary and the unpinned history may take; compaction starts at ``trigger`` of
    the history's share and cuts to ``target``.
    """

    budget: int
    pinned: int
    summary: int
    history: int
    reply: int
    free: int
    summary_reserve: int
    history_share: int
    trigger: float
    target: float
    facts: int = 0
    """The user's facts in the context (a memory with tiers)."""
    recall: int = 0
    """Recalled snippets in the context (a memory with tiers)."""


@dataclass(frozen=True, slots=True)
class FactRow:
    """A fact said in the session; ``current`` is False once a newer value replaced it."""

    subject: str
    attribute: str
    value: str
    current: bool
    message_id: str | None
    valid_from: float | None
    valid_to: float | None


@dataclass(frozen=True, slots=True)
class Timeline:
    """A session explained (see the module docstring); ``to_dict`` is JSON-ready."""

    entries: list[Entry]
    older: int
    """Messages of the log before the first entry (not read: ``limit``)."""
    counts: dict[str, int]
    """Entries per state."""
    segments: list[SegmentInfo]
    budget: BudgetSplit
    turns: list[TurnRow]
    facts: list[FactRow]
    summary_facts: list[str]
    """The key facts the summary carries verbatim."""
    stats: MemoryStats
    context_ids: list[str] = field(default_factory=list)
    """The ids ``context("messages")`` sends now, in order (summary and tiers too)."""
    facts_scope: str = "session"
    """``"user"``: ``facts`` are the user's long-term facts (every session of the user, a
    memory with tiers); ``"session"``: the facts said in the listed messages."""
    recall: dict[str, Any] | None = None
    """What recall returned for this context's query (a memory with recall): ``status``,
    ``query``, ``hits`` (``message_id``, ``session_id``, ``kind``, ``score``, ``shown``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- the timeline ------------------------------------------------------------------------


def _preview(m: Message) -> str:
    """The start of a message's text; a tool call shows its name and arguments."""
    return (m.text() or m.calls_text())[:PREVIEW]


def _facts(messages: Iterable[Message], history: FactHistory | None = None) -> list[FactRow]:
    if history is None:
        history = FactHistory()
        history.add_messages(list(messages))
    rows: list[KeyedFact] = []
    for subject in sorted({f.subject for f in history.current(None)} | {SUBJECT_USER}):
        rows.extend(history.history(None, subject=subject))
    return [
        FactRow(f.subject, f.attribute, f.value, f.current, f.message_id, f.valid_from, f.valid_to)
        for f in sorted(rows, key=lambda f: (not f.current, f.subject, f.attribute, f.seq or 0))
    ]


def _build(
    memory: ConversationMemory,
    log: list[Message],
    price: Mapping[str, float] | None,
    context: list[Message] | None,
) -> Timeline:
    engine = memory.view
    clog = engine.log
    view = memory.engine.current()
    stats = memory.stats()
    rs = memory.summary
    summary = rs.message()
    tok = memory.tokenizer

    sent: dict[str, Message] = {m.id: m for m in view.messages}
    context_ids = [m.id for m in (view.messages if context is None else context)]
    tiers = memory.tiers if context is not None else None
    split = {} if tiers is None else tiers.split
    pinned, turn, waiting, exchange = held_ids(clog)
    to_fold = {m.id for m in engine.to_fold}

    segments = [
        SegmentInfo(i, s.first_id, s.last_id, s.count, s.tokens, s.summarizer, s.degraded, s.text)
        for i, s in enumerate(rs.segments)
    ]
    segment_of: dict[str, int] = {}
    if segments:
        segment_of = segments_of(rs, {m.id for m in log if m.id not in sent and m.id not in clog})

    older = max(0, stats.log_messages - len(log))
    first_user = next((m.id for m in log if m.role == "user"), "") if older == 0 else ""
    entries: list[Entry] = []
    parts = {"pinned": 0, "history": 0}
    for i, m in enumerate(log):
        pos = older + i
        own = tok.count_message(m)
        text = _preview(m)
        mid = m.id
        if mid in sent:
            cm = sent[mid]
            cost = own if cm is m or cm == m else tok.count_message(cm)
            if mid in pinned:
                state: State = "pinned"
                reason = pin_reason(m, pos, engine.pins, first_user)
                parts["pinned"] += cost
            elif COMPRESSED_KEY in cm.metadata:
                state, reason = "compressed", f"priority 1: compressed in place ({own} -> {cost})"
                parts["history"] += cost
            else:
                state = "in_view"
                reason = "recent: within the history's share"
                if mid in turn:
                    reason = "the current turn: never evicted"
                if mid in exchange:
                    reason += "; a tool call and its results stay together"
                if REDUCED_KEY in cm.metadata:
                    reason += f"; a tool result reduced to fit ({own} -> {cost})"
                parts["history"] += cost
            entries.append(Entry(pos, mid, m.role, own, state, reason, None, cost, text))
            continue
        if mid in clog:
            if mid in waiting:
                state, reason = "waiting", "its tool exchange awaits a result"
            else:
                state = "omitted"
                reason = "left out of this context while a failed compaction waits"
        elif mid in to_fold:
            state, reason = "dropped", "orphan tool result (no call in view): folded next"
        elif mid in segment_of:
            n = segment_of[mid]
            state, reason = "summarized", f"evicted at a compaction; in summary segment {n}"
            entries.append(Entry(pos, mid, m.role, own, state, reason, n, None, text))
            continue
        elif rs.covers(mid):
            state, reason = "summarized", "evicted at a compaction; summarized"
        elif not memory.engine.summarize:
            state, reason = "dropped", "evicted (summaries are off)"
        else:
            state, reason = "dropped", "left the view unsummarized (an orphan tool result)"
        entries.append(Entry(pos, mid, m.role, own, state, reason, None, None, text))

    counts: dict[str, int] = {s: 0 for s in STATES}
    for e in entries:
        counts[e.state] += 1
    s_tok = 0
    if summary is not None and summary.id in sent:
        s_tok = tok.count_message(summary)
    if view.stand_in and STAND_IN.id in sent:
        parts["history"] += tok.count_message(STAND_IN)
    reply = memory.response_reserve + REPLY_PRIMING_TOKENS
    reserve = memory.engine.summary_reserve()
    facts, recalled = split.get("facts", 0), split.get("recall", 0)
    used = parts["pinned"] + s_tok + parts["history"] + facts + recalled
    budget = BudgetSplit(
        budget=memory.budget,
        pinned=parts["pinned"],
        summary=s_tok,
        history=parts["history"],
        facts=facts,
        recall=recalled,
        reply=reply,
        free=memory.budget - reply - used,
        summary_reserve=reserve,
        history_share=engine.share(reserve),
        trigger=engine.trigger,
        target=engine.target,
    )
    current = rs.current()
    return Timeline(
        entries=entries,
        older=older,
        counts=counts,
        segments=segments,
        budget=budget,
        turns=turn_rows(log, price),
        facts=_facts(log, None if tiers is None else tiers.profile.history),
        facts_scope="session" if tiers is None or tiers.profile.history is None else "user",
        recall=None if tiers is None or tiers.searcher is None else dict(tiers.last_recall),
        summary_facts=[] if current is None else [f.value for f in current.facts],
        stats=stats,
        context_ids=context_ids,
    )


def _timeline_gen(
    memory: ConversationMemory, limit: int | None, price: Mapping[str, float] | None
) -> Gen[Timeline]:
    yield from memory.engine.load()
    context: list[Message] | None = None
    tiers = memory.tiers
    if tiers is not None and tiers.on:
        # The tiers (facts, recall) are decided with the context, which may fold more
        # history to fit them: take it as context() would, then explain.
        context = yield from memory.engine.context("messages")
    log: list[Message] = yield from memory.engine.messages(limit)
    if not memory.engine.loaded:  # the store moved under a durable memory meanwhile: reload
        yield from memory.engine.load()
        context = None if context is None else (yield from memory.engine.context("messages"))
    return _build(memory, log, price, context)


def timeline(
    memory: ConversationMemory,
    *,
    limit: int | None = None,
    price: Mapping[str, float] | None = None,
) -> Timeline:
    """Explain ``memory`` (see the module docstring). Without tiers it makes no
    summarizer call and changes nothing; with tiers (facts, recall) it first takes the
    context as ``context()`` does (the search; read-only too), since the tiers are
    decided there.

    ``limit``: only the newest ``limit`` messages of the log are read and explained
    (``older`` says how many come before). ``price``: per million tokens, keys
    ``input``, ``cached_input``, ``output``, for the cost of recorded turns that carry
    none. Reads the log (and the summary's coverage) once: meant for inspection, not
    for every turn.
    """
    return memory.run(_timeline_gen(memory, check_limit(limit), check_price(price)))


async def atimeline(
    memory: ConversationMemory,
    *,
    limit: int | None = None,
    price: Mapping[str, float] | None = None,
) -> Timeline:
    """Async twin of ``timeline``."""
    return await memory.arun(_timeline_gen(memory, check_limit(limit), check_price(price)))
