"""ConversationMemory: one session's log, its view under a token budget, and its summary.

Messages go in with ``add``; ``context()`` returns what to send, under ``max_tokens``:

    [pinned system prompt] [running summary] [kept history, oldest first]

The *log* (every message, in a ``Store``) is never touched by eviction: compaction only
changes the *view*. It runs when the unpinned history passes ``trigger`` (80%) of its
share of the budget, or ``max_turns`` turns, and cuts to ``target`` (50%), keeping the
newest chunks (``chunks.ChunkBuilder``: a tool call and its results leave together) and
preferring a cut at the start of a turn. Between compactions messages are only appended,
so the context's prefix is identical turn to turn and a provider's prompt cache keeps
matching it. Evicted messages are folded into a ``RunningSummary`` once.

Priorities: 2 is never evicted (a pin); 1 is compressed on its own (summarized alone,
keeping its key facts) the first time eviction reaches it, and evicted like 0 the next
time; 0 is evicted oldest first. A ``scorer`` may assign priorities.

Failure never loses data. The store is written first and the view changes only after
the store accepted a message. A summarizer is retried, then its fallback is used (the
summary is ``degraded``); when both fail the compaction is aborted, the view stays as it
was, and it is retried on the next ``add``. Until then ``context()`` still respects
``max_tokens``: it leaves out the oldest unsummarized messages of that turn's context
without evicting them (``stats().omitted`` counts them).

Sync and async twins (``add``/``aadd``, ``context``/``acontext``, ...) share one
implementation: generators that yield their I/O (store calls, summarizer calls), run by
a sync or an async driver.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeVar, overload

from .._io import adrive, drive
from ..errors import ConfigError, InvalidMessage, SummarizerError, TokenizerError
from ..formats.anthropic import to_anthropic
from ..formats.openai import to_openai
from ..model import Chunk, ChunkBuilder, Message, PinSpec, ToolResultBlock, check_pins
from ..stores import AsyncStore, InMemoryStore, Store, check_items
from ..summaries import (
    SUMMARY_HEADER,
    ExtractiveSummarizer,
    RunningSummary,
    SummarizerLike,
    Summary,
    message_label,
    render_summary,
)
from ..summaries.facts import render_facts
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS

__all__ = ["COMPRESSED_KEY", "ConversationMemory", "MemoryStats"]

T = TypeVar("T")

COMPRESSED_KEY: Final = "convomem_compressed"
"""Metadata key of a priority-1 message compressed in the view: ``{"tokens": original
tokens, "summarizer": name, "degraded": bool, "kept": True when compressing did not
make it smaller}``. The log keeps the original."""

SUMMARY_SEGMENTS: Final = 8
"""Segments of the running summary a ConversationMemory builds (``max_segments``)."""

Format: TypeAlias = Literal["openai", "anthropic", "messages"]
_FORMATS: Final = ("openai", "anthropic", "messages")
_FIELDS: Final = frozenset({"id", "tokens", "name", "metadata", "created_at", "priority"})
_FORMAT_META: Final = ("openai", "anthropic", "langchain")
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """A snapshot of a ConversationMemory (counters are cumulative across ``clear``)."""

    context_tokens: int
    """What ``context()`` costs now: per-message overhead and reply priming included."""
    context_messages: int
    """Messages in ``context()`` now (the summary included)."""
    log_messages: int
    """Messages in the log (the store)."""
    view_messages: int
    """Messages kept in the view (not evicted), pinned ones included."""
    summarized_messages: int
    """Messages the running summary stands for."""
    compactions: int
    compaction_failures: int
    """Compactions aborted because the summarizer and its fallback failed."""
    compressions: int
    """Priority-1 messages compressed in the view."""
    summarizer_calls: int
    """Every summarizer call (retries, fallbacks, merges and compressions included)."""
    summarizer_input_tokens: int
    summary_tokens: int
    degraded: bool
    """The summary was (partly) made by the fallback summarizer."""
    compaction_pending: bool
    """A failed compaction waits to be retried on the next ``add``."""
    omitted: int
    """Messages left out of ``context()`` (not evicted) while a compaction is pending."""
    prefix_kept: bool | None
    """Whether the last ``context()`` started with the one before (None: no previous)."""
    prefix_breaks: int
    """``context()`` calls that did not start with the previous context."""
    fits: bool
    """False when pinned messages alone exceed the budget (they are sent anyway)."""


@dataclass(frozen=True, slots=True)
class _StoreOp:
    method: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class _FoldOp:
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class _CompressOp:
    messages: list[Message]
    summarizer: SummarizerLike | None


_Op: TypeAlias = _StoreOp | _FoldOp | _CompressOp
_Gen: TypeAlias = Generator[_Op, Any, T]


@dataclass(frozen=True, slots=True)
class _View:
    messages: list[Message]
    tokens: int
    omitted: int
    fits: bool


class _HalfExtractive:
    """The default compressor: extractive, to about half of the message's own text."""

    name = "extractive"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok = tokenizer

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        size = sum(self._tok.count(m.text()) for m in messages) // 2
        return ExtractiveSummarizer(max(8, size), self._tok)(messages, previous)


def _users(chunk: Chunk) -> int:
    """Turns a chunk counts for: its user messages, compressed ones excepted."""
    return _turns_in(chunk.messages)


def _turns_in(messages: Iterable[Message]) -> int:
    return sum(1 for m in messages if m.role == "user" and COMPRESSED_KEY not in m.metadata)


def _has_tool_blocks(m: Message) -> bool:
    return not isinstance(m.content, str) and (m.has_tool_use() or m.has_tool_result())


def _starts_with(seq: list[Message], prefix: list[Message]) -> bool:
    if len(prefix) > len(seq):
        return False
    return all(a is b or a == b for a, b in zip(prefix, seq, strict=False))


def _fraction(name: str, value: object, *, low_open: bool) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (0 < v <= 1) if low_open else (0 <= v <= 1)
    if not ok:
        interval = "in (0, 1]" if low_open else "in [0, 1]"
        raise ConfigError(f"{name}={value!r}: must be a number {interval}")
    return float(value)  # type: ignore[arg-type]


class ConversationMemory:
    """The memory of one conversation: a complete log and a context under budget.

    ``max_tokens`` bounds what ``context()`` costs (per-message overhead and reply
    priming included), less ``response_reserve`` tokens kept for the reply. The budget
    is shared by the pinned messages, the summary (``summary_tokens``, default a fifth
    of the budget) and the unpinned history; compaction works on the history's share.

    Options (keyword-only):

    - ``tokenizer``: a spec or tokenizer (``"approx"``, ``"tiktoken:cl100k_base"``...).
    - ``store``: a ``Store`` or ``AsyncStore`` holding the log (default ``InMemoryStore``).
      Messages already in it are replayed into the view on first use. With an
      ``AsyncStore`` use the async methods (sync ones raise ``ConfigError`` when they
      need the store). A sync store is called directly from the async methods.
    - ``summarizer``: a summarizer callable (sync or async; default
      ``ExtractiveSummarizer``), or a configured ``RunningSummary`` (then ``fallback``,
      ``facts`` and ``summary_tokens`` come from it and must not be given).
      ``fallback``: used when the summarizer fails (default extractive; False: none).
    - ``summary``: fold evicted messages into the running summary (default True). With
      False evicted messages just leave the view (they stay in the log).
    - ``pin``: pin specs as in ``chunks.resolve_pins`` (default ``("system",)``);
      priority-2 messages are always pinned. ``"last_user"`` and negative indices
      protect the newest messages from eviction without reserving budget for them.
    - ``trigger`` / ``target``: compaction hysteresis, as fractions of the history share.
    - ``max_turns``: also compact when the view holds more turns than this (a turn starts
      at an unpinned user message); it then keeps ``max(1, int(max_turns * target))``.
      A compressed priority-1 message stands for its turn as a summary would, and does
      not count as a turn (else the turn limit would evict it before it was compressed).
    - ``facts``: keep the key-facts ledger verbatim in the summary (default True).
    - ``scorer``: ``message -> 0 | 1 | 2`` assigning each new message's priority (the
      log stores the scored message).
    - ``background``: in the async methods, commit a fallback summary at once and
      replace it when the summarizer's arrives (``await wait()`` awaits it). Priority-1
      compressions still wait for the summarizer.

    Priority-1 compression uses the summarizer on the message alone (an extractive
    primary summarizes it to about half its size); the compressed message keeps its id,
    role and tool-result ids, carries its facts verbatim and is marked with
    ``COMPRESSED_KEY``. Assistant messages that call tools are not rewritten (their
    calls must stay intact): they just become evictable.

    Not safe for concurrent use from several threads and event loops at once: sync calls
    are serialized by a lock and async calls by an asyncio lock, separately.
    """

    def __init__(
        self,
        max_tokens: int = 4000,
        *,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        store: Store | AsyncStore | None = None,
        summarizer: SummarizerLike | RunningSummary | None = None,
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
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ConfigError(f"max_tokens={max_tokens!r}: must be a positive integer")
        if (
            isinstance(response_reserve, bool)
            or not isinstance(response_reserve, int)
            or response_reserve < 0
        ):
            raise ConfigError(
                f"response_reserve={response_reserve!r}: must be a non-negative integer"
            )
        limit = max_tokens - response_reserve - REPLY_PRIMING_TOKENS
        if limit <= 0:
            raise ConfigError(
                f"response_reserve={response_reserve!r}: leaves no room under "
                f"max_tokens={max_tokens} (reply priming takes {REPLY_PRIMING_TOKENS})"
            )
        self._trigger = _fraction("trigger", trigger, low_open=True)
        self._target = _fraction("target", target, low_open=False)
        if self._target > self._trigger:
            raise ConfigError(f"target={target!r}: must not exceed trigger={trigger!r}")
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns <= 0
        ):
            raise ConfigError(f"max_turns={max_turns!r}: must be None or a positive integer")
        for name, flag in (("summary", summary), ("facts", facts), ("background", background)):
            if not isinstance(flag, bool):
                raise ConfigError(f"{name}={flag!r}: must be True or False")
        if scorer is not None and not callable(scorer):
            raise ConfigError(f"scorer={scorer!r}: must be callable (message -> 0, 1 or 2)")
        specs = tuple(dict.fromkeys(check_pins(pin)))
        tok = get_tokenizer(tokenizer)
        self._store: Store | AsyncStore = InMemoryStore() if store is None else store
        self._store_async = self._check_store(self._store)

        if isinstance(summarizer, RunningSummary):
            if fallback is not None or facts is not True or summary_tokens is not None:
                raise ConfigError(
                    "summarizer=<RunningSummary>: configure fallback, facts and "
                    "summary_tokens on the RunningSummary itself, not here"
                )
            rs = summarizer
            if summary and rs.reserve > limit // 2:
                raise ConfigError(
                    f"summarizer=<RunningSummary reserve={rs.reserve}>: the summary may take "
                    f"at most half of the budget ({limit // 2} tokens)"
                )
        else:
            overhead = int(getattr(tok, "per_message", PER_MESSAGE_TOKENS))
            floor = tok.count(SUMMARY_HEADER) + overhead + 32
            if summary_tokens is None:
                reserve = max(floor, limit // 5)
            elif (
                isinstance(summary_tokens, bool)
                or not isinstance(summary_tokens, int)
                or summary_tokens < floor
            ):
                raise ConfigError(
                    f"summary_tokens={summary_tokens!r}: must be an integer of at least {floor}"
                )
            else:
                reserve = summary_tokens
            if summary and reserve > limit // 2:
                what = "summary_tokens" if summary_tokens is not None else "max_tokens"
                value = summary_tokens if summary_tokens is not None else max_tokens
                raise ConfigError(
                    f"{what}={value!r}: the summary ({reserve} tokens) may take at most half "
                    f"of the budget ({limit // 2} tokens); raise max_tokens, lower "
                    "summary_tokens, or use summary=False"
                )
            # Eight segments: each fold adds a segment of 1/8 of the narrative's share, so
            # the merge that follows a fold once the summary is full re-reads little
            # (summarizer input stays near 1.1x the conversation; with 4 it is ~1.2x).
            rs = RunningSummary(
                summarizer,
                reserve=reserve,
                tokenizer=tok,
                fallback=fallback,
                facts=facts,
                max_segments=SUMMARY_SEGMENTS,
            )
        if background and rs.fallback is None:
            raise ConfigError("background=True: needs a fallback summarizer (fallback=False)")
        primary = rs.summarizer.fn
        self._compressor: SummarizerLike | None = (
            _HalfExtractive(tok) if isinstance(primary, ExtractiveSummarizer) else None
        )

        self.max_tokens = max_tokens
        self.response_reserve = response_reserve
        self.max_turns = max_turns
        self._limit = limit
        self._tok = tok
        self._rs = rs
        self._summary_on = summary
        self._scorer = scorer
        self._background = background
        self._goal_turns = None if max_turns is None else max(1, int(max_turns * self._target))
        self._pin_system = "system" in specs
        self._pin_first_user = "first_user" in specs
        self._pin_tool_results = "tool_results" in specs
        self._pin_last_user = "last_user" in specs
        self._pin_indices = frozenset(s for s in specs if isinstance(s, int) and s >= 0)
        self._pin_neg = tuple(sorted(-s for s in specs if isinstance(s, int) and s < 0))
        self._tlock = threading.RLock()
        self._alock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        # cumulative counters
        self._compactions = 0
        self._failures = 0
        self._compressions = 0
        self._prefix_breaks = 0
        self.last_error: BaseException | None = None
        """The last error of a compaction (the summarizer's), kept for inspection."""
        self._loaded = False
        self._reset_view()

    # -- construction helpers --------------------------------------------------------

    @staticmethod
    def _check_store(store: object) -> bool:
        names = ("get_items", "add_items", "pop_item", "clear_session")
        methods = [getattr(store, n, None) for n in names]
        if not all(callable(m) for m in methods):
            raise ConfigError(
                f"store={store!r}: must implement get_items, add_items, pop_item and "
                "clear_session (see convomem.stores)"
            )
        kinds = {inspect.iscoroutinefunction(m) for m in methods}
        if len(kinds) > 1:
            raise ConfigError(
                f"store={store!r}: mixes sync and async methods; implement Store or AsyncStore"
            )
        return kinds == {True}

    def _reset_view(self) -> None:
        self._head: list[Message] = []  # the leading pinned messages (the system prompt)
        self._head_tokens = 0
        self._head_open = True
        self._leading_system: list[Message] = []  # the log's leading system messages
        self._system_run = True
        self._builder = ChunkBuilder()  # the kept history, oldest first
        self._pinned_tokens = 0  # tokens of pinned chunks in the history
        self._free_tokens = 0  # tokens of unpinned chunks
        self._turns = 0  # user messages in unpinned chunks
        self._to_fold: list[tuple[int, Message]] = []  # orphan results awaiting a fold
        self._n = 0  # log position of the next message
        self._ids: set[str] = set()
        self._seen_user = False
        self._last_user = -1
        self._compressed: dict[str, Message] = {}  # staged compressions, by id
        self._pending_retry = False
        self._version = 0
        self._cache: tuple[int, Message | None, _View] | None = None
        self._prev: list[Message] | None = None
        self._prefix_kept: bool | None = None

    # -- read side -------------------------------------------------------------------

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

    def _share(self) -> float:
        """Tokens the unpinned history may take (may be negative when pins overflow)."""
        if self._summary_on:
            s = self._rs.reserve
        else:
            msg = self._rs.message()
            s = 0 if msg is None else self._tok.count_message(msg)
        return self._limit - self._head_tokens - self._pinned_tokens - s

    def _over(self) -> bool:
        if self._free_tokens > self._trigger * self._share():
            return True
        return self._goal_turns is not None and self._turns > (self.max_turns or 0)

    def _protected(self, chunk: Chunk) -> bool:
        if chunk.pinned:
            return True
        if self._pin_last_user and self._last_user in chunk.indices:
            return True
        return any(self._n - k in chunk.indices for k in self._pin_neg)

    def _view(self) -> _View:
        summary = self._rs.message()
        cache = self._cache
        if cache is not None and cache[0] == self._version and cache[1] is summary:
            return cache[2]
        limit = self._limit
        count = self._tok.count_message
        s_tok = 0 if summary is None else count(summary)
        body = [c for c in self._builder.chunks if not c.pending]
        total = self._head_tokens + s_tok + sum(c.tokens for c in body)
        skip: set[int] = set()
        omitted = 0
        if total > limit:
            for c in body:
                if total <= limit:
                    break
                if self._protected(c):
                    continue
                skip.add(id(c))
                total -= c.tokens
                omitted += len(c)
            if total > limit and summary is not None:
                total -= s_tok
                summary = None
        msgs = list(self._head)
        if summary is not None:
            msgs.append(summary)
        for c in body:
            if id(c) not in skip:
                msgs.extend(c.messages)
        view = _View(msgs, total + REPLY_PRIMING_TOKENS, omitted, total <= limit)
        self._cache = (self._version, self._rs.message(), view)
        return view

    def stats(self) -> MemoryStats:
        """Counters and the state of the view now."""
        with self._tlock:
            v = self._view()
            rs = self._rs
            st = rs.stats
            current = rs.current()
            return MemoryStats(
                context_tokens=v.tokens,
                context_messages=len(v.messages),
                log_messages=self._n,
                view_messages=len(self._head) + sum(len(c) for c in self._builder.chunks),
                summarized_messages=len(rs.covered_ids),
                compactions=self._compactions,
                compaction_failures=self._failures,
                compressions=self._compressions,
                summarizer_calls=st.summarizer_calls,
                summarizer_input_tokens=st.input_tokens,
                summary_tokens=0 if current is None else (current.tokens or 0),
                degraded=current is not None and current.degraded,
                compaction_pending=self._pending_retry,
                omitted=v.omitted,
                prefix_kept=self._prefix_kept,
                prefix_breaks=self._prefix_breaks,
                fits=v.fits,
            )

    def __repr__(self) -> str:
        return (
            f"<ConversationMemory max_tokens={self.max_tokens} log={self._n} "
            f"view={len(self._head) + sum(len(c) for c in self._builder.chunks)}>"
        )

    # -- the shared logic (generators; the drivers do the I/O) -------------------------

    def _prepare(self, message: object, where: str = "message") -> tuple[Message, int]:
        """Validate, score and count a new message; nothing is changed."""
        if not isinstance(message, Message):
            raise InvalidMessage(where, message, f"must be a Message, not {type(message).__name__}")
        if message.id in self._ids:
            raise InvalidMessage(f"{where}.id", message.id, "is already in the log")
        m = message
        if self._scorer is not None:
            p = self._scorer(m)
            if isinstance(p, bool) or p not in (0, 1, 2):
                raise ConfigError(
                    f"scorer={self._scorer!r}: returned {p!r} for message id={m.id!r}; "
                    "must return 0, 1 or 2"
                )
            if p != m.priority:
                m = m.replace(priority=p)
        t = self._tok.count_message(m)
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise TokenizerError(f"tokenizer {self._tok.name!r} counted {t!r} for id={m.id!r}")
        return m, t

    def _static_pin(self, m: Message, index: int) -> bool:
        if m.priority == 2 or index in self._pin_indices:
            return True
        if m.role == "system" and self._pin_system:
            return True
        if m.role == "user" and self._pin_first_user and not self._seen_user:
            return True
        return self._pin_tool_results and m.has_tool_result()

    def _account(self, chunk: Chunk, sign: int) -> None:
        if chunk.pinned:
            self._pinned_tokens += sign * chunk.tokens
        else:
            self._free_tokens += sign * chunk.tokens
            self._turns += sign * _users(chunk)

    def _apply(self, m: Message, t: int) -> None:
        """Put an accepted message into the view (cannot fail)."""
        index = self._n
        self._n = index + 1
        self._version += 1
        self._ids.add(m.id)
        static = self._static_pin(m, index)
        if m.role == "user":
            self._seen_user = True
            self._last_user = index
        if m.role != "system":
            self._system_run = False
        elif self._system_run:
            self._leading_system.append(m)
        if self._head_open and static and not _has_tool_blocks(m):
            self._head.append(m)
            self._head_tokens += t
            return
        self._head_open = False
        builder = self._builder
        target = builder.joins(m) if m.has_tool_result() else None
        if target is not None:
            for c in reversed(builder.chunks):
                self._account(c, -1)
                if c is target:
                    break
        chunk = builder.add(m, index, tokens=t, pinned=static)
        if chunk.orphan:  # its call is not in the view: it never enters it
            builder.chunks.pop()
            self._to_fold.append((index, m))
            return
        self._account(chunk, +1)

    def _load_gen(self) -> _Gen[None]:
        """Replay the store's messages into the view, once."""
        if self._loaded:
            return
        items = check_items((yield _StoreOp("get_items")))
        seen: set[str] = set()
        counts: list[int] = []
        for i, m in enumerate(items):
            if m.id in seen:
                raise InvalidMessage(f"store item [{i}].id", m.id, "appears twice in the log")
            seen.add(m.id)
            counts.append(self._tok.count_message(m))
        self._reset_view()
        self._loaded = True
        for m, t in zip(items, counts, strict=True):
            self._apply(m, t)
            if self._over():
                yield from self._compact_gen()

    def _add_gen(self, message: object) -> _Gen[Message]:
        yield from self._load_gen()
        m, t = self._prepare(message)
        yield _StoreOp("add_items", ([m],))
        self._apply(m, t)
        if self._over():
            yield from self._compact_gen()
        return m

    def _compressed_message(self, m: Message, s: Summary, tokens: int) -> Message:
        meta = {k: v for k, v in m.metadata.items() if k not in _FORMAT_META}
        info = {"tokens": tokens, "summarizer": s.summarizer, "degraded": s.degraded}
        label = message_label(m) + ": "
        text = "\n".join(
            line[len(label) :] if line.startswith(label) else line
            for line in s.text.strip().splitlines()
        )
        body = render_summary("", render_facts(s.facts), text)
        results = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
        content: str | list[ToolResultBlock] = body
        if results:
            content = [ToolResultBlock(results[0].tool_use_id, body, results[0].is_error)]
            content += [ToolResultBlock(b.tool_use_id, "", b.is_error) for b in results[1:]]
        cm = Message(
            m.id,
            m.role,
            None,
            content=content,
            name=m.name,
            metadata={**meta, COMPRESSED_KEY: info},
            created_at=m.created_at,
            priority=0,
        )
        if self._tok.count_message(cm) < tokens:
            return cm
        return self._kept_message(m, {**info, "kept": True})

    @staticmethod
    def _kept_message(m: Message, info: dict[str, Any]) -> Message:
        """``m`` unchanged but marked compressed (now evictable), its count kept."""
        return Message(
            m.id,
            m.role,
            m.tokens,
            content=m.content,
            name=m.name,
            metadata={**m.metadata, COMPRESSED_KEY: info},
            created_at=m.created_at,
            priority=0,
        )

    def _compress_gen(self, chunk: Chunk) -> _Gen[tuple[list[Message], int]]:
        """The chunk with its priority-1 messages compressed (staged, not applied)."""
        out: list[Message] = []
        count = self._tok.count_message
        for m in chunk.messages:
            if m.priority != 1:
                out.append(m)
                continue
            cm = self._compressed.get(m.id)
            if cm is None:
                tokens = count(m)
                if m.has_tool_use() or not m.text().strip():
                    info = {"tokens": tokens, "summarizer": None, "degraded": False, "kept": True}
                    cm = self._kept_message(m, info)
                else:
                    s = yield _CompressOp([m], self._compressor)
                    cm = self._compressed_message(m, s, tokens)
                self._compressed[m.id] = cm
            out.append(cm)
        return out, sum(count(x) for x in out)

    def _compact_gen(self) -> _Gen[None]:
        """Evict the oldest unprotected chunks down to the target; all or nothing."""
        share = self._share()
        goal = self._target * share
        goal_turns = self._goal_turns
        chunks = list(self._builder.chunks)
        free, turns = self._free_tokens, self._turns
        open_ = [j for j, c in enumerate(chunks) if not self._protected(c)]
        newest = open_[-1] if open_ else -1
        last_turn = max((j for j in open_ if chunks[j].messages[0].role == "user"), default=-1)
        victims: list[int] = []
        staged: list[tuple[Chunk, list[Message], int]] = []
        try:
            for j in open_:
                c = chunks[j]
                need = free > goal or (goal_turns is not None and turns > goal_turns)
                if not need and (j > last_turn or c.messages[0].role == "user"):
                    break  # at the target, and at the start of a turn (or past the last)
                if j == newest and c.tokens <= share:
                    break  # the newest chunk stays when it fits the share on its own
                if any(m.priority == 1 for m in c.messages):
                    msgs, tokens = yield from self._compress_gen(c)
                    staged.append((c, msgs, tokens))
                    free -= c.tokens - tokens
                    turns -= _users(c) - _turns_in(msgs)
                    continue
                victims.append(j)
                free -= c.tokens
                turns -= _users(c)
            evicted = [
                (i, m)
                for j in victims
                for i, m in zip(chunks[j].indices, chunks[j].messages, strict=True)
            ]
            evicted.extend(self._to_fold)
            evicted.sort(key=lambda im: im[0])
            if not evicted and not staged:
                self._pending_retry = False
                return
            if self._summary_on and evicted:
                yield _FoldOp([m for _, m in evicted])
        except SummarizerError as exc:
            self._failures += 1
            self._pending_retry = True
            self.last_error = exc
            return
        # Commit: nothing below can fail.
        for c, msgs, tokens in staged:
            self._free_tokens -= c.tokens - tokens
            self._turns -= _users(c) - _turns_in(msgs)
            c.messages[:] = msgs
            c.tokens = tokens
            for m in msgs:
                if self._compressed.pop(m.id, None) is not None:
                    self._compressions += 1
        if victims:
            dq = self._builder.chunks
            front = [dq.popleft() for _ in range(victims[-1] + 1)]
            gone = {id(chunks[j]) for j in victims}
            dq.extendleft(reversed([c for c in front if id(c) not in gone]))
            for j in victims:
                c = chunks[j]
                self._account(c, -1)
                if c.pending:
                    self._builder.discard(c)
        self._to_fold.clear()
        self._compactions += 1
        self._pending_retry = False
        self._version += 1

    def _context_gen(self, format: str) -> _Gen[Any]:
        if format not in _FORMATS:
            raise ConfigError(f"format={format!r}: must be one of {list(_FORMATS)}")
        yield from self._load_gen()
        v = self._view()
        prev = self._prev
        if prev is not None:
            kept = v.messages is prev or _starts_with(v.messages, prev)
            self._prefix_kept = kept
            if not kept:
                self._prefix_breaks += 1
        self._prev = v.messages
        msgs = list(v.messages)
        if format == "openai":
            return to_openai(msgs)
        if format == "anthropic":
            system, out = to_anthropic(msgs)
            return {"messages": out} if system is None else {"system": system, "messages": out}
        return msgs

    def _messages_gen(self, limit: int | None) -> _Gen[list[Message]]:
        items = yield _StoreOp("get_items", (limit,))
        return check_items(items)

    def _clear_gen(self, keep_system: bool) -> _Gen[None]:
        if not isinstance(keep_system, bool):
            raise ConfigError(f"keep_system={keep_system!r}: must be True or False")
        keep: list[Message] = []
        if keep_system:
            if self._loaded:
                keep = list(self._leading_system)
            else:
                for m in check_items((yield _StoreOp("get_items"))):
                    if m.role != "system":
                        break
                    keep.append(m)
        yield _StoreOp("clear_session")
        self._rs.clear()
        self._reset_view()
        self._loaded = True
        if keep:
            yield _StoreOp("add_items", (keep,))
            for m in keep:
                self._apply(m, self._tok.count_message(m))

    # -- drivers -----------------------------------------------------------------------

    def _perform(self, step: _StoreOp | _FoldOp | _CompressOp) -> Any:
        if isinstance(step, _StoreOp):
            if self._store_async:
                raise ConfigError(
                    f"store={self._store!r}: is an AsyncStore; use the async "
                    "methods (aadd, aadd_message, acontext, amessages, aclear)"
                )
            return getattr(self._store, step.method)(*step.args)
        if isinstance(step, _FoldOp):
            return self._rs.fold(step.messages)
        return self._rs.compress(step.messages, summarizer=step.summarizer)

    async def _aperform(self, step: _StoreOp | _FoldOp | _CompressOp) -> Any:
        if isinstance(step, _StoreOp):
            r = getattr(self._store, step.method)(*step.args)
            return (await r) if inspect.isawaitable(r) else r
        if isinstance(step, _FoldOp):
            return await self._rs.afold(step.messages, background=self._background)
        return await self._rs.acompress(step.messages, summarizer=step.summarizer)

    def _run(self, gen: _Gen[T]) -> T:
        with self._tlock:
            return drive(gen, self._perform, passthrough=(ConfigError,))

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._alock is None or self._alock[0] is not loop:
            self._alock = (loop, asyncio.Lock())
        return self._alock[1]

    async def _arun(self, gen: _Gen[T]) -> T:
        async with self._lock():
            return await adrive(gen, self._aperform)

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

    def set_summary(self, text: str) -> Summary:
        """Provide the summary's narrative from outside (kept facts and coverage stay).

        Raises ``ConfigError`` (nothing changed) when it does not fit the summary's share.
        """
        with self._tlock:
            s = self._rs.set_text(text)
            self._version += 1
            return s

    @overload
    def context(self, format: Literal["openai"] = "openai") -> list[dict[str, Any]]: ...
    @overload
    def context(self, format: Literal["anthropic"]) -> dict[str, Any]: ...
    @overload
    def context(self, format: Literal["messages"]) -> list[Message]: ...
    def context(
        self, format: Format = "openai"
    ) -> list[dict[str, Any]] | dict[str, Any] | list[Message]:
        """What to send now, under ``max_tokens``.

        ``"openai"``: Chat Completions dicts; ``"anthropic"``: ``{"system": ...,
        "messages": [...]}`` for ``client.messages.create(**ctx)`` (system prompt, then
        the summary, in ``system``); ``"messages"``: convomem ``Message`` objects. Makes
        no summarizer call. A tool call still awaiting its result is left out until the
        result arrives.
        """
        result: list[dict[str, Any]] | dict[str, Any] | list[Message] = self._run(
            self._context_gen(format)
        )
        return result

    def messages(self, limit: int | None = None) -> list[Message]:
        """The log from the store, oldest first (with ``limit``, the newest ``limit``)."""
        return self._run(self._messages_gen(limit))

    def clear(self, keep_system: bool = True) -> None:
        """Empty the log, the view and the summary; keep the leading system messages."""
        self._run(self._clear_gen(keep_system))

    # -- public API: async -------------------------------------------------------------

    async def aadd(self, role: str, content: Any, **fields: Any) -> Message:
        """Async twin of ``add``."""
        return await self.aadd_message(self._build(role, content, fields))

    async def aadd_message(self, message: Message) -> Message:
        """Async twin of ``add_message``."""
        return await self._arun(self._add_gen(message))

    @overload
    async def acontext(self, format: Literal["openai"] = "openai") -> list[dict[str, Any]]: ...
    @overload
    async def acontext(self, format: Literal["anthropic"]) -> dict[str, Any]: ...
    @overload
    async def acontext(self, format: Literal["messages"]) -> list[Message]: ...
    async def acontext(
        self, format: Format = "openai"
    ) -> list[dict[str, Any]] | dict[str, Any] | list[Message]:
        """Async twin of ``context``."""
        result: list[dict[str, Any]] | dict[str, Any] | list[Message] = await self._arun(
            self._context_gen(format)
        )
        return result

    async def amessages(self, limit: int | None = None) -> list[Message]:
        """Async twin of ``messages``."""
        return await self._arun(self._messages_gen(limit))

    async def aclear(self, keep_system: bool = True) -> None:
        """Async twin of ``clear``."""
        await self._arun(self._clear_gen(keep_system))

    async def wait(self) -> None:
        """Wait for background summarizations (``background=True``) to finish."""
        await self._rs.wait()
