"""The bundled example data and the demo cannot rot."""

import contextlib
import importlib.util
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from convomem import from_openai
from convomem.model import validate_pairs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_conversation_is_what_the_generator_makes() -> None:
    committed = json.loads((EXAMPLES / "support_conversation.json").read_text())
    assert load("make_conversation").build() == committed
    assert 200 <= len(committed) <= 600
    assert {m["role"] for m in committed} == {"system", "user", "assistant", "tool"}
    assert validate_pairs(from_openai(committed)) == []


def test_the_conversation_is_one_customer_in_one_thread() -> None:
    committed = json.loads((EXAMPLES / "support_conversation.json").read_text())
    text = json.dumps(committed)
    assert text.count("Maya Chen") >= 2
    for other in ("Jonas", "Priya", "Tom Okafor", "Lena"):
        assert other not in text
    assert committed[1]["role"] == "user" and committed[-1]["role"] == "user"
    about = Counter("4417" in json.dumps(m) for m in committed)
    assert about[True] > len(committed) // 5  # one order runs through the whole thread


def run_demo(tmp_path: Path, *argv: str) -> tuple[ModuleType, str]:
    """The demo in-process, keeping its session in ``tmp_path``."""
    demo = load("demo")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert demo.main(["--db", str(tmp_path / "demo.db"), *argv]) == 0
    return demo, out.getvalue()


def test_demo_tells_the_before_and_after_story(tmp_path: Path) -> None:
    _, text = run_demo(tmp_path)
    for heading in ("The thread", "Before:", "After: ConversationMemory", "The same from the"):
        assert f"== {heading}" in text
    for part in ("kept verbatim:", "summarized:", "compressed:", "dropped from the context:"):
        assert part in text
    before, after = text.split("== After:")
    assert "[ ] her office address" in before  # the newest messages alone lose it
    assert "[x] her office address" in after  # the memory's summary keeps it
    assert "python -m convomem pack" in text and "pack (no priority marks" in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("$")) <= 88


def test_demo_prints_the_whole_summary_without_cutting_words(tmp_path: Path) -> None:
    demo, text = run_demo(tmp_path)
    thread = from_openai(json.loads((EXAMPLES / "support_conversation.json").read_text()))
    memory = demo.remember(thread, demo.get_tokenizer("approx"))
    log = {m.id for m in memory.messages()}
    (summary,) = [m for m in memory.context(format="messages") if m.id not in log]
    shown = text.split("nothing cut):\n", 1)[1].split("\nCan the model answer her now?")[0]
    assert shown.split() == summary.text().split()  # every word, whole, in order


def _demo_files() -> dict[str, tuple[int, int, bytes]]:
    """The checkout's own demo database files (a ``make demo`` run by hand leaves them):
    name -> (size, mtime, content)."""
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes())
        for p in ROOT.glob(".convomem-demo.db*")
    }


def test_make_demo_runs_from_the_source_tree_without_installing(tmp_path: Path) -> None:
    """``python -S`` skips site-packages: no installed convomem, no third-party module.
    The runs keep their session where ``$CONVOMEM_DEMO_DB`` says and leave the
    checkout's own demo database (if a ``make demo`` made one) as it was."""
    before = _demo_files()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ROOT), "CONVOMEM_DEMO_DB": str(tmp_path / "d.db")}
    runs = [
        subprocess.run(
            ["make", "-s", "demo", f"PYTHON={sys.executable} -S"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
    assert "== After: ConversationMemory" in runs[0].stdout
    assert "== Resumed: session" in runs[1].stdout  # make demo run twice resumes
    assert "== After:" not in runs[1].stdout
    assert (tmp_path / "d.db").is_file() and _demo_files() == before


def test_a_second_run_resumes_the_session_and_fresh_starts_over(tmp_path: Path) -> None:
    demo, first = run_demo(tmp_path)
    assert "The session is saved in" in first and "run the demo again to resume it" in first
    _, second = run_demo(tmp_path)
    thread = from_openai(json.loads((EXAMPLES / "support_conversation.json").read_text()))
    assert f"== Resumed: session {demo.SESSION!r}" in second and "== After:" not in second
    assert f"A previous run left {len(thread)} messages in this session" in second
    assert "stopped early" not in second
    for what in demo.NEEDED:
        assert f"[x] {what}" in second
    assert f"messages  {len(thread)} (last seq {len(thread)})" in second  # sessions show
    assert max(len(line) for line in second.splitlines() if not line.startswith("$")) <= 88
    # What it resumed is the context the first run ended with, and it says how many
    # summarizer calls resuming took.
    tok = demo.get_tokenizer("approx")
    db = demo.open_store(f"sqlite:///{tmp_path / 'demo.db'}")
    try:
        resumed = demo.open_memory(tok, db.session(demo.SESSION, user_id=demo.USER))
        again = resumed.context(format="openai")
        calls = resumed.stats().summarizer_calls
    finally:
        db.close()
    original = demo.remember(thread, tok).context(format="openai")
    assert json.dumps(again) == json.dumps(original)
    said = "none" if calls == 0 else str(calls)
    assert f"summarizer calls to resume: {said}" in second
    _, third = run_demo(tmp_path, "--fresh")
    assert third.startswith("Deleted the session saved in") and "== After:" in third


def test_a_run_cut_short_is_carried_on(tmp_path: Path) -> None:
    demo = load("demo")
    thread = from_openai(json.loads((EXAMPLES / "support_conversation.json").read_text()))
    tok = demo.get_tokenizer("approx")
    db = demo.open_store(f"sqlite:///{tmp_path / 'demo.db'}")
    try:
        demo.remember(thread[:100], tok, db.session(demo.SESSION, user_id=demo.USER))
    finally:
        db.close()
    _, text = run_demo(tmp_path)
    assert f"added the {len(thread) - 100} messages it lacked" in text
    assert f"messages  {len(thread)} (last seq {len(thread)})" in text


def test_the_demo_takes_a_budget_and_keeps_a_session_per_budget(tmp_path: Path) -> None:
    """``--budget`` (issue 19 §4): the same story under another context size, in its own
    session, so a default run afterwards starts its own story instead of resuming it."""
    demo, text = run_demo(tmp_path, "--budget", "4000")
    assert "the model's context holds 4,000" in " ".join(text.split())
    assert "== After: ConversationMemory(max_tokens=4,000)" in text
    after = text.split("== After:")[1]
    for what in demo.NEEDED:  # at 4,000 tokens every check holds
        assert f"[x] {what}" in after
    _, again = run_demo(tmp_path, "--budget", "4000")
    assert f"== Resumed: session '{demo.SESSION}-4000'" in again
    _, default = run_demo(tmp_path)
    assert "== After: ConversationMemory(max_tokens=2,500)" in default
    out = io.StringIO()
    with contextlib.redirect_stderr(out), pytest.raises(SystemExit):
        demo.main(["--db", str(tmp_path / "demo.db"), "--budget", "50"])
    assert "--budget=50" in out.getvalue()
