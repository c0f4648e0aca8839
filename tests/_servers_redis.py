"""Real ``redis-server`` processes for the tests: one server, and a 3-master Redis Cluster,
each on free loopback ports in a temporary directory, started once per test session and
killed at its end. ``scripts/ensure-redis-server.sh`` installs the server (``make test``
runs it first); when the binary is missing or a server cannot start, the fixture FAILS,
it never skips.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def free_port() -> int:
    """A free loopback port whose cluster bus port (+10000) is free too."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port + 10000))
            return port
    raise RuntimeError("no free loopback port pair found")


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not installed: run scripts/ensure-redis-server.sh (make test does) "
            "or apt-get install redis-server",
            pytrace=False,
        )
    return path


def cli(port: int, *args: str) -> str:
    out = subprocess.run(
        [_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.stdout.strip()


@dataclass
class RedisServer:
    """One ``redis-server`` on 127.0.0.1:``port`` with its data in ``directory``."""

    directory: Path
    port: int = field(default_factory=free_port)
    args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            _binary("redis-server"),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.directory / "redis.log"),
            *self.args,
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        for _ in range(200):
            if self.process.poll() is not None:
                break
            if cli(self.port, "PING") == "PONG":
                return self
            time.sleep(0.05)
        log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        self.stop()
        pytest.fail(f"redis-server on port {self.port} did not start:\n{log}", pytrace=False)

    def kill(self) -> None:
        """``kill -9``: no shutdown save, no goodbye."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        self.kill()
        self.process = None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    base = Path(tempfile.mkdtemp(prefix="convomem-redis-"))
    server = RedisServer(base / "single").start()
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


CREATE_OPTIONS = ("--cluster-replicas", "0", "--cluster-yes")


@dataclass
class RedisClusterNodes:
    servers: list[RedisServer]

    @property
    def port(self) -> int:
        return self.servers[0].port


@contextlib.contextmanager
def start_cluster(base: Path) -> Iterator[RedisClusterNodes]:
    """Three masters on loopback, joined with ``redis-cli --cluster create``."""
    args = ("--cluster-enabled", "yes", "--cluster-node-timeout", "5000", "--appendonly", "no")
    servers: list[RedisServer] = []
    try:
        for k in range(3):
            servers.append(RedisServer(base / f"node{k}", args=args).start())
        nodes = [f"127.0.0.1:{s.port}" for s in servers]
        create = subprocess.run(
            [_binary("redis-cli"), "--cluster", "create", *nodes, *CREATE_OPTIONS],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if create.returncode != 0:
            pytest.fail(f"redis-cli --cluster create failed:\n{create.stdout}{create.stderr}")
        for _ in range(400):
            if all("cluster_state:ok" in cli(s.port, "CLUSTER", "INFO") for s in servers):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the Redis Cluster did not reach cluster_state:ok", pytrace=False)
        yield RedisClusterNodes(servers)
    finally:
        for s in servers:
            s.stop()


@pytest.fixture(scope="session")
def redis_cluster_nodes() -> Iterator[RedisClusterNodes]:
    base = Path(tempfile.mkdtemp(prefix="convomem-redis-cluster-"))
    try:
        with start_cluster(base) as nodes:
            yield nodes
    finally:
        shutil.rmtree(base, ignore_errors=True)
