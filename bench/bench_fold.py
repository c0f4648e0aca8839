"""RunningSummary.fold on its own: per-fold cost flat, and cheap next to tokenizing.

The agent workload of ``bench_memory_turn`` (every message names a new order number, so
the facts ledger grows by a fact or more per message and reaches ``max_facts``), folded
in batches of ``--batch`` messages into a ``RunningSummary`` configured as
``ConversationMemory`` makes it for a budget of 8,000 (reserve 1,600, tiktoken counting,
default extractive summarizer, facts on). Figures (CPU time, ``process_time``):

1. flat: the mean fold over ``--window`` folds from fold ``--early`` vs from fold
   ``--late``, each as a ratio to the tokenizing reference of its window (target 1.5x;
   the raw ratio is printed too); ``--max-facts`` is lowered (default 2,000) so the ledger is
   full well before ``--late`` and an insertion into a full ledger is measured.
2. cheap: a fold vs tokenizing its evicted messages' text once with a fresh tokenizer
   (raw ``count`` of each text, no cache), over the same windows (target 10x).

    .venv/bin/python bench/bench_fold.py                    # folds 100 vs 3,000
    .venv/bin/python bench/bench_fold.py --late 600         # quicker
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_memory_turn as b
from convomem.formats.openai import from_openai
from convomem.model import Message
from convomem.summaries import RunningSummary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument("--early", type=int, default=100)
    ap.add_argument("--late", type=int, default=3000)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--max-facts", type=int, default=2000)
    ap.add_argument("--tokenizer", default="tiktoken:cl100k_base")
    ap.add_argument("--reserve", type=int, default=1600)
    args = ap.parse_args()

    folds = args.late + args.window
    dicts = b.agent_dicts(folds * args.batch)
    msgs: list[Message] = []
    for d in dicts:
        msgs.extend(from_openai([d]))
    rs = RunningSummary(
        reserve=args.reserve,
        tokenizer=b.fresh_tokenizer(args.tokenizer),
        max_facts=args.max_facts,
    )
    raw = b.fresh_tokenizer(args.tokenizer).count
    windows = {args.early: [0.0, 0.0], args.late: [0.0, 0.0]}
    for f in range(folds):
        batch = msgs[f * args.batch : (f + 1) * args.batch]
        start = next((w for w in windows if w <= f < w + args.window), None)
        t0 = time.process_time()
        rs.fold(batch)
        t1 = time.process_time()
        if start is not None:
            for m in batch:
                raw(m.text())
            t2 = time.process_time()
            windows[start][0] += t1 - t0
            windows[start][1] += t2 - t1
        if f % 500 == 499:
            print(f"  fold {f + 1}: ledger {len(rs.ledger)} facts", file=sys.stderr)
    (e_fold, e_tok), (l_fold, l_tok) = windows[args.early], windows[args.late]
    n = args.window
    for at, fold, tok in ((args.early, e_fold, e_tok), (args.late, l_fold, l_tok)):
        print(f"per fold at {at}: {fold / n * 1e3:.2f} ms (tokenize {tok / n * 1e3:.2f} ms)")
    # Machine speed drifts on a shared host: the late/early ratio is also given with each
    # window's fold time divided by its own tokenizing reference (the target's figure).
    raw_flat = l_fold / e_fold
    flat = (l_fold / l_tok) / (e_fold / e_tok)
    print(f"late/early, raw CPU time: {raw_flat:.2f}x")
    cheap = max(e_fold / e_tok, l_fold / l_tok)
    verdict = "met" if flat <= 1.5 else "MISSED"
    print(f"flat: late/early vs the reference {flat:.2f}x (target 1.5x) {verdict}")
    print(f"cheap: fold/tokenize {cheap:.1f}x (target 10x) {'met' if cheap <= 10 else 'MISSED'}")
    print(f"ledger {len(rs.ledger)} facts, dropped {rs.ledger.dropped}; {rs.stats}")


if __name__ == "__main__":
    main()
