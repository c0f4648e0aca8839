"""ConversationMemoryManager: the seed's word-counted window with a summary slot."""

from __future__ import annotations

from typing import Final

from .._check import positive_int
from ..errors import InvalidMessage
from ..model import Message
from ..tokens import get_tokenizer

__all__ = ["ConversationMemoryManager", "check_text"]

_ROLES: Final = ("system", "user", "assistant", "tool")


def check_text(role: object, content: object) -> None:
    """A role and a text content, or ``InvalidMessage`` naming the bad one."""
    if not isinstance(role, str) or role not in _ROLES:
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

    SUMMARY_PREFIX: Final = "Summary of previous conversation: "

    def __init__(self, max_tokens: int = 100) -> None:
        self.max_tokens = positive_int("max_tokens", max_tokens)
        self._tokenizer = get_tokenizer("words")
        self._messages: list[Message] = []
        self._system: Message | None = None
        self._summary: Message | None = None

    def add_message(self, role: str, content: str) -> None:
        """Append a message to the history."""
        check_text(role, content)
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
