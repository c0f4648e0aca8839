"""Errors that carry a value print a bounded repr: a 50 MB message never floods a log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem import ConversationMemory
from convomem.errors import (
    MAX_REPR,
    ConcurrentUpdate,
    ConvomemError,
    CorruptRecord,
    InvalidMessage,
    InvalidPage,
    MessageConflict,
    SessionOwnerMismatch,
    bounded_repr,
)
from convomem.formats.anthropic import from_anthropic
from convomem.formats.openai import from_openai
from convomem.model import Message

BIG = "x" * 50_000_000
"""A 50 MB value (the size the issue reports)."""

# What an error adds around the value: the field's name and the problem.
ROOM = 2 * MAX_REPR + 200


class Loud:
    """An object whose repr is huge."""

    def __repr__(self) -> str:
        return "L" * 1_000_000


class Broken:
    """An object whose repr raises."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    "value",
    [BIG, [BIG] * 3, {"k": {BIG}}, (BIG, [BIG, {"n": BIG}]), Loud(), 10**5000, b"y" * 10**6],
    ids=["str", "list", "nested", "tuple", "object", "long int", "bytes"],
)
def test_bounded_repr_is_bounded(value: Any) -> None:
    text = bounded_repr(value)
    assert len(text) <= MAX_REPR
    assert text  # never empty: it still shows the value's start


def test_a_short_value_is_shown_whole() -> None:
    assert bounded_repr("order 1182") == "'order 1182'"
    assert bounded_repr({"v": 1}) == "{'v': 1}"


def test_a_value_whose_repr_fails_shows_its_type() -> None:
    assert bounded_repr(Broken()).startswith("<Broken ")


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.text(max_size=300) | st.integers() | st.none(),
        lambda c: st.lists(c, max_size=12) | st.dictionaries(st.text(max_size=5), c, max_size=12),
        max_leaves=30,
    )
)
def test_bounded_repr_of_any_json_value(value: Any) -> None:
    text = bounded_repr(value)
    assert len(text) <= MAX_REPR
    if isinstance(value, str | int) and len(repr(value)) <= MAX_REPR - 40:
        assert text == repr(value)


ERRORS: dict[str, Callable[[], ConvomemError]] = {
    "InvalidMessage": lambda: InvalidMessage("content", BIG, "bad"),
    "InvalidMessage field": lambda: InvalidMessage("metadata" + BIG, 1, "bad"),
    "InvalidPage": lambda: InvalidPage(2, BIG, "messages", BIG, "bad"),
    "ConcurrentUpdate": lambda: ConcurrentUpdate(BIG, "seq", 1, 2),
    "MessageConflict": lambda: MessageConflict(BIG, BIG, 3, "other content"),
    "CorruptRecord": lambda: CorruptRecord(BIG, [4], "bad json", messages=[]),
    "SessionOwnerMismatch": lambda: SessionOwnerMismatch(BIG, BIG, BIG),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_every_error_carrying_a_value_prints_it_bounded(name: str) -> None:
    exc = ERRORS[name]()
    assert len(str(exc)) <= ROOM, name


def raises(call: Callable[[], Any]) -> ConvomemError:
    with pytest.raises(ConvomemError) as info:
        call()
    return info.value


@pytest.mark.parametrize(
    "call",
    [
        lambda: Message("m", BIG, content="hi"),
        lambda: Message("m", "user", content=[{"type": BIG}]),
        lambda: Message("m", "user", content="x", metadata={"k": {BIG}}),
        lambda: from_openai([{"role": BIG, "content": "x"}]),
        lambda: from_anthropic([{"role": BIG, "content": "x"}]),
        lambda: ConversationMemory(300).add_message(BIG),
        lambda: ConversationMemory(BIG),
    ],
    ids=["role", "block type", "metadata", "openai role", "anthropic role", "add", "option"],
)
def test_a_50_mb_value_in_a_real_error_is_cut(call: Callable[[], Any]) -> None:
    exc = raises(call)
    assert len(str(exc)) <= ROOM
    assert "xxxx" in str(exc)  # the value is still shown, cut


def test_the_value_itself_stays_on_the_error() -> None:
    exc = InvalidMessage("content", BIG, "bad")
    assert exc.value is BIG
