"""``convomem simulate``: per-turn tokens and costs, work counts, progress and the plot."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from convomem.cli.catalog import STRATEGY_NAMES
from convomem.cli.render import Progress
from convomem.cli.simulate import _CountingSummarizer, plot_title, simulate
from convomem.errors import ConfigError
from convomem.formats.openai import from_openai
from convomem.model import Message, starts_turn
from convomem.summaries import Summary
from convomem.tokens import get_tokenizer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_conversation.json"
MESSAGES = from_openai(json.loads(EXAMPLE.read_text()))[:160]


def user_turns() -> list[int]:
    return [i for i, m in enumerate(MESSAGES) if starts_turn(m)]


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


@pytest.mark.parametrize("name", [n for n in STRATEGY_NAMES if n != "full"])
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


def test_summary_evict_gives_each_message_to_the_summarizer_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay reuses one Packer, so SummaryEvict folds only the newly dropped."""
    given: list[str] = []
    calls = {"n": 0}
    inner = _CountingSummarizer.__call__

    def spy(
        self: _CountingSummarizer, msgs: Sequence[Message], previous: Summary | None = None
    ) -> str:
        calls["n"] += 1
        given.extend(m.id for m in msgs)
        return inner(self, msgs, previous)

    monkeypatch.setattr(_CountingSummarizer, "__call__", spy)
    (run,) = simulate(MESSAGES, 400, strategies=["summary-evict"], tokenizer="words")
    assert calls["n"] > 10
    assert len(given) == len(set(given))  # nobody summarized twice
    # input: each message once, plus the previous summary (at most ~256 tokens) per fold
    conversation = get_tokenizer("words").count_messages(MESSAGES)
    assert sum(run.summarizer_tokens) <= conversation + calls["n"] * 300


@pytest.mark.parametrize("name", ["full", "recency", "summary-evict"])
def test_each_message_is_tokenized_once_per_replay(name: str) -> None:
    tok = get_tokenizer("words")
    simulate(MESSAGES, 500, strategies=[name], tokenizer=tok)
    once = get_tokenizer("words")
    once.count_messages(MESSAGES)
    distinct = once.tokenizations  # one pass over the messages
    summaries = tok.tokenizations - distinct
    assert 0 <= summaries <= (len(user_turns()) * 2 if name == "summary-evict" else 0)


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


def test_progress_reports_every_strategy_up_to_the_total() -> None:
    seen: list[tuple[str, int, int]] = []
    simulate(
        MESSAGES[:40],
        300,
        strategies=["full", "recency"],
        progress=lambda name, done, total: seen.append((name, done, total)),
    )
    assert {t for _, _, t in seen} == {80}
    assert [d for _, d, _ in seen] == sorted(d for _, d, _ in seen)
    assert seen[-1] == ("recency", 80, 80)
    assert ("full", 40, 80) in seen


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    bar = Progress(quiet)
    bar.update("memory", 5, 10)
    bar.close()
    assert quiet.getvalue() == "" and not bar.enabled
    tty = FakeTTY()
    ticks = iter([0.0, 0.01, 1.0, 2.0])
    bar = Progress(tty, width=10, clock=lambda: next(ticks))
    bar.update("memory", 1, 10)
    bar.update("memory", 2, 10)  # within 0.1 s of the last draw: skipped
    bar.update("memory", 5, 10)
    bar.update("memory", 10, 10)
    bar.close()
    frames = tty.getvalue().split("\r")[1:]
    assert frames[0].startswith("memory [#---------]  10% 1/10")
    assert frames[1].startswith("memory [#####-----]  50% 5/10")
    assert frames[2].startswith("memory [##########] 100% 10/10")
    assert frames[-1] == "\x1b[K"  # the line is cleared at the end
    assert len(frames) == 4


# -- the command ------------------------------------------------------------------------


def test_cli_simulate_prints_a_table_and_plots(tmp_path: Path) -> None:
    from _cli_support import run

    png = tmp_path / "cost.png"
    code, out, err = run(
        "simulate", str(EXAMPLE), "--budget", "1500", "--strategy", "memory",
        "--price-in", "3", "--plot", str(png),
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["strategy", "turns"]
    assert lines[1].split()[0] == "full" and lines[1].split()[-1] == "1.00"
    assert lines[2].split()[0] == "memory" and float(lines[2].split()[-1]) < 1
    assert "$3/M input, $1.5/M cached" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert err == ""  # stderr is not a terminal: no progress bar


def test_the_plot_title_names_budget_and_prices(tmp_path: Path) -> None:
    import matplotlib

    from _cli_support import run

    svg = tmp_path / "cost.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # keep text as text
        code, _, err = run(
            "simulate", str(EXAMPLE), "--budget", "1500", "--strategy", "recency",
            "--price-in", "3", "--price-cached", "0.3", "--plot", str(svg),
        )  # fmt: skip
    assert code == 0, err
    # The drawn text elements, not the comments matplotlib leaves with the source string:
    # a title read as mathtext ("$3/M input, $" is a formula) draws "3/Minput," instead.
    drawn = re.findall(r"<text\b[^>]*>([^<]*)</text>", svg.read_text())
    assert "Cumulative cost per strategy, budget 1,500 tokens" in drawn
    assert "$3/M input, $0.3/M cached" in drawn
    assert plot_title(1500, 3, 0.3).splitlines() == [
        "Cumulative cost per strategy, budget 1,500 tokens",
        "$3/M input, $0.3/M cached",
    ]


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("cost.bogus", "unknown image type .bogus"),
        ("cost", "(no extension)"),
        ("missing/cost.png", "no such directory"),
        (".", "unknown image type"),
    ],
)
def test_a_bad_plot_path_fails_before_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, needle: str
) -> None:
    import convomem.cli.simulate as sim
    from _cli_support import one_line_failure, run

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before checking the plot path")

    monkeypatch.setattr(sim, "simulate", never)
    code, out, err = run(
        "simulate", str(EXAMPLE), "--budget", "100", "--plot", str(tmp_path / name)
    )
    one_line_failure(code, out, err)
    assert needle in err


def test_plot_without_matplotlib_fails_before_simulating(monkeypatch: pytest.MonkeyPatch) -> None:
    import convomem.cli.simulate as sim
    from _cli_support import one_line_failure, run

    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    monkeypatch.setattr(sim, "simulate", lambda *a, **k: pytest.fail("simulated"))
    code, out, err = run("simulate", str(EXAMPLE), "--budget", "100", "--plot", "x.png")
    one_line_failure(code, out, err)
    assert "pip install 'convomem[plot]'" in err


def test_simulate_draws_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from convomem.cli import main

    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    out = io.StringIO()
    code = main(["simulate", str(EXAMPLE), "--budget", "800", "--strategy", "recency"], out=out)
    assert code == 0 and out.getvalue().startswith("strategy")
    drawn = tty.getvalue()
    assert "\rfull [" in drawn and "100%" in drawn
    assert drawn.endswith("\r\x1b[K")  # cleared before the table is printed
