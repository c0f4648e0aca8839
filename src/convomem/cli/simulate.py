"""Replay a conversation turn by turn and price what each memory strategy sends.

A turn is each user message: at that point the agent sends a context and the model
replies. For each strategy the replay records the context's input tokens, the tokens a
provider's prompt cache would serve (the longest run of messages at the start that is
identical to the previous turn's context), and the tokens passed to summarizers. Cost is
billed per million tokens: uncached input and summarizer input at ``price_in``, cached
input at ``price_cached``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..errors import ConfigError
from ..model import Message
from ..packing import Packer
from ..session import ConversationMemory
from ..tokens import Tokenizer, get_tokenizer
from ..views.budget import REPLY_PRIMING_TOKENS

STRATEGIES: Final = ("full", "recency", "summary-evict", "memory")
"""``full`` sends the whole history every turn; ``recency`` packs the newest messages
that fit; ``summary-evict`` packs with ``SummaryEvict`` (extractive summaries);
``memory`` is ``ConversationMemory`` with its default compaction."""


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


def _common_prefix_tokens(
    prev: Sequence[Message], cur: Sequence[Message], count: Callable[[Message], int]
) -> tuple[int, bool]:
    n = 0
    tokens = 0
    for a, b in zip(prev, cur, strict=False):
        if a is not b and a != b:
            break
        n += 1
        tokens += count(b)
    return tokens, n == len(prev)


class _CountingSummarizer:
    """Wraps the extractive summarizer and counts the tokens it is given."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        from ..summaries import ExtractiveSummarizer

        self._inner = ExtractiveSummarizer()
        self._tokenizer = tokenizer
        self.tokens = 0

    def __call__(self, messages: Sequence[Message]) -> str:
        self.tokens += self._tokenizer.count_messages(messages)
        return self._inner(messages)


def simulate(
    messages: Sequence[Message],
    budget: int,
    *,
    strategies: Sequence[str] = STRATEGIES,
    tokenizer: str | Tokenizer = "approx",
) -> list[StrategyRun]:
    """Replay ``messages`` through each strategy; one ``StrategyRun`` per strategy."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ConfigError(f"budget={budget!r}: must be a positive integer")
    for name in strategies:
        if name not in STRATEGIES:
            raise ConfigError(f"strategy={name!r}: must be one of {list(STRATEGIES)}")
    tok = get_tokenizer(tokenizer)
    return [_replay(name, messages, budget, tok) for name in dict.fromkeys(strategies)]


def _replay(name: str, messages: Sequence[Message], budget: int, tok: Tokenizer) -> StrategyRun:
    from ..strategies import Recency

    run = StrategyRun(name)
    count = tok.count_message
    memory: ConversationMemory | None = None
    packer: Packer | None = None
    counter: _CountingSummarizer | None = None
    if name == "memory":
        memory = ConversationMemory(max_tokens=budget, tokenizer=tok)
    elif name == "recency":
        packer = Packer(budget=budget, tokenizer=tok, strategy=Recency())
    elif name == "summary-evict":
        from ..strategies.summary import SummaryEvict

        counter = _CountingSummarizer(tok)
        packer = Packer(budget=budget, tokenizer=tok, strategy=SummaryEvict(counter))
    history: list[Message] = []
    previous: list[Message] = []
    summarized = 0
    for m in messages:
        history.append(m)
        if memory is not None:
            memory.add_message(m)
        if m.role != "user" or m.has_tool_result():
            continue
        if memory is not None:
            context = memory.context(format="messages")
            done = memory.stats().summarizer_input_tokens
        elif packer is not None:
            context = packer.pack(history).kept
            done = counter.tokens if counter is not None else 0
        else:
            context = list(history)
            done = 0
        cached, stable = _common_prefix_tokens(previous, context, count)
        run.input_tokens.append(sum(count(c) for c in context) + REPLY_PRIMING_TOKENS)
        run.cached_tokens.append(cached)
        run.summarizer_tokens.append(done - summarized)
        if stable and previous:
            run.stable_turns += 1
        summarized = done
        previous = context
    return run


def plot_cumulative_cost(
    runs: Sequence[StrategyRun], price_in: float, price_cached: float, path: str
) -> None:
    """Draw cumulative cost per turn for each strategy to ``path`` (extra ``plot``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ..errors import MissingDependency

        raise MissingDependency("--plot", "plot", "matplotlib") from None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        total = 0.0
        cumulative = []
        for cost in run.turn_costs(price_in, price_cached):
            total += cost
            cumulative.append(total)
        ax.plot(range(1, run.turns + 1), cumulative, label=run.name)
    ax.set_xlabel("turn")
    ax.set_ylabel("cumulative cost (USD)")
    ax.set_title("Cost per strategy")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
