"""Agent-loop benchmark: append one message, pack to 8,000 tokens; convomem vs the peers.

The same workload (``workload.py``: system prompt, user/assistant turns, parallel tool
calls and results) and the same token counter for every library: a fresh convomem
tokenizer per library and cell (``tiktoken:cl100k_base`` or ``approx``), wrapped as each
peer's token counter (``peers.py``). Each library keeps its own native message list; per
turn the next message is appended and the list is packed. Conversions happen once,
outside the timing. Reported: the median per-turn time, and the ratio fastest peer /
convomem. Peers have no state across calls, so a turn costs the same whenever it runs.

Columns:
- ``convomem``: ``Packer(budget=8000, tokenizer=..., strategy=Recency())`` packing the
  same growing list of ``Message`` objects (the agent keeps them);
- ``convomem(rebuilt)``: the list rebuilt with ``from_openai`` from the same dicts every
  turn (the rebuild is not timed; the pack must not re-tokenize).

A peer whose predicted turn time at a size (extrapolated from the sizes already measured,
quadratic when only one is known) exceeds ``--max-turn-seconds`` is not run there; the
table shows the estimate as ``~N s?``. LlamaIndex's ``ChatMemoryBuffer`` is quadratic per
``get()``, so it is estimated beyond the smallest sizes.

    .venv/bin/python bench/bench_peers_turn.py            # full run, about 5 minutes
    .venv/bin/python bench/bench_peers_turn.py --quick    # 1,000 and 5,000 only
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import peers
import workload
from convomem.formats.openai import from_openai
from convomem.tokens import ApproxTokenizer, TiktokenTokenizer, Tokenizer

BUDGET = 8_000
TURNS = {1_000: 15, 5_000: 7, 20_000: 5}
TOKENIZERS = ("tiktoken:cl100k_base", "approx")


def fresh_tokenizer(spec: str) -> Tokenizer:
    """A new tokenizer instance (an empty count cache) for one library in one cell."""
    if spec == "approx":
        return ApproxTokenizer()
    kind, _, arg = spec.partition(":")
    if kind == "tiktoken":
        return TiktokenTokenizer(arg)
    raise SystemExit(f"unsupported tokenizer spec {spec!r}; use one of {TOKENIZERS}")


# ----------------------------------------------------------------------------- convomem hook


def convomem_packer_factory() -> Callable[[Tokenizer], Any] | None:
    """``tokenizer -> Packer(budget=8000, tokenizer=..., strategy=Recency())`` (``Packer``
    from ``convomem.packing``, ``Recency`` from ``convomem.strategies``), or None with a
    note while they are not built yet."""
    try:
        from convomem.packing import Packer
        from convomem.strategies import Recency
    except ImportError as exc:
        print(f"note: convomem's Packer/Recency not importable yet ({exc}); convomem skipped")
        return None

    def make(tokenizer: Tokenizer) -> Any:
        return Packer(budget=BUDGET, tokenizer=tokenizer, strategy=Recency())

    return make


def _convomem_measure(result: Any) -> tuple[int, int]:
    return len(result.kept), int(result.token_count)


# ----------------------------------------------------------------------------- harness


@dataclass
class Cell:
    """One library at one size with one tokenizer."""

    library: str
    size: int
    tokenizer: str
    times: list[float] = field(default_factory=list)
    kept: int = 0
    tokens: int = 0
    texts_per_turn: float = 0.0
    estimate: float | None = None  # seconds, when not run
    kind: str = "turn"

    @property
    def median(self) -> float | None:
        return float(statistics.median(self.times)) if self.times else None


def _run_turns(
    pack: Callable[[list[Any]], Any],
    measure: Callable[[Any], tuple[int, int]],
    history: list[Any],
    upcoming: list[Any],
    cell: Cell,
    *,
    warmup: bool,
    cell_seconds: float,
    work: Callable[[], int] | None = None,
    rebuild: Callable[[int], list[Any]] | None = None,
) -> None:
    if warmup:
        pack(history if rebuild is None else rebuild(len(history)))
    works = []
    spent = 0.0
    for nxt in upcoming:
        history.append(nxt)
        msgs = history if rebuild is None else rebuild(len(history))
        before = work() if work else 0
        t0 = time.perf_counter()
        result = pack(msgs)
        dt = time.perf_counter() - t0
        if work:
            works.append(work() - before)
        cell.times.append(dt)
        cell.kept, cell.tokens = measure(result)
        spent += dt
        if spent > cell_seconds:
            break
    cell.texts_per_turn = statistics.median(works) if works else 0.0


def _predict(measured: dict[int, float], size: int) -> float | None:
    """Extrapolate a per-turn time to ``size`` from the sizes measured so far."""
    if not measured:
        return None
    sizes = sorted(measured)
    last = sizes[-1]
    exponent = 2.0
    if len(sizes) >= 2:
        prev = sizes[-2]
        ratio = measured[last] / max(measured[prev], 1e-9)
        exponent = max(1.0, math.log(ratio) / math.log(last / prev))
    return float(measured[last] * (size / last) ** exponent)


def run_agent_loop(
    sizes: list[int],
    tokenizers: list[str],
    peer_names: list[str],
    *,
    cell_seconds: float,
    max_turn_seconds: float,
    make_packer: Callable[[Tokenizer], Any] | None,
) -> list[Cell]:
    available = peers.available_peers(peer_names)
    cells: list[Cell] = []
    max_turns = max(TURNS.get(s, 3) for s in sizes)
    all_dicts = workload.openai_messages(max(sizes) + max_turns)
    for spec in tokenizers:
        measured: dict[str, dict[int, float]] = {}
        for size in sizes:
            turns = TURNS.get(size, 3)
            dicts = all_dicts[: size + turns]
            libraries: list[str] = list(available)
            if make_packer is not None:
                libraries += ["convomem", "convomem(rebuilt)"]
            for lib in libraries:
                cell = Cell(lib, size, spec)
                cells.append(cell)
                predicted = _predict(measured.get(lib, {}), size)
                if predicted is not None and predicted > max_turn_seconds:
                    cell.estimate = predicted
                    print(f"  {spec:>20} {size:>7} {lib:<18} skipped: est. {predicted:.0f} s/turn")
                    continue
                warmup = predicted is None or predicted < 2.0
                tok = fresh_tokenizer(spec)
                if lib in available:
                    peer = available[lib]
                    counter = peers.CountingText(tok)
                    native = peer.convert(dicts)

                    def pack_peer(h: list[Any], p: Any = peer, c: Any = counter) -> Any:
                        return p.pack(h, c, BUDGET)

                    def measure_peer(r: Any, p: Any = peer, c: Any = counter) -> tuple[int, int]:
                        return p.measure(r, c)  # type: ignore[no-any-return]

                    def peer_work(c: Any = counter) -> int:
                        return int(c.calls)

                    _run_turns(
                        pack_peer,
                        measure_peer,
                        native[:size],
                        native[size:],
                        cell,
                        warmup=warmup,
                        cell_seconds=cell_seconds,
                        work=peer_work,
                    )
                else:
                    assert make_packer is not None
                    packer = make_packer(tok)

                    def convomem_work(t: Any = tok) -> int:
                        return int(getattr(t, "tokenizations", 0))

                    rebuild = None
                    msgs = from_openai(dicts)
                    if lib == "convomem(rebuilt)":

                        def rebuild(n: int, d: Any = dicts) -> list[Any]:
                            return from_openai(d[:n])

                    _run_turns(
                        packer.pack,
                        _convomem_measure,
                        msgs[:size],
                        msgs[size:],
                        cell,
                        warmup=True,
                        cell_seconds=cell_seconds,
                        work=convomem_work,
                        rebuild=rebuild,
                    )
                med = cell.median
                assert med is not None
                measured.setdefault(lib, {})[size] = med
                print(
                    f"  {spec:>20} {size:>7} {lib:<18} {med * 1e3:10.2f} ms/turn "
                    f"({len(cell.times)} turns; kept {cell.kept} msgs, {cell.tokens} tokens; "
                    f"{cell.texts_per_turn:.0f} texts tokenized/turn)",
                    flush=True,
                )
    return cells


def run_oneshot(
    size: int,
    tokenizers: list[str],
    peer_names: list[str],
    *,
    max_seconds: float,
    make_packer: Callable[[Tokenizer], Any] | None,
) -> list[Cell]:
    """One cold pack of ``size`` messages per library (no warm-up: a first call)."""
    available = peers.available_peers(peer_names)
    dicts = workload.openai_messages(size)
    cells = []
    for spec in tokenizers:
        for lib in [*available, *(["convomem"] if make_packer else [])]:
            cell = Cell(lib, size, spec, kind="oneshot")
            cells.append(cell)
            if lib == "llamaindex":  # quadratic: ~3 s at 1,000 messages with tiktoken
                cell.estimate = float("inf")
                print(f"  {spec:>20} {size:>7} {lib:<18} skipped (quadratic get())")
                continue
            tok = fresh_tokenizer(spec)
            if lib in available:
                peer = available[lib]
                counter = peers.CountingText(tok)
                native = peer.convert(dicts)
                t0 = time.perf_counter()
                result = peer.pack(native, counter, BUDGET)
                cell.times.append(time.perf_counter() - t0)
                cell.kept, cell.tokens = peer.measure(result, counter)
                cell.texts_per_turn = counter.calls
            else:
                assert make_packer is not None
                msgs = from_openai(dicts)
                packer = make_packer(tok)
                t0 = time.perf_counter()
                result = packer.pack(msgs)
                cell.times.append(time.perf_counter() - t0)
                cell.kept, cell.tokens = _convomem_measure(result)
                cell.texts_per_turn = getattr(tok, "tokenizations", 0)
            print(
                f"  {spec:>20} {size:>7} {lib:<18} {cell.times[0]:10.3f} s one-shot "
                f"(kept {cell.kept} msgs, {cell.tokens} tokens; {cell.texts_per_turn:.0f} texts)",
                flush=True,
            )
            if cell.times[0] > max_seconds:
                print(f"  note: {lib} took over {max_seconds:.0f} s")
    return cells


# ----------------------------------------------------------------------------- report


def _fmt(cell: Cell | None, scale: float) -> str:
    if cell is None:
        return "-"
    if cell.median is not None:
        return f"{cell.median * scale:.2f}"
    if cell.estimate is not None and math.isfinite(cell.estimate):
        return f"~{cell.estimate:.0f} s?"
    return "skip"


def print_table(cells: list[Cell], title: str, unit: str = "ms") -> None:
    scale = 1e3 if unit == "ms" else 1.0
    libs: list[str] = []
    for c in cells:
        if c.library not in libs:
            libs.append(c.library)
    peer_libs = [lib for lib in libs if not lib.startswith("convomem")]
    keys = sorted({(c.tokenizer, c.size) for c in cells}, key=lambda k: (k[0], k[1]))
    by = {(c.tokenizer, c.size, c.library): c for c in cells}
    head = ["tokenizer", "size", *[f"{lib} {unit}" for lib in libs], "fastest peer / convomem"]
    if "convomem(rebuilt)" in libs:
        head.append("/ rebuilt")
    rows = []
    for spec, size in keys:
        row = [spec, f"{size:,}", *[_fmt(by.get((spec, size, lib)), scale) for lib in libs]]
        peer_times = [
            by[(spec, size, lib)].median
            for lib in peer_libs
            if (spec, size, lib) in by and by[(spec, size, lib)].median is not None
        ]
        for variant in ("convomem", "convomem(rebuilt)"):
            own = by.get((spec, size, variant))
            if own is None and variant != "convomem":
                continue
            if peer_times and own is not None and own.median:
                ratio = min(t for t in peer_times if t is not None) / own.median
                row.append(f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2f}x")
            else:
                row.append("n/a")
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for r in rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)))


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for dist in ("convomem", "convopack", "langchain-core", "llama-index-core", "tiktoken"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 20_000])
    ap.add_argument("--tokenizers", nargs="+", default=list(TOKENIZERS))
    ap.add_argument("--peers", nargs="+", default=list(peers.PEERS))
    ap.add_argument("--cell-seconds", type=float, default=8.0, help="timed seconds per cell")
    ap.add_argument("--max-turn-seconds", type=float, default=20.0)
    ap.add_argument("--oneshot", type=int, default=100_000, help="0 to skip the one-shot pack")
    ap.add_argument("--quick", action="store_true", help="sizes 1,000 and 5,000, no one-shot")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.oneshot = [1_000, 5_000], 0
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions().items()))
    print(f"agent loop: append one message, pack to {BUDGET:,} tokens")
    make_packer = convomem_packer_factory()
    t0 = time.perf_counter()
    cells = run_agent_loop(
        sorted(args.sizes),
        args.tokenizers,
        args.peers,
        cell_seconds=args.cell_seconds,
        max_turn_seconds=args.max_turn_seconds,
        make_packer=make_packer,
    )
    oneshot: list[Cell] = []
    if args.oneshot:
        print(f"one-shot pack of {args.oneshot:,} messages")
        oneshot = run_oneshot(
            args.oneshot,
            args.tokenizers,
            args.peers,
            max_seconds=args.max_turn_seconds,
            make_packer=make_packer,
        )
    print_table(cells, "Per-turn cost (median ms per turn)")
    if oneshot:
        print_table(oneshot, f"One-shot pack of {args.oneshot:,} messages (s)", unit="s")
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    if args.json:
        payload = {
            "versions": versions(),
            "budget": BUDGET,
            "cells": [
                {
                    "library": c.library,
                    "size": c.size,
                    "tokenizer": c.tokenizer,
                    "median_s": c.median,
                    "turns": len(c.times),
                    "kept": c.kept,
                    "tokens": c.tokens,
                    "texts_tokenized_per_turn": c.texts_per_turn,
                    "estimate_s": c.estimate,
                    "kind": c.kind,
                }
                for c in [*cells, *oneshot]
            ],
        }
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
