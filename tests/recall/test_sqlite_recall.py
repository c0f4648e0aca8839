"""The SQLite recall backend's own rules: pruning of very common query terms, the
in-memory vector partitions following other writers."""

from __future__ import annotations

import pytest

from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex, _sqlite_recall
from convomem.stores import open_store


def test_very_common_terms_are_dropped_only_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with RecallIndex("sqlite://", embedder=HashingEmbedder(dim=16)) as idx:
        texts = [f"the note {i}" for i in range(9)] + ["the peanut note"]
        idx.add(
            [Message(f"m{i}", "user", content=t) for i, t in enumerate(texts)],
            user_id="u",
            session_id="s",
        )
        assert len([h for h in idx.search("the", user_id="u", k=20) if h.lexical]) == 10
        monkeypatch.setattr(_sqlite_recall, "LEXICAL_BUDGET", 3)
        assert [h for h in idx.search("the", user_id="u", k=20) if h.lexical] == []
        lexical = [h.message_id for h in idx.search("the peanut", user_id="u", k=20) if h.lexical]
        assert lexical == ["m9"]


def test_a_partition_follows_other_writers_and_deletes(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    db = open_store(url)
    reader = RecallIndex(db)
    writer = RecallIndex(url)  # another connection, as another process would have
    writer.add([Message("m1", "user", content="blue train")], user_id="u", session_id="s")
    assert [h.message_id for h in reader.search("blue", user_id="u")] == ["m1"]
    writer.add([Message("m2", "user", content="blue boat")], user_id="u", session_id="s")
    assert {h.message_id for h in reader.search("blue", user_id="u")} == {"m1", "m2"}
    writer.delete(user_id="u", message_ids=["m1"])
    hits = reader.search("blue train", user_id="u")
    assert [h.message_id for h in hits] == ["m2"]
    writer.close()
    reader.close()
    db.close()
