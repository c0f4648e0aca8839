"""Named memory designs with their exact published interfaces, built from convomem parts."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, InvalidMessage, TokenizerError
from ..model import Message
from ..session import ConversationMemory
from ..summaries import SummarizerLike
from ..tokens import Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS, ContextBudget

log = logging.getLogger("convomem.recipes")


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name}={value!r}: must be a positive integer")
    return value


def _check_text(role: object, content: object) -> None:
    if not isinstance(role, str) or role not in ("system", "user", "assistant", "tool"):
        raise InvalidMessage("role", role, "must be system, user, assistant or tool")
    if not isinstance(content, str):
        raise InvalidMessage("content", content, "must be a string")


class ConversationMemoryManager:
    """A word-counted window: first system message, optional summary, newest turns.

    A message costs ``len(content.split()) + 4`` tokens. The context is the first system
    message (always, unchanged), then the summary set with ``set_summary`` as a system
    message, then the most recent user/assistant messages, taken newest first and
    stopping at the first one that would push the total over ``max_tokens``.
    """

    SUMMARY_PREFIX = "Summary of previous conversation: "

    def __init__(self, max_tokens: int = 100) -> None:
        self.max_tokens = _positive_int("max_tokens", max_tokens)
        self._tokenizer = get_tokenizer("words")
        self._messages: list[Message] = []
        self._system: Message | None = None
        self._summary: Message | None = None

    def add_message(self, role: str, content: str) -> None:
        """Append a message to the history."""
        _check_text(role, content)
        message = Message(role=role, content=content)
        self._messages.append(message)
        if self._system is None and role == "system":
            self._system = message

    def set_summary(self, summary_text: str) -> None:
        """Set the summary that stands for earlier conversation."""
        if not isinstance(summary_text, str):
            raise InvalidMessage("summary_text", summary_text, "must be a string")
        self._summary = Message(role="system", content=self.SUMMARY_PREFIX + summary_text)

    def get_context_messages(self) -> list[dict[str, str]]:
        """The context, oldest first, as ``{"role", "content"}`` dicts."""
        count = self._tokenizer.count_message
        head = [m for m in (self._system, self._summary) if m is not None]
        total = sum(count(m) for m in head)
        recent: list[Message] = []
        for m in reversed(self._messages):
            if m.role not in ("user", "assistant"):
                continue
            cost = count(m)
            if total + cost > self.max_tokens:
                break
            total += cost
            recent.append(m)
        recent.reverse()
        return [{"role": m.role, "content": m.text()} for m in head + recent]


class SlidingWindowMemory:
    """The newest ``max_turns`` turns under ``max_tokens``, with priority tiers.

    A turn starts at a user message. Priority 2 is never evicted and does not count
    toward the window; priority 1 is compressed once (summarized on its own, keeping its
    key facts) when the window first reaches it, and evicted like priority 0 the next
    time; priority 0 is evicted oldest first. Both limits hold after every ``add``: at
    most ``max_turns`` unpinned turns, and ``get_token_count() <= max_tokens``. System
    messages are pinned. Evicted messages are not summarized (this is a window), but
    they stay in the log of the underlying ``ConversationMemory`` (``memory``).

    A thin composition: ``ConversationMemory(max_tokens, max_turns=max_turns,
    summary=False, trigger=1.0, target=1.0)``, i.e. eviction happens exactly when a
    limit is passed and removes just enough.
    """

    def __init__(
        self,
        max_turns: int = 20,
        max_tokens: int = 4000,
        *,
        tokenizer: str | Tokenizer = "approx",
        summarizer: SummarizerLike | None = None,
    ) -> None:
        self.max_turns = _positive_int("max_turns", max_turns)
        self.max_tokens = _positive_int("max_tokens", max_tokens)
        self.memory = ConversationMemory(
            max_tokens,
            tokenizer=tokenizer,
            summarizer=summarizer,
            summary=False,
            trigger=1.0,
            target=1.0,
            max_turns=max_turns,
        )

    def add(self, role: str, content: str, priority: int = 0) -> None:
        """Append a message (``priority`` 0, 1 or 2)."""
        _check_text(role, content)
        self.memory.add(role, content, priority=priority)

    def get_context(self) -> list[dict[str, str]]:
        """The window, oldest first, as ``{"role", "content"}`` dicts."""
        return [{"role": m.role, "content": m.text()} for m in self.memory.context("messages")]

    def get_token_count(self) -> int:
        """Tokens the context costs as a request (overhead and reply priming included)."""
        return self.memory.stats().context_tokens

    def clear(self, keep_system: bool = True) -> None:
        """Forget everything but (by default) the leading system messages."""
        self.memory.clear(keep_system)


class TokenBudgetManager:
    """A model's context split 15/60/25 into system, history and response shares.

    ``count_message_tokens`` bills like the Chat Completions API: content tokens plus 4
    per message, plus 2 priming the reply. Counting uses the model's tiktoken encoding;
    when that encoding is not installed locally it falls back to cl100k_base (and says
    so in the log), and to ``approx`` without tiktoken.
    """

    SYSTEM_RATIO = 0.15
    HISTORY_RATIO = 0.60
    RESPONSE_RATIO = 0.25
    SUMMARIZE_AT = 0.80

    def __init__(
        self,
        model: str = "gpt-4o",
        max_context: int = 128000,
        *,
        tokenizer: str | Tokenizer | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model={model!r}: must be a non-empty string")
        self.model = model
        self.budget = ContextBudget(
            max_context,
            system=self.SYSTEM_RATIO,
            history=self.HISTORY_RATIO,
            response=self.RESPONSE_RATIO,
            summarize_at=self.SUMMARIZE_AT,
        )
        self.max_context = max_context
        self.tokenizer = (
            get_tokenizer(tokenizer) if tokenizer is not None else _model_tokenizer(model)
        )
        self.system_ratio = self.SYSTEM_RATIO
        self.history_ratio = self.HISTORY_RATIO
        self.response_ratio = self.RESPONSE_RATIO
        self.system_tokens = self.budget.system_tokens
        self.history_tokens = self.budget.history_budget
        self.response_tokens = self.budget.response_tokens

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text``."""
        if not isinstance(text, str):
            raise InvalidMessage("text", text, "must be a string")
        return self.tokenizer.count(text)

    def count_message_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens a list of ``{"role", "content"}`` dicts costs as a request."""
        total = REPLY_PRIMING_TOKENS
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise InvalidMessage(f"messages[{i}]", m, "must be a mapping")
            content = m.get("content") or ""
            if not isinstance(content, str):
                raise InvalidMessage(f"messages[{i}].content", content, "must be a string")
            total += self.tokenizer.count(content) + 4
            name = m.get("name")
            if isinstance(name, str):
                total += self.tokenizer.count(name)
        return total

    def get_available_history_tokens(self, system_tokens: int) -> int:
        """History tokens left once the system prompt takes ``system_tokens``."""
        return self.budget.history_tokens(system_tokens)

    def should_summarize(self, history_tokens: int) -> bool:
        """True above 80% of the history share."""
        return self.budget.should_summarize(history_tokens)


def _model_tokenizer(model: str) -> Tokenizer:
    try:
        return get_tokenizer(f"tiktoken:{model}")
    except TokenizerError as exc:
        try:
            fallback = get_tokenizer("tiktoken:cl100k_base")
        except (TokenizerError, ImportError):
            log.warning("%s; counting with 'approx'", exc)
            return get_tokenizer("approx")
        log.warning("%s; counting with cl100k_base", exc)
        return fallback
    except ImportError:
        log.warning("tiktoken is not installed; counting with 'approx'")
        return get_tokenizer("approx")
