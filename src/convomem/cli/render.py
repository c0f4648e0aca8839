"""Output for the command line: tables, previews, JSON and a progress bar.

Text that cannot be encoded for the output (a lone surrogate read from a JSON ``\\ud800``
escape, or any character on a narrow terminal encoding) is written as a backslash
escape instead of failing; JSON falls back to ASCII escapes, so it still parses back to
exactly the same strings.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar

from ..model import Message, ToolUseBlock

T = TypeVar("T")

_CONTROL = {i: " " for i in range(32)} | {0x7F: " ", 0x2028: " ", 0x2029: " "}


class SafeText:
    """A text stream wrapper whose ``write`` never raises ``UnicodeEncodeError``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.encoding: str = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        try:
            text.encode(self.encoding)
        except UnicodeEncodeError:
            text = text.encode(self.encoding, "backslashreplace").decode(self.encoding)
        except LookupError:  # an encoding name Python does not know: trust the stream
            pass
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def dump_json(payload: Any, out: TextIO | SafeText) -> None:
    """``payload`` as indented JSON; non-ASCII kept when the output can encode it."""
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = json.dumps(payload, indent=2, ensure_ascii=True)
    out.write(text + "\n")


def plural(n: int, word: str) -> str:
    """``"1 session"``, ``"2 sessions"``."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def one_line(text: str) -> str:
    """``text`` with line breaks, tabs and other control characters turned into spaces."""
    return text.translate(_CONTROL)


def preview(m: Message, width: int = 48) -> str:
    """A one-line preview of a message: its text, the calls it makes, the ids it answers."""
    text = one_line(m.text())
    if m.has_tool_use():
        calls = ", ".join(
            f"{b.name}({one_line(b.arguments())})" for b in m.blocks if isinstance(b, ToolUseBlock)
        )
        text = (text + " " if text else "") + f"-> {calls}"
    if m.has_tool_result():
        text = f"[{', '.join(m.tool_result_ids())}] " + text
    return text if len(text) <= width else text[: width - 3] + "..."


def head_tail(
    items: Sequence[T], head: int | None, tail: int | None
) -> tuple[list[T], int, list[T]]:
    """``(first, omitted, last)``: the first ``head`` and last ``tail`` items.

    With neither given, everything is in ``first``. Overlapping ranges are not repeated.
    """
    n = len(items)
    if head is None and tail is None:
        return list(items), 0, []
    h = min(n, head or 0)
    t = min(n - h, tail or 0)
    return list(items[:h]), n - h - t, list(items[n - t :]) if t else []


def table(
    rows: Sequence[Sequence[object]],
    header: Sequence[str],
    out: TextIO | SafeText,
    *,
    head: int | None = None,
    tail: int | None = None,
) -> None:
    """Rows in aligned columns under ``header``; ``head``/``tail`` elide the middle."""
    first, omitted, last = head_tail(rows, head, tail)
    shown = [[str(c) for c in r] for r in (*first, *last)]
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() + "\n"

    out.write(line(header))
    for r in shown[: len(first)]:
        out.write(line(r))
    if omitted:
        out.write(f"... {omitted:,} rows omitted ...\n")
    for r in shown[len(first) :]:
        out.write(line(r))


class Progress:
    """A one-line progress bar on a terminal; silent when ``stream`` is not a TTY.

    ``update(label, done, total)`` redraws at most ``per_second`` times a second;
    ``close()`` clears the line. No dependency.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        width: int = 30,
        per_second: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(isatty and isatty())
        self._stream = stream
        self._width = width
        self._interval = 1.0 / per_second
        self._clock = clock
        self._last = -self._interval
        self._drawn = False

    def update(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if done < total and now - self._last < self._interval:
            return
        self._last = now
        frac = done / total if total else 1.0
        filled = int(frac * self._width)
        bar = "#" * filled + "-" * (self._width - filled)
        self._stream.write(f"\r{label} [{bar}] {frac:4.0%} {done:,}/{total:,}\x1b[K")
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False
