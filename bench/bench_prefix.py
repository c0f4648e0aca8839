"""Prompt-cache stability: how often a turn's context starts with the previous one.

A provider's prompt cache bills (and serves) the longest prefix a request shares with an
earlier one. convomem keeps a context append-only between compactions; this measures the
share of turns whose previous context (OpenAI dicts) is an exact prefix of the new one.

The bundled support conversation (examples/support_conversation.json) is replayed four
times as one session (fresh ids each round), tiktoken cl100k_base, one ``context()`` per
user message (after it is added, as a chat service asks before calling the model), at
budgets 8,000 / 4,000 / 2,000 / 1,000. Rows: the memory without tiers; with the profile
(``extractor=``) and recall (``recall=``, a SQLite ``RecallIndex``) and the user's
message as the query of each turn.

    .venv/bin/python bench/bench_prefix.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from convomem import ConversationMemory, from_openai, open_store
from convomem.recall import RecallIndex
from convomem.summaries.extractor import OfflineExtractor

TRIGGER = 0.8
CONVERSATION = Path(__file__).resolve().parents[1] / "examples" / "support_conversation.json"


def rounds(n: int) -> list[list[dict[str, Any]]]:
    """The conversation ``n`` times, each round's system prompt dropped after the first."""
    base = json.loads(CONVERSATION.read_text())
    out = [base]
    for _ in range(n - 1):
        out.append([d for d in base if d["role"] != "system"])
    return out


def measure(budget: int, tiers: bool, n: int) -> tuple[float, int, int]:
    """(share of turns whose previous context is a prefix of the new one, turns,
    compactions)."""
    folder = tempfile.mkdtemp()
    db = open_store(f"sqlite:///{folder}/prefix.db")
    options: dict[str, Any] = {}
    if tiers:
        options["recall"] = RecallIndex(db)
        options["extractor"] = OfflineExtractor()
    mem = ConversationMemory(
        budget,
        tokenizer="tiktoken:cl100k_base",
        store=db.session("s", user_id="maya"),
        trigger=TRIGGER,
        **options,
    )
    previous: list[dict[str, Any]] | None = None
    kept = turns = 0
    for k, dicts in enumerate(rounds(n)):
        for m in from_openai(dicts):
            m = m.replace(id=f"r{k}-{m.id}")
            mem.add_message(m)
            if m.role != "user":
                continue
            if tiers:
                mem.flush()  # what left the view indexed: the context sees it
            ctx = mem.context(query=m.text()) if tiers else mem.context()
            if previous is not None:
                turns += 1
                kept += len(previous) <= len(ctx) and ctx[: len(previous)] == previous
            previous = ctx
    compactions = mem.stats().compactions
    db.close()
    return (kept / turns if turns else 1.0), turns, compactions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--budgets", type=int, nargs="+", default=[8000, 4000, 2000, 1000])
    args = parser.parse_args()
    print(f"{'budget':>7}  {'no tiers':>16}  {'profile + recall, query/turn':>30}")
    for budget in args.budgets:
        plain = measure(budget, False, args.rounds)
        tiered = measure(budget, True, args.rounds)
        print(
            f"{budget:>7}  {plain[0]:>7.1%} ({plain[2]:>3} cp)  "
            f"{tiered[0]:>20.1%} ({tiered[2]:>3} cp)   turns {plain[1]}"
        )


if __name__ == "__main__":
    main()
