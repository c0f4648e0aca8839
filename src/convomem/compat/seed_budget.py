"""TokenBudgetManager: the memory-patterns article's 15/60/25 split of a model's context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from numbers import Real
from typing import Any, Final

from .._check import integer
from ..errors import ConfigError, InvalidMessage, bounded_repr
from ..tokens import PER_MESSAGE_TOKENS, TiktokenTokenizer, Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS, ContextBudget
from ._models import model_tokenizer

__all__ = ["TokenBudgetManager"]


class TokenBudgetManager:
    """A model's context split into system (15%), history (60%) and response (25%) shares.

    The seed's interface, attribute for attribute: ``max_context``; ``system_budget``,
    ``history_budget`` and ``response_budget`` (each ``int(max_context * share)``);
    ``encoding`` (the tiktoken ``Encoding`` counting, or None when counting is not
    tiktoken's); ``count_tokens``, ``count_message_tokens``,
    ``get_available_history_tokens`` and ``should_summarize``. The arithmetic is
    ``views.ContextBudget``'s (``budget``).

    ``model`` picks the tokenizer as ``compat`` maps model names (its own tiktoken
    encoding when installed offline, else ``cl100k_base``, else ``approx``; see
    ``compat._models``); ``tokenizer=`` overrides it with any spec or tokenizer.
    """

    SYSTEM_RATIO: Final = 0.15
    HISTORY_RATIO: Final = 0.60
    RESPONSE_RATIO: Final = 0.25
    SUMMARIZE_AT: Final = 0.80

    def __init__(
        self,
        model: str = "gpt-4o",
        max_context: int = 128000,
        *,
        tokenizer: str | Tokenizer | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model={model!r}: must be a non-empty string")
        self.budget = ContextBudget(
            max_context,
            system=self.SYSTEM_RATIO,
            history=self.HISTORY_RATIO,
            response=self.RESPONSE_RATIO,
            summarize_at=self.SUMMARIZE_AT,
        )
        self.tokenizer = (
            get_tokenizer(tokenizer) if tokenizer is not None else model_tokenizer(model)
        )
        self.model = model
        self.max_context = max_context
        self.system_ratio = self.SYSTEM_RATIO
        self.history_ratio = self.HISTORY_RATIO
        self.response_ratio = self.RESPONSE_RATIO
        self.system_budget: int = self.budget.system_tokens
        self.history_budget: int = self.budget.history_budget
        self.response_budget: int = self.budget.response_tokens

    @property
    def encoding(self) -> Any:
        """The tiktoken ``Encoding`` that counts, or None (counting is not tiktoken's)."""
        tok = self.tokenizer
        return tok.encoding if isinstance(tok, TiktokenTokenizer) else None

    # Older names of the three shares (the README's); the seed's names above are primary.
    @property
    def system_tokens(self) -> int:
        """Alias of ``system_budget``."""
        return self.system_budget

    @property
    def history_tokens(self) -> int:
        """Alias of ``history_budget``."""
        return self.history_budget

    @property
    def response_tokens(self) -> int:
        """Alias of ``response_budget``."""
        return self.response_budget

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text``."""
        if not isinstance(text, str):
            raise InvalidMessage("text", text, "must be a string")
        return self.tokenizer.count(text)

    def count_message_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens a list of ``{"role", "content"}`` dicts costs as a request.

        Like the seed: each message's content plus 4 tokens of overhead, plus 2 priming
        the reply. A ``name`` is counted too (providers bill it); a missing or None
        ``content`` (an assistant message that only calls tools) counts as empty.
        """
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidMessage("messages", messages, "must be a list of message dicts")
        count = self.tokenizer.count
        total = REPLY_PRIMING_TOKENS
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise InvalidMessage(f"messages[{i}]", m, "must be a mapping")
            content = m.get("content") or ""
            if not isinstance(content, str):
                raise InvalidMessage(f"messages[{i}].content", content, "must be a string")
            total += count(content) + PER_MESSAGE_TOKENS
            name = m.get("name")
            if isinstance(name, str):
                total += count(name)
        return total

    def get_available_history_tokens(self, system_tokens: int) -> int:
        """Tokens left for history once the system prompt takes ``system_tokens``.

        The seed's ``max_context - (system_tokens + response_budget)``: a system prompt
        smaller than its share leaves the rest to history. Never negative (0 when the
        system prompt alone leaves nothing).
        """
        used = integer("system_tokens", system_tokens, minimum=0)
        return max(0, self.max_context - used - self.response_budget)

    def should_summarize(self, history_tokens: float | Decimal) -> bool:
        """True when history is over 80% of the history share.

        The seed's comparison, ``history_tokens > history_budget * 0.8``, for any real
        number: an int, a float (an estimate such as ``76800 * 0.8 + 1``), a
        ``Fraction``, a ``Decimal``, numpy's numbers. A bool, NaN or anything else is a
        ``ConfigError`` naming the value.
        """
        value = history_tokens
        if isinstance(value, bool) or not isinstance(value, Real | Decimal):
            raise ConfigError(f"history_tokens={bounded_repr(value)}: must be a real number")
        if value.is_nan() if isinstance(value, Decimal) else value != value:
            raise ConfigError(f"history_tokens={bounded_repr(value)}: must be a real number")
        threshold = self.history_budget * self.SUMMARIZE_AT
        return bool(value > threshold)

    def __repr__(self) -> str:
        return (
            f"TokenBudgetManager(model={self.model!r}, max_context={self.max_context}, "
            f"tokenizer={self.tokenizer.name!r})"
        )
