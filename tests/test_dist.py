"""The package as a user gets it: ``python -m build`` makes an sdist and, from it, a
wheel (as ``make dist`` does); the wheel holds the ``convomem`` package and its metadata
only (no tests, benchmarks, examples or data); installed with ``[server]`` into a fresh
virtual environment (from the package index pip is configured with), it imports, its
``convomem`` command runs, and one session goes through a ``convomem serve`` of that
environment with the Python client, ``/docs`` assets included.

Nothing here imports the source tree: every command runs in the new environment with
``PYTHONPATH`` removed, and the test checks ``convomem`` was imported from there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import httpx

from _servers_redis import free_port

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 600  # pip resolves and installs FastAPI, uvicorn, httpx, pydantic


def _run(*argv: str | Path, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _build(out: Path) -> tuple[Path, Path]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(sys.executable, "-m", "build", "--outdir", out, ROOT, env=env, timeout=INSTALL_TIMEOUT)
    (wheel,) = out.glob("convomem-*.whl")
    (sdist,) = out.glob("convomem-*.tar.gz")
    return wheel, sdist


def _check_contents(wheel: Path, sdist: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"convomem", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    assert "convomem/py.typed" in names and "convomem/server/api_docs.py" in names
    data = "convomem/recall/data/"  # the static embedder's table and its NOTICE ship too
    assert f"{data}static-minilm-64.npz" in names and f"{data}NOTICE" in names
    assert not [
        n
        for n in names
        if not n.endswith((".py", "py.typed")) and "dist-info" not in n and not n.startswith(data)
    ]
    with tarfile.open(sdist) as tar:
        members = [m.split("/", 1)[1] for m in tar.getnames() if "/" in m]
    assert "pyproject.toml" in members and "src/convomem/__init__.py" in members
    assert not [m for m in members if m.startswith((".venv/", "site/", "dist/", "bench/results"))]


SESSION = textwrap.dedent(
    """
    import sys
    import convomem
    from convomem.client import Client

    base, key, venv = sys.argv[1:]
    assert convomem.__file__.startswith(venv), convomem.__file__
    with Client(base, key) as c:
        c.create_session("u1", id="s1")
        c.append("s1", [{"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "My parcel is 4471."},
                        {"role": "assistant", "content": "Looking it up."}])
        ctx = c.context("s1", budget=500)
        assert [m["content"] for m in ctx["context"]][-1] == "Looking it up.", ctx
        assert len(ctx["accounting"]["kept"]) == 3
    print("ok", convomem.__version__)
    """
)


def test_the_wheel_installs_with_server_and_serves_a_session(tmp_path: Path) -> None:
    wheel, sdist = _build(tmp_path / "dist")
    _check_contents(wheel, sdist)

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, env=dict(os.environ))
    env = _clean_env(venv)
    python, cli = venv / "bin" / "python", venv / "bin" / "convomem"
    _run(python, "-m", "pip", "install", "--quiet", f"{wheel}[server]", env=env,
         timeout=INSTALL_TIMEOUT)  # fmt: skip

    where = _run(python, "-c", "import convomem; print(convomem.__file__)", env=env)
    assert where.startswith(str(venv)), where
    assert "--store URL" in _run(cli, "serve", "--help", env=env)

    store = f"sqlite:///{tmp_path / 'smoke.db'}"
    key = _run(cli, "keys", "create", "--tenant", "acme", "--store", store, env=env)
    key = key.splitlines()[-1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [str(cli), "serve", "--store", store, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert serve.poll() is None, serve.communicate()
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the installed convomem serve did not start"
            time.sleep(0.2)
        out = _run(python, "-c", SESSION, base, key, str(venv), env=env)
        assert out.startswith("ok "), out
        docs = httpx.get(f"{base}/docs")
        assert docs.status_code == 200 and "/docs/assets/swagger-ui-bundle.js" in docs.text
        assert httpx.get(f"{base}/docs/assets/swagger-ui-bundle.js").status_code == 200
    finally:
        serve.terminate()
        _, err = serve.communicate(timeout=30)
    # [server] without [mcp]: /mcp is off, and the start says so before the start line
    lines = err.splitlines()
    assert lines[0].startswith("convomem serve: /mcp is off: "), err
    assert "pip install 'convomem[mcp]'" in lines[0], err
    assert lines[1].startswith(f"convomem serve: {base} (1 worker), store {store}"), err
