"""A resume reads O(view) rows: a 100,000-message session reopens by reading its state
and the rows of its view, calls no summarizer and no tokenizer, and returns the context
the previous process returned. The first open of a session without state (written by
plain appends) replays it once and saves the state."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convomem import ConversationMemory, open_store
from convomem.model import Message
from convomem.tokens.builtin import ApproxTokenizer

N = 100_000


class Calls:
    """A trivial summarizer that counts its calls."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, messages: Any, previous: Any = None) -> str:
        self.n += 1
        return f"{len(messages)} earlier messages about orders"


@pytest.fixture
def shm() -> Iterator[Path]:
    base = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(dir=base if base.is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def memory(store: Any, summarizer: Calls, tokenizer: ApproxTokenizer) -> ConversationMemory:
    return ConversationMemory(
        2000, store=store, summarizer=summarizer, facts=False, tokenizer=tokenizer
    )


def test_reopening_a_100k_session_reads_its_view_not_its_log(shm: Path) -> None:
    url = f"sqlite:///{shm}/big.db"
    db = open_store(url)
    store = db.session("big", user_id="u")
    tok = ApproxTokenizer()
    for start in range(1, N + 1, 5000):
        batch = [
            Message(f"m{i}", "user" if i % 2 else "assistant", content=f"order {i % 977} is late")
            for i in range(start, start + 5000)
        ]
        store.append(batch, counts={m.id: {tok.name: tok.count_message(m)} for m in batch})
    assert store.load_state() == (None, 0)
    # The first open replays the log once (it has no state) and saves the state.
    first = memory(store, Calls(), tok)
    want = (first.context(), first.context("anthropic"))
    state, version = store.load_state()
    assert state is not None and version == 1
    view = first.stats().view_messages
    db.close()

    again = open_store(url)
    fresh_tok, calls = ApproxTokenizer(), Calls()
    resumed = memory(again.session("big", user_id="u"), calls, fresh_tok)
    assert (resumed.context(), resumed.context("anthropic")) == want
    read = again.stats().rows_read
    assert read <= view + 8, (read, view)
    assert calls.n == 0 and fresh_tok.tokenizations == 0
    assert resumed.stats().log_messages == N
    # and it goes on: one more message is one more row written, no log read
    resumed.add("user", "and order 12?")
    assert again.stats().rows_read <= read + 2
    again.close()
