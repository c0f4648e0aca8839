"""Benchmark the semantic-dedup core: HashingEmbedder, EmbeddingCache, near-duplicate search.

Times, on N realistic-ish chat messages (default 10,000: support-chat sentences from
templates, about 10% exact repeats and 10% light edits of earlier messages):

- HashingEmbedder.embed_batch, numpy path vs pure-Python path (bit-identical output);
- EmbeddingCache.vectors cold, then warm (the same messages rebuilt from dicts);
- find_near_duplicates at threshold 0.95, numpy vs pure Python on the first
  --python-n messages (default 2,000: the pure search is quadratic), and numpy on all N;
- NearDuplicateFinder per turn: append one message to N and search again.

Each ratio is measured in the same run. Usage:
    .venv/bin/python bench/bench_dedup_core.py [--n 10000] [--python-n 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from convomem.model import Message
from convomem.recall import (
    EmbeddingCache,
    HashingEmbedder,
    NearDuplicateFinder,
    find_near_duplicates,
)

SUBJECTS = ["my order", "the invoice", "my account", "the refund", "the delivery", "my password"]
VERBS = ["has not arrived", "is wrong", "was charged twice", "cannot be found", "is late"]
ASKS = [
    "Can you check what happened?",
    "Please tell me what to do next.",
    "I need this fixed today.",
    "Is there anything you need from me?",
    "What are my options here?",
]
ANSWERS = [
    "I am sorry to hear that. Let me look into {s} for you right away.",
    "Thanks for your patience. I can see that {s} {v}; I have escalated it.",
    "I checked {s}: it {v}. A specialist will contact you within 24 hours.",
    "Could you confirm the number for {s}? Then I can open a ticket.",
]
SHORT = ["ok", "thanks!", "Thank you.", "yes", "no", "great, thanks", "hello?"]


def make_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts: list[str] = []
    for i in range(n):
        r = rng.random()
        if texts and r < 0.10:
            texts.append(rng.choice(texts))  # an exact repeat
        elif texts and r < 0.20:
            words = rng.choice(texts).split()  # a light edit of an earlier message
            k = rng.randrange(len(words))
            words[k] = words[k].upper() if rng.random() < 0.5 else words[k] + "!"
            texts.append(" ".join(words))
        elif r < 0.27:
            texts.append(rng.choice(SHORT))
        else:
            s, v = rng.choice(SUBJECTS), rng.choice(VERBS)
            number = rng.randrange(10_000, 99_999)
            if i % 2:
                texts.append(rng.choice(ANSWERS).format(s=s, v=v) + f" (ref {number})")
            else:
                texts.append(f"Hi, {s} #{number} {v}. {rng.choice(ASKS)}")
    return texts


def best(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """The best wall time of ``repeat`` runs, and the last result."""
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--python-n", type=int, default=2_000)
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    n, pn, thr = args.n, min(args.python_n, args.n), args.threshold
    texts = make_texts(n)
    dicts = [{"id": f"m{i}", "role": "user", "content": t} for i, t in enumerate(texts)]
    messages = [Message.from_dict(d) for d in dicts]
    out: dict[str, Any] = {"n": n, "python_n": pn, "threshold": thr}

    # 1. the embedder, fresh instances each run (no n-gram memo carried over)
    t_np, vec_np = best(lambda: HashingEmbedder(backend="numpy").embed_batch(texts))
    t_py, vec_py = best(lambda: HashingEmbedder(backend="python").embed_batch(texts), 1)
    assert vec_np == vec_py, "the two HashingEmbedder paths disagree"
    out["embed_numpy_s"], out["embed_python_s"] = t_np, t_py

    # 2. the cache: cold, then warm with messages rebuilt from the same dicts
    cache = EmbeddingCache(HashingEmbedder())
    t_cold, vectors = best(lambda: cache.vectors(messages), 1)
    cold_work = cache.embedded
    rebuilt = [Message.from_dict(d) for d in dicts]  # new objects, same content
    t_warm, _ = best(lambda: cache.vectors(rebuilt))
    assert cache.embedded == cold_work, "a warm call embedded again"
    out.update(cache_cold_s=t_cold, cache_warm_s=t_warm, distinct_texts=cold_work)

    # 3. the search, both backends on the same prefix, numpy on everything
    flags = [True] * n
    t_fnp, dups_p = best(lambda: find_near_duplicates(vectors[:pn], flags[:pn], thr))
    t_fpy, dups_py = best(
        lambda: find_near_duplicates(vectors[:pn], flags[:pn], thr, backend="python"), 1
    )
    assert dups_p == dups_py, "the two search backends disagree"
    t_full, dups = best(lambda: find_near_duplicates(vectors, flags, thr))
    out.update(find_numpy_prefix_s=t_fnp, find_python_prefix_s=t_fpy, find_numpy_full_s=t_full)
    out["duplicates"] = len(dups)

    # 4. an agent loop: append one message and search again
    extra = make_texts(args.turns, seed=1)
    per_turn: dict[str, float] = {}
    for backend in ("numpy", "python"):
        finder = NearDuplicateFinder(thr, backend=backend)  # type: ignore[arg-type]
        finder.find(vectors, flags)
        grown, total = list(messages), 0.0
        for i, text in enumerate(extra):
            grown.append(Message(f"new{i}", "user", content=text))
            t0 = time.perf_counter()
            vecs = cache.vectors(grown)
            finder.find(vecs, [True] * len(grown))
            total += time.perf_counter() - t0
        per_turn[backend] = total / len(extra)
        assert finder.compared <= len(set(texts)) + len(extra)
    out["turn_numpy_s"], out["turn_python_s"] = per_turn["numpy"], per_turn["python"]

    ms = 1000.0
    print(f"semantic-dedup core, {n} messages ({cold_work} distinct texts), threshold {thr}")
    print(f"  HashingEmbedder.embed_batch  numpy {t_np * ms:8.1f} ms   python {t_py * ms:8.1f} ms")
    print(f"    -> numpy path is {t_py / t_np:.1f}x faster (bit-identical vectors)")
    print(
        f"  EmbeddingCache.vectors       cold  {t_cold * ms:8.1f} ms   warm   {t_warm * ms:8.1f} ms"
    )
    print(f"    -> a warm call is {t_cold / t_warm:.0f}x cheaper (0 texts re-embedded)")
    print(
        f"  find_near_duplicates ({pn})  numpy {t_fnp * ms:8.1f} ms   python {t_fpy * ms:8.1f} ms"
    )
    print(f"    -> numpy backend is {t_fpy / t_fnp:.0f}x faster (identical results)")
    print(f"  find_near_duplicates ({n}) numpy {t_full * ms:8.1f} ms, {len(dups)} duplicates")
    print(
        f"  per turn (append 1, search)  numpy {per_turn['numpy'] * ms:8.2f} ms   "
        f"python {per_turn['python'] * ms:8.2f} ms"
    )
    ratio = t_full / per_turn["numpy"]
    print(f"    -> an incremental numpy turn is {ratio:.0f}x cheaper than a full search")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
