"""The subcommands: each reads a conversation, writes to ``out`` and returns an exit code.

Exit codes: 0 done, 2 bad input or options (one line on stderr, raised as a
``ConvomemError`` and reported by ``main``), 3 ``pack`` result over its budget.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..model import Message
from ..tokens import Tokenizer
from . import catalog
from .readers import read_conversation
from .render import Progress, SafeText, dump_json, head_tail, preview, table

EXIT_OVER_BUDGET = 3
"""``pack`` exit code when the result does not fit its budget (pins or ``min_keep``)."""

COMMON_BUDGETS = (4_096, 8_192, 16_384, 32_768, 128_000, 200_000, 1_000_000)

Out = TextIO | SafeText


def _read(args: argparse.Namespace) -> list[Message]:
    return read_conversation(args.file, input_format=args.input_format)


def _err() -> SafeText:
    return SafeText(sys.stderr)


def cmd_inspect(args: argparse.Namespace, out: Out) -> int:
    """One row per message (index, id, role, tokens, preview), then the total."""
    messages = _read(args)
    tok: Tokenizer = args.tokenizer
    counts = [tok.count_message(m) for m in messages]
    rows = [
        (i, m.id, m.role, n, preview(m))
        for i, (m, n) in enumerate(zip(messages, counts, strict=True))
    ]
    table(rows, ("#", "id", "role", "tokens", "preview"), out, head=args.head, tail=args.tail)
    out.write(f"total: {len(messages)} messages, {sum(counts)} tokens ({tok.name})\n")
    return 0


def cmd_window(args: argparse.Namespace, out: Out) -> int:
    """Replay through ``History``: each compaction, then what the window keeps."""
    from ..views.window import History

    messages = _read(args)
    tok: Tokenizer = args.tokenizer
    history = History(
        args.limit, tokenizer=tok, pin=catalog.resolve_pins(args.pin), target=args.target
    )
    compactions = 0
    for i, m in enumerate(messages):
        dropped = history.add(m)
        if dropped:
            compactions += 1
            shown = ", ".join(dropped[:6]) + (", ..." if len(dropped) > 6 else "")
            out.write(
                f"after #{i} {m.id} ({m.role}): dropped {len(dropped)} [{shown}] -> "
                f"kept {len(history)} messages, {history.total()} tokens\n"
            )
    kept = history.kept()
    out.write(
        f"kept {len(kept)} of {len(messages)} messages, {history.total()} of {args.limit} "
        f"tokens, {compactions} compactions\n"
    )
    if history.over_limit():
        out.write("warning: pinned messages and the current turn alone exceed the limit\n")
    where = {m.id: i for i, m in enumerate(messages)}
    rows = [(where.get(m.id, "?"), m.id, m.role, tok.count_message(m), preview(m)) for m in kept]
    table(rows, ("#", "id", "role", "tokens", "preview"), out, head=args.head, tail=args.tail)
    return 0


def cmd_pack(args: argparse.Namespace, out: Out) -> int:
    """The packed request as JSON on stdout; the verdict (and ``--explain``) on stderr."""
    messages = _read(args)
    result, payload = catalog.pack(
        args.strategy,
        messages,
        budget=args.budget,
        tokenizer=args.tokenizer,
        pin=catalog.resolve_pins(args.pin),
        format=args.format,
    )
    dump_json(payload, out)
    err = _err()
    if args.explain:
        lines = result.explain().splitlines()
        n = len(messages)
        rows, extra = lines[2 : 2 + n], lines[2 + n :]
        first, omitted, last = head_tail(rows, args.head, args.tail)
        shown = [*lines[:2], *first]
        if omitted:
            shown.append(f"... {omitted:,} rows omitted ...")
        err.write("\n".join([*shown, *last, *extra]) + "\n")
    over = "" if result.fits else " (OVER BUDGET: pinned messages and the current turn exceed it)"
    err.write(
        f"kept {len(result.kept)}, dropped {len(result.dropped)}, "
        f"{result.token_count} of {result.budget} tokens{over}\n"
    )
    return 0 if result.fits else EXIT_OVER_BUDGET


def cmd_estimate(args: argparse.Namespace, out: Out) -> int:
    """Total tokens, and which common context sizes the conversation fits."""
    messages = _read(args)
    tok: Tokenizer = args.tokenizer
    total = tok.count_messages(messages)
    out.write(f"{len(messages)} messages, {total} tokens ({tok.name})\n")
    for budget in COMMON_BUDGETS:
        verdict = "fits" if total <= budget else f"over by {total - budget:,}"
        out.write(f"  {budget:>9,}: {verdict}\n")
    return 0


def cmd_simulate(args: argparse.Namespace, out: Out) -> int:
    """Replay every turn with each strategy; a cost table (and ``--plot``)."""
    from .simulate import (
        DEFAULT_STRATEGIES,
        check_plot_path,
        plot_cumulative_cost,
        simulate,
    )

    if args.plot:
        check_plot_path(args.plot)  # before a replay that may take a while
    messages = _read(args)
    price_in: float = args.price_in
    price_cached: float = args.price_cached if args.price_cached is not None else price_in / 2
    names = list(args.strategy or DEFAULT_STRATEGIES)
    if "full" not in names:
        names.insert(0, "full")
    bar = Progress(sys.stderr)
    try:
        runs = simulate(
            messages,
            args.budget,
            strategies=names,
            tokenizer=args.tokenizer,
            pin=args.pin,
            progress=bar.update if bar.enabled else None,
        )
    finally:
        bar.close()
    full = next(r for r in runs if r.name == "full")
    full_cost = sum(full.turn_costs(price_in, price_cached))
    rows = []
    for run in runs:
        cost = sum(run.turn_costs(price_in, price_cached))
        rows.append(
            (
                run.name,
                run.turns,
                f"{sum(run.input_tokens):,}",
                f"{sum(run.cached_tokens):,}",
                f"{sum(run.summarizer_tokens):,}",
                f"{run.cache_hit_rate():.0%}",
                f"${cost:.4f}",
                f"{cost / full_cost:.2f}" if full_cost else "-",
            )
        )
    header = ("strategy", "turns", "input", "cached", "summarizer", "prefix kept", "cost")
    table(rows, (*header, "vs full"), out)
    tok: Tokenizer = args.tokenizer
    out.write(
        f"budget {args.budget} tokens ({tok.name}); "
        f"${price_in:g}/M input, ${price_cached:g}/M cached\n"
    )
    if args.plot:
        plot_cumulative_cost(runs, price_in, price_cached, args.plot, budget=args.budget)
        out.write(f"wrote {args.plot}\n")
    return 0
