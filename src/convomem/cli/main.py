"""The ``convomem`` command line: a thin face over the library."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from .. import __version__
from ..errors import ConvomemError, InputError, InvalidMessage
from ..formats.openai import from_openai
from ..model import Message, ToolUseBlock
from ..tokens import get_tokenizer


def read_conversation(path: str, stdin: TextIO | None = None) -> list[Message]:
    """Read an OpenAI-format conversation: a JSON list (or ``{"messages": [...]}``) or JSONL."""
    label = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as exc:
        raise InputError(f"{label}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte {exc.start})") from None
    records, lines = _parse_records(text, label)
    try:
        return from_openai(records)
    except InvalidMessage as exc:
        where = exc.field
        if lines is not None and where.startswith("messages["):
            i = int(where[len("messages[") : where.index("]")])
            where = f"line {lines[i]}: {where}"
        raise InputError(f"{label}: {where}={exc.value!r}: {exc.problem}") from None


def _parse_records(text: str, label: str) -> tuple[list[Any], list[int] | None]:
    stripped = text.strip()
    if not stripped:
        raise InputError(f"{label}: empty file; expected a JSON list of messages or JSONL")
    if stripped[0] == "[" or (stripped[0] == "{" and "\n" not in stripped):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{label}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
            ) from None
        if isinstance(data, dict):
            data = data.get("messages", [data] if "role" in data else None)
        if not isinstance(data, list):
            raise InputError(f"{label}: expected a list of messages or {{'messages': [...]}}")
        return data, None
    if stripped[0] == "{":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            return data["messages"], None
    records: list[Any] = []
    lines: list[int] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{label}: line {n} column {exc.colno}: invalid JSON: {exc.msg}"
            ) from None
        lines.append(n)
    return records, lines


def _preview(m: Message, width: int = 48) -> str:
    text = m.text().replace("\n", " ")
    if m.has_tool_use():
        calls = ", ".join(
            f"{b.name}({b.arguments()})" for b in m.blocks if isinstance(b, ToolUseBlock)
        )
        text = (text + " " if text else "") + f"-> {calls}"
    if m.has_tool_result():
        text = f"[{', '.join(m.tool_result_ids())}] " + text
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(rows: Sequence[Sequence[object]], header: Sequence[str], out: TextIO) -> None:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    out.write("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip() + "\n")
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    messages = read_conversation(args.file)
    tok = get_tokenizer(args.tokenizer)
    rows = []
    total = 0
    for i, m in enumerate(messages):
        n = tok.count_message(m)
        total += n
        rows.append((i, m.id, m.role, n, _preview(m)))
    _table(rows, ("#", "id", "role", "tokens", "preview"), out)
    out.write(f"total: {len(messages)} messages, {total} tokens ({tok.name})\n")
    return 0


def cmd_window(args: argparse.Namespace, out: TextIO) -> int:
    from ..views.window import History

    messages = read_conversation(args.file)
    history = History(
        args.limit,
        tokenizer=args.tokenizer,
        pin=tuple(args.pin or ()),
        target=args.target,
    )
    compactions = 0
    for i, m in enumerate(messages):
        dropped = history.add(m)
        if dropped:
            compactions += 1
            shown = ", ".join(dropped[:6]) + (", ..." if len(dropped) > 6 else "")
            out.write(
                f"after #{i} {m.id}: dropped {len(dropped)} [{shown}] -> "
                f"kept {len(history)} messages, {history.total()} tokens\n"
            )
    kept = history.messages()
    out.write(
        f"kept {len(kept)} of {len(messages)} messages, {history.total()} of {args.limit} "
        f"tokens, {compactions} compactions\n"
    )
    if history.over_limit():
        out.write("warning: pinned messages alone exceed the limit\n")
    for mid in kept:
        out.write(f"  {mid}\n")
    return 0


STRATEGIES = ("recency", "firstfit", "importance", "dedup")


def _strategy(name: str) -> object:
    from .. import strategies

    if name == "recency":
        return strategies.Recency()
    if name == "firstfit":
        return strategies.FirstFit()
    if name == "importance":
        return strategies.Importance()
    from ..recall import HashingEmbedder
    from ..strategies.dedup import SemanticDedup

    return SemanticDedup(HashingEmbedder())


def cmd_pack(args: argparse.Namespace, out: TextIO) -> int:
    from ..formats.anthropic import to_anthropic
    from ..formats.openai import to_openai
    from ..packing import Packer

    messages = read_conversation(args.file)
    packer = Packer(
        budget=args.budget,
        tokenizer=args.tokenizer,
        strategy=_strategy(args.strategy),
        pin=tuple(args.pin) if args.pin else ("system",),
    )
    result = packer.pack(messages)
    payload: Any
    if args.format == "anthropic":
        system, turns = to_anthropic(result.kept)
        payload = (
            {"system": system, "messages": turns} if system is not None else {"messages": turns}
        )
    else:
        payload = to_openai(result.kept)
    json.dump(payload, out, indent=2, ensure_ascii=False)
    out.write("\n")
    if args.explain:
        sys.stderr.write(result.explain() + "\n")
    sys.stderr.write(
        f"kept {len(result.kept)}, dropped {len(result.dropped)}, "
        f"{result.token_count} of {result.budget} tokens"
        f"{'' if result.fits else ' (OVER BUDGET: pinned messages alone exceed it)'}\n"
    )
    return 0


COMMON_BUDGETS = (4_096, 8_192, 16_384, 32_768, 128_000, 200_000, 1_000_000)


def cmd_estimate(args: argparse.Namespace, out: TextIO) -> int:
    messages = read_conversation(args.file)
    tok = get_tokenizer(args.tokenizer)
    total = tok.count_messages(messages)
    out.write(f"{len(messages)} messages, {total} tokens ({tok.name})\n")
    for budget in COMMON_BUDGETS:
        verdict = "fits" if total <= budget else f"over by {total - budget}"
        out.write(f"  {budget:>9,}: {verdict}\n")
    return 0


def cmd_simulate(args: argparse.Namespace, out: TextIO) -> int:
    from ..cli.simulate import STRATEGIES, plot_cumulative_cost, simulate

    messages = read_conversation(args.file)
    price_in = args.price_in
    price_cached = args.price_cached if args.price_cached is not None else price_in / 2
    names = args.strategy or list(STRATEGIES)
    if "full" not in names:
        names = ["full", *names]
    runs = simulate(messages, args.budget, strategies=names, tokenizer=args.tokenizer)
    full_cost = sum(runs[0].turn_costs(price_in, price_cached))
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
    _table(
        rows,
        ("strategy", "turns", "input", "cached", "summarizer", "prefix kept", "cost", "vs full"),
        out,
    )
    out.write(
        f"budget {args.budget} tokens ({get_tokenizer(args.tokenizer).name}); "
        f"${price_in}/M input, ${price_cached}/M cached\n"
    )
    if args.plot:
        plot_cumulative_cost(runs, price_in, price_cached, args.plot)
        out.write(f"wrote {args.plot}\n")
    return 0


def _price_arg(value: str) -> float:
    try:
        price = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not price >= 0 or price == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r}: must be a non-negative price")
    return price


def _tokenizer_arg(value: str) -> str:
    try:
        get_tokenizer(value)  # fail early, with the list of valid specs
    except (ConvomemError, ImportError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _pin_arg(value: str) -> str | int:
    try:
        return int(value)
    except ValueError:
        return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="convomem", description="Inspect and window conversation histories.")
    parser.add_argument("--version", action="version", version=f"convomem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add_common(p: argparse.ArgumentParser) -> None:
        p.add_argument("file", help="OpenAI-format JSON or JSONL conversation; - for stdin")
        p.add_argument(
            "--tokenizer",
            default="approx",
            type=_tokenizer_arg,
            help="given, words, approx, tiktoken:<model>, hf:<path> (default: approx)",
        )

    p = sub.add_parser("inspect", help="per-message table of ids, roles and tokens")
    add_common(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("window", help="replay through the incremental window")
    add_common(p)
    p.add_argument("--limit", type=int, required=True, help="token limit of the window")
    p.add_argument("--target", type=int, default=None, help="cut to this many tokens")
    p.add_argument(
        "--pin", action="append", type=_pin_arg, help="pin spec (system, last_user, index...)"
    )
    p.set_defaults(func=cmd_window)

    p = sub.add_parser("pack", help="pack to a budget; JSON to stdout, a summary to stderr")
    add_common(p)
    p.add_argument("--budget", type=int, required=True, help="token budget")
    p.add_argument("--strategy", choices=STRATEGIES, default="recency")
    p.add_argument(
        "--pin", action="append", type=_pin_arg, help="pin spec (default: system); repeatable"
    )
    p.add_argument("--format", choices=("openai", "anthropic"), default="openai")
    p.add_argument("--explain", action="store_true", help="print why each message was kept")
    p.set_defaults(func=cmd_pack)

    p = sub.add_parser("simulate", help="replay turn by turn and price each strategy")
    add_common(p)
    p.add_argument("--budget", type=int, required=True, help="token budget per turn")
    p.add_argument(
        "--strategy",
        action="append",
        choices=("full", "recency", "summary-evict", "memory"),
        help="strategy to replay (repeatable; default all; 'full' is always shown)",
    )
    p.add_argument("--price-in", type=_price_arg, default=2.5, help="USD per 1M input tokens")
    p.add_argument(
        "--price-cached", type=_price_arg, default=None, help="USD per 1M cached tokens (half)"
    )
    p.add_argument("--plot", metavar="PNG", help="draw cumulative cost per turn (extra plot)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("estimate", help="total tokens and which common budgets it fits")
    add_common(p)
    p.set_defaults(func=cmd_estimate)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (2 for bad input, never a traceback)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    out = out or sys.stdout
    try:
        code: int = args.func(args, out)
    except ConvomemError as exc:
        sys.stderr.write(f"convomem: error: {exc}\n")
        return 2
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main())
