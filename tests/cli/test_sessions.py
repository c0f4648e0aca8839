"""``convomem sessions``: listing, showing, exporting, importing and deleting stored
sessions, on every durable backend of tests/_store_backends.py.

The in-memory SQLite backend is left out of the parametrized tests: each command opens
its own database, and ``sqlite://`` is a fresh, empty one each time (one test below
checks the commands still work on it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _cli_support import one_line_failure, run
from _store_backends import BACKENDS, Backend
from convomem import open_store
from convomem.cli.transfer import FORMAT
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from convomem.stores import StoreDatabase

EXAMPLES = int(os.environ.get("CONVOMEM_CLI_EXAMPLES", "8"))
DURABLE = [b for b in BACKENDS if b != "sqlite_memory"]
TIMES = ("created_at", "updated_at", "expires_at")


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.getfixturevalue(request.param)
    return b


@pytest.fixture
def url(durable: Backend) -> str:
    return durable.fresh_url()


def opened(url: str) -> Any:
    return _Closing(open_store(url))


class _Closing:
    def __init__(self, db: StoreDatabase) -> None:
        self.db = db

    def __enter__(self) -> StoreDatabase:
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()


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


# -- list -------------------------------------------------------------------------------


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
    assert out2.splitlines()[-1] == "1 sessions"
    code, out3, _ = sessions("list", "--store", url, "--limit", "1", "--all", "--json")
    assert [s["session_id"] for s in json.loads(out3)["sessions"]] == ["s3", "s2", "s1"]


# -- show -------------------------------------------------------------------------------


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
    _, out, _ = sessions("show", "s1", "--store", url, "--json", "--format", "anthropic")
    shown = json.loads(out)
    assert shown["system"] is None and shown["messages"][0]["role"] == "user"


def test_show_of_another_owner_or_a_missing_session_is_one_line(url: str) -> None:
    fill(url)
    code, out, err = sessions("show", "s1", "--store", url, "--user", "u2")
    one_line_failure(code, out, err)
    assert "'s1'" in err and "u2" in err
    one_line_failure(*sessions("show", "nope", "--store", url))


# -- export and import ------------------------------------------------------------------


def test_export_format_is_versioned_and_complete(url: str) -> None:
    fill(url)
    code, out, err = sessions("export", "s1", "--store", url)
    assert code == 0 and "exported 1 sessions, 3 messages" in err
    recs = records(out)
    assert [r["type"] for r in recs] == ["session", "message", "message", "message", "end"]
    head = recs[0]
    assert head["format"] == FORMAT and head["user_id"] == "u1" and head["tenant"] is None
    assert head["metadata"] == {"topic": "billing"} and head["state"] == {"cut": 2}
    assert [r["seq"] for r in recs[1:4]] == [1, 2, 3]
    assert recs[1]["message"] == msg(1).to_dict() and recs[1]["counts"] == {"approx": 4}
    assert recs[-1] == {"type": "end", "session_id": "s1", "messages": 3}


def test_round_trip_through_a_file_is_exact(url: str, durable: Backend, tmp_path: Path) -> None:
    fill(url)
    path = str(tmp_path / "all.jsonl")
    assert sessions("export", "--all", "--store", url, "-o", path)[0] == 0
    target = durable.fresh_url()
    code, out, err = sessions("import", path, "--store", target)
    assert code == 0, err
    assert out == "imported 3 sessions (3 created, 0 extended, 0 updated, 0 unchanged), " + (
        "4 messages written\n"
    )
    code, again, _ = sessions("export", "--all", "--store", target)
    assert without_times(again) == without_times(Path(path).read_text())
    code, out, _ = sessions("import", path, "--store", target)  # idempotent
    assert "3 unchanged" in out and "0 messages written" in out
    code, listed, _ = sessions("list", "--store", target, "--json")
    assert [s["session_id"] for s in json.loads(listed)["sessions"]] == ["s3", "s2", "s1"]


text_st = st.text(max_size=12)
json_st = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text_st,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_st, inner, max_size=3),
    max_leaves=6,
)
block_st = st.one_of(
    st.builds(TextBlock, text_st),
    st.builds(ImageBlock, st.text(min_size=1, max_size=12), st.none() | st.just("image/png")),
    st.builds(
        ToolUseBlock,
        st.text(min_size=1, max_size=6),
        text_st.filter(bool),
        st.dictionaries(text_st, json_st, max_size=2),
    ),
    st.builds(
        ToolResultBlock,
        st.text(min_size=1, max_size=6),
        text_st | st.lists(st.builds(TextBlock, text_st), max_size=2).map(tuple),
        st.booleans(),
    ),
    st.builds(
        OpaqueBlock, st.sampled_from(["openai", "anthropic"]), st.dictionaries(text_st, json_st)
    ),
)
name_st = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=8)


@st.composite
def rich_message(draw: st.DrawFn, i: int) -> Message:
    return Message(
        f"{i}-{draw(st.text(max_size=4))}",
        draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        draw(st.none() | st.integers(0, 10**6)),
        content=draw(text_st | st.lists(block_st, max_size=3)),
        name=draw(st.none() | text_st),
        metadata=draw(st.dictionaries(text_st, json_st, max_size=2)),
        created_at=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
        priority=draw(st.sampled_from([0, 1, 2])),
    )


@st.composite
def stored_sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(name_st, min_size=1, max_size=3, unique=True))
    out = []
    for sid in ids:
        n = draw(st.integers(0, 4))
        messages = [draw(rich_message(i)) for i in range(n)]
        counts = {
            m.id: draw(st.dictionaries(st.sampled_from(["approx", "o200k"]), st.integers(0, 99)))
            for m in messages
        }
        out.append(
            {
                "id": sid,
                "user": draw(st.none() | name_st),
                "messages": messages,
                "counts": {k: v for k, v in counts.items() if v},
                "state": draw(st.none() | st.dictionaries(text_st, json_st, max_size=3)),
                "metadata": draw(st.dictionaries(text_st, json_st, max_size=3)),
            }
        )
    return out


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=stored_sessions(), tenant=st.none() | name_st)
def test_export_import_export_is_byte_identical(
    durable: Backend, data: list[dict[str, Any]], tenant: str | None
) -> None:
    """Rich messages (tool calls and results, images, opaque blocks, Unicode, metadata),
    counts, states and metadata: export, import into a fresh store, export again: the
    same bytes but for the times the target store stamps itself."""
    source, target = durable.fresh_url(), durable.fresh_url()
    with opened(source) as db:
        for s in data:
            store = db.session(s["id"], user_id=s["user"], tenant=tenant)
            if s["messages"]:
                store.append(s["messages"], counts=s["counts"] or None)
            if s["state"] is not None:
                store.save_state(s["state"], expected_version=0)
            store.set_metadata(s["metadata"])
    scope = [f"--tenant={tenant}"] if tenant is not None else []
    code, first, err = sessions("export", "--all", "--store", source, *scope)
    assert code == 0, err
    code, _, err = sessions("import", "-", "--store", target, stdin=first)
    assert code == 0, err
    code, second, err = sessions("export", "--all", "--store", target, *scope)
    assert code == 0, err
    assert without_times(second) == without_times(first)
    with opened(target) as db:
        for s in data:
            store = db.session(s["id"], tenant=tenant)
            got = store.get_items()
            assert [m.to_dict() for m in got] == [m.to_dict() for m in s["messages"]]
            assert got == s["messages"]
            assert store.load_state()[0] == s["state"]
            assert store.get_counts() == {m.id: s["counts"].get(m.id, {}) for m in got}
            info = store.info()
            assert info is not None and info.user_id == s["user"]


def _export(url: str, *argv: str) -> str:
    code, out, err = sessions("export", *argv, "--store", url)
    assert code == 0, err
    return out


def test_import_extends_a_stored_prefix(url: str, durable: Backend) -> None:
    fill(url)
    older = _export(url, "s1")
    with opened(url) as db:
        s1 = db.session("s1", user_id="u1")
        s1.append([msg(4)], state={"cut": 3}, expected_version=1)
    newer = _export(url, "s1")
    target = durable.fresh_url()
    assert sessions("import", "-", "--store", target, stdin=older)[0] == 0
    code, out, err = sessions("import", "-", "--store", target, stdin=newer)
    assert code == 0, err
    assert "1 extended" in out and "1 messages written" in out
    assert without_times(_export(target, "s1")) == without_times(newer)
    code, out, err = sessions("import", "-", "--store", target, stdin=older)
    one_line_failure(code, out, err)  # the stored log is newer than the import
    assert "'s1'" in err and "'m4'" in err and "seq 4" in err


def test_a_conflicting_import_names_session_and_message_and_writes_nothing(
    url: str, durable: Backend
) -> None:
    fill(url)
    exported = _export(url, "--all")
    target = durable.fresh_url()
    with opened(target) as db:
        db.session("s2", user_id="u2").append([msg(1, "edited elsewhere")])
    code, out, err = sessions("import", "-", "--store", target, stdin=exported)
    one_line_failure(code, out, err)
    assert "session 's2'" in err and "'m1'" in err and "other content" in err
    assert "1 sessions before it were imported" in err
    with opened(target) as db:  # s1 came before s2 in the file; s2 is untouched, s3 not reached
        assert [s.session_id for s in db.sessions()[0]] == ["s1", "s2"]
        assert db.session("s2").get_items() == [msg(1, "edited elsewhere")]


@pytest.mark.parametrize("change", ["owner", "state", "metadata", "counts"])
def test_other_conflicts_are_one_line_errors(url: str, durable: Backend, change: str) -> None:
    fill(url)
    exported = _export(url, "s1")
    target = durable.fresh_url()
    assert sessions("import", "-", "--store", target, stdin=exported)[0] == 0
    recs = records(exported)
    if change == "owner":
        recs[0]["user_id"] = "u2"
    elif change == "state":
        recs[0]["state"] = {"cut": 1}
    elif change == "metadata":
        recs[0]["metadata"] = {"topic": "other"}
    else:
        recs[1]["counts"] = {"approx": 5}
    edited = "\n".join(json.dumps(r) for r in recs)
    code, out, err = sessions("import", "-", "--store", target, stdin=edited)
    one_line_failure(code, out, err)
    assert "'s1'" in err
    assert without_times(_export(target, "s1")) == without_times(exported)


def test_counts_the_store_lacks_are_added(url: str, durable: Backend) -> None:
    fill(url)
    exported = _export(url, "s1")
    bare = "\n".join(
        json.dumps({**r, "counts": {}}) if r["type"] == "message" else json.dumps(r)
        for r in records(exported)
    )
    target = durable.fresh_url()
    assert sessions("import", "-", "--store", target, stdin=bare)[0] == 0
    _, out, _ = sessions("import", "-", "--store", target, stdin=exported)
    assert "1 updated" in out
    with opened(target) as db:
        assert db.session("s1").get_counts(["m1"]) == {"m1": {"approx": 4}}


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda lines: lines[:-1], "cut short"),
        (lambda lines: [*lines[:2], "{not json", *lines[2:]], "line 5: not JSON"),
        (lambda lines: [lines[0].replace(FORMAT, "convomem.sessions/9"), *lines[1:]], "format"),
        (lambda lines: [*lines[:1], lines[2], lines[1], *lines[3:]], "line 5: seq=1"),
        (lambda lines: [*lines[:-1], lines[-1].replace('"messages":3', '"messages":4')], "says 4"),
        (lambda lines: [lines[0].replace('"user_id"', '"owner"'), *lines[1:]], "owner"),
    ],
)
def test_a_damaged_file_is_refused_whole(
    url: str,
    durable: Backend,
    damage: Callable[[list[str]], list[str]],
    expected: str,
) -> None:
    fill(url)
    s3 = _export(url, "s3").splitlines()
    s1 = _export(url, "s1").splitlines()
    text = "\n".join(s3 + damage(s1)) + "\n"  # s3 is fine, yet not written either
    target = durable.fresh_url()
    code, out, err = sessions("import", "-", "--store", target, stdin=text)
    one_line_failure(code, out, err)
    assert "<stdin>" in err and expected in err
    with opened(target) as db:
        assert db.sessions()[0] == []


def test_seq_gaps_are_refused_or_renumbered(url: str, durable: Backend) -> None:
    with opened(url) as db:
        s = db.session("g", user_id="u1")
        s.append([msg(1), msg(2)], state={"cut": 2}, expected_version=0)
        s.pop_item()
        s.append([msg(3)])
    exported = _export(url, "g")
    assert [r["seq"] for r in records(exported) if r["type"] == "message"] == [1, 3]
    target = durable.fresh_url()
    code, out, err = sessions("import", "-", "--store", target, stdin=exported)
    one_line_failure(code, out, err)
    assert "gaps" in err and "--renumber" in err
    code, out, err = sessions("import", "-", "--store", target, "--renumber", stdin=exported)
    assert code == 0 and "renumbered" in err
    with opened(target) as db:
        g = db.session("g")
        assert [e.seq for e in g.entries()[0]] == [1, 2]
        assert g.get_items() == [msg(1), msg(3)] and g.load_state() == (None, 0)


def test_import_into_another_tenant(url: str, durable: Backend) -> None:
    fill(url)
    exported = _export(url, "s1")
    target = durable.fresh_url()
    code, _, err = sessions("import", "-", "--store", target, "--tenant", "acme", stdin=exported)
    assert code == 0, err
    code, out, _ = sessions("list", "--store", target, "--tenant", "acme", "--json")
    (info,) = json.loads(out)["sessions"]
    assert (info["session_id"], info["tenant"], info["user_id"]) == ("s1", "acme", "u1")
    assert json.loads(sessions("list", "--store", target, "--json")[1])["sessions"] == []


def test_export_of_a_user_and_to_a_file(url: str, tmp_path: Path) -> None:
    fill(url)
    out = _export(url, "--user", "u1")
    assert [r["session_id"] for r in records(out) if r["type"] == "session"] == ["s1", "s3"]
    path = tmp_path / "x.jsonl"
    code, out, err = sessions("export", "s1", "nope", "--store", url, "-o", str(path))
    one_line_failure(code, out, err)
    assert "'nope'" in err and not path.exists() and os.listdir(tmp_path) == []
    code, _, _ = sessions("export", "s1", "--store", url, "-o", str(tmp_path / "no" / "x"))
    assert code == 2


def test_export_names_a_corrupt_row_and_its_seq(url: str, durable: Backend) -> None:
    fill(url)
    with opened(url) as db:
        durable.corrupt(db, None, "s1", 2, b"\xff{")
    code, _out, err = sessions("export", "s1", "--store", url)
    assert code == 2 and "Traceback" not in err
    assert "'s1'" in err and "seq 2" in err


# -- delete -----------------------------------------------------------------------------


def test_delete_needs_yes_and_names_what_it_did(url: str) -> None:
    fill(url)
    one_line_failure(*sessions("delete", "s1", "--store", url))
    one_line_failure(*sessions("delete", "--store", url, "--yes"))
    code, out, _ = sessions("delete", "s1", "--store", url, "--yes")
    assert code == 0 and out == "deleted session 's1'\n"
    one_line_failure(*sessions("delete", "s1", "--store", url, "--yes"))
    code, out, _ = sessions("delete", "--user", "u2", "--store", url, "--yes")
    assert out == "erased user 'u2': 1 sessions deleted\n"
    code, out, _ = sessions("list", "--store", url, "--json")
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["s3"]
    code, out, _ = sessions("list", "--store", url, "--tenant", "t", "--json")
    assert len(json.loads(out)["sessions"]) == 1  # another tenant's s1 is untouched


# -- the store URL ----------------------------------------------------------------------


def test_store_url_errors_are_one_line_and_hide_passwords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVOMEM_STORE", raising=False)
    code, out, err = sessions("list")
    one_line_failure(code, out, err)
    assert "--store" in err and "CONVOMEM_STORE" in err
    for url in ("nosuch://u:hunter2@host/db", "redis://u:hunter2@127.0.0.1:1/0"):
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
    exported = _export(url, "--all")
    code, out, _ = sessions("import", "-", "--store", "sqlite://", stdin=exported)
    assert code == 0 and "3 created" in out
    assert sessions("list", "--store", "sqlite://")[1].splitlines()[-1] == "0 sessions"


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run("sessions", "--help")
    assert code == 0
    out = capsys.readouterr().out
    for name in ("list", "show", "export", "import", "delete"):
        assert name in out
