"""Context budgets: a model's context window split into shares."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..errors import ConfigError
from ..model import Message
from ..tokens import Tokenizer, get_tokenizer

REPLY_PRIMING_TOKENS = 2
"""Tokens a provider adds to a request to prime the reply (counted once per list)."""


def _share(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name}={value!r}: must be a number between 0 and 1")
    if not 0 <= value <= 1:
        raise ConfigError(f"{name}={value!r}: must be between 0 and 1")
    return float(value)


class ContextBudget:
    """``max_context`` tokens split into system, history and response shares.

    The response share is a hard reserve for the reply; history gets its share, less
    whatever the system prompt takes beyond its own. Summarization is due when history
    reaches ``summarize_at`` (80%) of its share.

    ``facts`` and ``recall`` are the shares of a ``ConversationMemory``'s tiers (the
    user's long-term facts, recalled snippets), as fractions of what the memory may send
    (``ConversationMemory(shares=...)``); what they leave unused goes to the history.
    """

    def __init__(
        self,
        max_context: int,
        *,
        system: float = 0.15,
        history: float = 0.60,
        response: float = 0.25,
        summarize_at: float = 0.80,
        summary: float = 0.10,
        tokenizer: str | Tokenizer = "approx",
        facts: float = 0.10,
        recall: float = 0.15,
    ) -> None:
        if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context <= 0:
            raise ConfigError(f"max_context={max_context!r}: must be a positive integer")
        self.max_context = max_context
        self.system_share = _share("system", system)
        self.history_share = _share("history", history)
        self.response_share = _share("response", response)
        total = self.system_share + self.history_share + self.response_share
        if total > 1 + 1e-9:
            raise ConfigError(
                f"system={system!r} + history={history!r} + response={response!r} = "
                f"{total:g}: shares must sum to at most 1"
            )
        self.summarize_at = _share("summarize_at", summarize_at)
        self.summary_share = _share("summary", summary)
        self.tokenizer = get_tokenizer(tokenizer)
        self.facts_share = _share("facts", facts)
        self.recall_share = _share("recall", recall)
        if self.facts_share + self.recall_share > 0.5:
            raise ConfigError(
                f"facts={facts!r} + recall={recall!r}: the tiers may take at most half"
            )

    @property
    def system_tokens(self) -> int:
        """The system prompt's share, in tokens."""
        return int(self.max_context * self.system_share)

    @property
    def history_budget(self) -> int:
        """The history share, in tokens."""
        return int(self.max_context * self.history_share)

    @property
    def response_tokens(self) -> int:
        """Tokens reserved for the reply."""
        return int(self.max_context * self.response_share)

    @property
    def summary_tokens(self) -> int:
        """The room a running summary may take, out of the history share."""
        return int(self.history_budget * self.summary_share)

    def history_tokens(self, system_tokens: int = 0) -> int:
        """Tokens available for history once the system prompt takes ``system_tokens``."""
        if isinstance(system_tokens, bool) or not isinstance(system_tokens, int):
            raise ConfigError(f"system_tokens={system_tokens!r}: must be an integer")
        if system_tokens < 0:
            raise ConfigError(f"system_tokens={system_tokens!r}: must not be negative")
        left = self.max_context - self.response_tokens - system_tokens
        return max(0, min(self.history_budget, left))

    def summarize_threshold(self) -> int:
        """History tokens above which summarization is due."""
        return int(self.history_budget * self.summarize_at)

    def should_summarize(self, history_tokens: int) -> bool:
        """True when history has grown past ``summarize_at`` of its share."""
        if isinstance(history_tokens, bool) or not isinstance(history_tokens, int):
            raise ConfigError(f"history_tokens={history_tokens!r}: must be an integer")
        return history_tokens > self.summarize_threshold()

    def count(self, messages: Iterable[Message]) -> int:
        """Tokens a request with these messages costs: per-message overhead and priming."""
        return self.tokenizer.count_messages(messages) + REPLY_PRIMING_TOKENS

    def __repr__(self) -> str:
        return (
            f"ContextBudget({self.max_context}, system={self.system_share:g}, "
            f"history={self.history_share:g}, response={self.response_share:g})"
        )
