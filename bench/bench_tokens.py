"""Token counting with tiktoken:cl100k_base against raw tiktoken encode on the same text.

First counts (fresh messages, nothing cached) should cost within 1.2x of calling
``encode_ordinary`` on the same text; repeat counts must tokenize nothing.

    .venv/bin/python bench/bench_tokens.py [--messages 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import time

from convomem.model import Message
from convomem.tokens import TiktokenTokenizer
from workload import messages as workload_messages


def fresh(template: list[Message]) -> list[Message]:
    """New Message objects (so no per-message memo) with distinct content."""
    return [
        Message(m.id, m.role, content=m.content, name=m.name, metadata=m.metadata) for m in template
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    template = workload_messages(args.messages)
    texts = [m.countable_text() for m in template]
    raw_best = first_best = repeat_best = float("inf")
    tokenizations = 0
    repeat_tokenizations = 0
    gc.disable()
    for _ in range(args.repeats):
        tok = TiktokenTokenizer("cl100k_base")  # fresh cache every round
        encode = tok.encoding.encode_ordinary
        batch = fresh(template)

        t0 = time.perf_counter()
        raw_total = sum(len(encode(t)) for t in texts)
        raw_best = min(raw_best, time.perf_counter() - t0)

        t0 = time.perf_counter()
        total = tok.count_messages(batch)
        first_best = min(first_best, time.perf_counter() - t0)
        tokenizations = tok.tokenizations

        rebuilt = fresh(template)  # same content, new objects: served by the content cache
        t0 = time.perf_counter()
        again = tok.count_messages(batch) + tok.count_messages(rebuilt)
        repeat_best = min(repeat_best, time.perf_counter() - t0)
        repeat_tokenizations = tok.tokenizations - tokenizations

        assert total == raw_total + 4 * len(batch), (total, raw_total)
        assert again == 2 * total
    gc.enable()
    n = len(template)
    print(f"{n:,} messages, cl100k_base, best of {args.repeats}")
    print(f"  raw encode_ordinary:     {raw_best * 1e3:8.1f} ms  ({raw_best / n * 1e6:.2f} us/msg)")
    print(
        f"  first count_messages:    {first_best * 1e3:8.1f} ms  "
        f"ratio {first_best / raw_best:.2f}x raw (target <= 1.2x)"
    )
    print(
        f"  repeat (same + rebuilt): {repeat_best * 1e3:8.1f} ms  "
        f"ratio {repeat_best / raw_best:.3f}x raw; tokenizations on repeat: "
        f"{repeat_tokenizations} (target 0)"
    )
    print(f"  tokenizations on first count: {tokenizations} of {n} (distinct contents)")


if __name__ == "__main__":
    main()
