"""A fold's tokenizer work: each new fact's value counted once (preview, then add)."""

from __future__ import annotations

from collections import Counter

from convomem.model import Message
from convomem.summaries import RunningSummary
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")


def test_a_fold_counts_each_new_fact_once() -> None:
    seen: Counter[str] = Counter()

    def count(text: str) -> int:
        seen[text] += 1
        return APPROX.count(text)

    rs = RunningSummary(reserve=400, tokenizer=count)
    msgs = [
        Message(f"m{i}", "user", content=f"My order ORD-{500 + i} ships on March {i + 1}.")
        for i in range(6)
    ]
    rs.fold(msgs)
    values = [f.value for f in rs.ledger.facts]
    assert "order ORD-500" in values
    assert all(seen[f"{v}; "] == 1 for v in values)
