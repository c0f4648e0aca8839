"""evict_conversations: the seed examples, edge cases, bad input, and a brute-force oracle."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, ConvomemError
from convomem.stores.forgetting import evict_conversations


def oracle(conversations: list[list[str]], cap: int) -> list[str]:
    """Straight from the definition: the longest suffix of conversations under the cap."""
    for start in range(len(conversations) + 1):
        kept = [id_ for conversation in conversations[start:] for id_ in conversation]
        if len(set(kept)) <= cap:
            out: list[str] = []
            for id_ in kept:
                if id_ not in out:
                    out.append(id_)
            return out
    raise AssertionError("unreachable: no conversations mention nothing")


def test_seed_examples() -> None:
    assert evict_conversations([["p1", "p2"], ["p2", "p3"], ["p4", "p1"]], 3) == ["p4", "p1"]
    assert evict_conversations([["p1", "p1"], ["p1"]], 1) == ["p1"]


def test_nothing_dropped_when_under_the_cap() -> None:
    assert evict_conversations([["a", "b"], ["b", "c"]], 3) == ["a", "b", "c"]
    assert evict_conversations([["a", "b"], ["b", "c"]], 10) == ["a", "b", "c"]


def test_an_id_stays_while_a_kept_conversation_still_mentions_it() -> None:
    # Dropping the first conversation removes "a" and "b" only because no later
    # conversation mentions them; "c" survives through the third one.
    assert evict_conversations([["a", "b", "c"], ["c", "d"], ["c"]], 2) == ["c", "d"]


def test_cap_zero_drops_every_conversation_that_mentions_anything() -> None:
    assert evict_conversations([["a"], [], ["b", "b"]], 0) == []
    assert evict_conversations([[], []], 0) == []


def test_empty_input_and_empty_conversations() -> None:
    assert evict_conversations([], 0) == []
    assert evict_conversations([], 5) == []
    assert evict_conversations([[], [], []], 1) == []
    assert evict_conversations([["a"], [], ["b"]], 1) == ["b"]
    assert evict_conversations([["a"], [], ["b"]], 2) == ["a", "b"]


def test_a_newest_conversation_over_the_cap_on_its_own_leaves_nothing() -> None:
    assert evict_conversations([["a"], ["b", "c", "d"]], 2) == []


def test_tuples_are_accepted_and_input_is_not_modified() -> None:
    conversations = [["p1", "p2"], ("p2", "p3"), ["p4", "p1"]]
    before = copy.deepcopy(conversations)
    assert evict_conversations(conversations, 3) == ["p4", "p1"]
    assert conversations == before


@pytest.mark.parametrize("cap", [-1, -100])
def test_negative_cap_is_a_value_error_naming_it(cap: int) -> None:
    with pytest.raises(ValueError, match=rf"max_listings={cap}"):
        evict_conversations([["a"]], cap)
    with pytest.raises(ConfigError):
        evict_conversations([], cap)


@pytest.mark.parametrize("cap", [True, False, 1.0, "3", None])
def test_non_integer_cap_is_rejected(cap: Any) -> None:
    with pytest.raises(ConfigError, match=r"max_listings="):
        evict_conversations([["a"]], cap)


@pytest.mark.parametrize(
    ("conversations", "where"),
    [
        ("abc", r"conversations='abc'"),
        (None, r"conversations=None"),
        ([["a"], "bc"], r"conversations\[1\]='bc'"),
        ([["a"], {"b"}], r"conversations\[1\]="),
        ([["a"], ["b", 3]], r"conversations\[1\]\[1\]=3"),
        ([[None]], r"conversations\[0\]\[0\]=None"),
    ],
)
def test_malformed_conversations_name_the_position(conversations: Any, where: str) -> None:
    with pytest.raises(ConfigError, match=where) as info:
        evict_conversations(conversations, 1)
    assert isinstance(info.value, ConvomemError)


class Id(str):
    """A string id that counts how often it is hashed: a deterministic measure of work."""

    hashes = 0

    def __hash__(self) -> int:
        Id.hashes += 1
        return str.__hash__(self)


def chained(n: int) -> list[list[str]]:
    """[x0, x1], [x1, x2], ...: any k consecutive conversations hold k + 1 distinct ids."""
    return [[Id(f"x{i}"), Id(f"x{i + 1}")] for i in range(n)]


def test_work_is_proportional_to_what_is_kept_not_to_the_history() -> None:
    # Only the kept run and the first dropped conversation are hashed: at most twice
    # each (the set of ids, then the ordered result), however long the history.
    for n in (100, 10_000):
        conversations = chained(n)
        Id.hashes = 0
        result = evict_conversations(conversations, 10)
        assert result == [f"x{i}" for i in range(n - 9, n + 1)]
        assert Id.hashes <= 2 * (2 * 10)  # 9 kept + 1 dropped conversation, 2 ids each


def test_work_is_linear_when_everything_is_kept() -> None:
    conversations = chained(5_000)
    Id.hashes = 0
    assert len(evict_conversations(conversations, 10**6)) == 5_001
    assert Id.hashes <= 2 * 2 * 5_000


conversation_lists = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]), max_size=6), max_size=8
)


@settings(max_examples=300, deadline=None)
@given(conversation_lists, st.integers(min_value=0, max_value=8))
def test_matches_brute_force_oracle(conversations: list[list[str]], cap: int) -> None:
    result = evict_conversations(conversations, cap)
    assert result == oracle(conversations, cap)
    assert len(result) <= cap
    assert len(set(result)) == len(result)
