"""The ``convomem`` command line: a thin face over the library.

Every failure is one line on stderr, ``convomem: error: ...`` (or ``convomem <command>:
error: ...`` for an option), and exit code 2; ``pack`` exits 3 when its result does not
fit the budget. Subcommands live in ``commands``, file reading in ``readers``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from .. import __version__, _check
from ..errors import ConvomemError
from ..model import PinSpec, check_pins
from ..tokens import Tokenizer, get_tokenizer
from . import commands, keys, mcp_stdio, serve, sessions
from .catalog import STRATEGIES, STRATEGY_NAMES
from .readers import INPUT_FORMATS
from .render import SafeText, one_line


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def _short(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _int_arg(check: Callable[[str, object], int]) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_short(value)} is not an integer") from None
        try:
            return check("value", n)
        except ConvomemError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace("value=", "", 1)) from None

    parse.__name__ = "integer"
    return parse


def _price_arg(value: str) -> float:
    try:
        price = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_short(value)} is not a number") from None
    try:
        return _check.number("price", price, minimum=0.0)
    except ConvomemError:
        raise argparse.ArgumentTypeError(
            f"{_short(value)}: must be a non-negative price (USD per 1M tokens)"
        ) from None


def _tokenizer_arg(value: str) -> Tokenizer:
    """Resolve the tokenizer once, at parse time, so a bad spec fails before any work."""
    try:
        return get_tokenizer(value)
    except ConvomemError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except Exception as exc:  # third-party loaders (a download, a corrupt file) raise anything
        text = one_line(str(exc))
        text = text if len(text) <= 160 else text[:157] + "..."
        raise argparse.ArgumentTypeError(
            f"{_short(value)}: cannot load it ({type(exc).__name__}: {text})"
        ) from None


def _pin_arg(value: str) -> PinSpec:
    if value == "none":
        return value
    spec: PinSpec
    try:
        spec = int(value)
    except ValueError:
        spec = value
    try:
        check_pins((spec,))
    except ConvomemError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or 'none'") from None
    return spec


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="convomem",
        description="Inspect, window, pack and simulate conversation histories; list, show, "
        "export, import and delete stored sessions.",
        epilog="Exit codes: 0 done, 2 bad input or options, 3 pack over budget.",
    )
    parser.add_argument("--version", action="version", version=f"convomem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    count = _int_arg(_check.non_negative_int)
    positive = _int_arg(_check.positive_int)

    def common(name: str, help: str, func: Callable[..., int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        p.add_argument("file", help="conversation: JSON or JSONL, OpenAI or Anthropic; - for stdin")
        p.add_argument(
            "--input-format",
            choices=INPUT_FORMATS,
            default="auto",
            help="message format of FILE (default: auto-detected)",
        )
        p.add_argument(
            "--tokenizer",
            default="approx",
            type=_tokenizer_arg,
            help="given, words, approx, tiktoken:<model>, hf:<path> (default: approx)",
        )
        return p

    def pins(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--pin",
            action="append",
            type=_pin_arg,
            help="pin spec added to the system pin: last_user, first_user, tool_results, "
            "an index; 'none' drops the system pin (repeatable)",
        )

    def elide(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--head", type=count, metavar="N", help=f"show only the first N {what}")
        p.add_argument("--tail", type=count, metavar="N", help=f"show only the last N {what}")

    strategies = ", ".join(f"{k} ({v})" for k, v in STRATEGIES.items())

    p = common("inspect", "a row per message: id, role, tokens, preview", commands.cmd_inspect)
    elide(p, "rows")

    p = common("window", "replay through the incremental window", commands.cmd_window)
    p.add_argument("--limit", type=count, required=True, help="token limit of the window")
    p.add_argument("--target", type=count, default=None, help="cut to this many tokens")
    pins(p)
    elide(p, "kept messages")

    p = common("pack", "pack to a budget: JSON to stdout, a verdict to stderr", commands.cmd_pack)
    p.add_argument("--budget", type=positive, required=True, help="token budget")
    p.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default="recency",
        metavar="NAME",
        help=f"one of: {strategies} (default: recency)",
    )
    pins(p)
    p.add_argument("--format", choices=("openai", "anthropic"), default="openai")
    p.add_argument("--explain", action="store_true", help="print why each message was kept")
    elide(p, "rows of --explain")

    p = common("simulate", "replay turn by turn and price each strategy", commands.cmd_simulate)
    p.add_argument("--budget", type=positive, required=True, help="token budget per turn")
    p.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGY_NAMES,
        metavar="NAME",
        help="strategy to replay, as for pack (repeatable; default: full, recency, "
        "summary-evict, memory; 'full' is always shown)",
    )
    pins(p)
    p.add_argument("--price-in", type=_price_arg, default=2.5, help="USD per 1M input tokens")
    p.add_argument(
        "--price-cached", type=_price_arg, default=None, help="USD per 1M cached tokens (half)"
    )
    p.add_argument("--plot", metavar="IMAGE", help="draw cumulative cost per turn (extra plot)")

    common("estimate", "total tokens and which common budgets it fits", commands.cmd_estimate)
    sessions.add_parser(sub, count, positive)
    serve.add_parser(sub)
    mcp_stdio.add_parser(sub)
    keys.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (2 for bad input, never a traceback)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    stream = out if out is not None else sys.stdout
    try:
        code: int = args.func(args, SafeText(stream))
        stream.flush()
    except ConvomemError as exc:
        _fail(f"{parser.prog}: error: {exc}")
        return 2
    except BrokenPipeError:  # `convomem pack ... | head`: the reader left
        _silence(stream)
        return 0
    except KeyboardInterrupt:
        _fail(f"{parser.prog}: interrupted")
        return 130
    return code


def _fail(message: str) -> None:
    SafeText(sys.stderr).write(one_line(message) + "\n")


def _silence(stream: Any) -> None:
    """Point a closed pipe at /dev/null so the interpreter's final flush stays quiet."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    raise SystemExit(main())
