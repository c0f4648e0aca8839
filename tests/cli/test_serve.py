"""``convomem serve``: a real process answering the API with a key from ``convomem keys
create`` and saying where it listens in one line; the settings of ``--workers``
processes; the error without the extra; one ``--store`` default for every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from _cli_support import one_line_failure, run
from _servers_redis import free_port
from convomem.cli.serve import ENV_SETTINGS, app_from_env

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_serve_answers_with_a_key_from_keys_create(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    made = subprocess.run(
        [sys.executable, "-m", "convomem", "keys", "create", "--tenant", "acme", "--store", url],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    key = made.stdout.splitlines()[-1]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "convomem", "serve", "--store", url, "--port", str(port)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):  # up to 30 s for the process to listen
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("convomem serve did not start")
        h = {"Authorization": f"Bearer {key}"}
        r = httpx.post(f"{base}/v1/sessions", json={"id": "s", "user_id": "u"}, headers=h)
        assert r.status_code == 201
        assert (
            httpx.get(f"{base}/v1/sessions/s", headers={"Authorization": "Bearer x"}).status_code
            == 401
        )
        spec = httpx.get(f"{base}/openapi.json").json()
        assert "/v1/sessions/{session_id}/context" in spec["paths"]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    # At the default log level: one line, on stderr, that says where and over what.
    assert out == ""
    assert err.splitlines() == [
        f"convomem serve: {base} (1 worker), store {url}, recall in the store (embedder "
        f"hashing); inspector {base}/inspect, API docs {base}/docs"
    ]


def test_the_start_line_names_recall_and_hides_passwords() -> None:
    from convomem.cli.serve import start_line
    from convomem.server import Settings

    pg = Settings(store="postgresql://app:hunter2@db/app", embedder="e5")
    line = start_line(pg, "0.0.0.0", 80, 4)
    assert line.startswith("convomem serve: http://0.0.0.0:80 (4 workers), store ")
    assert "hunter2" not in line and "postgresql://app:***@db/app" in line
    assert "recall in the store (embedder e5)" in line
    redis = Settings(store="redis://:pw@cache:6379/0", recall="sqlite:///r.db")
    assert "recall sqlite:///r.db (embedder hashing)" in start_line(redis, "::1", 8080, 1)
    assert start_line(redis, "::1", 8080, 1).startswith("convomem serve: http://[::1]:8080 ")
    alone = Settings(store="redis://cache:6379/0")
    assert "recall off (the store has no search: --recall URL)" in start_line(alone, "h", 1, 1)
    assert "recall off;" in start_line(Settings(use_recall=False), "h", 1, 1)


def test_the_start_line_is_quiet_under_log_level_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    ran: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: ran.append(kw["log_level"]))
    for level, lines in (("warning", 1), ("error", 0)):
        code, out, err = run("serve", "--store", "sqlite://", "--log-level", level)
        assert code == 0 and out == "" and len(err.splitlines()) == lines, err
    assert ran == ["warning", "error"]


def test_every_command_has_one_store_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``serve``, ``keys`` and ``sessions`` without ``--store``: ``$CONVOMEM_STORE``, else
    ``convomem.db`` in the working directory, said the same way in every help."""
    from convomem.cli.main import build_parser
    from convomem.cli.serve import settings_of

    monkeypatch.delenv("CONVOMEM_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    helps = set()
    for argv in (["serve"], ["keys", "list"], ["sessions", "list"], ["sessions", "sweep"]):
        assert run(*argv, "--help")[0] == 0
        text = " ".join(capsys.readouterr().out.split())
        helps.add(text[text.index("--store URL store URL") :].split(" --", 1)[0])
    assert helps == {"--store URL store URL (default: $CONVOMEM_STORE, else sqlite:///convomem.db)"}
    code, out, err = run("sessions", "list")  # no database yet: said, not made
    assert code == 2 and "no such database file" in err and not (tmp_path / "convomem.db").exists()
    assert run("keys", "create", "--tenant", "acme")[0] == 0  # the service's keys: convomem.db
    code, out, err = run("sessions", "list")
    assert code == 0 and out.splitlines()[-1] == "0 sessions", err
    assert settings_of(build_parser().parse_args(["serve"])).store == "sqlite:///convomem.db"
    monkeypatch.setenv("CONVOMEM_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    assert settings_of(build_parser().parse_args(["serve"])).store.endswith("env.db")
    assert run("keys", "create", "--tenant", "acme")[0] == 0
    assert (tmp_path / "env.db").exists()


def test_worker_processes_build_the_app_from_the_settings_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = {"store": f"sqlite:///{tmp_path / 'w.db'}", "budget": 1234, "burst": 7}
    monkeypatch.setenv(ENV_SETTINGS, json.dumps(settings))
    app = app_from_env()
    assert app.state.settings.budget == 1234 and app.state.settings.burst == 7


def test_serve_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    code, out, err = run("serve", "--port", str(free_port()))
    one_line_failure(code, out, err)
    assert "pip install 'convomem[server]'" in err


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    one_line_failure(*run("serve", "--port", "0"))
    one_line_failure(*run("serve", "--workers", "0"))
    one_line_failure(*run("serve", "--budget", "-5", "--store", f"sqlite:///{tmp_path / 'x'}"))


def test_the_embedder_option_reaches_the_settings(tmp_path: Path) -> None:
    from convomem.cli.main import build_parser
    from convomem.cli.serve import settings_of

    store = f"sqlite:///{tmp_path / 'e.db'}"
    args = build_parser().parse_args(["serve", "--store", store, "--embedder", "e5"])
    assert settings_of(args).embedder == "e5"
    args = build_parser().parse_args(["serve", "--store", store])
    assert settings_of(args).embedder == "hashing"
    one_line_failure(*run("serve", "--embedder", "bert"))


def test_serve_mounts_mcp_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    from _server_support import create_key
    from convomem.cli.main import build_parser
    from convomem.cli.serve import build_app, settings_of

    store = f"sqlite:///{tmp_path / 'm.db'}"
    key = create_key(store, "acme")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }

    def serve(*options: str) -> TestClient:
        args = build_parser().parse_args(["serve", "--store", store, "--rate", "0", *options])
        return TestClient(build_app(settings_of(args)))

    with serve() as client:
        assert client.post("/mcp", json=listing, headers=headers).status_code == 401
        auth = {**headers, "Authorization": f"Bearer {key}"}
        r = client.post("/mcp", json=listing, headers=auth)
        assert r.status_code == 200, r.text
        names = {t["name"] for t in r.json()["result"]["tools"]}
        assert "get_context" in names and "erase_user" not in names
    with serve("--mcp-allow-erase") as client:
        r = client.post("/mcp", json=listing, headers={**headers, "Authorization": f"Bearer {key}"})
        assert "erase_user" in {t["name"] for t in r.json()["result"]["tools"]}
    with serve("--no-mcp") as client:
        assert client.post("/mcp", json=listing, headers=headers).status_code == 404
    monkeypatch.setitem(sys.modules, "mcp", None)
    with serve() as client:
        assert client.post("/mcp", json=listing, headers=headers).status_code == 404
        assert client.get("/healthz").status_code == 200
    assert "/mcp is off" in capsys.readouterr().err
