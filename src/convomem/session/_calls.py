"""How a ``ConversationMemory``'s calls reach its store: which twins a store needs
(``check_store``), the error of a sync method that reached something async
(``refusal``), and the ``expected_seq`` a caller gives (``check_expected_seq``)."""

from __future__ import annotations

import inspect

from .. import _check
from .._io import Call
from ..errors import ConfigError

__all__ = ["check_expected_seq", "check_store", "refusal"]


def check_store(store: object) -> bool:
    """Whether ``store`` is async; ConfigError unless it has the four Store methods."""
    names = ("get_items", "add_items", "pop_item", "clear_session")
    methods = [getattr(store, n, None) for n in names]
    if not all(callable(m) for m in methods):
        raise ConfigError(
            f"store={store!r}: must implement get_items, add_items, pop_item and "
            "clear_session (see convomem.stores)"
        )
    kinds = {inspect.iscoroutinefunction(m) for m in methods}
    if len(kinds) > 1:
        raise ConfigError(
            f"store={store!r}: mixes sync and async methods; implement Store or AsyncStore"
        )
    return kinds == {True}


def refusal(store: object, step: Call) -> ConfigError:
    """The error of a sync method whose ``step`` is async (``store``, an ``AsyncStore``,
    or another async callable): it names the async twins to use instead."""
    owner = getattr(step.fn, "__self__", None)
    what = (
        f"store={store!r}: is an AsyncStore"
        if owner is store
        else f"{owner if owner is not None else step.fn!r}: is async"
    )
    return ConfigError(
        f"{what}; use the async methods (aadd, aadd_messages, acontext, amessages, aclear, aflush)"
    )


def check_expected_seq(seq: int | None) -> int | None:
    """The ``expected_seq`` of an add: None, or a non-negative int (else a ConfigError)."""
    return None if seq is None else _check.non_negative_int("expected_seq", seq)
