"""What a ConversationMemory builds from its options, checked: the store, the running
summary, the compressor, the tiers, and each batch of messages it is given."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import _check
from ..errors import ConfigError, InvalidMessage
from ..formats.openai import from_openai
from ..model import Message, PinPolicy, is_derived_id
from ..model.reduce import RESULT_SHARE
from ..model.reduce import result_limit as result_limit_of
from ..summaries import (
    SUMMARY_HEADER,
    ExtractiveSummarizer,
    RunningSummary,
    SummarizerLike,
    Summary,
)
from ..summaries.specs import extractor_from, summarizer_from
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS, ContextBudget
from .engine import SessionEngine
from .journal import DurableJournal, PlainJournal, is_session_store
from .tiers import FACTS_SHARE, RECALL_SHARE, Tiers
from .view import SessionView

SUMMARY_SEGMENTS: Final = 8
"""Segments of the running summary a ConversationMemory builds (``max_segments``)."""


def running_summary(
    summarizer: SummarizerLike | RunningSummary | None,
    owner: object,
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
        summarizer.claim(owner)
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


def make_tiers(
    store: object,
    owner: object,
    *,
    recall: Any,
    recall_k: int,
    extractor: Any,
    drift: Any,
    shares: Any,
    tokenizer: Tokenizer,
    limit: int,
    summary_reserve: int,
) -> Tiers | None:
    """The tiers of a memory from its options (None: none asked for); ``ConfigError``
    naming the option for a bad one."""
    k = _check.positive_int("recall_k", recall_k)
    if recall is not None and not callable(getattr(recall, "search", None)):
        raise ConfigError(
            f"recall={recall!r}: must be a RecallIndex, AsyncRecallIndex or GuardedRecall"
        )
    if extractor is not None and not callable(getattr(extractor, "extract", None)):
        raise ConfigError(f"extractor={extractor!r}: must have an extract(messages) method")
    if drift is not None and not callable(getattr(drift, "check", None)):
        raise ConfigError(f"drift={drift!r}: must be a DriftDetector")
    if drift is not None and callable(getattr(drift, "claim", None)):
        drift.claim(owner)
    if shares is not None and not isinstance(shares, ContextBudget):
        raise ConfigError(f"shares={shares!r}: must be a ContextBudget (facts=, recall= shares)")
    if recall is None and extractor is None and drift is None:
        return None
    scope = (
        getattr(store, "user_id", None),
        getattr(store, "tenant", None),
        str(getattr(store, "session_id", "default")),
    )
    t = Tiers(
        recall=recall,
        recall_k=k,
        extractor=extractor,
        drift=drift,
        facts_share=FACTS_SHARE if shares is None else float(shares.facts_share),
        recall_share=RECALL_SHARE if shares is None else float(shares.recall_share),
        tokenizer=tokenizer,
        limit=limit,
        scope=scope,
    )
    if limit - summary_reserve - t.profile.cap - t.recall_cap < limit // 5:
        raise ConfigError(
            f"shares={shares!r}: the summary ({summary_reserve}), facts ({t.profile.cap}) and "
            f"recall ({t.recall_cap}) shares leave less than a fifth of the {limit} tokens "
            "to the recent history; lower them or raise the budget"
        )
    return t


_FIELDS: Final = frozenset({"id", "tokens", "name", "metadata", "created_at", "priority"})


def built(role: object, content: object, fields: dict[str, Any]) -> Message:
    """The ``Message`` of ``add(role, content, **fields)``; ``InvalidMessage`` names an
    unknown field."""
    for key, value in fields.items():
        if key not in _FIELDS:
            raise InvalidMessage(key, value, f"unknown message field; use {sorted(_FIELDS)}")
    return Message(role=role, content=content, **fields)  # type: ignore[arg-type]


def shifted(field: str, by: int) -> str:
    """``field`` of a converted run (``messages[j]...``) named in the whole batch."""
    head = re.match(r"messages\[(\d+)\]", field)
    return field if head is None else f"messages[{int(head[1]) + by}]{field[head.end() :]}"


def checked_batch(batch: object, single: bool) -> tuple[list[Message], list[str]]:
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
                field = shifted(exc.field, first)
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


def build_engine(
    owner: object,
    store: Any,
    *,
    budget: int | None,
    max_tokens: int | None,
    tokenizer: Any,
    summarizer: Any,
    fallback: Any,
    summary: bool,
    pin: Any,
    trigger: float,
    target: float,
    max_turns: int | None,
    response_reserve: int,
    summary_tokens: int | None,
    facts: bool,
    scorer: Any,
    background: bool,
    recall: Any,
    recall_k: int,
    extractor: Any,
    drift: Any,
    shares: Any,
    cache_turns: int,
    result_limit: Any = RESULT_SHARE,
    keep_turn: Any = True,
) -> SessionEngine:
    """The session engine of ``ConversationMemory(...)``'s options (see its docstring),
    each checked (``ConfigError`` naming it); ``owner`` claims the stateful parts."""
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
    cache_turns = _check.non_negative_int("cache_turns", cache_turns)
    per_result = result_limit_of(result_limit, limit)
    _check.flag("keep_turn", keep_turn)
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
    rs = running_summary(
        summarizer,
        owner,
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
    tiers = make_tiers(
        store,
        owner,
        recall=recall,
        recall_k=recall_k,
        extractor=extractor,
        drift=drift,
        shares=shares,
        tokenizer=tok,
        limit=limit,
        summary_reserve=rs.reserve if summary else 0,
    )
    journal = DurableJournal(store) if is_session_store(store) else PlainJournal(store)
    return SessionEngine(
        journal=journal,
        view=SessionView(
            tok,
            pins,
            limit=limit,
            trigger=trigger,
            target=target,
            max_turns=max_turns,
            result_limit=per_result,
            keep_turn=keep_turn,
        ),
        summary=rs,
        summarize=summary,
        tokenizer=tok,
        scorer=scorer,
        compressor=(
            half_extractive(tok) if isinstance(rs.summarizer.fn, ExtractiveSummarizer) else None
        ),
        background=background,
        tiers=tiers,
        config={
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
            "cache_turns": cache_turns,
            "result_limit": per_result,
            "keep_turn": keep_turn,
        },
        cache_turns=cache_turns,
    )


def check_picklable(engine: SessionEngine) -> None:
    """A memory is pickled with its log, view and summary over an in-memory store; not
    over a durable session (the store keeps it) nor with tiers (an index, an embedder):
    ``ConfigError`` saying where to open it instead."""
    if engine.journal.durable:
        raise ConfigError(
            f"store={engine.journal.store!r}: a ConversationMemory over a durable session "
            "is not pickled; the store keeps it: open ConversationMemory(store="
            "db.session(session_id, ...)) where it is needed and it resumes exactly"
        )
    if engine.tiers is not None:
        raise ConfigError(
            "a ConversationMemory with recall=, extractor= or drift= is not pickled (an "
            "index, an embedder); open it over a durable session where it is needed"
        )
