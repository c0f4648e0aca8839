import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from convomem.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_conversation.json"


def run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run the CLI in-process, capturing stdout and stderr."""
    out = io.StringIO()
    err = io.StringIO()
    old_err, old_in = sys.stderr, sys.stdin
    sys.stderr = err
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main(list(argv), out=out)
    finally:
        sys.stderr, sys.stdin = old_err, old_in
    return code, out.getvalue(), err.getvalue()


def test_inspect_prints_a_row_per_message_and_the_total() -> None:
    code, out, _ = run("inspect", str(EXAMPLE), "--tokenizer", "words")
    assert code == 0
    lines = out.splitlines()
    n = len(json.loads(EXAMPLE.read_text()))
    assert lines[0].split() == ["#", "id", "role", "tokens", "preview"]
    assert len(lines) == n + 2
    assert lines[-1].startswith(f"total: {n} messages, ")
    assert "lookup_order" in out and "[call_0001b]" in out


def test_inspect_jsonl_from_stdin() -> None:
    data = "\n".join(
        json.dumps(d)
        for d in [{"role": "user", "content": "one two"}, {"role": "assistant", "content": "x"}]
    )
    code, out, _ = run("inspect", "-", "--tokenizer", "words", stdin=data + "\n")
    assert code == 0
    assert out.splitlines()[-1] == "total: 2 messages, 11 tokens (words)"


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ('[{"role": "user", "content": "x"}, {"role": "bot"}]', "messages[1].role='bot'"),
        ('{"role": "user", "content": "x"}\n{"role": oops}\n', "line 2 column 10: invalid JSON"),
        ('{"role": "user"}\n\n{"role": "robot"}\n', "line 3: messages[1].role='robot'"),
        ("[1, 2", "invalid JSON"),
        ("", "empty file"),
        ('{"foo": 1}', "expected a list of messages"),
        ('[{"role": "tool", "content": "x"}]', "messages[0].tool_call_id=None"),
    ],
)
def test_malformed_input_gives_one_line_and_exit_2(payload: str, needle: str) -> None:
    code, out, err = run("inspect", "-", stdin=payload)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err
    assert "Traceback" not in err


def test_missing_file_and_bad_options_exit_2(tmp_path: Path) -> None:
    code, _, err = run("inspect", str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read" in err
    code, _, err = run("inspect", str(EXAMPLE), "--tokenizer", "bogus")
    assert code == 2 and "unknown spec" in err


def test_window_replays_and_reports_compactions() -> None:
    code, out, _ = run("window", str(EXAMPLE), "--limit", "800", "--pin", "system")
    assert code == 0
    assert "dropped" in out
    summary = next(line for line in out.splitlines() if line.startswith("kept "))
    assert "of 800 tokens" in summary
    kept_ids = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    first = json.loads(EXAMPLE.read_text())
    assert first[0]["role"] == "system"
    from convomem.formats.openai import from_openai

    assert kept_ids[0] == from_openai(first)[0].id  # the pinned system prompt survived


def test_window_with_target_compacts_less_often() -> None:
    _, plain, _ = run("window", str(EXAMPLE), "--limit", "800")
    _, hyst, _ = run("window", str(EXAMPLE), "--limit", "800", "--target", "400")
    count = lambda text: int(text.split(" compactions")[0].rsplit(" ", 1)[1])  # noqa: E731
    assert count(hyst) < count(plain)


def test_window_bad_limit_exit_2() -> None:
    code, _, err = run("window", str(EXAMPLE), "--limit", "0")
    assert code == 2 and "limit" in err


def test_console_script_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "convomem", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("convomem ")


@pytest.mark.parametrize("strategy", ["recency", "firstfit", "importance", "dedup"])
def test_pack_writes_valid_json_under_budget(strategy: str) -> None:
    from convomem.formats.openai import from_openai
    from convomem.model import validate_pairs
    from convomem.tokens import get_tokenizer

    code, out, err = run(
        "pack", str(EXAMPLE), "--budget", "1200", "--strategy", strategy, "--tokenizer", "words"
    )
    assert code == 0
    packed = from_openai(json.loads(out))
    assert validate_pairs(packed) == []
    assert packed[0].role == "system"
    assert get_tokenizer("words").count_messages(packed) <= 1200
    kept, dropped = err.strip().splitlines()[-1].split(", ")[:2]
    assert kept == f"kept {len(packed)}"
    assert int(dropped.split()[1]) > 0
    assert err.strip().endswith("of 1200 tokens")


def test_pack_explain_and_anthropic_format() -> None:
    code, out, err = run(
        "pack", str(EXAMPLE), "--budget", "600", "--format", "anthropic", "--explain"
    )
    assert code == 0
    payload = json.loads(out)
    assert payload["system"].startswith("You are Ada")
    assert all(m["role"] in ("user", "assistant") for m in payload["messages"])
    table = err.splitlines()
    assert table[0].startswith("recency: kept ")
    assert table[1].split() == ["#", "id", "role", "tokens", "kept", "reason"]
    assert any(line.rstrip().endswith("pinned") for line in table)
    assert any(line.rstrip().endswith("budget") for line in table)


def test_pack_over_budget_says_so() -> None:
    code, _, err = run("pack", str(EXAMPLE), "--budget", "10", "--pin", "system")
    assert code == 0
    assert "OVER BUDGET" in err


def test_pack_bad_budget_exit_2() -> None:
    code, out, err = run("pack", str(EXAMPLE), "--budget", "0")
    assert code == 2 and out == "" and "budget must be positive" in err


def test_estimate_reports_common_budgets() -> None:
    code, out, _ = run("estimate", str(EXAMPLE), "--tokenizer", "words")
    assert code == 0
    first, *rows = out.splitlines()
    from convomem.formats.openai import from_openai
    from convomem.tokens import get_tokenizer

    total = get_tokenizer("words").count_messages(from_openai(json.loads(EXAMPLE.read_text())))
    assert first.endswith(f"{total} tokens (words)")
    assert rows[0].split(":")[0].strip() == "4,096"
    assert rows[-1].strip() == "1,000,000: fits"
    assert any("over by" in r for r in rows) == (total > 4096)
