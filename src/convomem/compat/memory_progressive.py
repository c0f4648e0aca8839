"""The memory-patterns article's ``ProgressiveSummarizer``: one rolling summary.

Every ``summarize_threshold`` exchanges the conversation is folded into one rolling
summary; the last two exchanges stay verbatim. Each message is summarized once: the
article re-sends the two exchanges it keeps verbatim to the next summary, here they are
summarized when they leave. See ``_summarizing`` for ``llm``, ``fallback`` and failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from .._check import non_negative_int, positive_int
from ..model import Message
from ..summaries import SummarizerLike, Summary
from ._summarizing import Gen, SummarizingMemory, lines

__all__ = ["PROGRESSIVE_PROMPT", "ProgressiveSummarizer"]

PROGRESSIVE_PROMPT: Final = """Previous summary:
{previous}

Recent conversation:
{messages}

Create a concise summary that integrates the previous summary with
the recent conversation, preserving key information. Include user names,
preferences, and unresolved issues."""


def _progressive_prompt(messages: Sequence[Message], previous: Summary | None) -> str:
    before = previous.text if previous is not None and previous.text else "(none)"
    return PROGRESSIVE_PROMPT.format(previous=before, messages=lines(messages))


class ProgressiveSummarizer(SummarizingMemory):
    """One rolling summary plus the last ``keep_turns`` exchanges verbatim.

    Every ``summarize_threshold`` exchanges, the messages older than the last
    ``keep_turns`` (default 2) exchanges are folded into the summary: the summarizer
    gets them with the previous summary (a chat model gets the article's prompt).
    ``get_context()`` is the article's text: ``[Conversation Summary]`` then ``[Recent
    Conversation]``. ``summary``, ``recent_messages`` and ``turn_count`` read as in the
    article; ``pending`` is True while a failed fold waits for the next exchange.
    """

    def __init__(
        self,
        llm: object = None,
        summarize_threshold: int = 10,
        *,
        keep_turns: int = 2,
        fallback: SummarizerLike | Literal[False] | None = None,
    ) -> None:
        self.summarize_threshold = positive_int("summarize_threshold", summarize_threshold)
        self.keep_turns = non_negative_int("keep_turns", keep_turns)
        super().__init__(llm, _progressive_prompt, fallback)
        self._summary: Summary | None = None
        self._recent: list[Message] = []
        self.turn_count = 0
        self.pending = False

    @property
    def summary(self) -> str:
        """The rolling summary's text (``""`` before the first fold)."""
        return self._summary.text if self._summary is not None else ""

    @property
    def summarized_messages(self) -> int:
        """How many messages the summary stands for."""
        return self._summary.count if self._summary is not None else 0

    @property
    def degraded(self) -> bool:
        """True when the fallback summarizer made part of the summary."""
        return self._summary is not None and self._summary.degraded

    @property
    def recent_messages(self) -> list[dict[str, str]]:
        """The messages not yet summarized, as ``{"role", "content"}`` dicts (a copy)."""
        return [{"role": m.role, "content": m.text()} for m in self._recent]

    def _add_gen(self, pair: tuple[Message, Message]) -> Gen:
        self._recent.extend(pair)
        self.turn_count += 1
        if self.pending or self.turn_count % self.summarize_threshold == 0:
            yield from self._fold_gen()

    def _fold_gen(self) -> Gen:
        if self._busy:  # a concurrent fold is running: fold the rest next time
            self.pending = True
            return
        n = len(self._recent) - 2 * self.keep_turns
        if n <= 0:
            self.pending = False
            return
        old = self._recent[:n]
        previous = self._summary
        self._busy = True
        try:
            made = yield from self._summarize_gen(old, previous)
        finally:
            self._busy = False
        if made is None:
            self.pending = True
            return
        text, degraded, name = made
        self._summary = Summary(
            text,
            first_id=previous.first_id if previous is not None else old[0].id,
            last_id=old[-1].id,
            count=(previous.count if previous is not None else 0) + n,
            summarizer=name,
            degraded=degraded or (previous is not None and previous.degraded),
        )
        del self._recent[:n]  # only appends happened meanwhile: these are still first
        self.pending = False

    def get_context(self) -> str:
        """The summary and the recent messages, as the article lays them out."""
        parts: list[str] = []
        if self.summary:
            parts.append(f"[Conversation Summary]\n{self.summary}")
        if self._recent:
            parts.append(f"[Recent Conversation]\n{lines(self._recent)}")
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        return (
            f"<ProgressiveSummarizer turns={self.turn_count} summarized="
            f"{self.summarized_messages} recent={len(self._recent)}>"
        )
