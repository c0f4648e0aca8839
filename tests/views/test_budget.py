import pytest
from hypothesis import given
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.views.budget import REPLY_PRIMING_TOKENS, ContextBudget


def test_default_split_is_15_60_25() -> None:
    b = ContextBudget(128000)
    assert (b.system_tokens, b.history_budget, b.response_tokens) == (19200, 76800, 32000)
    assert b.summary_tokens == 7680


def test_history_tokens_is_the_share_unless_the_system_prompt_overflows_its_own() -> None:
    b = ContextBudget(10000)
    assert b.history_tokens(0) == 6000
    assert b.history_tokens(1500) == 6000
    assert b.history_tokens(2000) == 5500  # 10000 - 2500 reply - 2000 system
    assert b.history_tokens(9000) == 0


def test_should_summarize_at_80_percent_of_history_share() -> None:
    b = ContextBudget(10000)
    assert b.summarize_threshold() == 4800
    assert not b.should_summarize(4800)
    assert b.should_summarize(4801)


def test_count_includes_overhead_and_reply_priming() -> None:
    b = ContextBudget(1000, tokenizer="words")
    ms = [Message(role="user", content="one two three"), Message(role="assistant", content="ok")]
    assert b.count(ms) == (3 + 4) + (1 + 4) + REPLY_PRIMING_TOKENS


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"system": 0.5, "history": 0.5, "response": 0.25}, "sum to at most 1"),
        ({"system": -0.1}, "system=-0.1"),
        ({"history": 1.5}, "history=1.5"),
        ({"response": "x"}, "response='x'"),
        ({"summarize_at": True}, "summarize_at=True"),
    ],
)
def test_bad_shares_name_the_field(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        ContextBudget(1000, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100"])
def test_bad_max_context(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_context"):
        ContextBudget(bad)  # type: ignore[arg-type]


def test_bad_token_arguments_are_rejected() -> None:
    b = ContextBudget(1000)
    with pytest.raises(ConfigError, match="system_tokens=-1"):
        b.history_tokens(-1)
    with pytest.raises(ConfigError, match="history_tokens='3'"):
        b.should_summarize("3")  # type: ignore[arg-type]


@given(
    st.integers(1, 10**7),
    st.integers(0, 10**7),
)
def test_history_never_exceeds_what_is_left(max_context: int, system_tokens: int) -> None:
    b = ContextBudget(max_context)
    h = b.history_tokens(system_tokens)
    assert 0 <= h <= b.history_budget
    assert h + system_tokens + b.response_tokens <= max(
        max_context, system_tokens + b.response_tokens
    )
