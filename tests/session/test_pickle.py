"""Pickling: a memory over an in-memory store travels whole (log, view, summary) and
goes on exactly as the original; one over a durable session refuses with a typed error
(the store is its persistence: reopen it instead)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from convomem import ConversationMemory, open_store
from convomem.errors import ConfigError
from session.test_resume import script

RAW = [("user", 9, 0), ("call", 4, 1), ("assistant", 20, 0), ("call", 3, 0), ("user", 7, 2)]
RAW += [("answer", 5, 0), ("assistant", 25, 1), ("user", 12, 0)] * 6


def test_a_pickled_memory_goes_on_as_the_original() -> None:
    messages = script(RAW)
    a = ConversationMemory(300, pin=("system", "last_user"), max_turns=4)
    for m in messages[:30]:
        a.add_message(m)
    b = pickle.loads(pickle.dumps(a))
    assert b.stats() == a.stats()
    assert b.messages() == a.messages()
    for m in messages[30:]:
        a.add_message(m)
        b.add_message(m)
        assert b.context() == a.context()
        assert b.context("anthropic") == a.context("anthropic")
    assert b.stats() == a.stats()
    assert a.stats().compactions > 0


def test_a_memory_over_a_durable_session_is_not_pickled(backend: Any) -> None:
    db = open_store(backend.fresh_url())
    mem = ConversationMemory(300, store=db.session("s", user_id="u"))
    mem.add("user", "hello")
    with pytest.raises(ConfigError, match="durable session"):
        pickle.dumps(mem)
    # what it says to do instead works
    again = ConversationMemory(300, store=db.session("s", user_id="u"))
    assert again.context() == mem.context()
