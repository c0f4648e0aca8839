"""A durable memory under store faults and damaged state.

- An append that fails (``TransientError`` before the store is touched, or after it
  committed: the reply lost) leaves the memory as if the add never happened, or as if
  it succeeded: a retry of the same add then gives exactly the contexts of a run
  without faults, and nothing is logged twice.
- A saved state that cannot be read (garbage, another format, a foreign configuration)
  is never fatal: the session replays its log and saves a good state.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from convomem import ConversationMemory, open_store
from convomem.errors import TransientError
from session.test_resume import script

RAW = [("user", 9, 0), ("call", 4, 1), ("assistant", 20, 0), ("call", 3, 0), ("user", 7, 2)]
RAW += [("answer", 5, 0), ("assistant", 25, 1), ("user", 12, 0)] * 8


class Flaky:
    """A session store whose appends fail at random, before or after the write."""

    def __init__(self, inner: Any, seed: int) -> None:
        self._inner = inner
        self._rng = random.Random(seed)
        self.fired = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def append(self, *args: Any, **kwargs: Any) -> int:
        roll = self._rng.random()
        if roll < 0.15:
            self.fired += 1
            raise TransientError("append: connection reset before the write")
        seq = int(self._inner.append(*args, **kwargs))
        if roll < 0.3:
            self.fired += 1
            raise TransientError("append: connection reset after the commit")
        return seq


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_failed_appends_retried_give_the_run_without_faults(backend: Any, seed: int) -> None:
    messages = script(RAW)
    clean = ConversationMemory(300, store=open_store(backend.fresh_url()).session("s"))
    flaky = Flaky(open_store(backend.fresh_url()).session("s"), seed)
    mem = ConversationMemory(300, store=flaky)
    for m in messages:
        clean.add_message(m)
        for _ in range(20):
            try:
                mem.add_message(m)
                break
            except TransientError:
                continue
        assert mem.context() == clean.context()
        assert mem.context("anthropic") == clean.context("anthropic")
    assert flaky.fired > 5
    assert [x.id for x in mem.messages()] == [x.id for x in messages]
    again = ConversationMemory(300, store=flaky._inner)
    assert again.context() == clean.context()


@pytest.mark.parametrize(
    "damage",
    [
        {"format": "convomem.session", "version": 1, "summary": "{not json", "view": "[]"},
        {"format": "something else"},
        "config",
    ],
)
def test_a_state_that_cannot_be_used_means_one_replay(backend: Any, damage: Any) -> None:
    url = backend.fresh_url()
    db = open_store(url)
    store = db.session("s", user_id="u")
    live = ConversationMemory(300, store=store)
    for i in range(40):
        live.add("user" if i % 2 == 0 else "assistant", f"turn {i} about the parcel")
    state, version = store.load_state()
    assert state is not None
    if damage == "config":
        damage = {**state, "config": {**state["config"], "budget": 301}}
    store.save_state(damage, expected_version=version)
    resumed = ConversationMemory(300, store=store)
    assert resumed.context() == live.context()  # replayed from the log
    saved, now = store.load_state()  # and a good state is back (made anew), of the whole log
    assert now == version + 2 and saved is not None
    assert saved["upto"] == store.last_seq() >= state["upto"]
    again = ConversationMemory(300, store=store)  # and it resumes the same view
    assert again.context() == live.context() and again.stats().summarizer_calls == 0
    texts = [[g["text"] for g in json.loads(x["summary"])["segments"]] for x in (saved, state)]
    assert texts[0] == texts[1]
