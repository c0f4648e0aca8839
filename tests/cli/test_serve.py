"""``convomem serve``: a real process answering the API with a key from ``convomem keys
create``; the settings of ``--workers`` processes; the error without the extra."""

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
        stderr=subprocess.STDOUT,
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
        proc.wait(timeout=30)


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
    assert settings_of(args).embedder == "static"
    one_line_failure(*run("serve", "--embedder", "bert"))
