"""Summaries: the Summary artifact, summarizers, and the incremental RunningSummary.

A ``Summary`` is a derived system message that stands for a range of the log. A
*summarizer* is any callable ``(messages, previous) -> str`` (sync or async); the
older ``(messages) -> str`` form works too. ``as_summarizer`` adapts either form
once, so every caller (RunningSummary, the Packer's summary strategy) runs
summarizers the same way, sync or async.

``RunningSummary`` is the incremental summary of one conversation: each fold
summarizes only newly evicted messages into a new *segment*; the oldest segments are
merged only when the summary outgrows its token reserve, and a ledger of key facts
is carried verbatim beside the segments, so details survive any number of folds.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import heapq
import inspect
import math
import re
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, KeysView, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeVar

from ._drive import adrive, drive
from .errors import ConfigError, InvalidMessage, SummarizerError
from .facts import (
    KIND_VALUE,
    Fact,
    FactLedger,
    extract_facts,
    extract_from_messages,
    render_facts,
    split_sentences,
)
from .messages import Message, ToolUseBlock
from .tokens import PER_MESSAGE_TOKENS, Tokenizer, get_tokenizer

T = TypeVar("T")

SUMMARY_HEADER: Final = "Summary of the earlier conversation:"
SEGMENT_KEY: Final = "convomem_summary_segment"
"""Metadata key marking a message that carries summary text (a segment being merged)."""

TRUNCATION_MARKER: Final = " […]"


def render_summary(header: str, facts_block: str, text: str) -> str:
    """The content of a summary message: header, facts block, then the narrative."""
    body = "\n\n".join(p for p in (facts_block, text) if p)
    if not header:
        return body
    return f"{header}\n{body}" if body else header


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary with its coverage: which messages it stands for, and how it was made.

    ``text`` is the narrative; ``facts`` the key facts it carries verbatim
    (``facts_omitted`` more did not fit). ``first_id`` / ``last_id`` / ``count`` give
    the coverage; ``tokens`` is the cost of ``to_message()`` (``None``: not counted);
    ``degraded`` is true when a fallback summarizer made some of it.
    """

    text: str
    first_id: str | None = None
    last_id: str | None = None
    count: int = 0
    summarizer: str = "external"
    tokens: int | None = None
    created_at: float = field(default_factory=time.time)
    degraded: bool = False
    facts: tuple[Fact, ...] = ()
    facts_omitted: int = 0
    header: str = SUMMARY_HEADER

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidMessage("Summary.text", self.text, "must be a string")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise InvalidMessage("Summary.count", self.count, "must be a non-negative integer")
        if self.tokens is not None and (
            isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0
        ):
            raise InvalidMessage("Summary.tokens", self.tokens, "must be a non-negative integer")
        if not isinstance(self.facts, tuple):
            object.__setattr__(self, "facts", tuple(self.facts))

    @property
    def content(self) -> str:
        """The rendered text of the summary message (header, facts, narrative)."""
        return render_summary(self.header, render_facts(self.facts, self.facts_omitted), self.text)

    @property
    def id(self) -> str:
        """A stable message id derived from the coverage (from the text if none)."""
        if self.count:
            key = f"{self.first_id}\x1f{self.last_id}\x1f{self.count}"
        else:
            key = "text\x1f" + self.content
        return "summary_" + hashlib.sha256(key.encode()).hexdigest()[:16]

    def to_message(self) -> Message:
        """The summary as a system message.

        The same summary always renders to an equal message (same id, content and
        token count; no timestamp), so a provider's prompt cache keeps matching it.
        """
        return Message(
            self.id,
            "system",
            self.tokens,
            content=self.content,
            metadata={
                "summary": {
                    "first_id": self.first_id,
                    "last_id": self.last_id,
                    "count": self.count,
                    "summarizer": self.summarizer,
                    "degraded": self.degraded,
                }
            },
        )


# -- the summarizer protocol and its adapter ----------------------------------------


class Summarizer(Protocol):
    """Turns messages (and the previous summary, if any) into summary text.

    The result is the summary of ``previous`` plus ``messages`` together. It may be
    ``async``. A plain ``(messages) -> str`` callable is accepted wherever a
    Summarizer is, and a summarizer object may offer an async twin as ``acall``.
    """

    def __call__(
        self, messages: Sequence[Message], previous: Summary | None, /
    ) -> str | Awaitable[str]: ...


SummarizerLike: TypeAlias = Callable[..., Any]
"""Anything ``as_summarizer`` accepts: ``(messages, previous)`` or ``(messages)``, sync or async."""


class AsyncSummarizerError(RuntimeError):
    """A coroutine summarizer was called from synchronous code inside a running loop."""


def _accepts_previous(fn: Callable[..., Any]) -> Literal["positional", "keyword", "no"]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "positional"  # builtins and C callables: assume the full protocol
    positional = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return "positional"
    if not positional:
        raise ConfigError(f"summarizer={fn!r}: must accept the messages as its first argument")
    if len(positional) >= 2:
        second = positional[1]
        if second.default is second.empty or second.name == "previous":
            return "positional"
    kw = sig.parameters.get("previous")
    if kw is not None and kw.kind is kw.KEYWORD_ONLY:
        return "keyword"
    return "no"


def _name_of(fn: Any) -> str:
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(fn, functools.partial):
        return _name_of(fn.func)
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    return type(fn).__name__


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _check_text(result: Any, name: str) -> str:
    if not isinstance(result, str):
        raise SummarizerError(
            f"summarizer {name!r} returned {type(result).__name__}: must return a str"
        )
    return result


class SummarizerAdapter:
    """A summarizer of either form, called uniformly: ``adapter(messages, previous)``
    (sync) or ``await adapter.acall(messages, previous)``.

    The signature is inspected once. The sync call runs a coroutine summarizer with
    ``asyncio.run`` when no loop is running; inside a running loop it raises
    ``AsyncSummarizerError`` (a RuntimeError) telling you to use the async method.
    The async call runs a sync summarizer in a worker thread.
    """

    __slots__ = ("_acall", "_pass", "fn", "is_async", "name")

    def __init__(self, fn: SummarizerLike, *, name: str | None = None) -> None:
        if not callable(fn):
            raise ConfigError(f"summarizer={fn!r}: must be callable")
        self.fn = fn
        self.name = name or _name_of(fn)
        self._pass = _accepts_previous(fn)
        twin = getattr(fn, "acall", None)
        self._acall: Callable[..., Any] | None = (
            twin if callable(twin) and inspect.iscoroutinefunction(twin) else None
        )
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )

    def _invoke(
        self, fn: Callable[..., Any], messages: Sequence[Message], previous: Summary | None
    ) -> Any:
        if self._pass == "positional":
            return fn(messages, previous)
        if self._pass == "keyword":
            return fn(messages, previous=previous)
        return fn(messages)

    def _misuse(self) -> AsyncSummarizerError:
        return AsyncSummarizerError(
            f"summarizer {self.name!r} is async and an event loop is running: use the async "
            "method (await running_summary.afold(...), await adapter.acall(...) or "
            "await asummarize(...)) instead of the sync one"
        )

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        """Summarize synchronously."""
        if self.is_async and _in_running_loop():
            raise self._misuse()
        result = self._invoke(self.fn, list(messages), previous)
        if inspect.isawaitable(result):
            if _in_running_loop():
                close = getattr(result, "close", None)
                if callable(close):
                    close()
                raise self._misuse()
            result = asyncio.run(_await(result))
        return _check_text(result, self.name)

    async def acall(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        """Summarize asynchronously.

        An async summarizer (or an async ``acall`` twin) is awaited; a sync one runs in a
        worker thread (``asyncio.to_thread``), so a slow or CPU-bound summarizer does not
        block the event loop.
        """
        msgs = list(messages)
        if self._acall is not None:
            result = self._invoke(self._acall, msgs, previous)
        elif self.is_async:
            result = self._invoke(self.fn, msgs, previous)
        else:
            result = await asyncio.to_thread(self._invoke, self.fn, msgs, previous)
        if inspect.isawaitable(result):
            result = await result
        return _check_text(result, self.name)

    def __repr__(self) -> str:
        return f"<SummarizerAdapter {self.name!r}{' async' if self.is_async else ''}>"


async def _await(aw: Awaitable[T]) -> T:
    return await aw


def as_summarizer(fn: SummarizerLike | SummarizerAdapter) -> SummarizerAdapter:
    """Adapt a summarizer of either form (sync or async) once; adapters pass through."""
    if isinstance(fn, SummarizerAdapter):
        return fn
    return SummarizerAdapter(fn)


def summarize(
    fn: SummarizerLike | SummarizerAdapter,
    messages: Sequence[Message],
    previous: Summary | None = None,
) -> str:
    """Run any summarizer synchronously (see ``SummarizerAdapter``)."""
    return as_summarizer(fn)(messages, previous)


async def asummarize(
    fn: SummarizerLike | SummarizerAdapter,
    messages: Sequence[Message],
    previous: Summary | None = None,
) -> str:
    """Run any summarizer asynchronously."""
    return await as_summarizer(fn).acall(messages, previous)


# -- text helpers --------------------------------------------------------------------


def message_label(message: Message) -> str:
    """``role`` or ``role(name)``: how a message is attributed in summary text."""
    return message.role if message.name is None else f"{message.role}({message.name})"


def _body(message: Message) -> str:
    parts = [message.text()] if message.text() else []
    for block in message.blocks:
        if isinstance(block, ToolUseBlock):
            args = block.arguments()
            if len(args) > 200:
                args = args[:200] + "…"
            parts.append(f"[called {block.name}({args})]")
    return " ".join(parts)


def transcript(messages: Iterable[Message]) -> str:
    """Messages as ``label: text`` lines (summary segments as their bare text)."""
    lines: list[str] = []
    for m in messages:
        body = _body(m)
        if m.metadata.get(SEGMENT_KEY):
            if body:
                lines.append(body)
        elif body:
            lines.append(f"{message_label(m)}: {body}")
    return "\n".join(lines)


def clip_to_tokens(
    text: str, limit: int, count: Callable[[str], int], marker: str = TRUNCATION_MARKER
) -> str:
    """The longest prefix of ``text`` (cut at a space when close) that, with ``marker``
    appended, counts at most ``limit``; ``text`` itself when it already fits."""
    if count(text) <= limit:
        return text
    if count(marker) > limit:
        return ""
    lo, hi = 0, len(text)  # invariant: prefix of length lo fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid].rstrip() + marker) <= limit:
            lo = mid
        else:
            hi = mid - 1
    cut = text.rfind(" ", 0, lo + 1)
    if cut > lo * 0.7:
        lo = cut
    return text[:lo].rstrip() + marker


# -- built-in summarizers ------------------------------------------------------------

_LABELED = re.compile(r"^((?:system|user|assistant|tool)(?:\([^)]*\))?): (.*)$")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’_-]*")
_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves ok okay yes yeah thanks thank please hi hello hey sure also
    got get let lets i'm it's that's don't can't im dont cant one would like just really
"""
_STOPWORDS: Final = frozenset(_STOPWORDS_TEXT.split())


@dataclass(slots=True)
class _Candidate:
    unit: int
    pos: int
    text: str
    terms: dict[str, float]
    cost: int


class ExtractiveSummarizer:
    """Offline, deterministic summarizer: the most informative sentences under a budget.

    Sentences are scored by the TF-IDF weight of the terms they add that no chosen
    sentence covers yet (numbers, proper nouns and extracted facts weigh more),
    divided by their token cost, and picked greedily until ``max_tokens``; they are
    kept in their original order, attributed (``user: ...``). The previous summary's
    sentences compete with the new ones, so the result folds both together.
    """

    name = "extractive"

    def __init__(
        self,
        max_tokens: int = 256,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 8:
            raise ConfigError(f"max_tokens={max_tokens!r}: must be an integer of at least 8")
        self.max_tokens = max_tokens
        self._tok = get_tokenizer(tokenizer)

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_tokens={self.max_tokens})"

    def _units(
        self, messages: Sequence[Message], previous: Summary | None
    ) -> list[tuple[str | None, bool, str]]:
        """(label, may-hold-preferences, text) units in order: previous first."""
        units: list[tuple[str | None, bool, str]] = []

        def summary_lines(text: str) -> None:
            for line in text.splitlines():
                line = line.strip()
                if not line:
                    continue
                m = _LABELED.match(line)
                if m:
                    units.append((m.group(1), m.group(1).startswith("user"), m.group(2)))
                else:
                    units.append((None, True, line))

        if previous is not None and previous.text:
            summary_lines(previous.text)
        for msg in messages:
            if msg.metadata.get(SEGMENT_KEY):
                summary_lines(msg.text())
            else:
                body = _body(msg)
                if body.strip():
                    units.append((message_label(msg), msg.role == "user", body))
        return units

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        units = self._units(messages, previous)
        count = self._tok.count
        cap = max(8, self.max_tokens // 2)
        cands: list[_Candidate] = []
        for u, (_label, prefs, text) in enumerate(units):
            for _, sentence in split_sentences(text):
                sentence = " ".join(sentence.split())
                cost = count(sentence) + 1
                if cost > cap:
                    sentence = clip_to_tokens(sentence, cap - 1, count)
                    cost = count(sentence) + 1
                if not sentence:
                    continue
                terms: dict[str, float] = {}
                for i, w in enumerate(_WORD.findall(sentence)):
                    lw = w.lower()
                    if lw in _STOPWORDS or (len(lw) < 2 and not lw.isdigit()):
                        continue
                    boost = 1.0
                    if any(c.isdigit() for c in w):
                        boost = 1.6
                    elif i and w[0].isupper():
                        boost = 1.3
                    terms[lw] = max(terms.get(lw, 0.0), boost)
                for fact in extract_facts(sentence, preferences=prefs):
                    terms["\x00" + "\x1f".join(fact.key)] = 1.0 + KIND_VALUE[fact.kind] / 2
                cands.append(_Candidate(u, len(cands), sentence, terms, cost))
        if not cands:
            return ""
        df: dict[str, int] = {}
        for c in cands:
            for t in c.terms:
                df[t] = df.get(t, 0) + 1
        n = len(cands)
        weight = {t: (1.0 if t.startswith("\x00") else math.log(1 + n / d)) for t, d in df.items()}
        label_cost = [count(f"{label}: ") if label else 0 for label, _, _ in units]
        chosen = self._select(cands, weight, label_cost)
        return self._render(units, cands, chosen, count)

    def _select(
        self, cands: list[_Candidate], weight: dict[str, float], label_cost: list[int]
    ) -> list[int]:
        covered: set[str] = set()
        used_units: set[int] = set()
        budget = self.max_tokens

        def score(c: _Candidate) -> tuple[float, int]:
            gain = sum(weight[t] * b for t, b in c.terms.items() if t not in covered)
            cost = c.cost + (0 if c.unit in used_units else label_cost[c.unit])
            return gain / cost, cost

        heap = [(-score(c)[0], c.pos) for c in cands]
        heapq.heapify(heap)
        used = 0
        chosen: list[int] = []
        while heap:
            _, pos = heapq.heappop(heap)
            c = cands[pos]
            s, cost = score(c)
            if s <= 0:
                continue
            if heap and -heap[0][0] > s + 1e-12:
                heapq.heappush(heap, (-s, pos))  # stale score: re-queue (lazy greedy)
                continue
            if used + cost > budget:
                continue
            chosen.append(pos)
            used += cost
            covered.update(c.terms)
            used_units.add(c.unit)
        return chosen

    def _render(
        self,
        units: list[tuple[str | None, bool, str]],
        cands: list[_Candidate],
        chosen: list[int],
        count: Callable[[str], int],
    ) -> str:
        picked = list(chosen)
        while True:
            by_unit: dict[int, list[str]] = {}
            for pos in sorted(picked):
                by_unit.setdefault(cands[pos].unit, []).append(cands[pos].text)
            lines = []
            for u in sorted(by_unit):
                label = units[u][0]
                body = " ".join(by_unit[u])
                lines.append(f"{label}: {body}" if label else body)
            out = "\n".join(lines)
            if count(out) <= self.max_tokens or not picked:
                return out
            picked.pop()  # the last pick had the lowest gain per token


class TruncatingSummarizer:
    """The first ``chars`` characters of the previous summary plus the new messages,
    with a marker when cut. Cheap and predictable; a baseline more than a summary."""

    name = "truncating"

    def __init__(self, chars: int = 200, *, marker: str = TRUNCATION_MARKER) -> None:
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise ConfigError(f"chars={chars!r}: must be a positive integer")
        if not isinstance(marker, str):
            raise ConfigError(f"marker={marker!r}: must be a string")
        self.chars = chars
        self.marker = marker

    def __repr__(self) -> str:
        return f"TruncatingSummarizer(chars={self.chars})"

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        text = transcript(messages)
        if previous is not None and previous.text:
            text = f"{previous.text}\n{text}" if text else previous.text
        if len(text) <= self.chars:
            return text
        return text[: self.chars].rstrip() + self.marker


# -- RunningSummary ------------------------------------------------------------------


@dataclass(slots=True)
class SummaryStats:
    """Work done by a RunningSummary (cumulative; failed attempts included)."""

    folds: int = 0
    """Folds that covered new messages."""
    summarizer_calls: int = 0
    """Every summarizer invocation: retries, fallbacks and merges included."""
    input_tokens: int = 0
    """Tokens passed to summarizers: the messages plus the previous summary, per call."""
    merges: int = 0
    truncations: int = 0
    retries: int = 0
    fallbacks: int = 0
    failures: int = 0
    """Folds and compressions aborted with SummarizerError (state left unchanged)."""
    compressions: int = 0
    """Successful ``compress`` calls (messages summarized on their own)."""
    skipped: int = 0
    """Messages passed to fold that were already covered (never re-summarized)."""
    background_replaced: int = 0
    background_discarded: int = 0
    background_failures: int = 0


@dataclass(frozen=True, slots=True)
class _Seg:
    summary: Summary
    seq: int


@dataclass(frozen=True, slots=True)
class _Call:
    adapter: SummarizerAdapter
    messages: list[Message]
    previous: Summary | None


@dataclass(frozen=True, slots=True)
class _Sleep:
    seconds: float


_Step: TypeAlias = _Call | _Sleep
_Gen: TypeAlias = Generator[_Step, Any, T]


class RunningSummary:
    """The incremental summary of one conversation.

    ``fold(evicted)`` summarizes only the messages it has not covered yet (by id) into
    a new segment; a covered message is never passed to a summarizer again. When the
    rendered summary exceeds ``reserve`` tokens (or there are more than
    ``max_segments`` segments), the two *oldest* segments are merged by calling the
    summarizer with ``previous`` = the oldest and the next one's text as the message;
    that is the only time summary text is re-summarized. Segments are summarized with
    ``previous=None`` on purpose: handing the whole summary to every fold would invite
    the summarizer to rewrite (and erode) it each time. With ``facts=True`` a
    ``FactLedger`` of key facts from the evicted messages is rendered verbatim in up to
    ``facts_share`` of the reserve; facts are never summarized.

    Failure never loses data: a failing summarizer is retried ``retries`` times with
    exponential ``backoff`` (``sleep`` is injectable); then ``fallback`` is used and the
    summary is marked ``degraded``; if the fallback fails too the fold raises
    ``SummarizerError`` and the RunningSummary is exactly as before (``stats`` still
    counts the attempts). ``afold`` is the async twin (same logic; only I/O differs)
    and with ``background=True`` it commits a fallback summary at once and replaces it
    when the real one arrives (``await wait()`` for pending work).

    Defaults: ``summarizer`` and ``fallback`` are ``ExtractiveSummarizer`` sized to
    ``1/max_segments`` of the segments' share of the reserve (the reserve minus the
    facts share and the header); ``fallback=False`` disables the fallback.

    Concurrency: sync folds are serialized by a lock, async folds by an asyncio lock;
    use one RunningSummary per conversation.
    """

    def __init__(
        self,
        summarizer: SummarizerLike | None = None,
        *,
        reserve: int = 1024,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        fallback: SummarizerLike | Literal[False] | None = None,
        retries: int = 2,
        backoff: float = 0.5,
        sleep: Callable[[float], object] | None = None,
        facts: bool = True,
        facts_share: float = 0.3,
        max_segments: int = 4,
        max_facts: int = 10_000,
        header: str = SUMMARY_HEADER,
    ) -> None:
        tok = get_tokenizer(tokenizer)
        if not isinstance(header, str):
            raise ConfigError(f"header={header!r}: must be a string")
        overhead = int(getattr(tok, "per_message", PER_MESSAGE_TOKENS))
        floor = tok.count(header) + overhead + 32
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < floor:
            raise ConfigError(f"reserve={reserve!r}: must be an integer of at least {floor}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"retries={retries!r}: must be a non-negative integer")
        if (
            isinstance(backoff, bool)
            or not isinstance(backoff, int | float)
            or not math.isfinite(backoff)
            or backoff < 0
        ):
            raise ConfigError(f"backoff={backoff!r}: must be a non-negative number of seconds")
        if not isinstance(facts, bool):
            raise ConfigError(f"facts={facts!r}: must be a bool")
        if (
            isinstance(facts_share, bool)
            or not isinstance(facts_share, int | float)
            or not 0 <= facts_share <= 0.8
        ):
            raise ConfigError(f"facts_share={facts_share!r}: must be a number from 0 to 0.8")
        if isinstance(max_segments, bool) or not isinstance(max_segments, int) or max_segments < 1:
            raise ConfigError(f"max_segments={max_segments!r}: must be a positive integer")
        if sleep is not None and not callable(sleep):
            raise ConfigError(f"sleep={sleep!r}: must be callable")
        self.reserve = reserve
        self.retries = retries
        self.backoff = float(backoff)
        self.facts = facts
        self.facts_share = float(facts_share)
        self.max_segments = max_segments
        self.header = header
        self._tok = tok
        self._overhead = overhead
        self._facts_budget = min(int(reserve * facts_share), reserve - floor + 28) if facts else 0
        seg_share = reserve - floor + 32 - self._facts_budget
        # Each fold adds one segment; sized so max_segments of them fill the share, which
        # keeps a merge (two segments in) cheap next to the messages folded.
        default_size = max(16, seg_share // max_segments)
        self._primary = as_summarizer(
            ExtractiveSummarizer(default_size, tok) if summarizer is None else summarizer
        )
        self._fallback: SummarizerAdapter | None
        if fallback is False:
            self._fallback = None
        elif fallback is None:
            self._fallback = as_summarizer(ExtractiveSummarizer(default_size, tok))
        else:
            self._fallback = as_summarizer(fallback)
        self._sleep = sleep
        self._ledger = FactLedger(tokenizer=tok, max_facts=max_facts)
        self._segments: tuple[_Seg, ...] = ()
        self._covered: dict[str, None] = {}
        self._version = 0
        self._seq = 0
        self._current: Summary | None = None
        self._message: Message | None = None
        self._stats = SummaryStats()
        self._tlock = threading.RLock()
        self._alock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.last_error: BaseException | None = None
        """The last error of a background summarization (it never raises elsewhere)."""

    # -- read side -------------------------------------------------------------------

    def current(self) -> Summary | None:
        """The current summary (segments joined, facts attached), or None if empty."""
        return self._current

    def message(self) -> Message | None:
        """The summary as a system message (facts ledger verbatim + segments), or None.

        The same state returns the same Message object, so it is cache-friendly.
        """
        return self._message

    @property
    def segments(self) -> tuple[Summary, ...]:
        """The segments, oldest first; each is a Summary of a contiguous part."""
        return tuple(s.summary for s in self._segments)

    @property
    def ledger(self) -> FactLedger:
        """The key-facts ledger (read it; do not modify it)."""
        return self._ledger

    @property
    def covered_ids(self) -> KeysView[str]:
        """Ids of every message folded in, in fold order (a live read-only view)."""
        return self._covered.keys()

    def covers(self, message_id: str) -> bool:
        """True if the message with this id is already summarized."""
        return message_id in self._covered

    @property
    def stats(self) -> SummaryStats:
        """A snapshot of the work counters."""
        return replace(self._stats)

    @property
    def summarizer(self) -> SummarizerAdapter:
        return self._primary

    @property
    def fallback(self) -> SummarizerAdapter | None:
        return self._fallback

    @property
    def pending(self) -> int:
        """Background summarizations not finished yet."""
        return len(self._pending)

    def __repr__(self) -> str:
        tokens = self._current.tokens if self._current else 0
        return (
            f"<RunningSummary {len(self._covered)} messages, {len(self._segments)} segments, "
            f"{tokens}/{self.reserve} tokens>"
        )

    # -- measuring -------------------------------------------------------------------

    def _facts_block(self, ledger: FactLedger) -> str:
        return ledger.render(self._facts_budget) if self.facts else ""

    def _measure_text(self, text: str, facts_block: str) -> int:
        return self._tok.count(render_summary(self.header, facts_block, text)) + self._overhead

    def _measure_with(self, ledger: FactLedger, text: str) -> int:
        return self._measure_text(text, self._facts_block(ledger))

    @staticmethod
    def _join(segments: Iterable[_Seg]) -> str:
        return "\n\n".join(s.summary.text for s in segments if s.summary.text)

    def _measure(self, segments: tuple[_Seg, ...], ledger: FactLedger) -> int:
        return self._measure_text(self._join(segments), self._facts_block(ledger))

    def _make_seg(
        self,
        text: str,
        first_id: str | None,
        last_id: str | None,
        count: int,
        summarizer: str,
        degraded: bool,
    ) -> _Seg:
        self._seq += 1
        summary = Summary(
            text,
            first_id,
            last_id,
            count,
            summarizer,
            self._measure_text(text, ""),
            time.time(),
            degraded,
            header=self.header,
        )
        return _Seg(summary, self._seq)

    def _segment_message(self, seg: _Seg) -> Message:
        return Message(
            f"summary_segment_{seg.seq}",
            "system",
            self._tok.count(seg.summary.text) + self._overhead,
            content=seg.summary.text,
            metadata={SEGMENT_KEY: True},
        )

    # -- the shared logic (generators; drivers do the I/O) ---------------------------

    def _summarize_gen(
        self,
        messages: list[Message],
        previous: Summary | None,
        *,
        primary: bool = True,
        fallback: bool = True,
        primary_adapter: SummarizerAdapter | None = None,
    ) -> _Gen[tuple[str, bool, str]]:
        """Primary with retries and backoff, then the fallback; SummarizerError if all fail."""
        errors: list[BaseException] = []
        first = self._primary if primary_adapter is None else primary_adapter
        if primary:
            for attempt in range(self.retries + 1):
                if attempt:
                    self._stats.retries += 1
                    yield _Sleep(self.backoff * 2 ** (attempt - 1))
                try:
                    text = yield _Call(first, messages, previous)
                    return text, False, first.name
                except AsyncSummarizerError:
                    raise
                except Exception as exc:
                    errors.append(exc)
        if fallback and self._fallback is not None:
            try:
                text = yield _Call(self._fallback, messages, previous)
                self._stats.fallbacks += 1
                return text, True, self._fallback.name
            except AsyncSummarizerError:
                raise
            except Exception as exc:
                errors.append(exc)
        who = [first.name] if primary else []
        if fallback and self._fallback is not None:
            who.append(f"fallback {self._fallback.name}")
        last = errors[-1] if errors else None
        raise SummarizerError(
            f"summarization failed ({' and '.join(who) or 'no summarizer'}; "
            f"{len(errors)} attempts): {last!r}",
            errors=tuple(errors),
        )

    def _enforce_gen(
        self, segments: tuple[_Seg, ...], ledger: FactLedger, *, primary: bool
    ) -> _Gen[tuple[_Seg, ...]]:
        """Merge the oldest segments (then truncate) until the summary fits the reserve."""
        while len(segments) > self.max_segments or self._measure(segments, ledger) > self.reserve:
            if len(segments) >= 2:
                a, b = segments[0], segments[1]
                text, degraded, name = yield from self._summarize_gen(
                    [self._segment_message(b)], a.summary, primary=primary
                )
                self._stats.merges += 1
                merged = self._make_seg(
                    text,
                    a.summary.first_id,
                    b.summary.last_id,
                    a.summary.count + b.summary.count,
                    name,
                    degraded or a.summary.degraded or b.summary.degraded,
                )
                segments = (merged, *segments[2:])
            else:
                only = segments[0].summary
                text = clip_to_tokens(
                    only.text, self.reserve, functools.partial(self._measure_with, ledger)
                )
                self._stats.truncations += 1
                # Same coverage, same seq: a pending background replacement still applies.
                tokens = self._measure_text(text, "")
                return (_Seg(replace(only, text=text, tokens=tokens), segments[0].seq),)
        return segments

    def _new_messages(self, messages: list[Message]) -> list[Message]:
        seen: set[str] = set()
        out: list[Message] = []
        for m in messages:
            if m.id not in self._covered and m.id not in seen:
                seen.add(m.id)
                out.append(m)
        return out

    def _fold_gen(
        self, messages: list[Message], *, background: bool
    ) -> _Gen[tuple[Summary | None, _Seg | None, list[Message]]]:
        new = self._new_messages(messages)
        self._stats.skipped += len(messages) - len(new)
        if not new:
            return self._current, None, []
        text, degraded, name = yield from self._summarize_gen(new, None, primary=not background)
        seg = self._make_seg(text, new[0].id, new[-1].id, len(new), name, degraded)
        found = extract_from_messages(new) if self.facts else []
        while True:
            version = self._version
            if any(m.id in self._covered for m in new):
                # A concurrent fold covered some of these meanwhile: fold the rest.
                return (yield from self._fold_gen(new, background=background))
            ledger = self._ledger.copy()
            ledger.add(found)
            segments = yield from self._enforce_gen(
                (*self._segments, seg), ledger, primary=not background
            )
            with self._tlock:
                if self._version == version:
                    self._commit(segments, ledger, new)
                    return self._current, seg, new
            # The state changed during a merge: redo the merge on the fresh state.

    def _replace_gen(self, seq: int, new: list[Message]) -> _Gen[None]:
        """Background: summarize with the primary and replace the fallback segment."""
        text, _, name = yield from self._summarize_gen(new, None, fallback=False)
        while True:
            version = self._version
            idx = next((i for i, s in enumerate(self._segments) if s.seq == seq), None)
            if idx is None:
                self._stats.background_discarded += 1  # merged or cleared meanwhile
                return
            old = self._segments[idx].summary
            seg = self._make_seg(text, old.first_id, old.last_id, old.count, name, False)
            segments = (*self._segments[:idx], seg, *self._segments[idx + 1 :])
            segments = yield from self._enforce_gen(segments, self._ledger, primary=True)
            with self._tlock:
                if self._version == version:
                    self._commit(segments, self._ledger, [])
                    self._stats.background_replaced += 1
                    return

    def _commit(self, segments: tuple[_Seg, ...], ledger: FactLedger, new: list[Message]) -> None:
        self._segments = segments
        self._ledger = ledger
        covered = self._covered
        for m in new:
            covered[m.id] = None
        self._version += 1
        if new:
            self._stats.folds += 1
        self._rebuild()

    def _rebuild(self) -> None:
        segs = self._segments
        facts, omitted = self._ledger.select(self._facts_budget) if self.facts else ((), 0)
        if not segs and not facts and not omitted:
            self._current = None
            self._message = None
            return
        names: list[str] = []
        for s in segs:
            if s.summary.summarizer not in names:
                names.append(s.summary.summarizer)
        text = self._join(segs)
        summary = Summary(
            text,
            segs[0].summary.first_id if segs else None,
            segs[-1].summary.last_id if segs else None,
            sum(s.summary.count for s in segs),
            "+".join(names) or "facts",
            self._measure(segs, self._ledger),
            time.time(),
            any(s.summary.degraded for s in segs),
            facts,
            omitted,
            self.header,
        )
        self._current = summary
        self._message = summary.to_message()

    # -- drivers -----------------------------------------------------------------------

    def _count_call(self, step: _Call) -> None:
        self._stats.summarizer_calls += 1
        n = self._tok.count_messages(step.messages)
        if step.previous is not None:
            prev = step.previous
            n += prev.tokens if prev.tokens is not None else self._tok.count(prev.text)
        self._stats.input_tokens += n

    def _perform(self, step: _Sleep | _Call) -> Any:
        if isinstance(step, _Sleep):
            if step.seconds > 0:
                if self._sleep is None:
                    time.sleep(step.seconds)
                else:
                    r = self._sleep(step.seconds)
                    if inspect.iscoroutine(r):  # an async sleep given to a sync fold
                        r.close()
                        time.sleep(step.seconds)
            return None
        self._count_call(step)
        return step.adapter(step.messages, step.previous)

    async def _aperform(self, step: _Sleep | _Call) -> Any:
        if isinstance(step, _Sleep):
            if step.seconds > 0:
                if self._sleep is None:
                    await asyncio.sleep(step.seconds)
                else:
                    r = self._sleep(step.seconds)
                    if inspect.isawaitable(r):
                        await r
            return None
        self._count_call(step)
        return await step.adapter.acall(step.messages, step.previous)

    def _drive(self, gen: _Gen[T]) -> T:
        return drive(gen, self._perform)

    async def _adrive(self, gen: _Gen[T]) -> T:
        return await adrive(gen, self._aperform)

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._alock is None or self._alock[0] is not loop:
            self._alock = (loop, asyncio.Lock())
        return self._alock[1]

    # -- write side --------------------------------------------------------------------

    @staticmethod
    def _check(messages: Iterable[Message]) -> list[Message]:
        if isinstance(messages, Message | str | bytes) or not isinstance(messages, Iterable):
            raise InvalidMessage("messages", messages, "must be an iterable of Message")
        out = list(messages)
        for i, m in enumerate(out):
            if not isinstance(m, Message):
                raise InvalidMessage(f"messages[{i}]", m, "must be a Message")
        return out

    def fold(self, messages: Iterable[Message]) -> Summary | None:
        """Fold newly evicted messages in; already covered ones are skipped.

        Returns the current summary (None only if nothing was ever folded). Raises
        ``SummarizerError`` (state unchanged) if the summarizer and the fallback fail.
        """
        msgs = self._check(messages)
        with self._tlock:
            try:
                summary, _, _ = self._drive(self._fold_gen(msgs, background=False))
            except SummarizerError:
                self._stats.failures += 1
                raise
        return summary

    async def afold(
        self, messages: Iterable[Message], *, background: bool = False
    ) -> Summary | None:
        """Async twin of ``fold``.

        ``background=True`` summarizes with the fallback now (the summary is marked
        degraded) and starts a task that replaces that segment with the primary
        summarizer's when it arrives; ``await wait()`` awaits it. If the segment was
        merged in the meantime the late result is discarded (the merge already
        covers those messages).
        """
        msgs = self._check(messages)
        if background and self._fallback is None:
            raise ConfigError("background=True: needs a fallback summarizer (fallback=False)")
        async with self._lock():
            try:
                summary, seg, new = await self._adrive(self._fold_gen(msgs, background=background))
            except SummarizerError:
                self._stats.failures += 1
                raise
        if background and seg is not None:
            task = asyncio.get_running_loop().create_task(self._background(seg.seq, new))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
        return summary

    async def _background(self, seq: int, new: list[Message]) -> None:
        try:
            await self._adrive(self._replace_gen(seq, new))
        except Exception as exc:  # the degraded fallback summary stays in place
            self.last_error = exc
            self._stats.background_failures += 1

    async def wait(self) -> None:
        """Wait until every background summarization has finished."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def _compress_gen(
        self, messages: list[Message], summarizer: SummarizerAdapter | None
    ) -> _Gen[Summary]:
        text, degraded, name = yield from self._summarize_gen(
            messages, None, primary_adapter=summarizer
        )
        facts: dict[tuple[str, str], Fact] = {}
        if self.facts:
            for f in extract_from_messages(messages):
                facts.setdefault(f.key, f)
        summary = Summary(
            text,
            messages[0].id,
            messages[-1].id,
            len(messages),
            name,
            None,
            time.time(),
            degraded,
            tuple(facts.values()),
            header="",
        )
        self._stats.compressions += 1
        return replace(summary, tokens=self._tok.count(summary.content) + self._overhead)

    def _check_compress(
        self, messages: Iterable[Message], summarizer: SummarizerLike | None
    ) -> tuple[list[Message], SummarizerAdapter | None]:
        msgs = self._check(messages)
        if not msgs:
            raise InvalidMessage("messages", msgs, "must not be empty")
        return msgs, None if summarizer is None else as_summarizer(summarizer)

    def compress(
        self, messages: Iterable[Message], *, summarizer: SummarizerLike | None = None
    ) -> Summary:
        """Summarize messages on their own, outside the running summary.

        For messages that must shrink but stay in view (priority-1 compression). The
        result covers exactly ``messages``, has no header, and carries every key fact
        found in them (when ``facts`` is on); segments, coverage and the ledger are not
        touched. ``summarizer`` replaces the primary for this call; retries and the
        fallback apply as for a fold, and ``SummarizerError`` is raised if both fail.
        Counted in ``stats`` (calls, input tokens, ``compressions``).
        """
        msgs, adapter = self._check_compress(messages, summarizer)
        with self._tlock:
            try:
                return self._drive(self._compress_gen(msgs, adapter))
            except SummarizerError:
                self._stats.failures += 1
                raise

    async def acompress(
        self, messages: Iterable[Message], *, summarizer: SummarizerLike | None = None
    ) -> Summary:
        """Async twin of ``compress``."""
        msgs, adapter = self._check_compress(messages, summarizer)
        try:
            return await self._adrive(self._compress_gen(msgs, adapter))
        except SummarizerError:
            self._stats.failures += 1
            raise

    def set_text(self, text: str) -> Summary:
        """Replace the narrative with text from outside (``summarizer="external"``).

        Coverage and the facts ledger are kept, so folds go on after it. Raises
        ``ConfigError`` (state unchanged) if the text does not fit the reserve.
        """
        if not isinstance(text, str):
            raise InvalidMessage("text", text, "must be a string")
        with self._tlock:
            segs = self._segments
            seg = self._make_seg(
                text,
                segs[0].summary.first_id if segs else None,
                segs[-1].summary.last_id if segs else None,
                sum(s.summary.count for s in segs),
                "external",
                False,
            )
            tokens = self._measure((seg,), self._ledger)
            if tokens > self.reserve:
                preview = text if len(text) <= 40 else text[:37] + "..."
                raise ConfigError(
                    f"text={preview!r}: the summary would take {tokens} tokens, "
                    f"over reserve={self.reserve}"
                )
            self._commit((seg,), self._ledger, [])
            assert self._current is not None
            return self._current

    def clear(self) -> None:
        """Forget the summary, the facts and the coverage (stats are kept)."""
        with self._tlock:
            for task in list(self._pending):
                task.cancel()
            self._segments = ()
            self._ledger = FactLedger(tokenizer=self._tok, max_facts=self._ledger.max_facts)
            self._covered = {}
            self._version += 1
            self._current = None
            self._message = None


__all__ = [
    "SEGMENT_KEY",
    "SUMMARY_HEADER",
    "AsyncSummarizerError",
    "ExtractiveSummarizer",
    "RunningSummary",
    "Summarizer",
    "SummarizerAdapter",
    "SummarizerLike",
    "Summary",
    "SummaryStats",
    "TruncatingSummarizer",
    "as_summarizer",
    "asummarize",
    "clip_to_tokens",
    "message_label",
    "render_summary",
    "summarize",
    "transcript",
]
