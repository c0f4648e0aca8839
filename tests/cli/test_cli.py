"""The command line: each command's output, exit codes and one-line failures."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _cli_support import one_line_failure, run
from convomem.cli import build_parser
from convomem.cli.catalog import PACKER_STRATEGIES, STRATEGY_NAMES, resolve_pins
from convomem.cli.catalog import pack as pack_named
from convomem.formats.anthropic import from_anthropic
from convomem.formats.openai import from_openai
from convomem.model import validate_pairs
from convomem.tokens import get_tokenizer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "support_conversation.json"
DATA: list[dict[str, Any]] = json.loads(EXAMPLE.read_text())
MESSAGES = from_openai(DATA)


def write(tmp_path: Path, data: Any, name: str = "c.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


# -- inspect -----------------------------------------------------------------------------


def test_inspect_prints_a_row_per_message_and_the_total() -> None:
    code, out, _ = run("inspect", str(EXAMPLE), "--tokenizer", "words")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["#", "id", "role", "tokens", "preview"]
    assert len(lines) == len(DATA) + 2
    total = get_tokenizer("words").count_messages(MESSAGES)
    assert lines[-1] == f"total: {len(DATA)} messages, {total} tokens (words)"
    assert "lookup_order" in out and "[call_0002]" in out


@pytest.mark.parametrize(("head", "tail"), [(3, None), (None, 4), (2, 5), (200, 200), (0, 0)])
def test_inspect_head_and_tail_show_the_ends(head: int | None, tail: int | None) -> None:
    argv = ["inspect", str(EXAMPLE)]
    argv += ["--head", str(head)] if head is not None else []
    argv += ["--tail", str(tail)] if tail is not None else []
    code, out, _ = run(*argv)
    assert code == 0
    lines = out.splitlines()
    rows = [ln for ln in lines[1:-1] if not ln.startswith("...")]
    n = len(DATA)
    h = min(n, head or 0)
    t = min(n - h, tail or 0)
    expect = list(range(h)) + list(range(n - t, n))
    assert [int(r.split()[0]) for r in rows] == expect
    omitted = [ln for ln in lines if ln.startswith("...")]
    assert omitted == ([f"... {n - h - t:,} rows omitted ..."] if n - h - t else [])
    assert lines[-1].startswith(f"total: {n} messages")


def test_inspect_jsonl_from_stdin_with_a_bom() -> None:
    data = "\n".join(
        json.dumps(d)
        for d in [{"role": "user", "content": "one two"}, {"role": "assistant", "content": "x"}]
    )
    code, out, _ = run(
        "inspect", "-", "--tokenizer", "words", stdin=b"\xef\xbb\xbf" + data.encode()
    )
    assert code == 0
    assert out.splitlines()[-1] == "total: 2 messages, 11 tokens (words)"


def test_inspect_reads_anthropic_requests() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    request = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ],
    }
    code, out, _ = run("inspect", "-", stdin=json.dumps(request))
    assert code == 0
    roles = [ln.split()[2] for ln in out.splitlines()[1:-1]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert "[t1] ok" in out and "-> f({})" in out


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ('{\n  "role": "user",\n  "content": "x"\n}', "expected a list of messages"),
        ("[" * 100_000, "nested too deeply"),
        ('[{"role": "user", "content": "x", "n": ' + "9" * 5000 + "}]", "digits"),
        ('[{"role": "user", "content": "x"}, {"role": "bot"}]', "messages[1].role='bot'"),
        ("", "empty file"),
    ],
)
@pytest.mark.parametrize("command", ["inspect", "estimate", "pack", "window", "simulate"])
def test_bad_files_fail_in_one_line_with_exit_2(command: str, payload: str, needle: str) -> None:
    extra = {"pack": ["--budget", "100"], "window": ["--limit", "100"]}
    extra["simulate"] = ["--budget", "100"]
    code, out, err = run(command, "-", *extra.get(command, []), stdin=payload)
    one_line_failure(code, out, err)
    assert needle in err


def test_bad_options_fail_in_one_line(tmp_path: Path) -> None:
    for argv in (
        ["inspect", str(tmp_path / "nope.json")],
        ["inspect", str(EXAMPLE), "--tokenizer", "bogus"],
        ["inspect", str(EXAMPLE), "--head", "-1"],
        ["pack", str(EXAMPLE), "--budget", "0"],
        ["pack", str(EXAMPLE), "--budget", "9" * 5000],
        ["pack", str(EXAMPLE), "--budget", "10", "--strategy", "fifo"],
        ["pack", str(EXAMPLE), "--budget", "10", "--pin", "everything"],
        ["window", str(EXAMPLE), "--limit", "-1"],
        ["window", str(EXAMPLE), "--limit", "100", "--target", "200"],
        ["simulate", str(EXAMPLE), "--budget", "100", "--price-in", "-1"],
        ["simulate", str(EXAMPLE), "--budget", "100", "--price-in", "nan"],
        ["inspect", str(EXAMPLE), "--input-format", "xml"],
        ["frobnicate"],
        [],
    ):
        code, out, err = run(*argv)
        one_line_failure(code, out, err)
    _, _, err = run("pack", str(EXAMPLE), "--budget", "0")
    assert "--budget: 0: must be a positive integer" in err
    _, _, err = run("simulate", str(EXAMPLE), "--budget", "100", "--price-in", "-1")
    assert "non-negative price" in err


def test_a_tokenizer_that_cannot_load_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """E.g. CONVOMEM_TIKTOKEN_DOWNLOAD=1 offline: tiktoken's download raises its own errors."""
    cli_main = sys.modules["convomem.cli.main"]  # convomem.cli.main is also the function

    def offline(spec: str) -> Any:
        raise ConnectionError("Max retries exceeded\nwith url: /encodings/o200k_base.tiktoken")

    monkeypatch.setattr(cli_main, "get_tokenizer", offline)
    code, out, err = run("inspect", str(EXAMPLE), "--tokenizer", "tiktoken:gpt-4o")
    one_line_failure(code, out, err)
    assert "'tiktoken:gpt-4o': cannot load it (ConnectionError: Max retries" in err


# -- python -m convomem, and real output encodings -----------------------------------------


def subprocess_cli(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "convomem", *argv],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PYTHONIOENCODING": "utf-8", "PATH": ""},
    )


def test_python_m_convomem_runs_the_cli() -> None:
    proc = subprocess_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith(b"convomem ")
    proc = subprocess_cli("estimate", "-", stdin=b'[{"role": "user", "content": "hi"}]')
    assert proc.returncode == 0 and proc.stdout.startswith(b"1 messages, ")


@pytest.mark.parametrize("command", [["inspect"], ["estimate"], ["pack", "--budget", "500"]])
def test_lone_surrogates_never_crash_the_output(command: list[str]) -> None:
    data = b'[{"id": "m1", "role": "user", "content": "a\\ud800b"}]'
    proc = subprocess_cli(command[0], "-", *command[1:], stdin=data)
    err = proc.stderr.decode()
    assert "Traceback" not in err
    if proc.returncode == 2:  # the model may refuse lone surrogates: one line, exit 2
        assert len(err.splitlines()) == 1 and "surrogate" in err
        return
    assert proc.returncode == 0, err
    text = proc.stdout.decode("utf-8")
    if command[0] == "pack":
        assert json.loads(text)[0]["content"] == "a\ud800b"  # escaped, so it parses back
    elif command[0] == "inspect":
        assert "a\\ud800b" in text


def test_output_that_cannot_be_encoded_is_escaped() -> None:
    from convomem.cli.render import SafeText, dump_json

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    safe = SafeText(stream)
    safe.write("café \ud800\n")
    dump_json([{"content": "café \ud800"}], safe)
    stream.flush()
    text = raw.getvalue().decode("ascii")
    first, rest = text.split("\n", 1)
    assert first == "caf\\xe9 \\ud800"
    assert json.loads(rest) == [{"content": "café \ud800"}]


# -- window --------------------------------------------------------------------------------


def kept_rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["#", "id", "role"])
    return [ln.split(maxsplit=4) for ln in lines[start + 1 :] if not ln.startswith("...")]


def test_window_replays_and_shows_role_and_preview() -> None:
    code, out, _ = run("window", str(EXAMPLE), "--limit", "800")
    assert code == 0
    assert "dropped" in out
    summary = next(line for line in out.splitlines() if line.startswith("kept "))
    assert "of 800 tokens" in summary
    rows = kept_rows(out)
    assert rows[0][:3] == ["0", MESSAGES[0].id, "system"]  # the system prompt is pinned
    assert rows[0][4].startswith("You are Ada")
    last = MESSAGES[-1]
    assert rows[-1][:3] == [str(len(MESSAGES) - 1), last.id, last.role]
    assert last.text().startswith(rows[-1][4].removesuffix("..."))


def test_window_pins_add_to_the_system_pin_and_none_removes_it() -> None:
    _, out, _ = run("window", str(EXAMPLE), "--limit", "300", "--pin", "first_user")
    assert [r[2] for r in kept_rows(out)[:2]] == ["system", "user"]
    _, out, _ = run("window", str(EXAMPLE), "--limit", "300", "--pin", "none")
    assert all(r[2] != "system" for r in kept_rows(out))


def test_window_with_target_compacts_less_often() -> None:
    _, plain, _ = run("window", str(EXAMPLE), "--limit", "800")
    _, hyst, _ = run("window", str(EXAMPLE), "--limit", "800", "--target", "400")
    count = lambda text: int(text.split(" compactions")[0].rsplit(" ", 1)[1])  # noqa: E731
    assert count(hyst) < count(plain)


# -- pack ----------------------------------------------------------------------------------


def test_pack_and_simulate_share_one_list_of_strategy_names() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    choices = {}
    for name in ("pack", "simulate"):
        p = sub.choices[name]
        (action,) = [a for a in p._actions if a.dest == "strategy"]
        choices[name] = tuple(action.choices)
    assert choices["pack"] == choices["simulate"] == STRATEGY_NAMES


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_pack_writes_valid_json_under_budget(strategy: str) -> None:
    code, out, err = run(
        "pack", str(EXAMPLE), "--budget", "1200", "--strategy", strategy, "--tokenizer", "words"
    )
    packed = from_openai(json.loads(out))
    assert validate_pairs(packed) == []
    assert packed[0].role == "system" and packed[0].text().startswith("You are Ada")
    verdict = err.strip().splitlines()[-1]
    tokens = get_tokenizer("words").count_messages(packed)
    if strategy == "full":
        assert code == 3 and "OVER BUDGET" in verdict
        assert len(packed) == len(DATA)
        return
    assert code == 0, err
    assert tokens <= 1200
    kept, dropped = verdict.split(", ")[:2]
    assert kept == f"kept {len(packed)}"
    assert int(dropped.split()[1]) > 0
    assert verdict.endswith("of 1200 tokens")


def test_pack_exits_3_when_the_pins_alone_exceed_the_budget() -> None:
    code, out, err = run("pack", str(EXAMPLE), "--budget", "10")
    assert code == 3
    assert json.loads(out)[0]["role"] == "system"  # the request is still written
    assert "OVER BUDGET" in err
    tok = get_tokenizer("approx")
    last, system = tok.count_message(MESSAGES[-1]), tok.count_message(MESSAGES[0])
    assert last < system
    code, out, _ = run("pack", str(EXAMPLE), "--budget", str(last), "--pin", "none")
    assert code == 0 and [m["role"] for m in json.loads(out)] == [MESSAGES[-1].role]
    code, _, _ = run("pack", str(EXAMPLE), "--budget", str(last))
    assert code == 3


def test_pack_last_user_pin_keeps_the_system_prompt() -> None:
    code, out, _ = run("pack", str(EXAMPLE), "--budget", "200", "--pin", "last_user")
    assert code in (0, 3)
    packed = from_openai(json.loads(out))
    assert packed[0].role == "system" and packed[0].text() == DATA[0]["content"]
    last_user = next(m for m in reversed(MESSAGES) if m.role == "user")
    assert last_user.id in {m.id for m in packed}


def test_cli_pins_are_passed_on_complete() -> None:
    assert resolve_pins(None) == ("system",)
    assert resolve_pins(["last_user"]) == ("system", "last_user")
    assert resolve_pins(["none"]) == ()
    assert resolve_pins(["none", "last_user", -2]) == ("last_user", -2)
    assert resolve_pins(["system", "system"]) == ("system",)


def test_pack_explain_with_head_and_tail_and_anthropic_format() -> None:
    code, out, err = run(
        "pack", str(EXAMPLE), "--budget", "600", "--format", "anthropic", "--explain",
        "--head", "2", "--tail", "3",
    )  # fmt: skip
    assert code == 0
    payload = json.loads(out)
    assert payload["system"].startswith("You are Ada")
    assert all(m["role"] in ("user", "assistant") for m in payload["messages"])
    assert from_anthropic(payload["messages"], system=payload["system"])
    table = err.splitlines()
    assert table[0].startswith("recency: kept ")
    assert table[1].split() == ["#", "id", "role", "tokens", "kept", "reason"]
    rows = table[2:-1]
    assert [r.split()[0] for r in rows] == [
        "0", "1", f"... {len(DATA) - 5:,} rows omitted ...".split()[0],
        *(str(i) for i in range(len(DATA) - 3, len(DATA))),
    ]  # fmt: skip
    assert rows[0].rstrip().endswith("pinned") and rows[1].rstrip().endswith("budget")


def test_pack_memory_explains_summarized_messages() -> None:
    code, out, err = run(
        "pack", str(EXAMPLE), "--budget", "1500", "--strategy", "memory", "--explain"
    )
    assert code == 0, err
    sent = json.loads(out)
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("You are Ada")
    assert sent[1]["role"] == "system" and "Summary" in sent[1]["content"]
    rows = err.splitlines()[2:-1]
    reasons = {r.split()[-1] for r in rows}
    assert {"pinned", "recent", "summarized", "summary"} <= reasons


# -- estimate ------------------------------------------------------------------------------


def test_estimate_reports_common_budgets() -> None:
    code, out, _ = run("estimate", str(EXAMPLE), "--tokenizer", "words")
    assert code == 0
    first, *rows = out.splitlines()
    total = get_tokenizer("words").count_messages(MESSAGES)
    assert first == f"{len(DATA)} messages, {total} tokens (words)"
    assert rows[0].split(":")[0].strip() == "4,096"
    assert rows[-1].strip() == "1,000,000: fits"
    assert (rows[0].split(": ")[1] == "fits") == (total <= 4096)


@settings(max_examples=30)
@given(
    budget=st.integers(40, 2_500),
    strategy=st.sampled_from(PACKER_STRATEGIES),
    pin=st.sampled_from([None, ["last_user"], ["none"]]),
)
def test_every_anthropic_request_starts_with_a_user_turn(
    budget: int, strategy: str, pin: list[str] | None
) -> None:
    """The Anthropic API rejects a request whose first message is not the user's.

    (``full`` sends the file as it is; ``memory`` sends ``ConversationMemory``'s own
    Anthropic context, which that class's tests cover.)
    """
    _, payload = pack_named(
        strategy,
        MESSAGES,
        budget=budget,
        tokenizer=get_tokenizer("approx"),
        pin=resolve_pins(pin),
        format="anthropic",
    )
    turns = payload["messages"]
    if not turns:
        return
    assert turns[0]["role"] == "user", (strategy, budget, [t["role"] for t in turns[:3]])
    for turn in turns:
        assert turn["content"] not in ("", [], None)
