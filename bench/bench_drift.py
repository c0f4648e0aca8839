"""Topic-drift detection quality: DriftDetector vs the seed's opening-topic-only check.

A seeded synthetic set: conversations made of topic blocks (travel, cooking, billing,
a laptop fault, gardening, a move), each block 4-9 messages written from shared
conversational templates ("can you", "thanks", "I want to ..."), so topics share much of
their wording. Ground truth: the first message of every block after the first is a topic
change. A detector's flag on any other message is a false alarm.

Compared in the same run, with the same embedder and threshold:
- ``DriftDetector`` (opening topic + running centroid; drifted = far from both), after a
  flagged change the caller ``reset()``s it (the suggested new segment);
- ``seed``: the seed's ``ContextDriftDetector`` (cosine with the opening topic only).

    .venv/bin/python bench/bench_drift.py [--conversations 200] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

from convomem.recall import DriftDetector, HashingEmbedder

TOPICS = {
    "travel": (
        "flight to Lisbon|window seat|hotel near the old town|train from Porto|return ticket"
        "|boarding pass|checked bag|layover in Madrid|travel insurance|airport transfer"
    ),
    "cooking": (
        "risotto recipe|arborio rice|vegetable stock|parmesan cheese|saffron threads"
        "|cast iron pan|oven temperature|baking time|sourdough starter|olive oil"
    ),
    "billing": (
        "invoice for March|refund for the charge|credit card ending 4242|monthly subscription"
        "|late payment fee|billing address|VAT number|annual plan discount|receipt by email"
        "|double charge"
    ),
    "laptop": (
        "laptop will not boot|blue screen error|battery drains fast|keyboard backlight"
        "|driver update|BIOS settings|SSD health|wifi adapter|fan noise|safe mode"
    ),
    "garden": (
        "tomato seedlings|compost bin|clay soil|drip irrigation|aphids on the roses"
        "|pruning the apple tree|raised beds|lawn fertilizer|mulch layer|frost cover"
    ),
    "moving": (
        "moving truck|packing boxes|new lease|utility transfer|change of address"
        "|storage unit|piano movers|security deposit|parking permit|key handover"
    ),
}
TEMPLATES = (
    "Can you help me with the {a}?",
    "I want to know more about the {a} and the {b}.",
    "Thanks, and what about the {a}?",
    "Please check the {a} again, I think the {b} is the problem.",
    "Okay, so the {a} is fine but the {b} worries me.",
    "Could you explain how the {a} works with the {b}?",
    "Great, one more question about the {a}.",
    "Sure, the {a} should be ready, then we look at the {b}.",
)


def conversation(rng: random.Random, items_per_topic: int = 10) -> tuple[list[str], set[int]]:
    """One conversation; ``items_per_topic`` phrases of each topic are used (fewer: more
    lexical overlap between the messages of one topic)."""
    names = list(TOPICS)
    rng.shuffle(names)
    texts: list[str] = []
    changes: set[int] = set()
    for k, name in enumerate(names[: rng.randint(2, 5)]):
        if k:
            changes.add(len(texts))
        items = TOPICS[name].split("|")[:items_per_topic]
        for _ in range(rng.randint(4, 9)):
            a, b = rng.sample(items, 2)
            texts.append(rng.choice(TEMPLATES).format(a=a, b=b))
    return texts, changes


def run_ours(threshold: float, texts: list[str], emb: HashingEmbedder) -> set[int]:
    d = DriftDetector(emb, threshold=threshold)
    flagged: set[int] = set()
    for i, t in enumerate(texts):
        if d.check(t).drifted:
            flagged.add(i)
            d.reset()
            d.check(t)  # the new topic opens with this message
    return flagged


def run_seed(threshold: float, texts: list[str], emb: HashingEmbedder) -> set[int]:
    """The seed: cosine with the opening message only, no centroid, no reset."""
    import math

    first = emb.embed(texts[0])
    flagged: set[int] = set()
    for i, t in enumerate(texts[1:], 1):
        v = emb.embed(t)
        sim = sum(a * b for a, b in zip(first, v, strict=True)) / (
            math.sqrt(sum(a * a for a in first)) * math.sqrt(sum(b * b for b in v)) or 1.0
        )
        if sim < threshold:
            flagged.add(i)
    return flagged


def score(
    runner: Callable[[float, list[str], HashingEmbedder], set[int]],
    threshold: float,
    data: list[tuple[list[str], set[int]]],
    emb: HashingEmbedder,
) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for texts, changes in data:
        flagged = runner(threshold, texts, emb)
        tp += len(flagged & changes)
        fp += len(flagged - changes)
        fn += len(changes - flagged)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    emb = HashingEmbedder()
    for items in (10, 4):
        rng = random.Random(args.seed)
        data = [conversation(rng, items) for _ in range(args.conversations)]
        n_msgs = sum(len(t) for t, _ in data)
        n_changes = sum(len(c) for _, c in data)
        print(
            f"\n{items} phrases a topic: {args.conversations} conversations, {n_msgs} messages, "
            f"{n_changes} topic changes (chance precision {n_changes / n_msgs:.3f})"
        )
        print(f"{'threshold':>9}  {'detector':<14} {'precision':>9} {'recall':>7} {'F1':>6}")
        for threshold in (0.1, 0.2, 0.3):
            for name, runner in (("DriftDetector", run_ours), ("seed", run_seed)):
                p, r, f = score(runner, threshold, data, emb)
                print(f"{threshold:>9}  {name:<14} {p:>9.3f} {r:>7.3f} {f:>6.3f}")


if __name__ == "__main__":
    main()
