"""Summary validation on the agent workload: how often a fold is rejected, and its cost.

A ``ConversationMemory`` (budget 4,000, approx counting) over ``workload.messages(n)``
with ``RunningSummary(reserve=1024, validate=True)`` (the offline ``validate_summary``,
``min_score=60``, the default extractive summarizer and fallback), with the facts
ledger on and off. Reported: validations, rejections, and the CPU of the whole run
against the same run without validation (ratio, interleaved rounds, best of each).

    .venv/bin/python bench/bench_validation.py [--messages 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

from convomem import ConversationMemory
from convomem.model import Message
from convomem.summaries import RunningSummary
from workload import messages


def run(msgs: list[Message], *, validate: bool, facts: bool) -> tuple[float, RunningSummary]:
    rs = RunningSummary(reserve=1024, validate=validate, facts=facts)
    mem = ConversationMemory(budget=4000, summarizer=rs)
    start = time.process_time()
    for m in msgs:
        mem.add_message(m)
    return time.process_time() - start, rs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    msgs = messages(args.messages, seed=1)
    for facts in (True, False):
        best = {True: float("inf"), False: float("inf")}
        rs: RunningSummary | None = None
        for _ in range(args.rounds):
            for validate in (True, False):
                cpu, got = run(msgs, validate=validate, facts=facts)
                best[validate] = min(best[validate], cpu)
                if validate:
                    rs = got
        assert rs is not None
        st = rs.stats
        print(
            f"facts={facts}: {st.folds} folds, {st.merges} merges, {st.validations} validations, "
            f"{st.rejections} rejected ({st.rejections / max(1, st.validations):.1%}), "
            f"{st.validation_errors} validator errors; cpu {best[True]:.2f}s vs "
            f"{best[False]:.2f}s without validation = {best[True] / best[False]:.2f}x"
        )


if __name__ == "__main__":
    main()
