"""Ids the converters derive: deterministic per list, recognizable, never over given ids."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.formats import from_anthropic, from_openai
from convomem.model import DERIVED_ID_PREFIX, Message, is_derived_id, new_id

texts = st.sampled_from(["ok", "yes", "hello", ""])
openai_dicts = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["system", "user", "assistant"]),
    texts,
)
anthropic_dicts = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant"]),
    texts,
)


@settings(max_examples=60)
@given(st.lists(openai_dicts, max_size=8))
def test_openai_same_list_twice_same_ids_all_derived_and_distinct(
    data: list[dict[str, Any]],
) -> None:
    first, second = from_openai(data), from_openai(data)
    assert [m.id for m in first] == [m.id for m in second]
    assert len({m.id for m in first}) == len(first)  # equal dicts in one list: distinct ids
    assert all(is_derived_id(m.id) for m in first)


@settings(max_examples=60)
@given(st.lists(anthropic_dicts, max_size=8), st.none() | st.just("be brief"))
def test_anthropic_same_list_twice_same_ids_all_derived_and_distinct(
    data: list[dict[str, Any]], system: str | None
) -> None:
    first, second = from_anthropic(data, system), from_anthropic(data, system)
    assert [m.id for m in first] == [m.id for m in second]
    assert len({m.id for m in first}) == len(first)
    assert all(is_derived_id(m.id) for m in first)


@settings(max_examples=60)
@given(st.lists(openai_dicts, min_size=1, max_size=8))
def test_one_at_a_time_repeats_are_recognizable(data: list[dict[str, Any]]) -> None:
    # Converted one call at a time, equal dicts get equal ids: every one of them is
    # marked derived, so a session can tell the repeat from a caller's duplicate id.
    singles = [from_openai([d])[0] for d in data]
    for d, m in zip(data, singles, strict=True):
        assert is_derived_id(m.id)
        assert m.id == from_openai([d])[0].id


def test_given_ids_are_honoured_and_not_derived() -> None:
    (m,) = from_openai([{"role": "user", "content": "hi", "id": "mine"}])
    assert m.id == "mine" and not is_derived_id(m.id)
    (a,) = from_anthropic([{"role": "user", "content": "hi", "id": "msg_01"}])
    assert a.id == "msg_01" and not is_derived_id(a.id)


def test_generated_and_plain_ids_are_not_derived() -> None:
    assert not is_derived_id(new_id())
    assert not is_derived_id(Message(role="user").id)
    assert not is_derived_id("u1")
    assert is_derived_id(DERIVED_ID_PREFIX + "anything")
