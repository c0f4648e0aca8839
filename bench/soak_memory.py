"""Soak: the ConversationMemory state machine of the test suite, run long.

``tests/session/test_memory_stateful.py`` drives one ConversationMemory with every kind
of message, clears, pops, restarts, sync/async/concurrent calls, failing stores and
summarizers, and checks its invariants after every step. The suite runs it briefly; this
runs it for about 10^5 steps (batches of fresh random examples until the total is
reached) and prints the examples, steps, rules fired per kind, states reached, failures
found (each distinct failure once, with its falsifying steps) and the time.

    python bench/soak_memory.py                 # about 10^5 steps (make soak)
    python bench/soak_memory.py --total 20000 --steps 40 --shrink

Options default from the environment: ``CONVOMEM_SOAK_TOTAL`` (steps in all, 100000),
``CONVOMEM_SOAK_STEPS`` (steps per example at most, 50), ``CONVOMEM_SOAK_BATCH``
(examples per batch, 200). Failing examples are not shrunk unless ``--shrink`` (shrinking
a long stateful example can take minutes). Exit status 1 when a failure was found.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (ROOT / "src", ROOT / "tests"):
    sys.path.insert(0, str(path))

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from session.test_memory_stateful import MemoryMachine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=int(env("CONVOMEM_SOAK_TOTAL", "100000")))
    parser.add_argument("--steps", type=int, default=int(env("CONVOMEM_SOAK_STEPS", "50")))
    parser.add_argument("--batch", type=int, default=int(env("CONVOMEM_SOAK_BATCH", "200")))
    parser.add_argument("--shrink", action="store_true", help="shrink failing examples")
    args = parser.parse_args(argv)

    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if args.shrink else [])
    config = settings(
        max_examples=args.batch,
        stateful_step_count=args.steps,
        deadline=None,
        database=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    fired = MemoryMachine.fired
    fired.clear()
    failures: dict[str, tuple[int, str]] = {}
    start = time.perf_counter()
    batches = 0
    print(
        f"soak: ConversationMemory state machine, {args.total:,} steps in batches of "
        f"{args.batch} examples (at most {args.steps} steps each)",
        flush=True,
    )
    while steps_of(fired) < args.total:
        batches += 1
        printed = io.StringIO()  # hypothesis prints the failing steps
        try:
            with contextlib.redirect_stdout(printed):
                run_state_machine_as_test(MemoryMachine, settings=config)
        except Exception as exc:  # a property failed: keep it, go on with a fresh batch
            first = str(exc).splitlines()[0] if str(exc) else ""
            key = re.sub(r"\d+", "N", f"{type(exc).__name__}: {first}")
            detail = f"{type(exc).__name__}: {exc}\n"  # (its notes are the steps, below)
            notes = getattr(exc, "__notes__", None) or [printed.getvalue()]
            steps = "\n".join(notes).splitlines()
            detail += "\n".join(line for line in steps if line.strip() not in CHECKS)
            count, first = failures.get(key, (0, detail))
            failures[key] = (count + 1, first)
        print(
            f"  batch {batches}: {fired['examples']:,} examples, {steps_of(fired):,} steps, "
            f"{len(failures)} distinct failures, {time.perf_counter() - start:.0f} s",
            flush=True,
        )
    elapsed = time.perf_counter() - start
    report(fired, failures, elapsed)
    return 1 if failures else 0


CHECKS = tuple(
    f"state.{name}()"
    for name in dir(MemoryMachine)
    if getattr(getattr(MemoryMachine, name), "hypothesis_stateful_invariant", None) is not None
)
"""The invariants hypothesis lists after every step of a failing example (left out)."""


def steps_of(fired: dict[str, int]) -> int:
    return sum(n for k, n in fired.items() if k.startswith("rule "))


def report(fired: dict[str, int], failures: dict[str, tuple[int, str]], elapsed: float) -> None:
    print()
    print(
        f"examples: {fired['examples']:,}   steps (rules fired): {steps_of(fired):,}   "
        f"invariant checks: {fired['checks']:,}   time: {elapsed:.0f} s"
    )
    print("\nrules fired:")
    for key in sorted(k for k in fired if k.startswith("rule ")):
        print(f"  {fired[key]:>8,}  {key[5:]}")
    print("\noperations that failed as they may (and changed nothing):")
    for key in sorted(k for k in fired if k.startswith("failed ")):
        print(f"  {fired[key]:>8,}  {key[7:]}")
    print("\nstates reached (invariant checks that saw them):")
    for key in sorted(k for k in fired if k.startswith("seen ")):
        print(f"  {fired[key]:>8,}  {key[5:]}")
    print(f"\nfailures found: {len(failures)} distinct")
    for key, (count, detail) in failures.items():
        print(f"\n--- {count} x {key}\n{detail}")


if __name__ == "__main__":
    raise SystemExit(main())
