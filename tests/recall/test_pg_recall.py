"""The PostgreSQL recall backend's own paths: pgvector's HNSW with iterative scans still
returns k items of one user among many others', and the exact fallback for pgvector
older than 0.8 gives the same items."""

from __future__ import annotations

from typing import Any

from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.stores import open_store


def test_filtered_vector_search_returns_k_for_one_user(postgresql: Any) -> None:
    db = open_store(postgresql.fresh_url())
    try:
        idx = RecallIndex(db, embedder=HashingEmbedder(dim=256), candidates=10)
        others = [
            Message(f"o{i}", "user", content=f"weather numbers report {i}") for i in range(600)
        ]
        idx.add(others, user_id="crowd", session_id="s")
        mine = [Message(f"m{i}", "user", content=f"my cat number {i}") for i in range(15)]
        idx.add(mine, user_id="me", session_id="s")
        query = "numbers"  # a word of the crowd's items only; mine are near it by vector
        hits = idx.search(query, user_id="me", k=10)
        assert idx.backend.iterative is True  # pgvector 0.8+ in the test server
        assert all(h.message_id.startswith("m") and h.lexical is None for h in hits)
        vector = [h for h in hits if h.similarity is not None]
        idx.backend.iterative = False  # the exact path older pgvector takes
        exact = idx.search(query, user_id="me", k=10)
        assert [h.message_id for h in exact] == [h.message_id for h in hits]
        assert len(vector) == len([h for h in exact if h.similarity is not None])
        assert len(hits) == 10
        idx.close()
    finally:
        db.close()
