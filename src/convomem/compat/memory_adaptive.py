"""The memory-patterns article's importance-based window: ``AdaptiveSlidingWindow``.

Turns (``ConversationTurn``) are scored as the article scores them: the turn's own
``importance``, plus up to 0.3 for recency, 0.2 for a question, 0.3 for an incident
keyword, capped at 1.0. When the window is over ``max_tokens`` the lowest-scored turns
leave first (older first among equals) until it fits; the newest ``min_turns`` never
leave. The decision is ``strategies.Importance`` run by a ``Packer`` over the turns,
the protected ones pinned; this module only scores and keeps the books.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from .._check import non_negative_int, positive_int
from ..errors import InvalidMessage, NotAMessage
from ..model import Message
from ..packing import Packer
from ..strategies import Importance
from ..tokens import Tokenizer
from ._models import model_tokenizer
from .seed_memory_manager import check_text

__all__ = ["AdaptiveSlidingWindow", "ConversationTurn"]


def _check_turn(turn: ConversationTurn) -> None:
    check_text(turn.role, turn.content)
    if not isinstance(turn.timestamp, datetime):
        raise InvalidMessage("timestamp", turn.timestamp, "must be a datetime")
    imp = turn.importance
    if (
        isinstance(imp, bool)
        or not isinstance(imp, int | float)
        or not math.isfinite(imp)
        or not 0 <= imp <= 1
    ):
        raise InvalidMessage("importance", imp, "must be a number from 0.0 to 1.0")
    t = turn.tokens
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 0):
        raise InvalidMessage("tokens", t, "must be a non-negative integer or None")
    if not isinstance(turn.turn_id, str):
        raise InvalidMessage("turn_id", turn.turn_id, "must be a string")


@dataclass
class ConversationTurn:
    """One message of the conversation, as the article's dataclass.

    ``importance`` (0.0 to 1.0) is the caller's own weight. ``tokens`` is the turn's
    token count; None (the default) lets the window count it, and the window writes the
    count it used back here when the turn is added. ``turn_id`` defaults to the
    article's short hash of the timestamp and the first 50 characters (a label: the
    window never relies on it being unique).
    """

    role: str
    content: str
    timestamp: datetime
    importance: float = 0.5
    tokens: int | None = None
    turn_id: str = ""

    def __post_init__(self) -> None:
        _check_turn(self)
        if not self.turn_id:
            key = f"{self.timestamp}{self.content[:50]}".encode()
            self.turn_id = hashlib.md5(key, usedforsecurity=False).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class _Entry:
    turn: ConversationTurn
    message: Message  # the turn as added (later edits of the dataclass do not count)
    tokens: int
    facts: tuple[float, bool, bool]  # importance, question, critical: scored once


class AdaptiveSlidingWindow:
    """Keep the most important turns within ``max_tokens``; the newest ``min_turns`` always.

    ``add_turn`` appends and, when the total passes ``max_tokens``, evicts turns to
    ``archived`` (in eviction order: lowest score first) until it fits or only protected
    turns are left. ``importance(turn, index)`` is the article's score (see the module
    docstring; the keyword tests are the article's substring tests, so "show" counts
    as "how" and "failed" as "fail"). ``min_turns=0`` protects nothing (the article's
    slice would protect everything). Turns without a ``tokens`` count are counted with
    the tokenizer ``model`` names (content plus 4 tokens of overhead).

    ``archived`` is a plain list the caller may read and drain (to a vector store, say);
    ``turns`` is a copy of the window.
    """

    RECENCY_WEIGHT: Final = 0.3
    QUESTION_BONUS: Final = 0.2
    CRITICAL_BONUS: Final = 0.3
    CRITICAL_KEYWORDS: Final = ("error", "failure", "outage", "critical", "urgent", "fail")

    def __init__(
        self,
        max_tokens: int = 8000,
        min_turns: int = 4,
        *,
        model: str | Tokenizer = "gpt-4o",
    ) -> None:
        self.max_tokens = positive_int("max_tokens", max_tokens)
        self.min_turns = non_negative_int("min_turns", min_turns)
        self.tokenizer = model_tokenizer(model)
        self._entries: list[_Entry] = []
        self._total = 0
        self._seq = 0
        self.archived: list[ConversationTurn] = []

    @property
    def turns(self) -> list[ConversationTurn]:
        """The turns in the window, oldest first (a new list)."""
        return [e.turn for e in self._entries]

    def total_tokens(self) -> int:
        """Tokens of the turns in the window."""
        return self._total

    def add_turn(self, turn: ConversationTurn) -> None:
        """Append ``turn``, then evict the least important turns until the window fits."""
        if not isinstance(turn, ConversationTurn):
            raise NotAMessage(
                "turn", turn, f"must be a ConversationTurn, not {type(turn).__name__}"
            )
        _check_turn(turn)  # a dataclass: its fields may have changed since construction
        tokens = turn.tokens
        if tokens is None:
            tokens = self.tokenizer.count_message(Message(role=turn.role, content=turn.content))
        self._seq += 1
        message = Message(str(self._seq), turn.role, tokens, content=turn.content)
        facts = (float(turn.importance), *self._bonuses(turn.content))
        turn.tokens = tokens
        self._entries.append(_Entry(turn, message, tokens, facts))
        self._total += tokens
        if self._total > self.max_tokens:
            self._optimize()

    def importance(self, turn: ConversationTurn, index: int) -> float:
        """The article's score of ``turn`` at ``index`` among the current turns."""
        return self._score(float(turn.importance), *self._bonuses(turn.content), index)

    def _bonuses(self, content: str) -> tuple[bool, bool]:
        text = content.lower()
        question = "?" in text or "how" in text
        return question, any(kw in text for kw in self.CRITICAL_KEYWORDS)

    def _score(self, importance: float, question: bool, critical: bool, index: int) -> float:
        # The article's order of additions, so equal turns tie exactly as they do there.
        score = importance
        score += index / max(len(self._entries) - 1, 1) * self.RECENCY_WEIGHT
        if question:
            score += self.QUESTION_BONUS
        if critical:
            score += self.CRITICAL_BONUS
        return min(score, 1.0)

    def _optimize(self) -> None:
        entries = self._entries
        guard = max(0, len(entries) - self.min_turns)
        score = self._score
        scores = {e.message.id: score(*e.facts, i) for i, e in enumerate(entries)}
        # Priority 2 pins the protected turns; pin=() pins nothing else (not even system).
        messages = [
            e.message if i < guard else e.message.replace(priority=2) for i, e in enumerate(entries)
        ]
        packer = Packer(
            budget=self.max_tokens,
            tokenizer="given",
            strategy=Importance(lambda m: scores[m.id]),
            pin=(),
            keep_turn=False,  # the article's algorithm: min_turns protects, nothing else
            result_limit=None,
        )
        kept = {m.id for m in packer.pack(messages).kept}
        gone = [
            (scores[e.message.id], i, e.turn)
            for i, e in enumerate(entries)
            if e.message.id not in kept
        ]
        gone.sort(key=lambda g: (g[0], g[1]))
        self.archived.extend(t for _, _, t in gone)
        self._entries = [e for e in entries if e.message.id in kept]
        self._total = sum(e.tokens for e in self._entries)

    def get_context(self) -> list[dict[str, str]]:
        """The window, oldest first, as ``{"role", "content"}`` dicts."""
        return [{"role": e.message.role, "content": e.message.text()} for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (
            f"<AdaptiveSlidingWindow max_tokens={self.max_tokens} min_turns={self.min_turns} "
            f"turns={len(self._entries)} total={self._total} archived={len(self.archived)}>"
        )
