"""The Summary artifact and the text helpers summarizers share."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from ..errors import InvalidMessage
from ..model import Message, ToolUseBlock
from ._fact import Fact, render_facts
from .extraction import split_sentences as _split_sentences

T = TypeVar("T")

SUMMARY_HEADER: Final = "Summary of the earlier conversation:"
SEGMENT_KEY: Final = "convomem_summary_segment"
"""Metadata key marking a message that carries summary text (a segment being merged)."""

TRUNCATION_MARKER: Final = " […]"


def render_summary(header: str, facts_block: str, text: str) -> str:
    """The content of a summary message: header, facts block, then the narrative."""
    body = "\n\n".join(p for p in (facts_block, text) if p)
    if not header:
        return body
    return f"{header}\n{body}" if body else header


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary with its coverage: which messages it stands for, and how it was made.

    ``text`` is the narrative; ``facts`` the key facts it carries verbatim
    (``facts_omitted`` more did not fit). ``first_id`` / ``last_id`` / ``count`` give
    the coverage; ``tokens`` is the cost of ``to_message()`` (``None``: not counted);
    ``degraded`` is true when a fallback summarizer made some of it.

    ``kept_original`` is set only by ``RunningSummary.compress`` when the summarizer
    could not make the messages shorter (or returned nothing): ``text`` is then their
    transcript, unchanged, and the caller keeps the messages as they are.
    """

    text: str
    first_id: str | None = None
    last_id: str | None = None
    count: int = 0
    summarizer: str = "external"
    tokens: int | None = None
    created_at: float = field(default_factory=time.time)
    degraded: bool = False
    facts: tuple[Fact, ...] = ()
    facts_omitted: int = 0
    header: str = SUMMARY_HEADER
    kept_original: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidMessage("Summary.text", self.text, "must be a string")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise InvalidMessage("Summary.count", self.count, "must be a non-negative integer")
        if self.tokens is not None and (
            isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0
        ):
            raise InvalidMessage("Summary.tokens", self.tokens, "must be a non-negative integer")
        if not isinstance(self.facts, tuple):
            object.__setattr__(self, "facts", tuple(self.facts))

    @property
    def content(self) -> str:
        """The rendered text of the summary message (header, facts, narrative)."""
        return render_summary(self.header, render_facts(self.facts, self.facts_omitted), self.text)

    @property
    def id(self) -> str:
        """A stable message id derived from the coverage (from the text if none)."""
        if self.count:
            key = f"{self.first_id}\x1f{self.last_id}\x1f{self.count}"
        else:
            key = "text\x1f" + self.content
        return "summary_" + hashlib.sha256(key.encode()).hexdigest()[:16]

    def to_message(self) -> Message:
        """The summary as a system message.

        The same summary always renders to an equal message (same id, content and
        token count; no timestamp), so a provider's prompt cache keeps matching it.
        """
        return Message(
            self.id,
            "system",
            self.tokens,
            content=self.content,
            metadata={
                "summary": {
                    "first_id": self.first_id,
                    "last_id": self.last_id,
                    "count": self.count,
                    "summarizer": self.summarizer,
                    "degraded": self.degraded,
                }
            },
        )


# -- text helpers --------------------------------------------------------------------


def message_label(message: Message) -> str:
    """``role`` or ``role(name)``: how a message is attributed in summary text."""
    return message.role if message.name is None else f"{message.role}({message.name})"


def _body(message: Message) -> str:
    parts = [message.text()] if message.text() else []
    for block in message.blocks:
        if isinstance(block, ToolUseBlock):
            args = block.arguments()
            if len(args) > 200:
                args = args[:200] + "…"
            parts.append(f"[called {block.name}({args})]")
    return " ".join(parts)


def transcript(messages: Iterable[Message]) -> str:
    """Messages as ``label: text`` lines (summary segments as their bare text)."""
    lines: list[str] = []
    for m in messages:
        body = _body(m)
        if m.metadata.get(SEGMENT_KEY):
            if body:
                lines.append(body)
        elif body:
            lines.append(f"{message_label(m)}: {body}")
    return "\n".join(lines)


def join_unique(texts: Iterable[str]) -> str:
    """Texts joined by blank lines, each line kept the first time only (case and spaces
    aside): a summary never says the same line twice, whichever summarizer wrote it."""
    seen: set[str] = set()
    blocks: list[str] = []
    for text in texts:
        kept = []
        for line in text.splitlines():
            key = " ".join(line.split()).casefold()
            if key and key in seen:
                continue
            seen.add(key)
            kept.append(line)
        block = "\n".join(kept).strip("\n")
        if block:
            blocks.append(block)
    return "\n\n".join(blocks)


def fit_whole(text: str, limit: int, count: Callable[[str], int]) -> str:
    """The longest run of ``text``'s first lines that counts at most ``limit``; when not
    even the first line fits, the longest run of its first sentences; else ``""``. Never
    a cut sentence: what a summary drops to fit, it drops whole."""
    if count(text) <= limit:
        return text
    lines = text.split("\n")
    lo, hi = 0, len(lines)  # invariant: the first lo lines fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count("\n".join(lines[:mid]).rstrip()) <= limit:
            lo = mid
        else:
            hi = mid - 1
    if lo:
        return "\n".join(lines[:lo]).rstrip()
    sentences = [s for _, s in _split_sentences(lines[0])]
    while sentences and count(" ".join(sentences)) > limit:
        sentences.pop()
    return " ".join(sentences)


def clip_to_tokens(
    text: str, limit: int, count: Callable[[str], int], marker: str = TRUNCATION_MARKER
) -> str:
    """The longest prefix of ``text`` (cut at a space when close) that, with ``marker``
    appended, counts at most ``limit``; ``text`` itself when it already fits."""
    if count(text) <= limit:
        return text
    if count(marker) > limit:
        return ""
    lo, hi = 0, len(text)  # invariant: prefix of length lo fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid].rstrip() + marker) <= limit:
            lo = mid
        else:
            hi = mid - 1
    cut = text.rfind(" ", 0, lo + 1)
    if cut > lo * 0.7:
        lo = cut
    return text[:lo].rstrip() + marker
