"""The parts of ConversationMemory that are not its state machine.

Store requests (and the check of what a store returns), the running summary a memory
builds from its options, priority-1 compression into a stand-in message, and the
rendering of a view as provider dicts, cached per message between turns.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, TypeVar

from .. import _check
from ..errors import ConfigError
from ..formats.anthropic import to_anthropic
from ..formats.openai import to_openai
from ..model import COMPRESSED_KEY, Message, ToolResultBlock
from ..stores import check_items
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
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer
from ._tiers import TierOp
from .view import STAND_IN, CompressOp, FoldOp, opens_turn

T = TypeVar("T")

SUMMARY_SEGMENTS: Final = 8
"""Segments of the running summary a ConversationMemory builds (``max_segments``)."""

Format: TypeAlias = Literal["openai", "anthropic", "messages"]
_FORMAT_META: Final = ("openai", "anthropic", "langchain")


@dataclass(frozen=True, slots=True)
class StoreOp:
    """A call of a store method (the four ``Store`` ones, or a ``SessionStore``'s)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def checked(self, result: Any) -> Any:
        """What the store returned, validated where it matters (``get_items``)."""
        if self.method == "get_items":
            return check_items(result)
        return result


@dataclass(frozen=True, slots=True)
class PauseOp:
    """A pause before retrying an append that lost a race: writers that keep colliding
    on one session spread out instead of all re-reading and colliding again."""

    seconds: float


Gen: TypeAlias = Generator[StoreOp | FoldOp | CompressOp | PauseOp | TierOp, Any, T]


def check_store(store: object) -> bool:
    """Whether ``store`` is async; ConfigError unless it has the four Store methods."""
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


def running_summary(
    summarizer: SummarizerLike | RunningSummary | None,
    *,
    fallback: Any,
    facts: bool,
    summary_tokens: int | None,
    summary: bool,
    limit: int,
    budget: int,
    tokenizer: Tokenizer,
) -> RunningSummary:
    """The RunningSummary a memory uses, built from its options (or the one given)."""
    if isinstance(summarizer, RunningSummary):
        if fallback is not None or facts is not True or summary_tokens is not None:
            raise ConfigError(
                "summarizer=<RunningSummary>: configure fallback, facts and "
                "summary_tokens on the RunningSummary itself, not here"
            )
        if summary and summarizer.reserve > limit // 2:
            raise ConfigError(
                f"summarizer=<RunningSummary reserve={summarizer.reserve}>: the summary may "
                f"take at most half of the budget ({limit // 2} tokens)"
            )
        return summarizer
    overhead = int(getattr(tokenizer, "per_message", PER_MESSAGE_TOKENS))
    floor = tokenizer.count(SUMMARY_HEADER) + overhead + 32
    if summary_tokens is None:
        reserve = max(floor, limit // 5)
    else:
        reserve = _check.integer("summary_tokens", summary_tokens, minimum=floor)
    if summary and reserve > limit // 2:
        what = "summary_tokens" if summary_tokens is not None else "max_tokens"
        value = summary_tokens if summary_tokens is not None else budget
        raise ConfigError(
            f"{what}={value!r}: the summary ({reserve} tokens) may take at most half "
            f"of the budget ({limit // 2} tokens); raise the budget, lower "
            "summary_tokens, or use summary=False"
        )
    # Eight segments: each fold adds a segment of 1/8 of the narrative's share, so the
    # merge that follows a fold once the summary is full re-reads little.
    return RunningSummary(
        summarizer,
        reserve=reserve,
        tokenizer=tokenizer,
        fallback=fallback,
        facts=facts,
        max_segments=SUMMARY_SEGMENTS,
    )


class _HalfExtractive:
    """The default compressor: extractive, to about half of the message's own text."""

    name = "extractive"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok = tokenizer

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        size = sum(self._tok.count(m.text()) for m in messages) // 2
        return ExtractiveSummarizer(max(8, size), self._tok)(messages, previous)


def half_extractive(tokenizer: Tokenizer) -> SummarizerLike:
    """A compressor that summarizes a message to about half its size, extractively."""
    return _HalfExtractive(tokenizer)


def compressed_message(m: Message, s: Summary, tokenizer: Tokenizer) -> Message:
    """The stand-in for a compressed priority-1 message: same id, role and result ids.

    It carries the message's key facts verbatim and is marked with ``COMPRESSED_KEY``
    (the log keeps the original). A message the compressor could not shorten (or that
    calls tools, whose calls must stay intact) stays as it is, marked, and evictable.
    """
    tokens = tokenizer.count_message(m)
    info: dict[str, Any] = {"tokens": tokens, "summarizer": s.summarizer, "degraded": s.degraded}
    if not getattr(s, "kept_original", False) and not m.has_tool_use():
        label = message_label(m) + ": "
        text = "\n".join(
            line[len(label) :] if line.startswith(label) else line
            for line in s.text.strip().splitlines()
        )
        body = render_summary("", render_facts(s.facts), text)
        if body.strip():
            meta = {k: v for k, v in m.metadata.items() if k not in _FORMAT_META}
            results = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
            content: str | list[ToolResultBlock] = body
            if results:
                content = [ToolResultBlock(results[0].tool_use_id, body, results[0].is_error)]
                content += [ToolResultBlock(b.tool_use_id, "-", b.is_error) for b in results[1:]]
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
            if tokenizer.count_message(cm) < tokens:
                return cm
    return m.replace(
        tokens=m.tokens, metadata={**m.metadata, COMPRESSED_KEY: {**info, "kept": True}}, priority=0
    )


def render_context(
    messages: list[Message],
    format: str,
    cache: dict[int, tuple[Message, list[dict[str, Any]]]],
    *,
    stand_in: bool = False,
) -> Any:
    """The view in ``format``. OpenAI dicts are converted once per message and cached
    (the view changes by a few messages a turn); each call returns fresh dicts."""
    if format == "messages":
        return list(messages)
    if format == "anthropic":
        if stand_in:
            at = next(i for i, m in enumerate(messages) if m.role != "system")
            messages = [*messages[:at], STAND_IN, *messages[at:]]
        system, out = to_anthropic(_from_first_turn(messages))
        return {"messages": out} if system is None else {"system": system, "messages": out}
    result: list[dict[str, Any]] = []
    for m in messages:
        hit = cache.get(id(m))
        if hit is None or hit[0] is not m:
            hit = cache[id(m)] = (m, to_openai([m]))
        result.extend(hit[1])
    if len(cache) > 2 * len(messages) + 64:
        live = {id(m) for m in messages}
        for key in [k for k in cache if k not in live]:
            del cache[key]
    return [_copy(d) for d in result]


def _from_first_turn(messages: list[Message]) -> list[Message]:
    """``messages`` arranged to start (after system messages) with a user turn, as an
    Anthropic request must. A view cut between turns may start with the tail of the
    previous turn: when that tail is plain and unpinned it is left out of this request
    (it stays in the log, and in the summary once evicted); otherwise the view already
    gets a stand-in user turn (``view.STAND_IN``, budgeted by the view)."""
    lead = [m for m in messages if m.role != "system"]
    first = next((i for i, m in enumerate(lead) if opens_turn(m)), None)
    if not first:
        return messages
    skipped = set(map(id, lead[:first]))
    return [m for m in messages if id(m) not in skipped]


def _copy(value: Any) -> Any:
    """A copy of plain JSON data (strings and numbers are immutable, so shared)."""
    if type(value) is dict:
        return {k: _copy(v) if type(v) is dict or type(v) is list else v for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) if type(v) is dict or type(v) is list else v for v in value]
    return value
