"""SlidingWindowMemory: the seed's turn- and token-limited window with priority tiers."""

from __future__ import annotations

from typing import Final

from .._check import positive_int
from ..session import ConversationMemory
from ..summaries import SummarizerLike
from ..tokens import Tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS
from ._models import model_tokenizer
from .seed_memory_manager import check_text

__all__ = ["SlidingWindowMemory"]

SEED_MODEL: Final = "gpt-4"
"""The seed counts with ``tiktoken.encoding_for_model("gpt-4")`` (cl100k_base)."""


class SlidingWindowMemory:
    """The newest ``max_turns`` turns under ``max_tokens``, with priority tiers.

    A turn starts at a user message. Priority 2 is never evicted and does not count
    toward the turn limit; priority 1 is compressed once (summarized on its own, keeping
    its key facts) when the window first reaches it, and evicted like priority 0 the
    next time; priority 0 is evicted oldest first. System messages are pinned.

    Both limits hold after every ``add``: at most ``max_turns`` unpinned turns, and
    ``get_token_count() <= max_tokens`` unless pinned messages alone exceed it.
    ``get_token_count()`` is the sum of the items' counts, as in the seed: each item
    costs what it costs in a request (its content tokens plus the per-message
    overhead); 0 when the window is empty. Counting is the seed's (tiktoken's gpt-4
    encoding, ``cl100k_base``) unless ``tokenizer=`` says otherwise; without tiktoken it
    is ``approx``.

    Evicted messages are not summarized (this is a window), but they stay in the log of
    the underlying ``ConversationMemory`` (``memory``): a thin composition,
    ``ConversationMemory(max_tokens + 2, max_turns=max_turns, summary=False,
    trigger=1.0, target=1.0, cache_turns=0)``, i.e. eviction happens exactly when a limit
    is passed and removes just enough (the 2 tokens a request adds to prime the reply are not an
    item's, so they are not charged to ``max_tokens``).
    """

    def __init__(
        self,
        max_turns: int = 20,
        max_tokens: int = 4000,
        *,
        tokenizer: str | Tokenizer | None = None,
        summarizer: SummarizerLike | None = None,
    ) -> None:
        self.max_turns = positive_int("max_turns", max_turns)
        self.max_tokens = positive_int("max_tokens", max_tokens)
        tok = model_tokenizer(SEED_MODEL if tokenizer is None else tokenizer, "tokenizer")
        self.memory = ConversationMemory(
            max_tokens + REPLY_PRIMING_TOKENS,
            tokenizer=tok,
            summarizer=summarizer,
            summary=False,
            trigger=1.0,
            target=1.0,
            max_turns=max_turns,
            cache_turns=0,  # the seed's window: just enough, never a deeper cut
            keep_turn=False,  # the seed evicts the oldest, the newest user message too
            result_limit=None,  # and keeps each item as it was given
        )

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer that counts the items."""
        return self.memory.tokenizer

    def add(self, role: str, content: str, priority: int = 0) -> None:
        """Append a message (``priority`` 0, 1 or 2)."""
        check_text(role, content)
        self.memory.add(role, content, priority=priority)

    def get_context(self) -> list[dict[str, str]]:
        """The window, oldest first, as ``{"role", "content"}`` dicts."""
        return [{"role": m.role, "content": m.text()} for m in self.memory.context("messages")]

    def get_token_count(self) -> int:
        """The sum of the items' token counts (0 when the window is empty)."""
        return self.memory.tokenizer.count_messages(self.memory.context("messages"))

    def clear(self, keep_system: bool = True) -> None:
        """Forget everything but (by default) the leading system messages."""
        self.memory.clear(keep_system)
