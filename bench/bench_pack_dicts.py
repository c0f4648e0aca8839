"""The Packer on provider dicts: per turn at 20,000 messages, and a cold pack of 100,000.

Agent loop (issue 7 §2): the caller keeps a list of OpenAI dicts (or the same
conversation as Anthropic dicts) and appends one per turn; each turn packs it to 8,000
tokens. Columns, all in one run, in interleaved rounds (one turn each per round, order
rotated, CPU-time medians), with ``approx`` (chars/4) and ``tiktoken:cl100k_base``:

- ``Messages``: ``packer.pack(messages)`` on a growing list of ``Message`` objects (the
  native path, the reference);
- ``pack_openai``: ``packer.pack_openai(dicts)``; ``pack_anthropic``:
  ``packer.pack_anthropic(dicts, system=...)`` (the prefix is proved unchanged against
  private snapshots, so in-place edits are seen; only the new dict is converted);
- ``...+trust``: the same with ``Packer(assume_unchanged=True)`` (the prefix proved by
  identity: for callers that never edit a dict in place once passed);
- ``convopack``, ``langchain``: each on its own native list (converted once, not timed),
  with the same token counter (``peers.py``).

Targets: each dict path within 2x of ``Messages`` and >= 100x faster than the fastest peer.

One-shot (issue 7 §2): a fresh Packer packs 100,000 OpenAI dicts (``pack_openai``:
conversion, counting, chunking and selection timed) against each peer converting and
packing them, and the floor: tiktoken's own ``encode_ordinary_batch`` of the texts
convomem counts. Wall time (tiktoken batches on threads), best of ``--rounds``.
Targets: with approx faster than the fastest peer; with tiktoken <= 0.7x convopack and
<= 1.5x the floor.

    .venv/bin/python bench/bench_pack_dicts.py                 # about 5 minutes
    .venv/bin/python bench/bench_pack_dicts.py --size 5000 --oneshot 20000   # quicker
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
import workload
from convomem.formats.anthropic import to_anthropic
from convomem.formats.openai import from_openai
from convomem.packing import Packer
from convomem.strategies import Recency
from convomem.tokens import ApproxTokenizer, BaseTokenizer, TiktokenTokenizer

BUDGET = 8_000
OWN = ("Messages", "pack_openai", "pack_anthropic")
TOKENIZERS = ("approx", "tiktoken:cl100k_base")
cpu = time.process_time
wall = time.perf_counter


def fresh_tokenizer(spec: str) -> BaseTokenizer:
    return ApproxTokenizer() if spec == "approx" else TiktokenTokenizer(spec.partition(":")[2])


def packer(spec: str, trust: bool = False) -> Packer:
    return Packer(
        budget=BUDGET, tokenizer=fresh_tokenizer(spec), strategy=Recency(), assume_unchanged=trust
    )


class Loop:
    """One library's agent loop: its list, what comes next, and one timed turn."""

    def __init__(
        self, name: str, history: list[Any], upcoming: list[Any], pack: Callable[[Any], Any]
    ) -> None:
        self.name, self.history, self.upcoming, self.pack = name, history, upcoming, pack
        self.times: list[float] = []

    def turn(self) -> None:
        self.history.append(self.upcoming[len(self.times)])
        t0 = cpu()
        self.pack(self.history)
        self.times.append(cpu() - t0)


def loops(spec: str, size: int, turns: int, peer_names: list[str]) -> list[Loop]:
    dicts = workload.openai_messages(size + 3 * turns)
    msgs = from_openai(dicts)
    out = [Loop("Messages", msgs[:size], msgs[size:], packer(spec).pack)]
    system, anth = to_anthropic(from_openai(dicts))
    start = len(to_anthropic(from_openai(dicts[:size]))[1])
    for trust, tag in ((False, ""), (True, "+trust")):
        own = workload.openai_messages(size + 3 * turns)  # the caller's own dicts
        pack = packer(spec, trust).pack_openai
        out.append(Loop("pack_openai" + tag, own[:size], own[size:], pack))
        p = packer(spec, trust)
        mine = [dict(d) for d in anth]

        def pack_anthropic(h: list[Any], p: Packer = p) -> Any:
            return p.pack_anthropic(h, system)

        out.append(Loop("pack_anthropic" + tag, mine[:start], mine[start:], pack_anthropic))
    for name, peer in peers.available_peers(peer_names).items():
        counter = peers.CountingText(fresh_tokenizer(spec))
        native = peer.convert(dicts)
        out.append(
            Loop(
                name,
                native[:size],
                native[size:],
                lambda h, pr=peer, c=counter: pr.pack(h, c, BUDGET),
            )
        )
    return out


def per_turn(spec: str, size: int, own_turns: int, peer_turns: int, names: list[str]) -> None:
    ls = loops(spec, size, own_turns, names)
    for lp in ls:
        lp.pack(lp.history)  # warm-up: the first pack converts and counts everything
    for k in range(own_turns):
        for lp in ls[k % len(ls) :] + ls[: k % len(ls)]:
            if lp.name.startswith(OWN) or k < peer_turns:
                lp.turn()
    med = {lp.name: statistics.median(lp.times) for lp in ls}
    peer_meds = {n: t for n, t in med.items() if not n.startswith(OWN)}
    print(f"\n{spec}, {size:,} messages, median CPU ms per turn:")
    for name, t in med.items():
        print(f"  {name:<22} {t * 1e3:9.3f} ms")
    native = med["Messages"]
    fastest = min(peer_meds.items(), key=lambda kv: kv[1]) if peer_meds else None
    for path in [n for n in med if n.startswith(OWN[1:])]:
        line = f"  {path}: {med[path] / native:.2f}x Messages (target <= 2)"
        if fastest:
            line += f"; {fastest[0]} / {path} = {fastest[1] / med[path]:,.0f}x (target >= 100)"
        print(line)


def one_shot(spec: str, size: int, rounds: int, names: list[str]) -> None:
    dicts = workload.openai_messages(size)
    texts = [m.countable_text() for m in from_openai(dicts)]
    avail = peers.available_peers(names)
    best: dict[str, tuple[float, float]] = {}

    def note(name: str, w: float, c: float) -> None:
        old = best.get(name)
        best[name] = (min(w, old[0]), min(c, old[1])) if old else (w, c)

    for _ in range(rounds):
        fresh = workload.openai_messages(size)
        p = packer(spec)
        w0, c0 = wall(), cpu()
        p.pack_openai(fresh)
        note("pack_openai", wall() - w0, cpu() - c0)
        for name, peer in avail.items():
            counter = peers.CountingText(fresh_tokenizer(spec))
            fresh = workload.openai_messages(size)
            w0, c0 = wall(), cpu()
            peer.pack(peer.convert(fresh), counter, BUDGET)
            note(name, wall() - w0, cpu() - c0)
        if spec != "approx":
            enc = TiktokenTokenizer(spec.partition(":")[2]).encoding
            w0, c0 = wall(), cpu()
            enc.encode_ordinary_batch(texts)
            note("floor", wall() - w0, cpu() - c0)
    print(f"\n{spec}: one-shot pack of {size:,} OpenAI dicts, best of {rounds} (s)")
    for name, (w, c) in best.items():
        print(f"  {name:<12} wall {w:7.3f}   cpu {c:7.3f}")
    own = best["pack_openai"][0]
    peer_w = {n: v[0] for n, v in best.items() if n in avail}
    if peer_w:
        fastest = min(peer_w, key=peer_w.__getitem__)
        print(f"  pack_openai / {fastest} (fastest peer): {own / peer_w[fastest]:.2f}x wall"
              + (" (target < 1)" if spec == "approx" else ""))  # fmt: skip
        if "convopack" in peer_w and spec != "approx":
            print(f"  pack_openai / convopack: {own / peer_w['convopack']:.2f}x (target <= 0.7)")
    if "floor" in best:
        print(f"  pack_openai / floor: {own / best['floor'][0]:.2f}x wall (target <= 1.5)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--turns", type=int, default=40, help="convomem turns per cell")
    ap.add_argument("--peer-turns", type=int, default=5)
    ap.add_argument("--oneshot", type=int, default=100_000, help="0 to skip")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", nargs="*", default=["convopack", "langchain"])
    ap.add_argument("--tokenizers", nargs="*", default=list(TOKENIZERS))
    args = ap.parse_args()
    for spec in args.tokenizers:
        per_turn(spec, args.size, args.turns, args.peer_turns, args.peers)
    if args.oneshot:
        for spec in args.tokenizers:
            one_shot(spec, args.oneshot, args.rounds, args.peers)


if __name__ == "__main__":
    main()
