"""Turn records: what was sent at each turn, kept in the log beside the reply.

Whoever sends a context to a model (the service's chat route, a client of the context
route, an application) calls ``record_turn(memory, usage=...)`` right after taking the
context and stores the result as the reply's ``metadata[TURN_KEY]``. A stateless service
keeps per-turn figures where every request writes anyway: the log. ``turn_rows`` reads
them back for the timeline: context tokens, the prompt-cache prefix (reported by the
provider, or estimated from the summary's stability) and the cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConfigError
from ..model import Message
from ..views.budget import REPLY_PRIMING_TOKENS

if TYPE_CHECKING:
    from .memory import ConversationMemory

__all__ = [
    "PRICE_KEYS",
    "TURN_KEY",
    "TurnRow",
    "check_price",
    "cost_of",
    "record_turn",
    "turn_rows",
    "with_usage",
]

TURN_KEY: Final = "convomem_turn"
"""The metadata key of a reply's turn record (``record_turn``)."""


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One recorded turn: what was sent with the reply ``message_id``.

    ``prefix_tokens`` is the part of the context identical to the previous turn's (what
    a provider's prompt cache can reuse): the whole previous context when no compaction
    happened in between, else only the leading system prompt. ``cached_tokens`` is what
    the provider reported as cache hits (None: not reported); ``cost`` in the price's
    currency (None: no price).
    """

    turn: int
    message_id: str
    context_tokens: int
    prefix_tokens: int
    cached_tokens: int | None
    completion_tokens: int | None
    cost: float | None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """Prompt, cached and completion tokens from an OpenAI or Anthropic usage object."""
    if usage is None:
        return {}
    if not isinstance(usage, Mapping):
        raise ConfigError(f"usage={usage!r}: must be a mapping (a provider's usage)")
    out: dict[str, int] = {}
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if _int(usage.get("prompt_tokens")) is not None:  # OpenAI Chat Completions
        out["prompt_tokens"] = usage["prompt_tokens"]
    elif _int(usage.get("input_tokens")) is not None:  # Anthropic: input excludes the cache
        read = _int(usage.get("cache_read_input_tokens")) or 0
        made = _int(usage.get("cache_creation_input_tokens")) or 0
        out["prompt_tokens"] = usage["input_tokens"] + read + made
        cached = read
    if cached is not None:
        out["cached_tokens"] = cached
    for key in ("completion_tokens", "output_tokens"):
        if _int(usage.get(key)) is not None:
            out["completion_tokens"] = usage[key]
            break
    return out


PRICE_KEYS: Final = ("input", "cached_input", "output")


def check_price(price: Mapping[str, float] | None) -> Mapping[str, float] | None:
    """``price`` as given when it is a mapping of ``PRICE_KEYS`` to non-negative numbers
    (per million tokens), else ``ConfigError`` naming the key."""
    if price is None:
        return None
    if not isinstance(price, Mapping):
        raise ConfigError(f"price={price!r}: must be a mapping of {list(PRICE_KEYS)}")
    for k, v in price.items():
        if k not in PRICE_KEYS:
            raise ConfigError(f"price[{k!r}]: unknown; use {list(PRICE_KEYS)}")
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
            raise ConfigError(f"price[{k!r}]={v!r}: must be a non-negative number")
    return price


def cost_of(prompt: int, cached: int, completion: int, price: Mapping[str, float]) -> float:
    """The cost of one request at ``price`` (per million tokens; cached input at the
    ``input`` price when ``cached_input`` is not given)."""
    cached = min(prompt, cached)
    base = price.get("input", 0.0)
    return (
        (prompt - cached) * base
        + cached * price.get("cached_input", base)
        + completion * price.get("output", 0.0)
    ) / 1_000_000


def record_turn(
    memory: ConversationMemory,
    *,
    usage: Mapping[str, Any] | None = None,
    price: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The record of the turn whose context was just taken from ``memory``.

    Store it as the reply's ``metadata[TURN_KEY]``: ``timeline`` plots it. ``usage`` is
    the provider's (OpenAI or Anthropic shape); its cache hits are kept when given.
    ``price`` (see ``cost_of``) adds the turn's ``cost``, from the usage when given,
    else from the context's tokens. Bad input raises ``ConfigError``. A caller that
    learns the usage only after the reply streamed (the service's chat route) takes
    ``record_turn(memory)`` with the context and adds ``with_usage(record, usage)``.
    """
    st = memory.stats()
    summary = memory.summary.message()
    record = {
        "context_tokens": st.context_tokens,
        "head_tokens": memory.view.head_tokens,
        "summary_id": None if summary is None else summary.id,
    }
    return with_usage(record, usage, price=price)


def with_usage(
    record: Mapping[str, Any],
    usage: Mapping[str, Any] | None,
    *,
    price: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """``record`` (from ``record_turn``) with the provider's ``usage`` and, given a
    ``price``, the turn's ``cost``."""
    got = _usage(usage)
    price = check_price(price)
    out: dict[str, Any] = {**record, **got}
    if price is not None:
        prompt = got.get("prompt_tokens", out["context_tokens"])
        out["cost"] = cost_of(
            prompt, got.get("cached_tokens", 0), got.get("completion_tokens", 0), price
        )
    return out


def turn_rows(log: list[Message], price: Mapping[str, float] | None = None) -> list[TurnRow]:
    """The turns recorded on ``log``'s messages, oldest first; ``price`` (per million
    tokens: ``input``, ``cached_input``, ``output``) prices those recorded without a
    cost (the estimated prefix counts as cached when no cache hit was reported). Prefix
    hits are estimated between consecutive records: the previous context when the
    summary did not change in between, else the leading system prompt."""
    price = check_price(price)
    rows: list[TurnRow] = []
    prev: Mapping[str, Any] | None = None
    for m in log:
        rec = m.metadata.get(TURN_KEY)
        if not isinstance(rec, Mapping) or _int(rec.get("context_tokens")) is None:
            continue
        tokens: int = rec["context_tokens"]
        head = _int(rec.get("head_tokens")) or 0
        if prev is not None and prev.get("summary_id") == rec.get("summary_id"):
            prefix = min(tokens, int(prev["context_tokens"]) - REPLY_PRIMING_TOKENS)
        else:  # the first turn, or a compaction changed the summary: the system prompt
            prefix = head if prev is not None else 0
        cached = _int(rec.get("cached_tokens"))
        done = _int(rec.get("completion_tokens"))
        given = rec.get("cost")
        cost = (
            float(given) if isinstance(given, int | float) and not isinstance(given, bool) else None
        )
        if cost is None and price is not None:
            prompt = _int(rec.get("prompt_tokens")) or tokens
            cost = cost_of(prompt, prefix if cached is None else cached, done or 0, price)
        rows.append(TurnRow(len(rows) + 1, m.id, tokens, max(0, prefix), cached, done, cost))
        prev = rec
    return rows
