"""docs/mcp.md is true: its Python blocks run (each alone, in a fresh interpreter, against
``convomem mcp`` over stdio and a real ``convomem serve`` over HTTP), its client
configurations are valid JSON naming a ``convomem mcp`` command line or the ``/mcp`` URL,
and every ``convomem`` command line it shows parses."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _servers_app import Replica, create_key, spawn_replicas, wait_ready
from convomem.cli.main import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
TEXT = DOC.read_text()
SRC = str(Path(__file__).resolve().parents[2] / "src")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", TEXT, flags=re.S | re.M)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, str]]:
    folder = tmp_path_factory.mktemp("mcp-docs")
    store = f"sqlite:///{folder / 'service.db'}"
    key = create_key(store, "acme")
    (replica,) = spawn_replicas(store, 1, "--rate", "0", directory=folder)
    try:
        wait_ready([replica])
        yield replica, key
    finally:
        replica.stop()


def _shim(folder: Path) -> str:
    """A ``convomem`` on PATH that runs this checkout (the SDK passes only PATH, HOME...
    to the server it starts, not PYTHONPATH)."""
    shim = folder / "bin" / "convomem"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{SRC}" exec "{sys.executable}" -m convomem "$@"\n')
    shim.chmod(0o755)
    return str(shim.parent)


@pytest.mark.parametrize("i", range(len(blocks("python"))))
def test_python_blocks_run(i: int, served: tuple[Replica, str], tmp_path: Path) -> None:
    replica, key = served
    env = os.environ | {
        "PATH": _shim(tmp_path) + os.pathsep + os.environ["PATH"],
        "PYTHONPATH": SRC,
        "CONVOMEM_URL": replica.url,
        "CONVOMEM_API_KEY": key,
    }
    done = subprocess.run(
        [sys.executable, "-c", blocks("python")[i]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]


def test_there_are_blocks_of_each_kind() -> None:
    assert len(blocks("python")) == 3 and len(blocks("json")) == 4 and len(blocks("bash")) >= 3


def test_client_configurations_are_valid() -> None:
    servers = [json.loads(b) for b in blocks("json") if "mcpServers" in b]
    assert len(servers) == 3
    for config in servers:
        (entry,) = config["mcpServers"].values()
        if "url" in entry:
            assert entry["url"].endswith("/mcp")
            assert entry["headers"]["Authorization"].startswith("Bearer ")
        else:
            assert entry["command"].endswith("convomem") and entry["args"][0] == "mcp"
            build_parser().parse_args(entry["args"])  # exits on a bad option
    problem = next(json.loads(b) for b in blocks("json") if "mcpServers" not in b)
    assert problem["error"]["type"].startswith("https://convomem.dev/problems/")


def test_command_lines_parse() -> None:
    lines = [
        line.split("#")[0].strip()
        for b in blocks("bash")
        for line in b.splitlines()
        if line.startswith("convomem ")
    ]
    assert len(lines) >= 7
    for line in lines:
        build_parser().parse_args(shlex.split(line)[1:])
