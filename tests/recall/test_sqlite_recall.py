"""The SQLite recall backend's own rules: the in-memory partitions follow other writers
(reading only new rows), stay under their memory cap, fold diacritics, and the FTS5
index of earlier versions is dropped."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall._backend import Scope
from convomem.stores import open_store


def test_a_partition_follows_other_writers_and_deletes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    db = open_store(url)
    reader = RecallIndex(db)
    writer = RecallIndex(url)  # another connection, as another process would have
    writer.add([Message("m1", "user", content="blue train")], user_id="u", session_id="s")
    assert [h.message_id for h in reader.search("blue", user_id="u")] == ["m1"]
    assert reader.backend.loaded_rows == 1
    writer.add([Message("m2", "user", content="blue boat")], user_id="u", session_id="s")
    assert {h.message_id for h in reader.search("blue", user_id="u")} == {"m1", "m2"}
    assert reader.backend.loaded_rows == 2  # only the new row was read
    reader.search("boat", user_id="u")
    assert reader.backend.loaded_rows == 2  # nothing changed: nothing read
    writer.delete(user_id="u", message_ids=["m1"])
    hits = reader.search("blue train", user_id="u")
    assert [h.message_id for h in hits] == ["m2"]
    assert reader.backend.loaded_rows == 3  # a removal reloads the user
    writer.close()
    reader.close()
    db.close()


def test_a_partition_loads_in_pages_and_is_current_only_once_all_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from convomem.recall import _sqlite_recall

    monkeypatch.setattr(_sqlite_recall, "LOAD_PAGE", 3)
    loads: list[str] = []

    class Watching:
        """The store database, its statements watched on their way to the driver."""

        def __init__(self, db: Any) -> None:
            self.inner, self.kind = db, db.kind

        def run_statements(self, op: Any, *, write: bool = False) -> Any:
            def watched() -> Any:
                gen, reply = op(), None
                while True:
                    try:
                        q = gen.send(reply)
                    except StopIteration as stop:
                        return stop.value
                    if q.sql.startswith("SELECT rid, kind"):
                        loads.append(q.sql)
                    reply = yield q

            return self.inner.run_statements(watched, write=write)

        def __getattr__(self, name: str) -> Any:  # the rest of StoreDatabase
            return getattr(self.inner, name)

    db = open_store("sqlite://")
    with db, RecallIndex(Watching(db)) as idx:
        msgs = [Message(f"m{i}", "user", content=f"blue note {i}") for i in range(10)]
        idx.add(msgs, user_id="u", session_id="s")
        hits = idx.search("blue", user_id="u", k=20)
        assert sorted(h.message_id for h in hits) == sorted(m.id for m in msgs)
        assert idx.backend.loaded_rows == 10 and len(loads) == 4  # pages of 3, 3, 3, 1
        part = idx.backend._parts[Scope("", "u")]
        assert (part.n, part.added, part.removed) == (10, 10, 0)
        idx.search("blue", user_id="u", k=20)
        assert idx.backend.loaded_rows == 10 and len(loads) == 4  # current: nothing read


def test_partitions_stay_under_the_memory_cap() -> None:
    with RecallIndex("sqlite://", embedder=HashingEmbedder(dim=32)) as idx:
        idx.backend.max_bytes = 1
        for user in ("u1", "u2", "u3"):
            idx.add([Message("m", "user", content=f"note of {user}")], user_id=user, session_id="s")
        for _ in range(2):
            for user in ("u1", "u2", "u3"):
                hits = idx.search(f"note of {user}", user_id=user)
                assert [h.text for h in hits] == [f"note of {user}"]
                assert list(idx.backend._parts) == [Scope("", user)]  # only the last
        assert idx.backend.loaded_rows == 6


def test_words_match_with_diacritics_folded() -> None:
    with RecallIndex("sqlite://", embedder=HashingEmbedder(dim=32)) as idx:
        for mid, text in (("m1", "at the Café Noël"), ("m2", "x")):  # no neighbours
            idx.add([Message(mid, "user", content=text)], user_id="u", session_id=mid)
        for query in ("cafe", "CAFÉ", "noel"):
            hits = [h for h in idx.search(query, user_id="u") if h.lexical is not None]
            assert [h.message_id for h in hits] == ["m1"]


def test_the_fts5_index_of_earlier_versions_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE convomem_recall_items (rid INTEGER PRIMARY KEY, tenant TEXT NOT NULL,
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, message_id TEXT NOT NULL,
            seq INTEGER, kind TEXT NOT NULL, created_at REAL NOT NULL, text TEXT NOT NULL,
            scope TEXT NOT NULL, vec BLOB NOT NULL,
            UNIQUE (tenant, user_id, session_id, message_id));
        CREATE VIRTUAL TABLE convomem_recall_fts USING fts5(scope, text,
            content='convomem_recall_items', content_rowid='rid');
        CREATE VIRTUAL TABLE convomem_recall_vocab USING fts5vocab('convomem_recall_fts', 'row');
        CREATE TRIGGER convomem_recall_ai AFTER INSERT ON convomem_recall_items BEGIN
            INSERT INTO convomem_recall_fts (rowid, scope, text)
            VALUES (new.rid, new.scope, new.text);
        END;
        """
    )
    conn.close()
    with RecallIndex(f"sqlite:///{path}", embedder=HashingEmbedder(dim=32)) as idx:
        idx.add([Message("m1", "user", content="blue train")], user_id="u", session_id="s")
        assert [h.message_id for h in idx.search("train", user_id="u")] == ["m1"]
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert not {n for n in names if "fts" in n or "vocab" in n or n == "convomem_recall_ai"}


def test_a_snapshot_loads_a_partition_in_one_read_and_goes_with_any_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search that builds a large partition saves it; a new process restores it
    (no item row read), then reads only the rows added since, and ranks exactly as a
    partition built from the rows; deleting any of the user's items deletes the
    snapshot, so an erased item is in no snapshot and the next process rebuilds."""
    from convomem.recall import _sqlite_recall

    monkeypatch.setattr(_sqlite_recall, "MIN_ROWS", 50)
    url = f"sqlite:///{tmp_path}/r.db"
    words = ["blue", "train", "paint", "sunrise", "adopt", "dog", "camp", "book", "race"]
    msgs = [
        Message(f"m{i}", "user", content=f"{words[i % 9]} {words[i * 7 % 9]} {i}")
        for i in range(120)
    ]
    queries = ["blue train", "painting sunrises", "adopted a dog", "camping books 7"]
    with RecallIndex(url) as first:
        for s in range(4):
            first.add(
                msgs[s * 30 : (s + 1) * 30], user_id="u", session_id=f"s{s}", seqs=list(range(30))
            )
        want = [first.search(q, user_id="u", neighbours=1) for q in queries]
        assert first.backend.loaded_rows == 120
    with sqlite3.connect(f"{tmp_path}/r.db") as conn:
        assert conn.execute("SELECT rows FROM convomem_recall_snapshots").fetchall() == [(120,)]
    with RecallIndex(url) as second:
        assert [second.search(q, user_id="u", neighbours=1) for q in queries] == want
        assert second.backend.loaded_rows == 0  # restored
        extra = [Message("n1", "user", content="blue train again")]
        second.add(extra, user_id="u", session_id="s0", seqs=[30])
        fresh = RecallIndex(url)
        for q in queries:
            assert second.search(q, user_id="u") == fresh.search(q, user_id="u")
        assert second.backend.loaded_rows == 1  # the new row only
        second.delete(user_id="u", session_id="s1")
        fresh.close()
    with sqlite3.connect(f"{tmp_path}/r.db") as conn:
        assert conn.execute("SELECT count(*) FROM convomem_recall_snapshots").fetchone() == (0,)
    with RecallIndex(url) as third:
        hits = third.search("blue train", user_id="u", k=50)
        assert third.backend.loaded_rows == 91  # rebuilt from the rows
        assert not {h.session_id for h in hits} & {"s1"}


def _users_rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT tenant, user_id FROM convomem_recall_users").fetchall()


@pytest.mark.parametrize("how", ["index", "store", "last session"])
def test_an_erased_user_leaves_no_row_and_no_partition_anywhere(tmp_path: Path, how: str) -> None:
    """After an erasure (the index's, the store's, or the deletion of the user's last
    session) no row names the user, and another process's partition of them is dropped
    even when the user comes back with counters equal to the old ones."""
    path = tmp_path / "r.db"
    db = open_store(f"sqlite:///{path}")
    other = RecallIndex(f"sqlite:///{path}")  # another process's index, partitions and all
    mine = RecallIndex(db)
    db.session("s", user_id="u").add_items([Message("x", "user", content="hello")])
    db.session("k", user_id="keep").add_items([Message("x", "user", content="hello")])
    old = [Message(f"m{i}", "user", content=f"secret parcel {i}") for i in range(3)]
    mine.add(old, user_id="u", session_id="s")
    mine.add([Message("k1", "user", content="parcel kept")], user_id="keep", session_id="k")
    assert len(other.search("parcel", user_id="u")) == 3  # loaded: (added, removed) = (3, 0)
    assert len(other.search("parcel", user_id="keep")) == 1
    if how == "index":
        mine.erase_user("u")
        assert db.erase_user("u") == 1
    elif how == "store":
        assert db.erase_user("u") == 1
    else:
        assert db.delete_session("s", user_id="u")
    assert _users_rows(path) == [("", "keep")]
    db.session("s2", user_id="u").add_items([Message("y", "user", content="hi")])
    new = [Message(f"n{i}", "user", content=f"new parcel {i}") for i in range(3)]
    mine.add(new, user_id="u", session_id="s2")  # the same counters again: (3, 0)
    texts = sorted(h.text for h in other.search("parcel", user_id="u", k=10))
    assert texts == ["new parcel 0", "new parcel 1", "new parcel 2"]
    assert len(other.search("parcel", user_id="keep")) == 1
    other.close()
    mine.close()
    db.close()
