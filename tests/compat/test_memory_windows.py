"""TokenWindowMemory, TimeBasedWindow, HybridWindow: the article's code as the oracle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.compat import HybridWindow, TimeBasedWindow, TokenWindowMemory
from convomem.errors import ConfigError, InvalidMessage
from convomem.tokens import FunctionTokenizer, TiktokenTokenizer

ROLES = ("system", "user", "assistant", "tool")


def words(content: str) -> int:
    """The article's per-message cost with a whitespace 'encoding': tokens + 4."""
    return len(content.split()) + 4


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# -- TokenWindowMemory -----------------------------------------------------------------


def test_the_articles_usage_example() -> None:
    token_window = TokenWindowMemory(max_tokens=4000)
    token_window.add_message("system", "You are a technical support expert.")
    token_window.add_message("user", "My Docker container keeps restarting.")
    token_window.add_message("assistant", "Let me check if it is in OOMKilled state...")
    # gpt-4o counts with o200k_base when installed offline, else cl100k_base stands in.
    assert token_window.tokenizer.name in ("tiktoken:o200k_base", "tiktoken:cl100k_base")
    assert isinstance(token_window.tokenizer, TiktokenTokenizer)
    enc = token_window.tokenizer.encoding
    texts = [m["content"] for m in token_window.get_messages()]
    assert len(texts) == 3
    assert token_window._total_tokens() == sum(len(enc.encode(t)) + 4 for t in texts)


def article_token_window(ops: list[tuple[str, str]], max_tokens: int) -> list[dict[str, str]]:
    """The article's TokenWindowMemory, verbatim but for the encoding."""
    messages: list[dict[str, str]] = []
    for role, content in ops:
        messages.append({"role": role, "content": content})
        while sum(words(m["content"]) for m in messages) > max_tokens and len(messages) > 2:
            messages.pop(0 if messages[0]["role"] != "system" else 1)
    return messages


contents = st.lists(st.sampled_from(["a", "b", "ok", "server", "down"]), min_size=0, max_size=12)
ops_strategy = st.lists(
    st.tuples(st.sampled_from(ROLES), contents.map(" ".join)), min_size=0, max_size=25
)


@settings(max_examples=120)
@given(
    ops=ops_strategy,
    system=st.sampled_from(["You are helpful.", "Be brief"]),
    max_tokens=st.integers(1, 60),
)
def test_with_a_system_prompt_it_is_the_articles_window(
    ops: list[tuple[str, str]], system: str, max_tokens: int
) -> None:
    ops = [("system", system), *ops]
    window = TokenWindowMemory(max_tokens=max_tokens, model="words")
    for k, (role, content) in enumerate(ops):
        window.add_message(role, content)
        expected = article_token_window(ops[: k + 1], max_tokens)
        assert window.get_messages() == expected
        assert window.total_tokens() == sum(words(m["content"]) for m in expected)
        assert window.over_limit() == (window.total_tokens() > max_tokens)


@settings(max_examples=120)
@given(ops=ops_strategy, max_tokens=st.integers(1, 60))
def test_without_a_system_prompt_the_budget_holds_down_to_the_newest(
    ops: list[tuple[str, str]], max_tokens: int
) -> None:
    ops = [("user", "hello"), *ops]
    window = TokenWindowMemory(max_tokens=max_tokens, model="words")
    for k, (role, content) in enumerate(ops):
        window.add_message(role, content)
        # Oracle: drop the oldest while over budget, never the newest.
        expected = [{"role": r, "content": c} for r, c in ops[: k + 1]]
        while sum(words(m["content"]) for m in expected) > max_tokens and len(expected) > 1:
            expected.pop(0)
        assert window.get_messages() == expected
        assert window.total_tokens() <= max_tokens or len(expected) == 1


def test_system_prompt_and_newest_are_kept_even_over_budget() -> None:
    window = TokenWindowMemory(max_tokens=12, model="words")
    window.add_message("system", "one two three")  # 7
    window.add_message("user", "a b c d e f")  # 10
    assert [m["role"] for m in window.get_messages()] == ["system", "user"]
    assert window.over_limit() and window.total_tokens() == 17
    window.add_message("user", "x")  # 5: the big one goes, 12 fits
    assert window.get_messages()[1:] == [{"role": "user", "content": "x"}]
    assert not window.over_limit()


def test_a_later_system_message_is_evictable() -> None:
    window = TokenWindowMemory(max_tokens=20, model="words")
    for role, content in [("system", "S"), ("system", "note"), ("user", "a b c d e f g h")]:
        window.add_message(role, content)
    assert [m["content"] for m in window.get_messages()] == ["S", "a b c d e f g h"]


def test_equal_texts_are_distinct_messages_and_reads_are_copies() -> None:
    window = TokenWindowMemory(max_tokens=100, model="words")
    window.add_message("user", "ok")
    window.add_message("user", "ok")
    got = window.get_messages()
    assert got == [{"role": "user", "content": "ok"}] * 2
    got[0]["content"] = "changed"
    window.messages.clear()
    assert window.get_messages() == [{"role": "user", "content": "ok"}] * 2
    assert len(window) == 2


def test_each_message_is_counted_once() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text.split())

    window = TokenWindowMemory(max_tokens=30, model=FunctionTokenizer(count, name="spy"))
    for i in range(200):
        window.add_message("user", f"message number {i}")
        window.get_messages()
        window.total_tokens()
    assert len(calls) == 200


@pytest.mark.parametrize(
    ("args", "field"), [(("robot", "hi"), "role"), (("user", 5), "content"), ((None, "x"), "role")]
)
def test_bad_messages_change_nothing(args: tuple[Any, ...], field: str) -> None:
    window = TokenWindowMemory(max_tokens=100, model="words")
    window.add_message("system", "S")
    with pytest.raises(InvalidMessage, match=field):
        window.add_message(*args)
    window.add_message("system", "second")  # still the second message: evictable
    assert window.get_messages()[0]["content"] == "S" and len(window) == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens=0"),
        ({"max_tokens": 1.5}, r"max_tokens=1\.5"),
        ({"model": "gtp-4o"}, "model='gtp-4o'"),
    ],
)
def test_bad_token_window_options(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TokenWindowMemory(**kwargs)


# -- TimeBasedWindow -------------------------------------------------------------------


def test_keeps_only_the_last_n_minutes_and_the_boundary_expires() -> None:
    clock = Clock()
    window = TimeBasedWindow(window_minutes=30, now=clock)
    window.add_message("user", "first")
    clock.t += 10 * 60
    window.add_message("assistant", "second")
    clock.t += 20 * 60 - 1
    assert [m["content"] for m in window.get_messages()] == ["first", "second"]
    clock.t += 1  # exactly 30 minutes old: the article keeps only timestamp > cutoff
    assert [m["content"] for m in window.get_messages()] == ["second"]
    clock.t += 3600  # read much later, without adding: empty
    assert window.get_messages() == [] and len(window) == 0


def test_the_system_prompt_never_expires() -> None:
    clock = Clock()
    window = TimeBasedWindow(window_minutes=1, now=clock)
    window.add_message("system", "You are helpful.")
    window.add_message("system", "a later note")
    clock.t += 3600
    window.add_message("user", "hi")
    assert window.get_messages() == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "hi"},
    ]


def test_a_datetime_clock_and_timestamps() -> None:
    start = datetime(2025, 3, 18, 2, 0, tzinfo=UTC)
    now = [start]
    window = TimeBasedWindow(window_minutes=5, now=lambda: now[0])
    window.add_message("user", "db migration at 2 AM")
    now[0] = start + timedelta(minutes=4)
    window.add_message("user", "done?")
    stamps = [m["timestamp"] for m in window.messages]
    assert stamps == [start, start + timedelta(minutes=4)]
    now[0] = start + timedelta(minutes=6)
    assert [m["content"] for m in window.messages] == ["done?"]


def test_a_clock_that_steps_back_never_reorders() -> None:
    clock = Clock()
    window = TimeBasedWindow(window_minutes=10, now=clock)
    window.add_message("user", "a")
    clock.t -= 3600  # a wall-clock adjustment
    window.add_message("user", "b")
    assert [m["content"] for m in window.get_messages()] == ["a", "b"]
    first, second = (m["timestamp"] for m in window.messages)
    assert second >= first
    clock.t += 3600 + 600
    assert window.get_messages() == []


@settings(max_examples=100)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 900), st.sampled_from(ROLES), st.booleans()), max_size=30
    ),
    minutes=st.integers(1, 20),
)
def test_time_window_matches_the_articles_filter(
    steps: list[tuple[int, str, bool]], minutes: int
) -> None:
    clock = Clock()
    window = TimeBasedWindow(window_minutes=minutes, now=clock)
    log: list[tuple[float, str, str]] = []
    for k, (advance, role, read) in enumerate(steps):
        clock.t += advance
        window.add_message(role, f"m{k}")
        log.append((clock.t, role, f"m{k}"))
        if read:
            clock.t += advance
        cutoff = clock.t - minutes * 60
        expected = [
            {"role": r, "content": c}
            for i, (t, r, c) in enumerate(log)
            if t > cutoff or (i == 0 and r == "system")
        ]
        assert window.get_messages() == expected


def test_bad_time_window_input() -> None:
    with pytest.raises(ConfigError, match="window_minutes=0"):
        TimeBasedWindow(0)
    with pytest.raises(ConfigError, match="now="):
        TimeBasedWindow(5, now="soon")  # type: ignore[arg-type]
    window = TimeBasedWindow(5, now=lambda: "noon")  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError, match="now: returned 'noon'"):
        window.add_message("user", "hi")
    ok = TimeBasedWindow(5, now=Clock())
    with pytest.raises(InvalidMessage, match="content=3"):
        ok.add_message("user", 3)  # type: ignore[arg-type]
    assert ok.get_messages() == []


# -- HybridWindow ----------------------------------------------------------------------


@settings(max_examples=100)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 600), st.sampled_from(ROLES), st.integers(0, 10)), max_size=25
    ),
    max_tokens=st.integers(5, 60),
    minutes=st.integers(1, 15),
)
def test_hybrid_is_the_intersection_of_both_windows(
    steps: list[tuple[int, str, int]], max_tokens: int, minutes: int
) -> None:
    clock = Clock()
    hybrid = HybridWindow(max_tokens=max_tokens, max_minutes=minutes, model="words", now=clock)
    tokens = TokenWindowMemory(max_tokens=max_tokens, model="words")
    times = TimeBasedWindow(window_minutes=minutes, now=clock)
    for k, (advance, role, n) in enumerate(steps):
        clock.t += advance
        content = " ".join([f"w{k}"] * (n + 1))  # unique texts: the article's intersection is exact
        for w in (hybrid, tokens, times):
            w.add_message(role, content)
        in_tokens = {m["content"] for m in tokens.get_messages()}
        expected = [m for m in times.get_messages() if m["content"] in in_tokens]
        assert hybrid.get_messages() == expected
        assert hybrid.total_tokens() == sum(words(m["content"]) for m in expected)


def test_hybrid_repeated_texts_are_distinct_messages() -> None:
    clock = Clock()
    hybrid = HybridWindow(max_tokens=30, max_minutes=60, model="words", now=clock)
    hybrid.add_message("system", "Be brief")  # 6
    hybrid.add_message("user", "ok")  # 5: evicted by tokens below
    for i in range(3):
        hybrid.add_message("assistant", f"a b c {i}")  # 8 each
    hybrid.add_message("user", "ok")
    got = [m["content"] for m in hybrid.get_messages()]
    # By text, the old "ok" would survive through its twin; it is gone.
    assert got == ["Be brief", "a b c 1", "a b c 2", "ok"]
    assert len(hybrid) == 4


def test_hybrid_both_limits_and_the_system_prompt() -> None:
    clock = Clock()
    hybrid = HybridWindow(max_tokens=1000, max_minutes=60, model="words", now=clock)
    hybrid.add_message("system", "You are helpful.")
    hybrid.add_message("user", "old question")
    clock.t += 61 * 60
    hybrid.add_message("user", "new question")
    assert [m["content"] for m in hybrid.get_messages()] == ["You are helpful.", "new question"]
    assert (hybrid.max_tokens, hybrid.max_minutes) == (1000, 60)
    with pytest.raises(ConfigError, match="max_tokens=0"):
        HybridWindow(max_tokens=0)
    with pytest.raises(ConfigError, match="window_minutes=-1"):
        HybridWindow(max_minutes=-1)
