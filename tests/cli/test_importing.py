"""``convomem sessions import`` into a store that already holds sessions: idempotent,
extending a stored prefix, and one-line conflicts that write nothing."""

from __future__ import annotations

import json

import pytest

from _cli_support import one_line_failure
from _sessions_support import export_text, fill, msg, opened, records, sessions, without_times
from _store_backends import Backend


def test_import_extends_a_stored_prefix(url: str, durable: Backend) -> None:
    fill(url)
    older = export_text(url, "s1")
    with opened(url) as db:
        s1 = db.session("s1", user_id="u1")
        s1.append([msg(4)], state={"cut": 3}, expected_version=1)
    newer = export_text(url, "s1")
    target = durable.fresh_url()
    assert sessions("import", "-", "--store", target, stdin=older)[0] == 0
    code, out, err = sessions("import", "-", "--store", target, stdin=newer)
    assert code == 0, err
    assert "1 extended" in out and "1 message written" in out
    assert without_times(export_text(target, "s1")) == without_times(newer)
    code, out, err = sessions("import", "-", "--store", target, stdin=older)
    one_line_failure(code, out, err)  # the stored log is newer than the import
    assert "'s1'" in err and "'m4'" in err and "seq 4" in err


def test_a_conflicting_import_names_session_and_message_and_writes_nothing(
    url: str, durable: Backend
) -> None:
    fill(url)
    exported = export_text(url, "--all")
    target = durable.fresh_url()
    with opened(target) as db:
        db.session("s2", user_id="u2").append([msg(1, "edited elsewhere")])
    code, out, err = sessions("import", "-", "--store", target, stdin=exported)
    one_line_failure(code, out, err)
    assert "session 's2'" in err and "'m1'" in err and "other content" in err
    assert "1 session before it imported; a re-run keeps them" in err
    with opened(target) as db:  # s1 came before s2 in the file; s2 is untouched, s3 not reached
        assert [s.session_id for s in db.sessions()[0]] == ["s1", "s2"]
        assert db.session("s2").get_items() == [msg(1, "edited elsewhere")]


@pytest.mark.parametrize("change", ["owner", "state", "metadata", "counts"])
def test_other_conflicts_are_one_line_errors(url: str, durable: Backend, change: str) -> None:
    fill(url)
    exported = export_text(url, "s1")
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
    assert without_times(export_text(target, "s1")) == without_times(exported)


def test_counts_the_store_lacks_are_added(url: str, durable: Backend) -> None:
    fill(url)
    exported = export_text(url, "s1")
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


def test_import_into_another_tenant(url: str, durable: Backend) -> None:
    fill(url)
    exported = export_text(url, "s1")
    target = durable.fresh_url()
    code, _, err = sessions("import", "-", "--store", target, "--tenant", "acme", stdin=exported)
    assert code == 0, err
    code, out, _ = sessions("list", "--store", target, "--tenant", "acme", "--json")
    (info,) = json.loads(out)["sessions"]
    assert (info["session_id"], info["tenant"], info["user_id"]) == ("s1", "acme", "u1")
    assert json.loads(sessions("list", "--store", target, "--json")[1])["sessions"] == []
