"""AdaptiveSlidingWindow and ConversationTurn: the article's code as the oracle."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.compat import AdaptiveSlidingWindow, ConversationTurn
from convomem.errors import ConfigError, InvalidMessage, NotAMessage

T0 = datetime(2025, 3, 15, 9, 0)
TEXTS = (
    "hello there",
    "we have a server outage",
    "How can I check memory usage?",
    "the deploy failed again",
    "ok",
    "thanks",
    "show me the logs",  # "show" contains "how": the article's substring test
    "URGENT: database is down",
    "sounds good",
)


def article_window(
    turns: list[tuple[str, str, float, int]], max_tokens: int, min_turns: int
) -> tuple[list[int], list[int]]:
    """The article's AdaptiveSlidingWindow, verbatim but for removal by position (its
    ``list.remove`` removes the first *equal* turn) and ``min_turns=0`` (its slice
    ``[:-0]`` would protect every turn). Returns (kept, archived) as input indices."""
    window: list[int] = []
    archived: list[int] = []

    def score(k: int, index: int) -> float:
        _, content, importance, _ = turns[k]
        s = importance
        s += index / max(len(window) - 1, 1) * 0.3
        if "?" in content or "how" in content.lower():
            s += 0.2
        critical = ["error", "failure", "outage", "critical", "urgent", "fail"]
        if any(kw in content.lower() for kw in critical):
            s += 0.3
        return min(s, 1.0)

    for k in range(len(turns)):
        window.append(k)
        total = sum(turns[j][3] for j in window)
        if total <= max_tokens:
            continue
        scored = [(i, score(j, i), j) for i, j in enumerate(window)]
        candidates = scored[: max(0, len(scored) - min_turns)]
        candidates.sort(key=lambda x: x[1])
        while total > max_tokens and candidates:
            _, _, j = candidates.pop(0)
            archived.append(j)
            window.remove(j)
            total -= turns[j][3]
    return window, archived


turn_strategy = st.tuples(
    st.sampled_from(("user", "assistant", "system", "tool")),
    st.sampled_from(TEXTS),
    st.sampled_from((0.0, 0.1, 0.5, 0.9, 1.0)),
    st.integers(0, 40),
)


@settings(max_examples=150)
@given(
    turns=st.lists(turn_strategy, max_size=25),
    max_tokens=st.integers(1, 150),
    min_turns=st.integers(0, 5),
)
def test_matches_the_articles_algorithm(
    turns: list[tuple[str, str, float, int]], max_tokens: int, min_turns: int
) -> None:
    window = AdaptiveSlidingWindow(max_tokens=max_tokens, min_turns=min_turns)
    objects = [ConversationTurn(r, c, T0, importance=i, tokens=t) for r, c, i, t in turns]
    for k, turn in enumerate(objects):
        window.add_turn(turn)
        kept, archived = article_window(turns[: k + 1], max_tokens, min_turns)
        assert window.turns == [objects[j] for j in kept]
        assert [id(t) for t in window.archived] == [id(objects[j]) for j in archived]
        assert window.get_context() == [{"role": turns[j][0], "content": turns[j][1]} for j in kept]
        assert window.total_tokens() == sum(turns[j][3] for j in kept)
        assert set(range(max(0, k + 1 - min_turns), k + 1)) <= set(kept)  # the newest stay
        assert window.total_tokens() <= max_tokens or len(kept) <= min_turns


def test_the_articles_scores() -> None:
    window = AdaptiveSlidingWindow(max_tokens=10_000, min_turns=0)
    turns = [
        ConversationTurn("user", "hello", T0, importance=0.2),
        ConversationTurn("user", "Is it down?", T0, importance=0.2),
        ConversationTurn("user", "server outage", T0, importance=0.2),
        ConversationTurn("user", "how? urgent failure", T0, importance=0.6),
    ]
    for t in turns:
        window.add_turn(t)
    scores = [window.importance(t, i) for i, t in enumerate(turns)]
    assert scores == pytest.approx([0.2, 0.2 + 0.1 + 0.2, 0.2 + 0.2 + 0.3, 1.0])


def test_low_scores_leave_first_and_the_newest_are_protected() -> None:
    window = AdaptiveSlidingWindow(max_tokens=100, min_turns=2)
    for text in ["hello", "we have an outage", "ok", "thanks", "fine", "bye"]:
        window.add_turn(ConversationTurn("user", text, T0, tokens=30))
    # 6 x 30 over 100: three leave; the outage (0.5 + recency + 0.3) outranks the chatter,
    # and the two newest are protected whatever their score.
    assert [t.content for t in window.turns] == ["we have an outage", "fine", "bye"]
    assert [t.content for t in window.archived] == ["hello", "ok", "thanks"]


def test_protected_turns_stay_even_over_budget() -> None:
    window = AdaptiveSlidingWindow(max_tokens=50, min_turns=2)
    window.add_turn(ConversationTurn("system", "You are an SRE assistant.", T0, tokens=10))
    window.add_turn(ConversationTurn("user", "big log dump", T0, tokens=40))
    window.add_turn(ConversationTurn("assistant", "bigger analysis", T0, tokens=45))
    assert [t.role for t in window.turns] == ["user", "assistant"]
    assert window.total_tokens() == 85 > window.max_tokens
    assert [t.role for t in window.archived] == ["system"]  # the article pins no system


def test_min_turns_zero_protects_nothing() -> None:
    window = AdaptiveSlidingWindow(max_tokens=10, min_turns=0)
    window.add_turn(ConversationTurn("user", "a", T0, tokens=5))
    window.add_turn(ConversationTurn("user", "b", T0, tokens=20))
    assert window.turns == [] and [t.content for t in window.archived] == ["a", "b"]


def test_turns_without_a_count_are_counted_and_the_count_written_back() -> None:
    window = AdaptiveSlidingWindow(max_tokens=1000, model="words")
    turn = ConversationTurn("user", "my pod is crashing", T0)
    assert turn.tokens is None
    window.add_turn(turn)
    assert turn.tokens == 4 + 4 and window.total_tokens() == 8
    given_zero = ConversationTurn("user", "trusted count", T0, tokens=0)
    window.add_turn(given_zero)
    assert given_zero.tokens == 0 and window.total_tokens() == 8


def test_conversation_turn_is_the_articles_dataclass() -> None:
    turn = ConversationTurn("user", "x" * 80, T0)
    assert turn.importance == 0.5
    expected = hashlib.md5(f"{T0}{'x' * 50}".encode()).hexdigest()[:8]
    assert turn.turn_id == expected
    assert ConversationTurn("user", "y", T0, turn_id="mine").turn_id == "mine"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"role": "robot"}, "role"),
        ({"content": 3}, "content"),
        ({"timestamp": "today"}, "timestamp"),
        ({"importance": 1.5}, "importance"),
        ({"importance": float("nan")}, "importance"),
        ({"importance": True}, "importance"),
        ({"tokens": -1}, "tokens"),
        ({"turn_id": 7}, "turn_id"),
    ],
)
def test_bad_turns_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    fields: dict[str, Any] = {"role": "user", "content": "hi", "timestamp": T0, **kwargs}
    with pytest.raises(InvalidMessage, match=field):
        ConversationTurn(**fields)


def test_a_bad_add_changes_nothing() -> None:
    window = AdaptiveSlidingWindow(max_tokens=100, min_turns=1)
    window.add_turn(ConversationTurn("user", "first", T0, tokens=10))
    with pytest.raises(NotAMessage, match="turn"):
        window.add_turn("hello")  # type: ignore[arg-type]
    turn = ConversationTurn("user", "second", T0, tokens=10)
    turn.importance = 7.0  # a dataclass: fields can change after construction
    with pytest.raises(InvalidMessage, match=r"importance=7\.0"):
        window.add_turn(turn)
    assert [t.content for t in window.turns] == ["first"] and window.total_tokens() == 10


def test_archived_is_drainable_and_turns_is_a_copy() -> None:
    window = AdaptiveSlidingWindow(max_tokens=10, min_turns=1)
    for text in "abc":
        window.add_turn(ConversationTurn("user", text, T0, tokens=10))
    drained = list(window.archived)
    window.archived.clear()
    assert [t.content for t in drained] == ["a", "b"] and window.archived == []
    window.turns.clear()
    assert len(window) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens=0"),
        ({"min_turns": -1}, "min_turns=-1"),
        ({"min_turns": 1.0}, r"min_turns=1\.0"),
        ({"model": "nope"}, "model='nope'"),
    ],
)
def test_bad_options(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AdaptiveSlidingWindow(**kwargs)
