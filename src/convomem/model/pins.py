"""Pins: which messages a view must never evict."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, TypeAlias

from ..errors import ConfigError
from .messages import Message

PinSpec: TypeAlias = str | int
PIN_NAMES: Final = ("system", "first_user", "last_user", "tool_results")


def resolve_pins(messages: Sequence[Message], pin: Iterable[PinSpec]) -> set[int]:
    """Indices of the messages the pin specs select (priority-2 messages always).

    Specs: ``"system"`` (every system message), ``"first_user"``, ``"last_user"``,
    ``"tool_results"`` (every message carrying a tool result), and integer indices
    (negative from the end; out of range ignored).
    """
    specs = check_pins(pin)
    n = len(messages)
    out = {i for i, m in enumerate(messages) if m.priority == 2}
    for spec in specs:
        if isinstance(spec, int):
            i = spec + n if spec < 0 else spec
            if 0 <= i < n:
                out.add(i)
        elif spec == "system":
            out.update(i for i, m in enumerate(messages) if m.role == "system")
        elif spec == "first_user":
            first = next((i for i, m in enumerate(messages) if m.role == "user"), None)
            if first is not None:
                out.add(first)
        elif spec == "last_user":
            last = next((i for i in range(n - 1, -1, -1) if messages[i].role == "user"), None)
            if last is not None:
                out.add(last)
        else:  # tool_results
            out.update(i for i, m in enumerate(messages) if m.has_tool_result())
    return out


def check_pins(pin: Iterable[PinSpec] | PinSpec | None) -> tuple[PinSpec, ...]:
    """Validate pin specs; a bare string or int is one spec."""
    if pin is None:
        return ()
    if isinstance(pin, str | int) or not isinstance(pin, Iterable):
        pin = (pin,)  # a bare spec (a wrong one is reported below, naming it)
    specs = tuple(pin)
    for spec in specs:
        if isinstance(spec, bool) or not (isinstance(spec, int) or spec in PIN_NAMES):
            raise ConfigError(
                f"pin={spec!r}: unknown pin spec; use an index or one of {list(PIN_NAMES)}"
            )
    return specs
