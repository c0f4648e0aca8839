"""Kill -9 a writer in the middle of a large batch (issue 9 s5): the batch is stored all
or nothing, the session still opens, its seqs stay gapless and the next append works.

The writer is a separate process killed at several points of its append (as it starts,
and a little later); both append paths are killed: on PostgreSQL the one-statement
function (all new messages) and the careful path in a transaction (a batch re-sending a
stored message first). When the kill lands after the commit the whole batch is there;
before it, none of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _store_backends import Backend
from convomem.model import Message
from convomem.stores import open_store

SRC = str(Path(__file__).resolve().parents[2] / "src")
BATCH = int(os.environ.get("CONVOMEM_KILL_BATCH", "5000"))

_WRITER = textwrap.dedent(
    """
    import sys
    from convomem.model import Message
    from convomem.stores import open_store
    url, sid, n, resend = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    batch = [Message(f"{sid}-{i}", "user", content=f"message {i} " + "x" * 400)
             for i in range(n)]
    db = open_store(url)
    s = db.session(sid)
    head = [Message(f"{sid}-head", "user", content="stored before")]
    s.append(head)
    print("go", flush=True)
    s.append((head if resend else []) + batch)
    print("done", flush=True)
    """
)


def _wait_for_the_server(url: str) -> None:
    """The killed client's PostgreSQL backend may still run its statement (it commits or
    rolls back on its own): wait until it has gone, so what we read is final."""
    if not url.startswith("postgresql"):
        return
    plain = url.split("?")[0]
    deadline = time.monotonic() + 60
    with psycopg.connect(plain, autocommit=True) as conn:
        while time.monotonic() < deadline:
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'convomem-kill'"
            ).fetchone()
            if busy == (0,):
                return
            time.sleep(0.02)
    raise AssertionError("the killed writer's backend is still running after 60 s")


@pytest.mark.parametrize("backend_name", ["sqlite_file", "postgresql"])
def test_a_writer_killed_mid_batch_stores_all_or_nothing(
    backend_name: str, request: pytest.FixtureRequest
) -> None:
    backend: Backend = request.getfixturevalue(backend_name)
    url = backend.fresh_url()
    if backend_name == "postgresql":
        url += "&application_name=convomem-kill"
    outcomes: list[str] = []
    rounds = [(0.0, False), (0.0, True), (0.5, True)]
    for k, (delay, resend) in enumerate(rounds):
        sid = f"s{k}"
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, sid, str(BATCH), "1" if resend else "0"],
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line == "go\n", writer.communicate()[1]
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate()
        _wait_for_the_server(url)
        with open_store(url) as db:
            s = db.session(sid)
            entries, _ = s.entries(None, BATCH + 10)
            seqs = [e.seq for e in entries]
            ids = [e.message.id for e in entries]
            assert ids[0] == f"{sid}-head"
            stored = len(entries) - 1
            assert stored in (0, BATCH), f"{stored} of {BATCH} messages stored"
            assert ids[1:] == [f"{sid}-{i}" for i in range(stored)]
            assert seqs == list(range(1, len(entries) + 1))
            info: Any = s.info()
            assert (info.message_count, info.last_seq) == (len(entries), len(entries))
            assert s.append([Message(f"{sid}-after", "user", content="x")]) == len(entries) + 1
            outcomes.append("all" if stored else "none")
        assert "done" not in out or stored == BATCH
    # Killing as the append starts lands before its commit at least once on every backend.
    assert "none" in outcomes, outcomes
