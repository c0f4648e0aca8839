"""Prefill: 20,000 OpenAI dicts into a fresh ``ConversationMemory`` (issue 20 §3).

What a user importing a conversation does: ``mem.add_messages(dicts)`` on a new memory
(budget 8,000, ``tokenizer="tiktoken:cl100k_base"``, the default summarizer, so the
prefill compacts as it goes). Rows, each on its own fresh objects, interleaved round by
round (best of ``--rounds``; wall and CPU seconds):

- ``add_messages``: the whole list in one call;
- ``add_messages x1000``: the list in batches of 1,000 (an import loop);
- floors: ``tokenizer``: a fresh tokenizer's ``count_texts`` over the texts convomem
  counts (content, tool names and arguments; tiktoken batches them on threads);
  ``from_openai``: the conversion to ``Message`` alone; ``list``: the dicts appended to a
  plain list.

Target: ``add_messages`` <= 3 s with tiktoken; reported as a multiple of the tokenizer
floor. ``--tokenizers approx`` adds chars/4 for comparison.

    .venv/bin/python bench/bench_prefill.py
    .venv/bin/python bench/bench_prefill.py --size 5000 --rounds 1 --tokenizers approx
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from convomem import ConversationMemory
from convomem.formats.openai import from_openai
from convomem.tokens import ApproxTokenizer, TiktokenTokenizer, Tokenizer
from workload import openai_messages


def fresh_tokenizer(spec: str) -> Tokenizer:
    if spec == "approx":
        return ApproxTokenizer()
    kind, _, arg = spec.partition(":")
    if kind == "tiktoken" and arg:
        return TiktokenTokenizer(arg)
    raise SystemExit(f"unsupported tokenizer {spec!r}: use approx or tiktoken:<encoding>")


def dict_text(d: dict[str, Any]) -> str:
    parts = [d.get("content") or ""]
    for call in d.get("tool_calls") or ():
        parts.append(call["function"]["name"])
        parts.append(call["function"]["arguments"])
    return "\n".join(parts)


def subjects(dicts: list[dict[str, Any]], spec: str, budget: int) -> dict[str, Callable[[], Any]]:
    """Each row: a callable doing its whole job on fresh objects (made inside the call)."""

    def one_call() -> Any:
        mem = ConversationMemory(budget, tokenizer=fresh_tokenizer(spec))
        mem.add_messages(dicts)
        return mem

    def batches() -> Any:
        mem = ConversationMemory(budget, tokenizer=fresh_tokenizer(spec))
        for start in range(0, len(dicts), 1000):
            mem.add_messages(dicts[start : start + 1000])
        return mem

    texts = [dict_text(d) for d in dicts]

    def tokenizer() -> Any:
        return fresh_tokenizer(spec).count_texts(texts)

    def convert() -> Any:
        return from_openai(dicts)

    def plain() -> Any:
        out: list[dict[str, Any]] = []
        for d in dicts:
            out.append(d)
        return out

    return {
        "add_messages": one_call,
        "add_messages x1000": batches,
        "tokenizer": tokenizer,
        "from_openai": convert,
        "list": plain,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--budget", type=int, default=8_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokenizers", nargs="+", default=["tiktoken:cl100k_base", "approx"])
    args = ap.parse_args()

    dicts = openai_messages(args.size)
    for spec in args.tokenizers:
        rows = subjects(dicts, spec, args.budget)
        fresh_tokenizer(spec).count("warm up")  # the encoding loads once per process
        best: dict[str, tuple[float, float]] = {}
        compactions = 0
        for r in range(args.rounds):
            names = list(rows)
            names = names[r % len(names) :] + names[: r % len(names)]  # rotate the order
            for name in names:
                w0, c0 = time.perf_counter(), time.process_time()
                result = rows[name]()
                w, c = time.perf_counter() - w0, time.process_time() - c0
                if name == "add_messages":
                    compactions = result.stats().compactions
                old = best.get(name)
                best[name] = (min(w, old[0]), min(c, old[1])) if old else (w, c)
        floor_w, floor_c = best["tokenizer"]
        print(
            f"\n{args.size:,} OpenAI dicts, {spec}, budget {args.budget:,}; best of {args.rounds}"
        )
        print(f"  {'row':<20} {'wall s':>8} {'cpu s':>8} {'/ tokenizer wall':>17} {'cpu':>7}")
        for name, (w, c) in best.items():
            print(f"  {name:<20} {w:8.3f} {c:8.3f} {w / floor_w:16.1f}x {c / floor_c:6.1f}x")
        w = best["add_messages"][0]
        verdict = "met" if w <= 3 else "MISSED"
        c = best["add_messages"][1]
        print(
            f"  add_messages: {w:.2f} s wall, {c:.2f} s cpu, {compactions} compactions "
            f"(target <= 3 s: {verdict})"
        )


if __name__ == "__main__":
    main()
