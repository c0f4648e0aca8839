"""The Extractor interface, and the offline (rule-based) extractor.

An extractor turns messages into ``KeyedFact`` s: ``extract(messages)`` (blocking) and
``aextract(messages)`` (its async twin). ``OfflineExtractor`` needs no model: rules in
English, Spanish, French and German for what a user says about themself, plus the
fields of tool results (see ``_keyed_rules``). ``LLMExtractor`` (``llm_extractor``)
asks a chat model and falls back to the offline one. ``FactHistory`` calls an extractor
once per message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._keyed_rules import tool_facts, user_facts
from .extraction import source_role
from .keyed import KeyedFact, norm_attribute, norm_value

if TYPE_CHECKING:
    from ..model import Message

__all__ = ["AsyncExtractor", "Extractor", "OfflineExtractor", "facts_of"]


@runtime_checkable
class Extractor(Protocol):
    """Anything that extracts keyed facts from messages, in message order."""

    def extract(self, messages: Sequence[Message]) -> list[KeyedFact]: ...


@runtime_checkable
class AsyncExtractor(Protocol):
    """An extractor with an async twin (``OfflineExtractor`` and ``LLMExtractor`` are both)."""

    def extract(self, messages: Sequence[Message]) -> list[KeyedFact]: ...

    async def aextract(self, messages: Sequence[Message]) -> list[KeyedFact]: ...


def facts_of(message: Message, pairs: Sequence[tuple[str, str]]) -> list[KeyedFact]:
    """``(attribute, value)`` pairs of one message as keyed facts with its provenance;
    the first value of each key wins, empty ones are dropped."""
    role = source_role(message)
    seen: set[str] = set()
    out: list[KeyedFact] = []
    for attribute, value in pairs:
        attr, val = norm_attribute(attribute), " ".join(value.split())
        if not attr or not norm_value(val) or attr in seen:
            continue
        seen.add(attr)
        out.append(
            KeyedFact(
                attr,
                val,
                source_role=role,
                message_id=message.id,
                valid_from=message.created_at,
            )
        )
    return out


class OfflineExtractor:
    """Rule-based extraction, no model and no I/O: deterministic and fast.

    A user's messages yield what they state about themself (name, nickname, city,
    email, phone, age, job, diet, allergies, likes and dislikes, counts such as "two
    kids", "my X is Y", events on relative dates resolved against the message's
    ``created_at``); a tool result yields its fields. Assistant and system messages
    yield nothing: the facts kept are the user's and what tools reported.
    ``calls`` counts messages read (each one once when driven by ``FactHistory``).
    """

    name = "offline"

    def __init__(self) -> None:
        self.calls = 0

    def extract_one(self, message: Message) -> list[KeyedFact]:
        """The facts of one message."""
        self.calls += 1
        text = message.text()
        if not text:
            return []
        role = source_role(message)
        if role == "tool":
            return facts_of(message, tool_facts(text))
        if role == "user":
            return facts_of(message, user_facts(text, message.created_at))
        return []

    def extract(self, messages: Sequence[Message]) -> list[KeyedFact]:
        """The facts of ``messages``, in message order."""
        return [f for m in messages for f in self.extract_one(m)]

    async def aextract(self, messages: Sequence[Message]) -> list[KeyedFact]:
        """Async twin of ``extract`` (no I/O: the same work)."""
        return self.extract(messages)

    def __repr__(self) -> str:
        return "OfflineExtractor()"
