"""RunningSummary.snapshot() / restore(): the content as a value, taken over without a
summarizer call; Coverage: covered ids decoded lazily and encoded incrementally."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.summaries import RunningSummary, Summary
from convomem.summaries.snapshot import Coverage, SummarySnapshot, encode_ids


def turns(start: int, n: int) -> list[Message]:
    return [
        Message(f"m{i}", "user" if i % 2 == 0 else "assistant", content=f"My order {i} ships.")
        for i in range(start, start + n)
    ]


class Echo:
    """Deterministic: the ids it was given."""

    name = "echo"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        self.calls += 1
        return "echo " + " ".join(m.id for m in messages)[:120]


def seen(rs: RunningSummary) -> tuple[object, ...]:
    """What a summary shows (creation times aside: a fold stamps the clock)."""
    timeless = [replace(s, created_at=0.0) for s in (*rs.segments, rs.current()) if s]
    message = rs.message()
    return message and message.content, list(rs.covered_ids), rs.ledger.entries(), timeless


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=8), st.integers(0, 7))
def test_a_restored_summary_renders_and_folds_as_the_original(batches: list[int], cut: int) -> None:
    """Restore after any prefix of folds; the rest of the folds give both the same state."""
    original, echo = RunningSummary(Echo(), reserve=200), Echo()
    start = 0
    copy: RunningSummary | None = None
    for k, n in enumerate(batches):
        if k == min(cut, len(batches) - 1):
            copy = RunningSummary(echo, reserve=200)
            copy.restore(original.snapshot())
            assert seen(copy) == seen(original) and echo.calls == 0
        for rs in (original, copy):
            if rs is not None:
                rs.fold(turns(start, n))
        start += n
    assert copy is not None and seen(copy) == seen(original)


def test_restore_refuses_what_is_not_a_snapshot_and_changes_nothing() -> None:
    rs = RunningSummary(Echo(), reserve=200)
    rs.fold(turns(0, 4))
    before = seen(rs)
    snap = rs.snapshot()
    other = RunningSummary(Echo(), reserve=200)
    with pytest.raises(ConfigError, match="must be a SummarySnapshot"):
        rs.restore(rs.state())  # type: ignore[arg-type]
    twice = SummarySnapshot(snap.segments * 2, snap.seq, other.ledger, Coverage())
    with pytest.raises(ConfigError, match="segments"):
        rs.restore(twice)
    past = SummarySnapshot(snap.segments, 0, other.ledger, Coverage())
    with pytest.raises(ConfigError, match="seq=0"):
        rs.restore(past)
    assert seen(rs) == before


def test_a_lazy_coverage_decodes_on_first_use_and_saves_as_loaded() -> None:
    ids = [f"m{i}" for i in range(1000)] + ["odd"]
    raw = encode_ids(ids)
    lazy = Coverage.loaded(raw, lazy=True)
    assert lazy.encode() == raw  # saved untouched, nothing decoded
    assert "m999" in lazy and len(lazy) == 1001 and list(lazy.keys()) == ids
    lazy.add(["m1000"])
    assert lazy.encode() == encode_ids([*ids, "m1000"])
