"""``convomem sessions list|show|export|delete``: output, paging, targets and one-line
failures, on every durable backend (tests/cli/conftest.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from _cli_support import one_line_failure, run
from _sessions_support import export_text, fill, msg, opened, records, sessions
from _store_backends import Backend
from convomem import open_store


def test_list_newest_first_with_filters_and_json(url: str) -> None:
    fill(url)
    code, out, err = sessions("list", "--store", url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["session", "user", "messages", "last"]
    assert [line.split()[0] for line in lines[1:4]] == ["s3", "s2", "s1"]
    assert lines[-1] == "3 sessions"
    code, out, _ = sessions("list", "--store", url, "--user", "u1", "--json")
    listed = json.loads(out)
    assert [s["session_id"] for s in listed["sessions"]] == ["s3", "s1"]
    assert listed["sessions"][1]["message_count"] == 3
    assert listed["sessions"][1]["metadata"] == {"topic": "billing"}
    assert listed["next_cursor"] is None
    code, out, _ = sessions("list", "--store", url, "--tenant", "t", "--json")
    assert [(s["session_id"], s["user_id"]) for s in json.loads(out)["sessions"]] == [("s1", "u9")]


def test_list_pages_with_a_cursor_or_all(url: str) -> None:
    fill(url)
    code, out, _ = sessions("list", "--store", url, "--limit", "2")
    assert code == 0 and "3 sessions" not in out
    cursor = out.splitlines()[-1].split("--cursor ")[1]
    code, out2, _ = sessions("list", "--store", url, "--limit", "2", "--cursor", cursor)
    assert [line.split()[0] for line in out2.splitlines()[1:-1]] == ["s1"]
    assert out2.splitlines()[-1] == "1 session"
    code, out3, _ = sessions("list", "--store", url, "--limit", "1", "--all", "--json")
    assert [s["session_id"] for s in json.loads(out3)["sessions"]] == ["s3", "s2", "s1"]


def test_an_empty_listing_says_which_tenants_hold_sessions(url: str) -> None:
    """A store written by the service has its sessions under the keys' tenants: a listing
    without ``--tenant`` that finds nothing says so, by name and count only."""
    hint = "(--tenant NAME lists them)"
    with opened(url) as db:
        assert sessions("list", "--store", url)[1].splitlines()[-1] == "0 sessions"  # none
        db.session("s1", user_id="u1", tenant="acme").append([msg(1, "secret 1")])
        db.session("s2", user_id="u2", tenant="acme").append([msg(1)])
        db.session("s3", user_id="u1", tenant="globex").append([msg(1)])
    code, out, err = sessions("list", "--store", url)
    assert code == 0, err
    assert out.splitlines()[-1] == (
        f"0 sessions; 3 sessions under other tenants: 'acme' (2), 'globex' (1) {hint}"
    )
    assert "s1" not in out and "secret" not in out and "u1" not in out
    _, out, _ = sessions("list", "--store", url, "--user", "u1")
    assert out.splitlines()[-1] == (
        f"0 sessions; 2 sessions under other tenants: 'acme' (1), 'globex' (1) {hint}"
    )
    _, out, _ = sessions("list", "--store", url, "--tenant", "nobody")
    assert out.splitlines()[-1].startswith("0 sessions of tenant 'nobody'; 3 sessions under")
    _, out, _ = sessions("list", "--store", url, "--tenant", "acme")  # found: no hint
    assert out.splitlines()[-1] == "2 sessions of tenant 'acme'"
    _, out, _ = sessions("list", "--store", url, "--json")  # the JSON keeps its shape
    assert json.loads(out) == {"sessions": [], "next_cursor": None}
    with opened(url) as db:
        db.session("s4", user_id="u2").append([msg(1)])
    _, out, _ = sessions("list", "--store", url, "--tenant", "globex", "--user", "u2")
    assert out.splitlines()[-1] == (
        "0 sessions of tenant 'globex'; 2 sessions under other tenants: no tenant (1), "
        "'acme' (1) (--tenant NAME lists them)"
    )
    with opened(url) as db:
        db.session("s5", user_id="u9").append([msg(1)])
    _, out, _ = sessions("list", "--store", url, "--tenant", "acme", "--user", "u9")
    assert out.splitlines()[-1].endswith("no tenant (1) (drop --tenant to list them)")


def test_show_record_and_messages(url: str) -> None:
    fill(url)
    code, out, err = sessions("show", "s1", "--store", url)
    assert code == 0, err
    head, rows = out.split("\n\n")
    assert "session   s1" in head and "user      u1" in head and "version 1" in head
    assert '{"topic": "billing"}' in head and "messages  3 (last seq 3)" in head
    table = rows.splitlines()
    assert table[0].split() == ["seq", "id", "role", "tokens", "preview"]
    assert table[1].split()[:4] == ["1", "m1", "user", "approx=4"]
    one_line_failure(*sessions("show", "s1", "--store", url, "--tail", "1", "--cursor", "f:1"))
    code, out, _ = sessions("show", "s1", "--store", url, "--tail", "1")
    assert out.split("\n\n")[1].splitlines()[1].split()[:2] == ["3", "m3"]
    code, out, _ = sessions("show", "s1", "--store", url, "--limit", "2")
    cursor = out.splitlines()[-1].split("--cursor ")[1]
    code, out, _ = sessions("show", "s1", "--store", url, "--cursor", cursor, "--json")
    page = json.loads(out)
    assert [m["seq"] for m in page["messages"]] == [3]
    assert page["state"] == {"cut": 2} and page["next_cursor"] is None


def test_show_json_in_provider_formats(url: str) -> None:
    fill(url)
    _, out, _ = sessions("show", "s1", "--store", url, "--json", "--format", "openai")
    assert next(m["content"] for m in json.loads(out)["messages"]) == "message 1"
    _, out, _ = sessions("show", "s1", "--store", url, "--format", "anthropic")  # JSON
    shown = json.loads(out)
    assert shown["system"] is None and shown["messages"][0]["role"] == "user"


def test_show_of_another_owner_or_a_missing_session_is_one_line(url: str) -> None:
    fill(url)
    code, out, err = sessions("show", "s1", "--store", url, "--user", "u2")
    one_line_failure(code, out, err)
    assert "'s1'" in err and "u2" in err
    one_line_failure(*sessions("show", "nope", "--store", url))


def test_export_of_a_user_and_to_a_file(url: str, tmp_path: Path) -> None:
    fill(url)
    out = export_text(url, "--user", "u1")
    assert [r["session_id"] for r in records(out) if r["type"] == "session"] == ["s1", "s3"]
    one_line_failure(*sessions("export", "s1", "nope", "--store", url))  # nothing on stdout
    one_line_failure(*sessions("export", "s1", "--all", "--store", url))
    path = tmp_path / "x.jsonl"
    code, out, err = sessions("export", "s1", "nope", "--store", url, "-o", str(path))
    one_line_failure(code, out, err)
    assert "'nope'" in err and not path.exists() and os.listdir(tmp_path) == []
    code, _, _ = sessions("export", "s1", "--store", url, "-o", str(tmp_path / "no" / "x"))
    assert code == 2
    code, out, err = sessions("export", "s1", "--store", url, "-o", str(path))
    assert code == 0 and out == "" and "to " + str(path) in err
    assert path.stat().st_mode & 0o777 == 0o600  # it holds conversations
    assert records(path.read_text()) == records(export_text(url, "s1"))


def test_export_names_a_corrupt_row_and_its_seq(url: str, durable: Backend, tmp_path: Path) -> None:
    fill(url)
    with opened(url) as db:
        durable.corrupt(db, None, "s1", 2, b"\xff{")
    code, _, err = sessions("export", "s1", "--store", url)
    assert code == 2 and "Traceback" not in err
    assert "'s1'" in err and "seq 2" in err
    code, out, err = sessions("export", "--all", "--store", url, "-o", str(tmp_path / "x"))
    one_line_failure(code, out, err)  # a file is written whole or not at all
    assert "seq 2" in err and os.listdir(tmp_path) == []


def test_delete_needs_yes_and_names_what_it_did(url: str) -> None:
    fill(url)
    one_line_failure(*sessions("delete", "s1", "--store", url))
    one_line_failure(*sessions("delete", "--store", url, "--yes"))
    code, out, _ = sessions("delete", "s1", "--store", url, "--yes")
    assert code == 0 and out == "deleted session 's1'\n"
    one_line_failure(*sessions("delete", "s1", "--store", url, "--yes"))
    code, out, _ = sessions("delete", "--user", "u2", "--store", url, "--yes")
    assert out == "erased user 'u2': 1 session deleted\n"
    code, out, _ = sessions("list", "--store", url, "--json")
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["s3"]
    code, out, _ = sessions("list", "--store", url, "--tenant", "t", "--json")
    assert len(json.loads(out)["sessions"]) == 1  # another tenant's s1 is untouched


def test_store_url_errors_are_one_line_and_hide_passwords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVOMEM_STORE", raising=False)
    monkeypatch.chdir(tmp_path)  # the default store, sqlite:///convomem.db, is not there
    code, out, err = sessions("list")
    one_line_failure(code, out, err)
    assert "--store 'sqlite:///convomem.db': no such database file" in err
    for url in (
        "nosuch://u:hunter2@host/db",
        "redis://u:hunter2@127.0.0.1:1/0",
        "postgresql://u:hunter2@127.0.0.1:1/db",
        "sqlite://u:hunter2@/x.db",  # the URL parser's own message repeats the host part
        "sqlite://u:hunter%32@/x.db",
    ):
        code, out, err = sessions("list", "--store", url)
        one_line_failure(code, out, err)
        assert "hunter2" not in err
    missing = tmp_path / "missing.db"
    code, out, err = sessions("show", "s1", "--store", f"sqlite:///{missing}")
    one_line_failure(code, out, err)
    assert "no such database file" in err and not missing.exists()
    monkeypatch.setenv("CONVOMEM_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    code, out, _ = sessions("import", "-", stdin="")
    assert code == 0 and "imported 0 sessions" in out
    assert sessions("list")[1].splitlines()[-1] == "0 sessions"


def test_in_memory_store_works_for_one_command(durable: Backend) -> None:
    url = durable.fresh_url()
    fill(url)
    exported = export_text(url, "--all")
    code, out, _ = sessions("import", "-", "--store", "sqlite://", stdin=exported)
    assert code == 0 and "3 created" in out
    assert sessions("list", "--store", "sqlite://")[1].splitlines()[-1] == "0 sessions"


def test_sweep_deletes_expired_sessions_of_every_tenant(url: str) -> None:
    with opened(url) as db:
        db.session("live").append([msg(1)])
    # Written an hour ago (the store's clock) with a minute to live: expired by the
    # sweeper's clock now, with no wait.
    hour_ago = time.time() - 3600
    with contextlib.closing(open_store(url, ttl=60, clock=lambda: hour_ago)) as past:
        past.session("gone").append([msg(1)])
        past.session("gone", tenant="t").append([msg(1)])
    counts = []
    for _ in range(3):
        code, out, err = sessions("sweep", "--store", url)
        assert code == 0, err
        match = re.fullmatch(r"swept (\d+) expired sessions?\n", out)
        assert match is not None, out
        counts.append(int(match.group(1)))
    assert counts == [2, 0, 0], counts  # each backend deletes both at the first sweep
    for tenant in ([], ["--tenant", "t"]):
        code, out, _ = sessions("list", "--store", url, "--json", *tenant)
        assert [s["session_id"] for s in json.loads(out)["sessions"]] == (["live"] * (not tenant))


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run("sessions", "--help")
    assert code == 0
    out = capsys.readouterr().out
    for name in ("list", "show", "export", "import", "delete", "sweep"):
        assert name in out
