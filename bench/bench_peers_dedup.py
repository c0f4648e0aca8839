"""SemanticDedup on 10,000 messages: convomem vs convopack 0.3.2, with the same embedder.

Both libraries get a fresh ``convomem.recall.HashingEmbedder()`` (same parameters; a
fresh instance each so neither profits from the other's n-gram memo), wrapped to count
``embed`` / ``embed_batch`` calls, the same ``approx`` token counter, threshold 0.95 and an
8,000-token budget with ``Recency`` as the fallback. Two packs each: a cold pack of the
history, then a pack of the history plus one message (what an agent loop does next);
for convomem also the median of a few more such turns (``--turns``).

convopack's ``SemanticDedup`` compares every message with every earlier survivor in pure
Python (quadratic: about 4 s at 1,000 messages, 14 s at 2,000 here), so by default it is
measured at smaller sizes and extrapolated to 10,000 with the fitted exponent; ``--full``
runs it at 10,000 for real (several minutes).

    .venv/bin/python bench/bench_peers_dedup.py
    .venv/bin/python bench/bench_peers_dedup.py --full
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

import peers
import workload
from convomem.formats.openai import from_openai
from convomem.tokens import ApproxTokenizer

BUDGET = 8_000
THRESHOLD = 0.95
SIZE = 10_000


class CountingEmbedder:
    """Wraps an embedder, counting texts embedded and calls made."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embed_calls = 0
        self.batch_calls = 0
        self.texts = 0

    def embed(self, text: str) -> list[float]:
        self.embed_calls += 1
        self.texts += 1
        return self.inner.embed(text)  # type: ignore[no-any-return]

    def embed_batch(self, texts: Iterable[str]) -> list[list[float]]:
        batch = list(texts)
        self.batch_calls += 1
        self.texts += len(batch)
        return self.inner.embed_batch(batch)  # type: ignore[no-any-return]


def make_embedder() -> CountingEmbedder:
    from convomem.recall import HashingEmbedder

    return CountingEmbedder(HashingEmbedder())


def convomem_dedup_packer(embedder: CountingEmbedder) -> Any:
    """``Packer(budget=8000, tokenizer=approx, strategy=SemanticDedup(...))``."""
    from convomem.packing import Packer
    from convomem.strategies import Recency
    from convomem.strategies.dedup import SemanticDedup

    return Packer(
        budget=BUDGET,
        tokenizer=ApproxTokenizer(),
        strategy=SemanticDedup(embedder, threshold=THRESHOLD, fallback=Recency()),
    )


def _two_packs(
    pack: Callable[[list[Any]], Any], msgs: list[Any], emb: CountingEmbedder
) -> dict[str, float]:
    history = msgs[:-1]
    t0 = time.perf_counter()
    first = pack(history)
    cold = time.perf_counter() - t0
    texts_cold = emb.texts
    history.append(msgs[-1])
    t0 = time.perf_counter()
    second = pack(history)
    warm = time.perf_counter() - t0
    return {
        "cold_s": cold,
        "warm_s": warm,
        "texts_cold": float(texts_cold),
        "texts_warm": float(emb.texts - texts_cold),
        "kept": float(len(second.kept)),
        "dropped": float(len(second.dropped)),
        "first_kept": float(len(first.kept)),
    }


def run_convopack(size: int) -> dict[str, float]:
    from convopack import Packer, Recency, SemanticDedup

    dicts = workload.openai_messages(size + 1)
    msgs = peers.to_convopack(dicts)
    emb = make_embedder()
    packer = Packer(
        budget=BUDGET,
        tokenizer=peers.ConvopackTokenizer(peers.CountingText(ApproxTokenizer())),
        strategy=SemanticDedup(emb, threshold=THRESHOLD, fallback=Recency()),
    )
    return _two_packs(packer.pack, msgs, emb)


def run_convomem(size: int, turns: int) -> dict[str, float]:
    emb = make_embedder()
    packer = convomem_dedup_packer(emb)
    msgs = from_openai(workload.openai_messages(size + 1 + turns))
    out = _two_packs(packer.pack, msgs[: size + 1], emb)
    times = []
    before = emb.texts
    for k in range(size + 2, size + 2 + turns):
        t0 = time.perf_counter()
        packer.pack(msgs[:k])
        times.append(time.perf_counter() - t0)
    out["turn_s"] = statistics.median(times) if times else out["warm_s"]
    out["texts_per_turn"] = (emb.texts - before) / max(turns, 1)
    return out


def _show(name: str, size: int, r: dict[str, float]) -> None:
    print(
        f"  {name:<10} {size:>7,}: cold {r['cold_s']:8.2f} s, next turn {r['warm_s']:8.2f} s; "
        f"texts embedded {r['texts_cold']:.0f} then {r['texts_warm']:.0f}; "
        f"kept {r['kept']:.0f}, dropped {r['dropped']:.0f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=SIZE)
    ap.add_argument("--convopack-sizes", type=int, nargs="+", default=[1_000, 2_000])
    ap.add_argument("--full", action="store_true", help="run convopack at --size too (slow)")
    ap.add_argument("--turns", type=int, default=9, help="more convomem turns for the median")
    args = ap.parse_args(argv)
    print(f"SemanticDedup(threshold={THRESHOLD}) + Recency, budget {BUDGET:,}, HashingEmbedder()")
    print(f"  versions: {_versions()}")

    measured: dict[int, dict[str, float]] = {}
    sizes = sorted(set(args.convopack_sizes + ([args.size] if args.full else [])))
    for n in sizes:
        measured[n] = run_convopack(n)
        _show("convopack", n, measured[n])
    if args.size in measured:
        cp_cold, cp_warm, how = measured[args.size]["cold_s"], measured[args.size]["warm_s"], ""
    else:
        a, b = sorted(measured)[-2:] if len(measured) >= 2 else (None, sorted(measured)[-1])
        exp = 2.0
        if a is not None:
            exp = math.log(measured[b]["cold_s"] / measured[a]["cold_s"]) / math.log(b / a)
        scale = (args.size / b) ** exp
        cp_cold, cp_warm = measured[b]["cold_s"] * scale, measured[b]["warm_s"] * scale
        how = f" (extrapolated from {b:,} with exponent {exp:.2f}; --full to measure)"
        print(
            f"  convopack {args.size:>7,}: cold ~{cp_cold:.0f} s, next turn ~{cp_warm:.0f} s{how}"
        )

    own = run_convomem(args.size, args.turns)
    _show("convomem", args.size, own)
    print(
        f"  convomem   {args.size:>7,}: median of {args.turns} more turns "
        f"{own['turn_s'] * 1e3:.1f} ms, texts embedded per turn {own['texts_per_turn']:.1f}"
    )
    print(
        f"ratio convopack / convomem at {args.size:,}: cold {cp_cold / own['cold_s']:,.0f}x, "
        f"next turn {cp_warm / max(own['warm_s'], 1e-9):,.0f}x, "
        f"steady turn {cp_warm / max(own['turn_s'], 1e-9):,.0f}x{how}"
    )


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in ("convopack", "numpy"):
        try:
            out.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            out.append(f"{dist} not installed")
    return ", ".join(out)


if __name__ == "__main__":
    main()
