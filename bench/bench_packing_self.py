"""Per-turn cost of ``Packer(Recency)`` in an agent loop, against tokenizing one message.

The workload is ``workload.py`` (the one the peer benchmarks use). For histories of
1,000, 5,000 and 20,000 messages an agent loop appends the next message and packs to
8,000 tokens, with ``tiktoken:cl100k_base`` and with ``approx``:

- ``reused``: the agent keeps one list of ``Message`` objects and appends to it;
- ``rebuilt``: the list is rebuilt with ``from_openai`` from the same dicts every turn
  (the rebuild is not timed; the pack must still not re-tokenize).

The reference, measured in the same run, is the time to tokenize one new message
(its text, uncached) with the same tokenizer: a pack that did no work beyond counting
the new message would cost 1x. Also reported: a one-shot pack of 100,000 messages
(cold: everything tokenized; warm: counts cached, a fresh Packer chunks and selects).

    .venv/bin/python bench/bench_packing_self.py            # about a minute
    .venv/bin/python bench/bench_packing_self.py --quick    # 1,000 and 5,000, fewer turns
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workload
from convomem.formats.openai import from_openai
from convomem.model import Message
from convomem.packing import Packer
from convomem.strategies.budget import Recency
from convomem.tokens import ApproxTokenizer, BaseTokenizer, TiktokenTokenizer

BUDGET = 8_000
TOKENIZERS = ("tiktoken:cl100k_base", "approx")


def fresh_tokenizer(spec: str) -> BaseTokenizer:
    """A new tokenizer (empty count cache), so nothing is shared across cells."""
    if spec == "approx":
        return ApproxTokenizer()
    return TiktokenTokenizer(spec.partition(":")[2])


def tokenize_one(spec: str, new: list[Message]) -> float:
    """Median seconds to tokenize one of ``new`` from scratch (uncached)."""
    tok = fresh_tokenizer(spec)
    times = []
    for m in new:
        t0 = time.perf_counter()
        tok.count(m.countable_text())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def loop(spec: str, n: int, turns: int, *, rebuilt: bool) -> tuple[float, float, float]:
    """Median per-turn pack seconds, the first pack's seconds, tokenizations per turn.

    Tokenizations per turn stay below 1: the new message is the only one counted, and
    repeated texts (``thanks!``, polled tool results) hit the count cache.
    """
    tok = fresh_tokenizer(spec)
    packer = Packer(budget=BUDGET, tokenizer=tok, strategy=Recency())
    dicts = workload.openai_messages(n + turns)
    history = from_openai(dicts[:n])
    t0 = time.perf_counter()
    packer.pack(history)
    first = time.perf_counter() - t0
    before = tok.tokenizations
    times = []
    full = from_openai(dicts)
    for t in range(1, turns + 1):
        if rebuilt:
            history = from_openai(dicts[: n + t])  # not timed
        else:
            history.append(full[n + t - 1])
        t0 = time.perf_counter()
        result = packer.pack(history)
        times.append(time.perf_counter() - t0)
        assert result.fits or result.token_count > BUDGET
    per_turn_tok = (tok.tokenizations - before) / turns
    return statistics.median(times), first, per_turn_tok


def one_shot(spec: str, n: int) -> tuple[float, float, int]:
    """Cold and warm seconds for one pack of ``n`` messages, and messages kept."""
    msgs = workload.messages(n)
    tok = fresh_tokenizer(spec)
    t0 = time.perf_counter()
    Packer(budget=BUDGET, tokenizer=tok).pack(msgs)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = Packer(budget=BUDGET, tokenizer=tok).pack(msgs)
    warm = time.perf_counter() - t0
    return cold, warm, len(result.kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 5,000 only")
    args = parser.parse_args()
    sizes = (1_000, 5_000) if args.quick else (1_000, 5_000, 20_000)
    turns = 20 if args.quick else 60
    print(f"budget {BUDGET:,} tokens; {turns} turns per cell; median per-turn time")
    print(
        f"{'tokenizer':<22}{'messages':>9}  {'tokenize 1':>11}  {'reused':>10} {'x':>6}"
        f"  {'rebuilt':>10} {'x':>6}  {'first pack':>10}  tok/turn"
    )
    for spec in TOKENIZERS:
        for n in sizes:
            new = workload.messages(n + turns)[n:]
            ref = tokenize_one(spec, new)
            reused, first, tpt = loop(spec, n, turns, rebuilt=False)
            rebuilt, _, tpt2 = loop(spec, n, turns, rebuilt=True)
            print(
                f"{spec:<22}{n:>9,}  {ref * 1e6:>9.1f}us  {reused * 1e3:>8.3f}ms "
                f"{reused / ref:>5.0f}x  {rebuilt * 1e3:>8.3f}ms {rebuilt / ref:>5.0f}x"
                f"  {first * 1e3:>8.1f}ms  {tpt:.2f}/{tpt2:.2f}"
            )
    n = 20_000 if args.quick else 100_000
    print(f"\none-shot pack of {n:,} messages (fresh Packer)")
    for spec in TOKENIZERS:
        cold, warm, kept = one_shot(spec, n)
        print(
            f"{spec:<22} cold {cold:>7.3f}s (all tokenized)   warm {warm * 1e3:>8.1f}ms"
            f" (counts cached)   kept {kept}"
        )


if __name__ == "__main__":
    main()
