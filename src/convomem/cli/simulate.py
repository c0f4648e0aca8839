"""Replay a conversation turn by turn and price what each memory strategy sends.

A turn is each message that starts one (``model.starts_turn``: a user message that is
not a tool result): at that point the agent sends a context and the model replies. For
each strategy the replay records the context's input tokens, the tokens a provider's
prompt cache would serve (the longest run of messages at the start that is identical
to the previous turn's context), and the tokens passed to summarizers (the previous
summary included when a summarizer folds into it). Cost is billed per million tokens:
uncached input and summarizer input at ``price_in``, cached input at ``price_cached``.

The replay is linear in the conversation: each strategy keeps one ``Packer`` (or one
``ConversationMemory``) for the whole replay, so a message is counted once and only
newly evicted messages reach a summarizer; ``full`` keeps running totals.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _check
from ..errors import InputError, MissingDependency
from ..model import Message, PinSpec, starts_turn
from ..packing import Packer
from ..summaries import Summary
from ..tokens import Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS
from .catalog import check_strategy, make_packer, resolve_pins

DEFAULT_STRATEGIES = ("full", "recency", "summary-evict", "memory")
"""What ``simulate`` replays when no strategy is named."""

ProgressFn = Callable[[str, int, int], None]
"""``(strategy, messages done, messages in all)``, called as the replay advances."""


@dataclass
class StrategyRun:
    """What one strategy sent over a replay, turn by turn."""

    name: str
    input_tokens: list[int] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    summarizer_tokens: list[int] = field(default_factory=list)
    stable_turns: int = 0
    """Turns whose context started with the whole previous context (a full cache hit)."""

    @property
    def turns(self) -> int:
        return len(self.input_tokens)

    def turn_costs(self, price_in: float, price_cached: float) -> list[float]:
        """Dollar cost of each turn."""
        return [
            ((i - c + s) * price_in + c * price_cached) / 1e6
            for i, c, s in zip(
                self.input_tokens, self.cached_tokens, self.summarizer_tokens, strict=True
            )
        ]

    def cache_hit_rate(self) -> float:
        """Fraction of turns after the first whose context extended the previous one."""
        return self.stable_turns / max(1, self.turns - 1)


class _CountingSummarizer:
    """The extractive summarizer, folding into the previous text; counts what it is given."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        from ..summaries import ExtractiveSummarizer

        self._inner = ExtractiveSummarizer()
        self._tokenizer = tokenizer
        self.tokens = 0
        self.calls = 0

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        self.calls += 1
        self.tokens += self._tokenizer.count_messages(messages)
        if previous is not None and previous.text:
            self.tokens += self._tokenizer.count(previous.text)
        return self._inner(messages, previous)


def simulate(
    messages: Sequence[Message],
    budget: int,
    *,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    tokenizer: str | Tokenizer = "approx",
    pin: Sequence[PinSpec] | None = None,
    progress: ProgressFn | None = None,
) -> list[StrategyRun]:
    """Replay ``messages`` through each strategy; one ``StrategyRun`` per strategy.

    ``strategies`` are names from ``catalog.STRATEGIES`` (duplicates run once); ``pin``
    adds to the system pin as on the command line.
    """
    _check.positive_int("budget", budget)
    for name in strategies:
        check_strategy(name)
    tok = get_tokenizer(tokenizer)
    pins = resolve_pins(pin)
    names = list(dict.fromkeys(strategies))
    total = len(messages) * len(names)
    return [
        _replay(name, messages, budget, tok, pins, _shifted(progress, k * len(messages), total))
        for k, name in enumerate(names)
    ]


def _shifted(progress: ProgressFn | None, offset: int, total: int) -> ProgressFn | None:
    """``progress`` for one strategy's replay, reporting against the whole simulation."""
    if progress is None:
        return None
    report = progress

    def step(label: str, done: int, _n: int) -> None:
        report(label, offset + done, total)

    return step


def _replay(
    name: str,
    messages: Sequence[Message],
    budget: int,
    tok: Tokenizer,
    pin: tuple[PinSpec, ...],
    progress: ProgressFn | None,
) -> StrategyRun:
    run = StrategyRun(name)
    count = tok.count_message
    n = len(messages)
    every = max(1, n // 200)
    context_of: Callable[[], list[Message]] | None = None
    summarized: Callable[[], int] = lambda: 0  # noqa: E731
    memory: Any = None
    history: list[Message] = []
    if name == "memory":
        from ..session import ConversationMemory

        memory = ConversationMemory(max_tokens=budget, tokenizer=tok, pin=pin)
        context_of = lambda: memory.context(format="messages")  # noqa: E731
        summarized = lambda: memory.stats().summarizer_input_tokens  # noqa: E731
    elif name != "full":
        counter = _CountingSummarizer(tok)
        packer: Packer = make_packer(name, budget, tok, pin, summarizer=counter)
        context_of = lambda: packer.pack(history).kept  # noqa: E731
        summarized = lambda: counter.tokens  # noqa: E731
    full_total = 0  # ``full``: the whole history, summed as it grows
    previous: list[Message] = []
    previous_tokens = 0
    done_before = 0
    for i, m in enumerate(messages):
        if memory is not None:
            memory.add_message(m)
        else:
            history.append(m)
            full_total += count(m)
        if progress is not None and (i % every == 0 or i == n - 1):
            progress(name, i + 1, n)
        if not starts_turn(m):
            continue
        if context_of is None:
            tokens, cached, stable = full_total, previous_tokens, True
        else:
            context = context_of()
            tokens = sum(map(count, context))
            cached, stable = _common_prefix_tokens(previous, context, count)
            previous = context
        done = summarized()
        run.input_tokens.append(tokens + REPLY_PRIMING_TOKENS)
        run.cached_tokens.append(cached)
        run.summarizer_tokens.append(done - done_before)
        if stable and run.turns > 1:
            run.stable_turns += 1
        done_before = done
        previous_tokens = tokens
    return run


def _common_prefix_tokens(
    prev: Sequence[Message], cur: Sequence[Message], count: Callable[[Message], int]
) -> tuple[int, bool]:
    """Tokens of the longest common leading run, and whether it is all of ``prev``."""
    n = 0
    tokens = 0
    for a, b in zip(prev, cur, strict=False):
        if a is not b and a != b:
            break
        n += 1
        tokens += count(b)
    return tokens, n == len(prev)


# -- the plot ----------------------------------------------------------------------------


def check_plot_path(path: str) -> None:
    """Fail before a long replay if the plot cannot be written.

    Raises ``MissingDependency`` without matplotlib (the ``plot`` extra) and
    ``InputError`` for an extension matplotlib cannot write or a missing directory.
    """
    canvas = _agg_canvas()
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = sorted(canvas.get_supported_filetypes())
    if ext not in formats:
        raise InputError(
            f"--plot {path!r}: unknown image type {('.' + ext) if ext else '(no extension)'}; "
            f"use one of {', '.join('.' + f for f in formats)}"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"--plot {path!r}: no such directory {folder!r}")
    if os.path.isdir(path):
        raise InputError(f"--plot {path!r}: is a directory")
    if not os.access(folder, os.W_OK):
        raise InputError(f"--plot {path!r}: directory {folder!r} is not writable")


def _agg_canvas() -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise MissingDependency("simulate --plot", "plot", "matplotlib") from None
    return FigureCanvasAgg


def plot_cumulative_cost(
    runs: Sequence[StrategyRun],
    price_in: float,
    price_cached: float,
    path: str,
    *,
    budget: int | None = None,
) -> None:
    """Draw cumulative cost per turn for each strategy to ``path`` (extra ``plot``).

    The title names the budget and the prices. A write failure raises ``InputError``.
    """
    canvas_class = _agg_canvas()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5))
    canvas_class(fig)
    ax = fig.add_subplot()
    for run in runs:
        total = 0.0
        cumulative = []
        for cost in run.turn_costs(price_in, price_cached):
            total += cost
            cumulative.append(total)
        ax.plot(range(1, run.turns + 1), cumulative, label=run.name)
    ax.set_xlabel("turn")
    ax.set_ylabel("cumulative cost (USD)")
    # parse_math=False: the prices' "$" are text, not mathtext delimiters.
    ax.set_title(plot_title(budget, price_in, price_cached), parse_math=False)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"--plot {path!r}: cannot write: {exc}") from None


def plot_title(budget: int | None, price_in: float, price_cached: float) -> str:
    """The plot's title: what was simulated, at which prices."""
    what = "Cumulative cost per strategy"
    if budget is not None:
        what += f", budget {budget:,} tokens"
    return f"{what}\n${price_in:g}/M input, ${price_cached:g}/M cached"
