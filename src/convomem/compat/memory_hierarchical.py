"""The memory-patterns article's ``HierarchicalMemory``: three tiers of memory.

Recent messages verbatim (short term), summaries of older stretches (mid term), and a
long-term profile: name, preferences, key facts, unresolved issues. The profile comes
from the chat model's JSON when it answers with JSON, else (or without a chat model)
from convomem's deterministic fact extraction over the original messages. See
``_summarizing`` for ``llm``, ``fallback`` and failures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Literal

from .._check import non_negative_int, positive_int
from ..errors import SummarizerError
from ..model import Message
from ..summaries import SummarizerLike, Summary
from ..summaries.facts import Fact, extract_from_messages
from ._llm import Ask
from ._summarizing import Gen, SummarizingMemory, lines, log

__all__ = ["EXTRACT_PROMPT", "PROMOTE_PROMPT", "HierarchicalMemory", "MemoryTier"]

PROMOTE_PROMPT: Final = "Summarize the following conversation in 3-4 sentences:\n\n{messages}"

EXTRACT_PROMPT: Final = (
    "Extract key information from the following conversation summaries as JSON:\n"
    """{summaries}

Items to extract:
- user_name: the user's name, if stated
- user_preferences: user preferences
- key_facts: key facts
- unresolved_issues: unresolved issues"""
)


def _promote_prompt(messages: Sequence[Message], previous: Summary | None) -> str:
    return PROMOTE_PROMPT.format(messages=lines(messages))


class MemoryTier(Enum):
    """The three tiers of ``HierarchicalMemory``."""

    SHORT_TERM = "short_term"  # recent conversation, verbatim
    MID_TERM = "mid_term"  # summaries of older stretches
    LONG_TERM = "long_term"  # core facts and preferences


@dataclass(frozen=True, slots=True)
class _Mid:
    text: str
    facts: tuple[Fact, ...]  # found in the summarized messages (for the offline profile)
    user_name: str | None
    degraded: bool


@dataclass(frozen=True, slots=True)
class _Profile:
    user_name: str | None
    preferences: list[str]
    key_facts: list[str]
    unresolved: list[str] | None  # None: unknown (keep the current list)


_USER_NAME = re.compile(r"\b(?i:my name is|my name's|call me)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)")


def _user_name(messages: Sequence[Message]) -> str | None:
    name = None
    for m in messages:
        if m.role == "user":
            for found in _USER_NAME.finditer(m.text()):
                name = found.group(1)
    return name


def _strings(value: object) -> list[str]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    return [v if isinstance(v, str) else json.dumps(v, sort_keys=True) for v in items]


def _parse_profile(answer: str) -> _Profile:
    """The model's JSON answer (code fences and prose around the object tolerated)."""
    text = answer.strip()
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise SummarizerError(f"profile extraction: the answer is not a JSON object: {answer!r}")
    name = data.get("user_name")
    return _Profile(
        name if isinstance(name, str) and name.strip() else None,
        _strings(data.get("user_preferences")),
        _strings(data.get("key_facts")),
        _strings(data.get("unresolved_issues")),
    )


def _offline_profile(retired: Sequence[_Mid]) -> _Profile:
    facts = [f for mid in retired for f in mid.facts]
    names = [mid.user_name for mid in retired if mid.user_name]
    return _Profile(
        names[-1] if names else None,
        # "My name is Ada" is a self-stated fact the extractor files as a preference; the
        # name has its own field.
        [f.value for f in facts if f.kind == "preference" and not _USER_NAME.search(f.value)],
        [f.value for f in facts if f.kind not in ("preference", "number")],
        None,
    )


def _extend_unique(values: list[Any], new: Sequence[str], limit: int) -> None:
    """Append ``new``; a value seen before moves to the end (it is recent again)."""
    for value in new:
        key = " ".join(value.split()).casefold()
        if not key:
            continue
        values[:] = [v for v in values if " ".join(str(v).split()).casefold() != key]
        values.append(value)
    del values[: max(0, len(values) - limit)]


class HierarchicalMemory(SummarizingMemory):
    """Three tiers: short-term messages, mid-term summaries, a long-term profile.

    When short-term holds more than ``short_term_limit`` exchanges, all but the last
    three (at most ``short_term_limit``) are summarized into a mid-term entry (a chat
    model gets the article's "3-4 sentences" prompt). When mid-term holds more than
    ``mid_term_limit`` summaries, all but the last two (at most ``mid_term_limit``) are
    retired into the long-term profile: the chat model's JSON (``user_name``,
    ``user_preferences``, ``key_facts``, ``unresolved_issues``), or, when it does not
    answer with JSON or there is no chat model, the facts convomem extracted from the
    summarized messages (preferences from the user's own words; a name only from "my
    name is ..."). Preferences and key facts are kept once each, newest last, at most
    ``LONG_TERM_LIMIT`` of each; unresolved issues are replaced by the newest list.
    ``build_context()`` is the article's text. The tiers read as in the article
    (``short_term``, ``mid_term``, ``long_term``: copies).
    """

    KEEP_SHORT_TURNS: Final = 3
    KEEP_MID: Final = 2
    LONG_TERM_LIMIT: Final = 200

    def __init__(
        self,
        llm: object = None,
        short_term_limit: int = 10,
        mid_term_limit: int = 5,
        *,
        fallback: SummarizerLike | Literal[False] | None = None,
    ) -> None:
        self.short_term_limit = positive_int("short_term_limit", short_term_limit)
        self.mid_term_limit = non_negative_int("mid_term_limit", mid_term_limit)
        super().__init__(llm, _promote_prompt, fallback)
        self._short: list[Message] = []
        self._mid: list[_Mid] = []
        self._long: dict[str, Any] = {
            "user_name": None,
            "preferences": [],
            "key_facts": [],
            "unresolved_issues": [],
        }
        self.extractions = 0
        self.degraded_extractions = 0
        """Extractions a chat model did not answer with JSON (the offline facts stood in)."""

    @property
    def short_term(self) -> list[dict[str, str]]:
        """Recent messages, verbatim (a copy)."""
        return [{"role": m.role, "content": m.text()} for m in self._short]

    @property
    def mid_term(self) -> list[str]:
        """Summaries of older stretches, oldest first (a copy)."""
        return [m.text for m in self._mid]

    @property
    def long_term(self) -> dict[str, Any]:
        """The profile: ``user_name``, ``preferences``, ``key_facts``,
        ``unresolved_issues`` (a copy)."""
        return {k: list(v) if isinstance(v, list) else v for k, v in self._long.items()}

    def _add_gen(self, pair: tuple[Message, Message]) -> Gen:
        self._short.extend(pair)
        if self._busy:  # a concurrent promotion or extraction: the next exchange catches up
            return
        self._busy = True
        try:
            if len(self._short) > 2 * self.short_term_limit:
                yield from self._promote_gen()
            if len(self._mid) > self.mid_term_limit:
                yield from self._extract_gen()
        finally:
            self._busy = False

    def _promote_gen(self) -> Gen:
        n = len(self._short) - 2 * min(self.KEEP_SHORT_TURNS, self.short_term_limit)
        old = self._short[:n]
        made = yield from self._summarize_gen(old, None)
        if made is None:
            return
        text, degraded, _ = made
        self._mid.append(_Mid(text, tuple(extract_from_messages(old)), _user_name(old), degraded))
        del self._short[:n]

    def _extract_gen(self) -> Gen:
        retired = self._mid[: len(self._mid) - min(self.KEEP_MID, self.mid_term_limit)]
        profile: _Profile | None = None
        if self._chat is not None:
            prompt = EXTRACT_PROMPT.format(summaries="\n\n".join(m.text for m in retired))
            self.calls += 1
            try:
                profile = _parse_profile((yield Ask(self._chat, prompt)))
            except Exception as exc:
                self.last_error = exc
                self.degraded_extractions += 1
                log.warning("HierarchicalMemory: %s; using the extracted facts instead", exc)
        if profile is None:
            profile = _offline_profile(retired)
        self.extractions += 1
        long = self._long
        if profile.user_name:
            long["user_name"] = profile.user_name
        _extend_unique(long["preferences"], profile.preferences, self.LONG_TERM_LIMIT)
        _extend_unique(long["key_facts"], profile.key_facts, self.LONG_TERM_LIMIT)
        if profile.unresolved is not None:
            long["unresolved_issues"] = profile.unresolved[: self.LONG_TERM_LIMIT]
        del self._mid[: len(retired)]

    def build_context(self) -> str:
        """The long-term profile, the summaries and the recent messages, as the article
        lays them out."""
        parts: list[str] = []
        lt = self._long
        if any(lt.values()):
            facts = "\n".join(f"- {f}" for f in lt["key_facts"][-10:])
            prefs = ", ".join(lt["preferences"][-5:])
            issues = "\n".join(f"- {i}" for i in lt["unresolved_issues"])
            parts.append(
                f"[User Profile]\nName: {lt['user_name']}\n"
                f"Preferences: {prefs}\nKey Facts:\n{facts}\n"
                f"Unresolved Issues:\n{issues}"
            )
        if self._mid:
            parts.append(
                "[Previous Conversation Summary]\n" + "\n---\n".join(m.text for m in self._mid)
            )
        if self._short:
            parts.append(f"[Recent Conversation]\n{lines(self._short)}")
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        return (
            f"<HierarchicalMemory short={len(self._short)} mid={len(self._mid)} "
            f"facts={len(self._long['key_facts'])}>"
        )
