"""``convomem mcp``: its options reach the settings, bad ones fail in one line, and
without the extra the error names it (the served tools: ``tests/mcp/test_stdio.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from _cli_support import one_line_failure, run
from convomem.cli.main import build_parser
from convomem.cli.mcp_stdio import settings_of


def test_options_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = f"sqlite:///{tmp_path / 'm.db'}"
    args = build_parser().parse_args(
        ["mcp", "--store", store, "--budget", "900", "--embedder", "e5", "--tenant", "acme"]
    )
    s = settings_of(args)
    assert (s.store, s.budget, s.embedder, s.rate_per_second) == (store, 900, "e5", 0.0)
    assert args.tenant == "acme" and args.allow_erase is False
    monkeypatch.setenv("CONVOMEM_STORE", store)
    assert settings_of(build_parser().parse_args(["mcp"])).store == store


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}"
    one_line_failure(*run("mcp", "--store", store, "--budget", "-5"))
    one_line_failure(*run("mcp", "--store", store, "--tenant", "a\x01b"))
    one_line_failure(*run("mcp", "--embedder", "bert"))
    one_line_failure(*run("mcp", "--store", "nosuch://x"))
    assert not (tmp_path / "x.db").exists()  # refused before the store was opened


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    code, out, err = run("mcp", "--store", "sqlite:///:memory:")
    one_line_failure(code, out, err)
    assert "pip install 'convomem[mcp]'" in err
