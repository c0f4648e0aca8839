"""Helpers of the ``convomem sessions`` tests (tests/cli/test_sessions.py,
test_transfer.py, test_importing.py): running the command, a filled store, reading an
export."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from _cli_support import run
from convomem import open_store
from convomem.model import Message
from convomem.stores import StoreDatabase

TIMES = ("created_at", "updated_at", "expires_at")


def opened(url: str) -> contextlib.closing[StoreDatabase]:
    return contextlib.closing(open_store(url))


def sessions(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    return run("sessions", *argv, stdin=stdin)


def msg(i: int, text: str = "", role: str = "user") -> Message:
    return Message(f"m{i}", role, content=text or f"message {i}")


def fill(url: str) -> None:
    """s1 (u1, 3 messages, state, metadata), s2 (u2), s3 (u1, empty), t/s1 (u9)."""
    with opened(url) as db:
        s1 = db.session("s1", user_id="u1")
        s1.append([msg(1), msg(2, role="assistant")], counts={"m1": {"approx": 4}})
        s1.append([msg(3)], state={"cut": 2}, expected_version=0)
        s1.set_metadata({"topic": "billing"})
        db.session("s2", user_id="u2").append([msg(1, "other user")])
        db.session("s3", user_id="u1").set_metadata({})
        db.session("s1", user_id="u9", tenant="t").append([msg(1, "tenant t")])


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def without_times(text: str) -> list[str]:
    """Each line as written, the session records' three times taken out."""
    out = []
    for line in text.split("\n")[:-1]:
        assert not any(c in line for c in "\x85\u2028\u2029")  # str.splitlines() is safe
        rec = json.loads(line)
        if rec["type"] == "session":
            for key in TIMES:
                assert isinstance(rec.pop(key), float | int | None)
            line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
        out.append(line)
    return out


def export_text(url: str, *argv: str) -> str:
    code, out, err = sessions("export", *argv, "--store", url)
    assert code == 0, err
    return out
