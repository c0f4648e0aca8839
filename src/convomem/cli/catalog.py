"""The strategies the command line knows, by name: one list for ``pack`` and ``simulate``.

``full`` sends everything; ``recency``, ``firstfit``, ``importance``, ``dedup`` and
``summary-evict`` are ``Packer`` strategies; ``memory`` is a ``ConversationMemory`` fed
the conversation one message at a time. ``pack`` packs once with any of them,
``simulate`` replays every turn with each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from ..errors import ConfigError
from ..model import COMPRESSED_KEY, Message, PinPolicy, PinSpec
from ..packing import Packer, PackResult
from ..summaries import SummarizerLike
from ..tokens import Tokenizer

STRATEGIES: Final[dict[str, str]] = {
    "full": "send the whole conversation every turn (no memory)",
    "recency": "the newest messages that fit (Recency)",
    "firstfit": "the oldest messages that fit (FirstFit)",
    "importance": "drop the least important messages first (Importance)",
    "dedup": "drop near-duplicates, then the newest that fit (SemanticDedup, hashing embedder)",
    "summary-evict": "the newest that fit plus one extractive summary of the rest (SummaryEvict)",
    "memory": "ConversationMemory: evicted turns folded into a running summary and facts",
}
"""Every strategy name, with what it does (``--help`` shows these)."""

STRATEGY_NAMES: Final = tuple(STRATEGIES)
PACKER_STRATEGIES: Final = ("recency", "firstfit", "importance", "dedup", "summary-evict")


def check_strategy(name: object) -> str:
    """``name`` if it is one of ``STRATEGY_NAMES``, else a ``ConfigError`` naming it."""
    if not isinstance(name, str) or name not in STRATEGIES:
        raise ConfigError(f"strategy={name!r}: must be one of {list(STRATEGY_NAMES)}")
    return name


def resolve_pins(specs: Sequence[PinSpec] | None) -> tuple[PinSpec, ...]:
    """The pin specs the command line passes on: given specs *add to* the system pin.

    ``None`` (no ``--pin``) pins the system prompt; ``"none"`` among the specs removes
    that default (``--pin none`` alone pins nothing). The result is complete, so every
    view receives exactly the same specs whatever its own default.
    """
    if specs is None:
        return PinPolicy().specs
    rest = [s for s in specs if s != "none"]
    default: tuple[PinSpec, ...] = () if len(rest) < len(specs) else ("system",)
    return PinPolicy(rest, default=default).specs if rest else default


def packer_strategy(name: str, *, summarizer: SummarizerLike | None = None) -> object:
    """The Packer strategy called ``name`` (one of ``PACKER_STRATEGIES``)."""
    from .. import strategies

    if name == "recency":
        return strategies.Recency()
    if name == "firstfit":
        return strategies.FirstFit()
    if name == "importance":
        return strategies.Importance()
    if name == "dedup":
        from ..recall import HashingEmbedder

        return strategies.SemanticDedup(HashingEmbedder())
    if name == "summary-evict":
        from ..summaries import ExtractiveSummarizer

        return strategies.SummaryEvict(
            summarizer if summarizer is not None else ExtractiveSummarizer(),
            placement="after_system",
        )
    raise ConfigError(f"strategy={name!r}: not a Packer strategy; use one of {PACKER_STRATEGIES}")


def make_packer(
    name: str,
    budget: int,
    tokenizer: Tokenizer,
    pin: tuple[PinSpec, ...],
    *,
    summarizer: SummarizerLike | None = None,
    start_on: Literal["user"] | None = None,
) -> Packer:
    """A Packer for the named strategy (reused across turns by ``simulate``).

    ``start_on="user"`` makes the kept messages start at a user turn after the system
    prompt, as the Anthropic Messages API requires.
    """
    strategy = packer_strategy(name, summarizer=summarizer)
    return Packer(budget=budget, tokenizer=tokenizer, strategy=strategy, pin=pin, start_on=start_on)


def pack(
    name: str,
    messages: list[Message],
    *,
    budget: int,
    tokenizer: Tokenizer,
    pin: tuple[PinSpec, ...],
    format: str = "openai",
) -> tuple[PackResult, Any]:
    """Pack ``messages`` once with the named strategy: ``(result, payload to send)``.

    The payload is OpenAI Chat dicts, or ``{"system": ..., "messages": [...]}`` for
    ``format="anthropic"`` (then the Packer strategies start the kept messages at a
    user turn, and ``memory`` uses the memory's own Anthropic context; ``full`` sends
    the conversation as it is).
    """
    check_strategy(name)
    if name == "full":
        result = PackResult.from_kept(
            messages,
            messages,
            budget=budget,
            tokenizer=tokenizer,
            kept_reason="full",
            strategy=name,
        )
        return result, _payload(result.kept, format)
    if name == "memory":
        return _pack_memory(messages, budget=budget, tokenizer=tokenizer, pin=pin, format=format)
    start_on: Literal["user"] | None = "user" if format == "anthropic" else None
    result = make_packer(name, budget, tokenizer, pin, start_on=start_on).pack(messages)
    return result, _payload(result.kept, format)


def _payload(kept: list[Message], format: str) -> Any:
    if format == "anthropic":
        from ..formats.anthropic import to_anthropic

        system, turns = to_anthropic(kept)
        return {"messages": turns} if system is None else {"system": system, "messages": turns}
    from ..formats.openai import to_openai

    return to_openai(kept)


def _pack_memory(
    messages: list[Message],
    *,
    budget: int,
    tokenizer: Tokenizer,
    pin: tuple[PinSpec, ...],
    format: str,
) -> tuple[PackResult, Any]:
    """What a ``ConversationMemory`` of ``budget`` tokens sends after the whole conversation.

    The result's reasons: ``pinned`` (pinned system messages), ``compressed`` (priority-1
    messages the memory shortened), ``recent``; dropped messages are ``summarized`` when
    the context carries a summary, else ``budget``.
    """
    from ..session import ConversationMemory

    memory = ConversationMemory(max_tokens=budget, tokenizer=tokenizer, pin=pin)
    index: dict[str, int] = {}
    for i, m in enumerate(messages):
        index[memory.add_message(m).id] = i
    context = memory.context(format="messages")
    kept_idx: list[int] = []
    reasons: list[str] = []
    summary: Message | None = None
    for m in context:
        at = index.get(m.id)
        if at is None:
            summary = m  # the one message of the context that stands for no input message
            continue
        kept_idx.append(at)
        if COMPRESSED_KEY in m.metadata:
            reasons.append("compressed")
        elif m.role == "system" and "system" in pin:
            reasons.append("pinned")
        else:
            reasons.append("recent")
    result = PackResult(
        messages=messages,
        kept=context,
        kept_indices=kept_idx,
        kept_reasons=reasons,
        token_count=tokenizer.count_messages(context),
        budget=budget,
        tokenizer=tokenizer,
        summary=summary,
        default_reason="summarized" if summary is not None else "budget",
        strategy="memory",
    )
    payload = memory.context(format="anthropic" if format == "anthropic" else "openai")
    return result, payload
