"""Agent-loop benchmark: append one message, pack to 8,000 tokens; convomem vs the peers.

The same workload (``workload.py``: system prompt, user/assistant turns, parallel tool
calls and results) and the same token counter for every library: a fresh convomem
tokenizer per library and cell (``tiktoken:cl100k_base``, or ``approx``: chars/4),
wrapped as each peer's token counter (``peers.py``). Per turn the next message is
appended to the list the caller keeps and the list is packed. Each (tokenizer, size)
cell runs its libraries in interleaved rounds (one turn each per round, the order
rotated), so load on the machine hits every library alike; figures are medians of CPU
time (``process_time``) per turn.

Libraries (columns):
- ``convopack``, ``langchain``, ``llamaindex``: each keeps its own native message list
  (converted from the dicts once, outside the timing) and packs it every turn;
- ``pack_openai``: ``Packer(...).pack_openai(dicts)`` on the caller's list of OpenAI
  dicts growing by one dict per turn (what most users hold; conversion is timed);
- ``from_openai+pack``: ``packer.pack(from_openai(dicts))`` on the same growing list
  (the conversion of the whole list is timed, every turn);
- ``pack_anthropic``: ``packer.pack_anthropic(messages, system=...)`` on the same
  conversation as a growing list of Anthropic dicts;
- ``Messages``: ``packer.pack(messages)`` on a growing list of ``Message`` objects
  converted once (the native path, the reference for the dict paths).

Targets (issue 7): each dict path within 2x of ``Messages`` and at least 100x faster than
the fastest peer, with tiktoken and with approx. A peer whose predicted turn time at a
size (extrapolated from the sizes already measured, quadratic when only one is known)
exceeds ``--max-turn-seconds`` is not run there; the table shows the estimate as
``~N s?``. LlamaIndex's ``ChatMemoryBuffer`` is quadratic per ``get()``.

One-shot: a cold pack of ``--oneshot`` (100,000) OpenAI dicts: ``pack_openai`` with a
fresh Packer and tokenizer, against each peer converting the dicts and packing them
(conversion and pack reported apart), ``Messages`` (the conversion not timed) and the
floor: tiktoken's own ``encode_ordinary_batch`` of the texts convomem counts (and, for
reference, ``encode_ordinary`` one text at a time). CPU and wall time, best of
``--oneshot-rounds`` interleaved rounds (the batch floor runs on threads: compare wall
on an idle machine).
Targets: with approx faster than the fastest peer; with tiktoken at most 0.7x convopack
and within 1.5x of the floor.

    .venv/bin/python bench/bench_peers_turn.py            # full run, about 10 minutes
    .venv/bin/python bench/bench_peers_turn.py --quick    # 1,000 and 5,000, one-shot 20,000
    .venv/bin/python bench/bench_peers_turn.py --sizes 20000 --peers convopack langchain
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
from convomem.formats.anthropic import to_anthropic
from convomem.formats.openai import from_openai
from convomem.packing import Packer
from convomem.strategies import Recency
from convomem.tokens import ApproxTokenizer, TiktokenTokenizer, Tokenizer

BUDGET = 8_000
PEER_TURNS = {1_000: 15, 5_000: 7, 20_000: 5}
OWN_TURNS = 40  # convomem's turns per cell (they are cheap; more turns, a steadier median)
TOKENIZERS = ("tiktoken:cl100k_base", "approx")
NATIVE = "Messages"
DICT_PATHS = ("pack_openai", "from_openai+pack", "pack_anthropic")
OWN = (*DICT_PATHS, NATIVE)

cpu = time.process_time
wall = time.perf_counter


def fresh_tokenizer(spec: str) -> Tokenizer:
    """A new tokenizer instance (an empty count cache) for one library in one cell."""
    if spec == "approx":
        return ApproxTokenizer()
    kind, _, arg = spec.partition(":")
    if kind == "tiktoken" and arg:
        return TiktokenTokenizer(arg)
    raise SystemExit(f"unsupported tokenizer spec {spec!r}; use one of {TOKENIZERS}")


def make_packer(tokenizer: Tokenizer) -> Packer:
    return Packer(budget=BUDGET, tokenizer=tokenizer, strategy=Recency())


# ----------------------------------------------------------------------------- cells


@dataclass
class Cell:
    """One library at one size with one tokenizer."""

    library: str
    size: int
    tokenizer: str
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    kept: int = 0
    tokens: int | None = None
    texts_per_turn: float = 0.0
    estimate: float | None = None  # seconds, when not run
    kind: str = "turn"
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def median(self) -> float | None:
        return float(statistics.median(self.cpu)) if self.cpu else None


@dataclass
class Runner:
    """A library's state in one cell: its list, what comes next, how it packs."""

    cell: Cell
    history: list[Any]
    upcoming: list[Any]
    pack: Callable[[list[Any]], Any]
    measure: Callable[[Any], tuple[int, int | None]]
    work: Callable[[], int]
    turns: int
    works: list[int] = field(default_factory=list)
    spent: float = 0.0

    def turn(self) -> None:
        self.history.append(self.upcoming[len(self.cell.cpu)])
        before = self.work()
        c0, w0 = cpu(), wall()
        result = self.pack(self.history)
        c1, w1 = cpu(), wall()
        self.works.append(self.work() - before)
        self.cell.cpu.append(c1 - c0)
        self.cell.wall.append(w1 - w0)
        self.cell.kept, self.cell.tokens = self.measure(result)
        self.spent += w1 - w0

    def done(self, cell_seconds: float) -> bool:
        n = len(self.cell.cpu)
        return n >= self.turns or n >= len(self.upcoming) or self.spent > cell_seconds


def peer_runner(
    cell: Cell, peer: peers.Peer, dicts: list[dict[str, Any]], size: int, turns: int
) -> Runner:
    counter = peers.CountingText(fresh_tokenizer(cell.tokenizer))
    native = peer.convert(dicts)

    def pack(h: list[Any]) -> Any:
        return peer.pack(h, counter, BUDGET)

    def measure(r: Any) -> tuple[int, int | None]:
        return peer.measure(r, counter)

    return Runner(cell, native[:size], native[size:], pack, measure, lambda: counter.calls, turns)


def own_runner(cell: Cell, dicts: list[dict[str, Any]], size: int, turns: int) -> Runner:
    tok = fresh_tokenizer(cell.tokenizer)
    packer = make_packer(tok)
    lib = cell.library

    def work() -> int:
        return int(getattr(tok, "tokenizations", 0))

    def kept_only(r: Any) -> tuple[int, int | None]:
        return len(r), None

    if lib == NATIVE:
        msgs = from_openai(dicts)

        def measure(r: Any) -> tuple[int, int | None]:
            return len(r.kept), int(r.token_count)

        return Runner(cell, msgs[:size], msgs[size:], packer.pack, measure, work, turns)
    if lib == "pack_openai":
        fresh = workload.openai_messages(len(dicts))  # the caller's own dicts
        return Runner(cell, fresh[:size], fresh[size:], packer.pack_openai, kept_only, work, turns)
    if lib == "from_openai+pack":
        fresh = workload.openai_messages(len(dicts))

        def pack_converted(h: list[Any]) -> Any:
            return packer.pack(from_openai(h))

        def measure_result(r: Any) -> tuple[int, int | None]:
            return len(r.kept), int(r.token_count)

        return Runner(cell, fresh[:size], fresh[size:], pack_converted, measure_result, work, turns)
    if lib == "pack_anthropic":
        system, anth = to_anthropic(from_openai(dicts))
        start = len(to_anthropic(from_openai(dicts[:size]))[1])

        def pack_anthropic(h: list[Any]) -> Any:
            return packer.pack_anthropic(h, system=system)

        def measure_anthropic(r: Any) -> tuple[int, int | None]:
            return len(r[1]), None

        return Runner(
            cell, anth[:start], anth[start:], pack_anthropic, measure_anthropic, work, turns
        )
    raise ValueError(lib)


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
    own: list[str],
    *,
    cell_seconds: float,
    max_turn_seconds: float,
) -> list[Cell]:
    available = peers.available_peers(peer_names)
    cells: list[Cell] = []
    extra = 2 * OWN_TURNS  # Anthropic merges parallel tool results: fewer messages per dict
    for spec in tokenizers:
        measured: dict[str, dict[int, float]] = {}
        for size in sizes:
            dicts = workload.openai_messages(size + extra)
            runners: list[Runner] = []
            for lib in [*available, *own]:
                cell = Cell(lib, size, spec)
                cells.append(cell)
                predicted = _predict(measured.get(lib, {}), size)
                if predicted is not None and predicted > max_turn_seconds:
                    cell.estimate = predicted
                    print(f"  {spec:>20} {size:>7} {lib:<18} skipped: est. {predicted:.0f} s/turn")
                    continue
                if lib in available:
                    r = peer_runner(cell, available[lib], dicts, size, PEER_TURNS.get(size, 3))
                else:
                    r = own_runner(cell, dicts, size, OWN_TURNS)
                if predicted is None or predicted < 2.0:  # warm-up pack, not timed
                    r.pack(r.history)  # the same list object, as a caller would
                runners.append(r)
            k = 0
            while not all(r.done(cell_seconds) for r in runners):
                for r in runners[k % len(runners) :] + runners[: k % len(runners)]:
                    if not r.done(cell_seconds):
                        r.turn()
                k += 1
            for r in runners:
                c = r.cell
                c.texts_per_turn = statistics.median(r.works) if r.works else 0.0
                med = c.median
                assert med is not None
                measured.setdefault(c.library, {})[size] = med
                print(
                    f"  {spec:>20} {size:>7} {c.library:<18} {med * 1e3:10.3f} ms/turn cpu "
                    f"({len(c.cpu)} turns; kept {c.kept} msgs; "
                    f"{c.texts_per_turn:.0f} texts tokenized/turn)",
                    flush=True,
                )
            check_same_kept(cells, spec, size)
    return cells


def check_same_kept(cells: list[Cell], spec: str, size: int) -> None:
    """The OpenAI-dict paths must keep what the native path keeps (same list, same turns)."""
    by = {c.library: c for c in cells if c.tokenizer == spec and c.size == size and c.cpu}
    native = by.get(NATIVE)
    for lib in ("pack_openai", "from_openai+pack"):
        c = by.get(lib)
        if native is None or c is None or len(c.cpu) != len(native.cpu):
            continue
        if c.kept != native.kept:
            print(f"  warning: {lib} kept {c.kept} messages, {NATIVE} {native.kept}")


# ----------------------------------------------------------------------------- one-shot


def run_oneshot(size: int, tokenizers: list[str], peer_names: list[str], rounds: int) -> list[Cell]:
    """A cold pack of ``size`` OpenAI dicts per library, best of ``rounds`` (wall)."""
    available = peers.available_peers(peer_names)
    available.pop("llamaindex", None)  # quadratic get(): ~3 s at 1,000 messages
    dicts = workload.openai_messages(size)
    texts = [m.countable_text() for m in from_openai(dicts)]
    cells = []
    for spec in tokenizers:
        libs = [*available, "pack_openai", NATIVE]
        if spec.startswith("tiktoken:"):
            libs += ["floor", "floor_seq"]
        by = {lib: Cell(lib, size, spec, kind="oneshot") for lib in libs}
        cells.extend(by.values())
        for r in range(rounds):
            for lib in libs[r % len(libs) :] + libs[: r % len(libs)]:
                oneshot_once(by[lib], available, dicts, texts)
        for c in by.values():
            best = min(c.wall)
            extra = ", ".join(f"{k} {v:.3f} s" for k, v in c.extra.items())
            print(
                f"  {spec:>20} {size:>7} {c.library:<16} {best:8.3f} s wall "
                f"({min(c.cpu):.3f} s cpu; kept {c.kept}; {c.texts_per_turn:.0f} texts"
                f"{'; ' + extra if extra else ''})",
                flush=True,
            )
    return cells


def oneshot_once(
    cell: Cell, available: dict[str, peers.Peer], dicts: list[dict[str, Any]], texts: list[str]
) -> None:
    tok = fresh_tokenizer(cell.tokenizer)
    lib = cell.library
    if lib in available:
        peer = available[lib]
        counter = peers.CountingText(tok)
        fresh = workload.openai_messages(len(dicts))
        c0, w0 = cpu(), wall()
        native = peer.convert(fresh)
        w1 = wall()
        result = peer.pack(native, counter, BUDGET)
        c2, w2 = cpu(), wall()
        cell.kept, cell.tokens = peer.measure(result, counter)
        cell.texts_per_turn = counter.calls
        convert, pack = w1 - w0, w2 - w1
        if not cell.wall or w2 - w0 < min(cell.wall):
            cell.extra = {"convert": convert, "pack": pack}
        cell.wall.append(w2 - w0)
        cell.cpu.append(c2 - c0)
        return
    if lib in ("floor", "floor_seq"):  # tiktoken's batch (threads), or one text at a time
        encoding = tok.encoding  # type: ignore[attr-defined]
        c0, w0 = cpu(), wall()
        if lib == "floor":
            encoding.encode_ordinary_batch(texts)
        else:
            encode = encoding.encode_ordinary
            for t in texts:
                encode(t)
        cell.wall.append(wall() - w0)
        cell.cpu.append(cpu() - c0)
        cell.texts_per_turn = len(texts)
        return
    packer = make_packer(tok)
    if lib == NATIVE:
        msgs = from_openai(dicts)
        c0, w0 = cpu(), wall()
        result = packer.pack(msgs)
        cell.wall.append(wall() - w0)
        cell.cpu.append(cpu() - c0)
        cell.kept = len(result.kept)
    else:
        fresh = workload.openai_messages(len(dicts))
        c0, w0 = cpu(), wall()
        out = packer.pack_openai(fresh)
        cell.wall.append(wall() - w0)
        cell.cpu.append(cpu() - c0)
        cell.kept = len(out)
    cell.texts_per_turn = getattr(tok, "tokenizations", 0)


# ----------------------------------------------------------------------------- report


def _fmt(cell: Cell | None, scale: float) -> str:
    if cell is None:
        return "-"
    if cell.median is not None:
        return (
            f"{cell.median * scale:.3f}"
            if cell.median * scale < 10
            else f"{cell.median * scale:.1f}"
        )
    if cell.estimate is not None and math.isfinite(cell.estimate):
        return f"~{cell.estimate:.0f} s?"
    return "skip"


def _ratio(x: float) -> str:
    return f"{x:,.0f}x" if x >= 10 else f"{x:.2f}x"


def _table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for r in rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)))


def print_turns(cells: list[Cell]) -> None:
    libs: list[str] = []
    for c in cells:
        if c.library not in libs:
            libs.append(c.library)
    peer_libs = [lib for lib in libs if lib not in OWN]
    own_libs = [lib for lib in libs if lib in OWN]
    keys = sorted({(c.tokenizer, c.size) for c in cells})
    by = {(c.tokenizer, c.size, c.library): c for c in cells}
    print("\nPer-turn cost (median cpu ms per turn)")
    _table(
        ["tokenizer", "size", *libs],
        [[s, f"{n:,}", *[_fmt(by.get((s, n, lib)), 1e3) for lib in libs]] for s, n in keys],
    )
    print("\nRatios (targets: fastest peer / dict path >= 100x; dict path / Messages <= 2x)")
    rows = []
    for s, n in keys:
        known = [
            (by[(s, n, p)].median, p)
            for p in peer_libs
            if (s, n, p) in by and by[(s, n, p)].median is not None
        ]
        fastest, name = min(known) if known else (None, "-")
        native = by.get((s, n, NATIVE))
        for lib in own_libs:
            own = by.get((s, n, lib))
            if own is None or not own.median:
                continue
            vs_peer = _ratio(fastest / own.median) if fastest else "n/a"
            vs_native = (
                _ratio(own.median / native.median)
                if native is not None and native.median and lib != NATIVE
                else ""
            )
            rows.append(
                [
                    s,
                    f"{n:,}",
                    lib,
                    f"{own.median * 1e3:.3f}",
                    f"{name} {fastest * 1e3:.1f}" if fastest else "-",
                    vs_peer,
                    vs_native,
                ]
            )
    head = ["tokenizer", "size", "convomem path", "cpu ms", "fastest peer ms", "peer / path"]
    _table([*head, "path / Messages"], rows)


def print_oneshot(cells: list[Cell]) -> None:
    """Best CPU and wall seconds per library, ratios on both. CPU is steadier under load;
    wall is what threads improve (tiktoken's batch floor, and any pack that tokenizes on
    threads: their CPU is summed over threads). convopack counts one text at a time, so
    it is about the sequential floor in CPU: 0.7x of it needs threads and an idle machine."""
    if not cells:
        return
    size = cells[0].size
    print(f"\nOne-shot cold pack of {size:,} OpenAI dicts (best of rounds; s)")
    rows = []
    for c in cells:
        conv = f"{c.extra['convert']:.2f} + {c.extra['pack']:.2f}" if c.extra else ""
        rows.append([c.tokenizer, c.library, f"{min(c.cpu):.3f}", f"{min(c.wall):.3f}", conv])
    _table(["tokenizer", "library", "cpu s", "wall s", "wall: convert + pack"], rows)
    for spec in sorted({c.tokenizer for c in cells}):
        by = {c.library: c for c in cells if c.tokenizer == spec}
        own_cpu, own_wall = min(by["pack_openai"].cpu), min(by["pack_openai"].wall)
        floors = ("floor", "floor_seq")
        peer_cpu = {lib: min(c.cpu) for lib, c in by.items() if lib not in (*OWN, *floors)}
        print(f"  {spec}:")
        if peer_cpu:
            fastest = min(peer_cpu, key=peer_cpu.__getitem__)
            target = "(target < 1)" if spec == "approx" else ""
            print(
                f"    pack_openai / fastest peer ({fastest}): {own_cpu / peer_cpu[fastest]:.2f}x "
                f"cpu, {own_wall / min(by[fastest].wall):.2f}x wall {target}"
            )
            if "convopack" in peer_cpu and spec != "approx":
                print(
                    f"    pack_openai / convopack: {own_cpu / peer_cpu['convopack']:.2f}x cpu, "
                    f"{own_wall / min(by['convopack'].wall):.2f}x wall (target <= 0.7)"
                )
        if "floor" in by:
            print(
                f"    pack_openai / encode_ordinary_batch: {own_cpu / min(by['floor'].cpu):.2f}x "
                f"cpu, {own_wall / min(by['floor'].wall):.2f}x wall (target <= 1.5)"
            )
        if "floor_seq" in by:
            print(
                f"    pack_openai / encode_ordinary one at a time: "
                f"{own_cpu / min(by['floor_seq'].cpu):.2f}x cpu, "
                f"{own_wall / min(by['floor_seq'].wall):.2f}x wall"
            )
        native = by[NATIVE]
        print(
            f"    pack_openai / {NATIVE} (conversion untimed): "
            f"{own_cpu / min(native.cpu):.2f}x cpu, {own_wall / min(native.wall):.2f}x wall"
        )


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
    ap.add_argument("--own", nargs="+", default=list(OWN), choices=OWN, help="convomem paths")
    ap.add_argument("--cell-seconds", type=float, default=10.0, help="wall s per library/cell")
    ap.add_argument("--max-turn-seconds", type=float, default=20.0)
    ap.add_argument("--oneshot", type=int, default=100_000, help="0 to skip the one-shot pack")
    ap.add_argument("--oneshot-rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="sizes 1,000 and 5,000, one-shot 20,000")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.oneshot, args.oneshot_rounds = [1_000, 5_000], 20_000, 1
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions().items()))
    print(f"agent loop: append one message, pack to {BUDGET:,} tokens")
    t0 = wall()
    cells = run_agent_loop(
        sorted(args.sizes),
        args.tokenizers,
        args.peers,
        args.own,
        cell_seconds=args.cell_seconds,
        max_turn_seconds=args.max_turn_seconds,
    )
    oneshot: list[Cell] = []
    if args.oneshot:
        print(f"one-shot pack of {args.oneshot:,} OpenAI dicts")
        oneshot = run_oneshot(args.oneshot, args.tokenizers, args.peers, args.oneshot_rounds)
    print_turns(cells)
    print_oneshot(oneshot)
    print(f"\ntotal wall time {wall() - t0:.0f} s")
    if args.json:
        payload = {
            "versions": versions(),
            "budget": BUDGET,
            "cells": [
                {
                    "library": c.library,
                    "size": c.size,
                    "tokenizer": c.tokenizer,
                    "kind": c.kind,
                    "cpu_s": c.cpu,
                    "wall_s": c.wall,
                    "kept": c.kept,
                    "tokens": c.tokens,
                    "texts_tokenized_per_turn": c.texts_per_turn,
                    "estimate_s": c.estimate,
                    "extra": c.extra,
                }
                for c in [*cells, *oneshot]
            ],
        }
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
