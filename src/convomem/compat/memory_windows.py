"""The memory-patterns article's windows: by tokens, by time, and both at once.

``TokenWindowMemory(max_tokens, model)`` is a ``views.History`` (the incremental token
window: amortized O(1) per message, each message counted once) that pins the system
prompt and the newest message. ``TimeBasedWindow(window_minutes)`` keeps what was said
in the last ``window_minutes``; ``HybridWindow(max_tokens, max_minutes)`` feeds one
message to both and sends what both still hold. Time comes from an injectable clock
(``now=``: epoch seconds or a ``datetime``), so tests and replays control it.

Where the article's code and a demanding user part ways, the user wins, and the
docstrings say so: the system prompt never expires, equal texts are distinct messages,
and a window read late reflects the time it is read at.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .._check import function, number, positive_int
from ..errors import ConfigError
from ..model import Message
from ..tokens import Tokenizer
from ..views import History
from ._models import model_tokenizer
from .seed_memory_manager import check_text

__all__ = ["Clock", "HybridWindow", "TimeBasedWindow", "TokenWindowMemory"]

Clock = Callable[[], float | datetime]
"""A clock: epoch seconds, or a ``datetime`` (naive ones are local time, as in Python)."""


def _dicts(messages: list[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.text()} for m in messages]


class TokenWindowMemory:
    """The newest messages whose token counts sum to at most ``max_tokens``.

    A message costs its content's tokens plus 4 (the article's ``len(encode(content))
    + 4``), counted once with the tokenizer ``model`` names (see ``compat._models``:
    the model's tiktoken encoding when installed offline, else ``cl100k_base``, else
    ``approx``; a tokenizer spec or ``Tokenizer`` works too). Each ``add_message``
    evicts the oldest messages until the total fits.

    Never evicted: the system prompt (the first message, when it is a system message)
    and the newest message. The article stops evicting at two messages; this window
    stops at those two, so without a system prompt the budget still holds down to the
    newest message. When they alone exceed ``max_tokens`` they are kept and
    ``over_limit()`` says so. Evicted messages are gone (this is a window).
    """

    def __init__(
        self, max_tokens: int = 4000, model: str | Tokenizer | Callable[[str], int] = "gpt-4o"
    ) -> None:
        self.max_tokens = positive_int("max_tokens", max_tokens)
        self.tokenizer = model_tokenizer(model)
        self.model = model
        # The article's window: the newest message pinned, nothing else kept, nothing cut.
        self._history = History(
            max_tokens, tokenizer=self.tokenizer, pin=(-1,), keep_turn=False, result_limit=None
        )
        self._added = 0

    def add_message(self, role: str, content: str) -> None:
        """Append a message, then evict the oldest ones until the total fits."""
        check_text(role, content)
        self._add(self._message(role, content, None))

    def _message(self, role: str, content: str, created_at: float | None) -> Message:
        # Priority 2 pins the system prompt in History without pinning later system notes.
        first_system = self._added == 0 and role == "system"
        return Message(
            role=role, content=content, created_at=created_at, priority=2 if first_system else 0
        )

    def _add(self, message: Message) -> list[str]:
        dropped = self._history.add(message)
        self._added += 1
        return dropped

    def get_messages(self) -> list[dict[str, str]]:
        """The window, oldest first, as new ``{"role", "content"}`` dicts."""
        return _dicts(self._history.kept())

    @property
    def messages(self) -> list[dict[str, str]]:
        """The window as the article's ``messages`` list (a copy; edits do not stick)."""
        return self.get_messages()

    def total_tokens(self) -> int:
        """Tokens the window holds now."""
        return self._history.total()

    _total_tokens = total_tokens  # the article's name, used in its usage example

    def over_limit(self) -> bool:
        """True when the system prompt and the newest message alone exceed the limit."""
        return self._history.over_limit()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._history

    def __len__(self) -> int:
        return len(self._history)

    def __repr__(self) -> str:
        return (
            f"<TokenWindowMemory max_tokens={self.max_tokens} tokenizer="
            f"{self.tokenizer.name!r} messages={len(self)} total={self.total_tokens()}>"
        )


class TimeBasedWindow:
    """What was said in the last ``window_minutes`` minutes.

    Each message is stamped with ``now()`` when added; it stays while it is younger
    than ``window_minutes`` (the article's ``timestamp > now - window``), and the window
    is brought up to date on every add *and* every read, so a window read an hour later
    is empty. The system prompt (the first message, when it is a system message) never
    expires. A clock that steps back (a wall-clock adjustment) never reorders the
    window: a message is stamped no earlier than the one before it. O(1) amortized per
    message (a deque, expired from the old end).

    ``now`` returns epoch seconds or a ``datetime`` (default ``time.time``).
    """

    def __init__(self, window_minutes: float = 30, *, now: Clock | None = None) -> None:
        number("window_minutes", window_minutes, minimum=0.0, low_open=True)
        self.window_minutes = window_minutes
        self._seconds = float(window_minutes) * 60.0
        self._now: Clock = time.time if now is None else function("now", now, "-> seconds")
        self._system: Message | None = None
        self._dq: deque[Message] = deque()
        self._last = -math.inf
        self._added = 0

    def _clock(self) -> float:
        raw: Any = self._now()
        if isinstance(raw, datetime):
            t = raw.timestamp()
        elif isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
            t = float(raw)
        else:
            raise ConfigError(f"now: returned {raw!r}; it must return epoch seconds or a datetime")
        return max(t, self._last)

    def add_message(self, role: str, content: str) -> None:
        """Append a message stamped now, then forget what is older than the window."""
        check_text(role, content)
        self._add(Message(role=role, content=content, created_at=self._clock()))

    def _add(self, message: Message) -> None:
        assert message.created_at is not None
        if self._added == 0 and message.role == "system":
            self._system = message
        else:
            self._dq.append(message)
        self._added += 1
        self._last = message.created_at
        self._expire(message.created_at)

    def _expire(self, now: float) -> None:
        cutoff = now - self._seconds
        dq = self._dq
        while dq and dq[0].created_at is not None and dq[0].created_at <= cutoff:
            dq.popleft()

    def _live(self) -> list[Message]:
        self._expire(self._clock())
        head = [self._system] if self._system is not None else []
        return head + list(self._dq)

    def get_messages(self) -> list[dict[str, str]]:
        """The window now, oldest first, as ``{"role", "content"}`` dicts."""
        return _dicts(self._live())

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The article's ``messages``: dicts with ``role``, ``content`` and ``timestamp``
        (an aware UTC ``datetime``); a copy, brought up to date first."""
        return [
            {
                "role": m.role,
                "content": m.text(),
                "timestamp": datetime.fromtimestamp(m.created_at or 0.0, UTC),
            }
            for m in self._live()
        ]

    def __len__(self) -> int:
        return len(self._live())

    def __repr__(self) -> str:
        return f"<TimeBasedWindow window_minutes={self.window_minutes} messages={len(self)}>"


class HybridWindow:
    """Both limits at once: at most ``max_tokens`` and at most ``max_minutes`` old.

    Each message goes to a ``TokenWindowMemory`` (``token_window``) and a
    ``TimeBasedWindow`` (``time_window``); ``get_messages`` returns the messages both
    still hold, in order. The article intersects by text, so a repeated text ("ok")
    evicted from one window survived through its twin; here they are distinct
    messages. The system prompt is in both windows for good, so it is always sent.
    """

    def __init__(
        self,
        max_tokens: int = 4000,
        max_minutes: float = 60,
        *,
        model: str | Tokenizer | Callable[[str], int] = "gpt-4o",
        now: Clock | None = None,
    ) -> None:
        self.token_window = TokenWindowMemory(max_tokens=max_tokens, model=model)
        self.time_window = TimeBasedWindow(window_minutes=max_minutes, now=now)
        self.max_tokens = max_tokens
        self.max_minutes = max_minutes

    def add_message(self, role: str, content: str) -> None:
        """Append a message to both windows."""
        check_text(role, content)
        message = self.token_window._message(role, content, self.time_window._clock())
        self.token_window._add(message)
        self.time_window._add(message)

    def _live(self) -> list[Message]:
        tokens = self.token_window
        return [m for m in self.time_window._live() if m.id in tokens]

    def get_messages(self) -> list[dict[str, str]]:
        """What both windows hold now, oldest first, as ``{"role", "content"}`` dicts."""
        return _dicts(self._live())

    def total_tokens(self) -> int:
        """Tokens of what ``get_messages`` returns now."""
        return self.token_window.tokenizer.count_messages(self._live())

    def __len__(self) -> int:
        return len(self._live())

    def __repr__(self) -> str:
        return (
            f"<HybridWindow max_tokens={self.max_tokens} max_minutes={self.max_minutes} "
            f"messages={len(self)}>"
        )
