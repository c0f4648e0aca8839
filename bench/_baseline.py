"""Measure a bench against another checkout's ``src`` in the same run.

``checkout(ref)`` extracts ``src/`` of a git ref (``git archive``) into a temporary
directory, once per commit; ``run(script, args, src)`` runs a bench script in a child
interpreter with that ``src`` first on ``PYTHONPATH`` (the bench's own helpers still
come from this checkout's ``bench/``) and returns the JSON it prints.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def resolve(ref: str) -> str:
    """The commit ``ref`` names (``merge-base`` when it is written ``base:REF``: the
    point this branch left REF)."""
    if ref.startswith("base:"):
        args = ["git", "merge-base", "HEAD", ref[5:]]
    else:
        args = ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"]
    return subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def checkout(ref: str) -> tuple[str, Path]:
    """``(commit, path of its src/)``, extracted once into the temp directory."""
    commit = resolve(ref)
    dest = Path(tempfile.gettempdir()) / f"convomem-src-{commit[:12]}"
    if not (dest / "src" / "convomem").is_dir():
        tar = subprocess.run(
            ["git", "archive", "--format=tar", commit, "src"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(dest, filter="data")
    return commit, dest / "src"


def run(script: Path, args: list[str], src: Path) -> Any:
    """The JSON ``script`` prints with ``args``, run against ``src``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT / "bench")])
    out = subprocess.run(
        [sys.executable, str(script), *args], env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)
