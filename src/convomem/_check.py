"""Option validators: one place that turns a bad option into a ConfigError naming it.

Every public constructor checks its options with these, so a wrong value always reads
``name=value: must be ...`` and nothing is half-built.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ConfigError, bounded_repr

T = TypeVar("T")


def is_int(value: object) -> bool:
    """True for an int that is not a bool."""
    return value.__class__ is int or (isinstance(value, int) and not isinstance(value, bool))


def integer(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """An int (not a bool) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={bounded_repr(value)}: must be an integer")
    n = value
    if minimum is not None and n < minimum:
        raise ConfigError(f"{name}={bounded_repr(value)}: must be at least {minimum}")
    if maximum is not None and n > maximum:
        raise ConfigError(f"{name}={bounded_repr(value)}: must be at most {maximum}")
    return n


def positive_int(name: str, value: object) -> int:
    """An int of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name}={bounded_repr(value)}: must be a positive integer")
    return value


def non_negative_int(name: str, value: object) -> int:
    """An int of at least 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{name}={bounded_repr(value)}: must be a non-negative integer")
    return value


def optional_positive_int(name: str, value: object) -> int | None:
    """None, or an int of at least 1."""
    return None if value is None else positive_int(name, value)


def number(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    low_open: bool = False,
) -> float:
    """A finite real number (not a bool) in the given interval."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name}={bounded_repr(value)}: must be a finite number")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"{name}={bounded_repr(value)}: must be a finite number")
    low = "(" if low_open else "["
    span = f"{low}{minimum if minimum is not None else '-inf'}, "
    span += f"{maximum if maximum is not None else 'inf'}]"
    if minimum is not None and (v < minimum or (low_open and v == minimum)):
        raise ConfigError(f"{name}={bounded_repr(value)}: must be a number in {span}")
    if maximum is not None and v > maximum:
        raise ConfigError(f"{name}={bounded_repr(value)}: must be a number in {span}")
    return v


def fraction(name: str, value: object, *, low_open: bool = False) -> float:
    """A number in [0, 1] (or (0, 1] with ``low_open``)."""
    return number(name, value, minimum=0.0, maximum=1.0, low_open=low_open)


def flag(name: str, value: object) -> bool:
    """True or False, nothing else."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={bounded_repr(value)}: must be True or False")
    return value


def one_of(name: str, value: object, choices: tuple[T, ...]) -> T:
    """One of ``choices``."""
    for c in choices:
        if value == c and type(value) is type(c):
            return c
    raise ConfigError(f"{name}={bounded_repr(value)}: must be one of {list(choices)}")


def function(name: str, value: object, what: str = "") -> Callable[..., Any]:
    """A callable (``what`` says what it is called with)."""
    if not callable(value):
        called = f" ({what})" if what else ""
        raise ConfigError(f"{name}={bounded_repr(value)}: must be callable{called}")
    return value


class Owner:
    """The one owner of a stateful object (a memory's running summary, its drift
    detector): objects that hold one conversation's state must not serve two, or one
    conversation's summary and facts would reach the other. Kept as a weak reference, so
    the object is free again once its owner is gone; not pickled (an owner re-claims)."""

    __slots__ = ("_ref",)

    def __init__(self) -> None:
        self._ref: weakref.ref[object] | None = None

    def claim(self, owner: object, name: str, thing: object) -> None:
        """Make ``owner`` the owner; ``ConfigError`` naming option ``name`` when another
        live owner holds ``thing``."""
        held = None if self._ref is None else self._ref()
        if held is not None and held is not owner:
            raise ConfigError(
                f"{name}={bounded_repr(thing)}: already belongs to {bounded_repr(held)}; it "
                "holds one conversation's state: give each memory its own"
            )
        self._ref = weakref.ref(owner)

    def __reduce__(self) -> tuple[type[Owner], tuple[()]]:
        return (Owner, ())


def model_spec(name: str, value: object, offline: tuple[str, ...]) -> tuple[str, str]:
    """A model spec: one of the ``offline`` names, as ``(name, "")``, or
    ``"openai:MODEL"`` (a model behind an OpenAI-compatible endpoint; the model name may
    hold colons, ``openai:llama3:8b``), as ``("openai", MODEL)``."""
    if isinstance(value, str):
        if value in offline:
            return value, ""
        provider, colon, model = value.partition(":")
        if colon and provider == "openai" and model.strip() == model and model:
            return provider, model
    choices = ", ".join([*map(repr, offline), "'openai:MODEL'"])
    raise ConfigError(f"{name}={bounded_repr(value)}: must be one of {choices}")


def http_url(name: str, value: object) -> str:
    """An ``http://`` or ``https://`` URL."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigError(f"{name}={bounded_repr(value)}: must be an http:// or https:// URL")
    return value
