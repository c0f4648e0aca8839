import json
from pathlib import Path

import pytest

from convomem.cli.simulate import simulate
from convomem.errors import ConfigError
from convomem.formats.openai import from_openai
from convomem.tokens import get_tokenizer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_conversation.json"
MESSAGES = from_openai(json.loads(EXAMPLE.read_text()))[:160]


def user_turns() -> list[int]:
    return [i for i, m in enumerate(MESSAGES) if m.role == "user" and not m.has_tool_result()]


def test_full_sends_everything_and_is_always_cached() -> None:
    (full,) = simulate(MESSAGES, 1000, strategies=["full"], tokenizer="words")
    tok = get_tokenizer("words")
    turns = user_turns()
    assert full.turns == len(turns)
    expect = [tok.count_messages(MESSAGES[: i + 1]) + 2 for i in turns]
    assert full.input_tokens == expect
    assert full.cached_tokens == [0] + [e - 2 for e in expect[:-1]]
    assert full.cache_hit_rate() == 1.0
    assert set(full.summarizer_tokens) == {0}


@pytest.mark.parametrize("name", ["recency", "summary-evict", "memory"])
def test_strategies_stay_under_budget(name: str) -> None:
    (run,) = simulate(MESSAGES, 600, strategies=[name], tokenizer="words")
    assert run.turns == len(user_turns())
    assert max(run.input_tokens) <= 600 + 2
    assert all(0 <= c <= i for c, i in zip(run.cached_tokens, run.input_tokens, strict=True))


def test_memory_summarizes_each_message_about_once_and_keeps_its_prefix() -> None:
    full, memory = simulate(MESSAGES, 600, strategies=["full", "memory"], tokenizer="words")
    assert sum(memory.summarizer_tokens) > 0
    assert sum(memory.summarizer_tokens) < 2 * full.input_tokens[-1]
    assert memory.cache_hit_rate() > 0.6


def test_costs_follow_the_prices() -> None:
    (run,) = simulate(MESSAGES, 600, strategies=["memory"], tokenizer="words")
    costs = run.turn_costs(2.0, 0.5)
    for cost, i, c, s in zip(
        costs, run.input_tokens, run.cached_tokens, run.summarizer_tokens, strict=True
    ):
        assert cost == pytest.approx(((i - c + s) * 2.0 + c * 0.5) / 1e6)


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="budget=0"):
        simulate(MESSAGES, 0)
    with pytest.raises(ConfigError, match="strategy='fifo'"):
        simulate(MESSAGES, 100, strategies=["fifo"])


def test_cli_simulate_prints_a_table_and_plots(tmp_path: Path) -> None:
    from test_cli import run

    png = tmp_path / "cost.png"
    code, out, err = run(
        "simulate",
        str(EXAMPLE),
        "--budget",
        "1500",
        "--strategy",
        "memory",
        "--price-in",
        "3",
        "--plot",
        str(png),
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["strategy", "turns"]
    assert lines[1].split()[0] == "full" and lines[1].split()[-1] == "1.00"
    assert lines[2].split()[0] == "memory" and float(lines[2].split()[-1]) < 1
    assert "$3.0/M input, $1.5/M cached" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_simulate_bad_price_exit_2() -> None:
    from test_cli import run

    code, _, err = run("simulate", str(EXAMPLE), "--budget", "100", "--price-in", "-1")
    assert code == 2 and "non-negative price" in err
