"""The ``convomem.sessions/1`` format: what an export holds, that an import reads it back
exactly (a property test over rich sessions), and that a damaged file writes nothing."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _cli_support import one_line_failure
from _sessions_support import export_text, fill, msg, opened, records, sessions, without_times
from _store_backends import Backend
from convomem import ConversationMemory
from convomem.cli import main
from convomem.cli.transfer import FORMAT
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

EXAMPLES = int(os.environ.get("CONVOMEM_CLI_EXAMPLES", "8"))


def test_export_format_is_versioned_and_complete(url: str) -> None:
    fill(url)
    code, out, err = sessions("export", "s1", "--store", url)
    assert code == 0 and "exported 1 session, 3 messages" in err
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
    sqlite_file: Backend, damage: Callable[[list[str]], list[str]], expected: str
) -> None:
    """Reading a file does not depend on the backend: one is enough here."""
    url = sqlite_file.fresh_url()
    fill(url)
    s3 = export_text(url, "s3").splitlines()
    s1 = export_text(url, "s1").splitlines()
    text = "\n".join(s3 + damage(s1)) + "\n"  # s3 is fine, yet not written either
    target = sqlite_file.fresh_url()
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
    exported = export_text(url, "g")
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


def test_big_unicode_messages_and_an_ascii_only_output(url: str, durable: Backend) -> None:
    big = Message("big", "user", content="é😀中\u2028" * 300_000)  # over 1 MB of UTF-8
    with opened(url) as db:
        db.session("s", user_id="ユーザー").append([big, msg(2)])
    exported = export_text(url, "s")
    assert len(exported.encode()) > 3_000_000
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    assert main(["sessions", "export", "s", "--store", url], out=ascii_out) == 0
    ascii_out.flush()
    raw = ascii_out.buffer.getvalue()  # type: ignore[attr-defined]
    assert raw.isascii() and records(raw.decode()) == records(exported)
    target = durable.fresh_url()
    code, _, err = sessions("import", "-", "--store", target, stdin=raw.decode())
    assert code == 0, err
    with opened(target) as db:
        assert db.session("s").get_items() == [big, msg(2)]


def test_a_file_with_a_bom_and_crlf_reads_and_bad_bytes_do_not(
    url: str, durable: Backend, tmp_path: Path
) -> None:
    fill(url)
    exported = export_text(url, "s1")
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + exported.replace("\n", "\r\n").encode())
    target = durable.fresh_url()
    code, out, err = sessions("import", str(path), "--store", target)
    assert code == 0 and "1 created" in out, err
    assert without_times(export_text(target, "s1")) == without_times(exported)
    path.write_bytes(exported.encode()[:-40] + b"\xff\xfe" + exported.encode()[-40:])
    code, out, err = sessions("import", str(path), "--store", durable.fresh_url())
    one_line_failure(code, out, err)
    assert "not UTF-8" in err
    code, out, err = sessions("import", str(tmp_path / "nope.jsonl"), "--store", target)
    one_line_failure(code, out, err)
    assert "nope.jsonl" in err


def test_an_imported_session_resumes_as_its_source_does(url: str, durable: Backend) -> None:
    """A ConversationMemory over the imported copy gives the context one over the source
    gives, byte for byte, with as many summarizer calls (none, when the derived state is
    read back)."""
    with opened(url) as db:
        memory = ConversationMemory(300, store=db.session("chat", user_id="u1"))
        memory.add("system", "You are terse.")
        for i in range(40):
            memory.add("user", f"question {i} about order {1000 + i}?")
            call = Message(f"a{i}", "assistant", content=[ToolUseBlock(f"c{i}", "look", {"n": i})])
            memory.add_message(call)
            memory.add_message(Message(f"t{i}", "tool", content=[ToolResultBlock(f"c{i}", "ok")]))
            memory.add("assistant", f"answer {i}")
        assert memory.stats().summarizer_calls > 0
    target = durable.fresh_url()
    code, _, err = sessions("import", "-", "--store", target, stdin=export_text(url, "chat"))
    assert code == 0, err
    contexts, calls = [], []
    for where in (url, target):
        with opened(where) as db:
            again = ConversationMemory(300, store=db.session("chat", user_id="u1"))
            contexts.append(json.dumps(again.context()))
            calls.append(again.stats().summarizer_calls)
    assert contexts[0] == contexts[1] and calls[0] == calls[1]
