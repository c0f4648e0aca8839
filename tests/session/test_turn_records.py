"""Turn records: what a reply's sender recorded, read back as per-turn rows.

The prefix estimate is checked against the summary's identity at each turn (the previous
context while it is unchanged, the system prompt after a compaction); usage of both
providers' shapes is normalized; costs come from the record or from a price; bad input
is a ``ConfigError`` naming it.
"""

from __future__ import annotations

import pytest

from convomem.errors import ConfigError
from convomem.session import ConversationMemory
from convomem.session.turn_records import TURN_KEY, cost_of, record_turn, turn_rows
from convomem.views.budget import REPLY_PRIMING_TOKENS

TEXT = "the parcel was delayed again and we talked about shipping options while support"


def words(seed: int, n: int) -> str:
    w = TEXT.split(" ")
    return " ".join(w[(seed * 5 + k * 3) % len(w)] for k in range(n))


def test_turn_records_prefix_and_cost() -> None:
    """Recorded turns: the previous context is the prefix until a compaction; the
    provider's cache hits win when reported; cost from the price."""
    mem = ConversationMemory(400)
    mem.add("system", "You are terse.", id="sys")
    seen_summaries = []
    for i in range(20):
        mem.add("user", words(i, 14), id=f"u{i}")
        mem.context()
        usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}
        rec = record_turn(mem, usage=usage if i == 0 else None)
        seen_summaries.append(rec["summary_id"])
        mem.add("assistant", words(i + 1, 6), id=f"a{i}", metadata={TURN_KEY: rec})
    rows = turn_rows(mem.messages(), {"input": 1.0, "cached_input": 0.1, "output": 2.0})
    assert [r.message_id for r in rows] == [f"a{i}" for i in range(20)]
    assert rows[0].cached_tokens == 90 and rows[0].completion_tokens == 5
    assert rows[0].cost == pytest.approx((10 * 1.0 + 90 * 0.1 + 5 * 2.0) / 1e6)
    head = mem.view.head_tokens
    for k in range(1, 20):
        if seen_summaries[k] == seen_summaries[k - 1]:
            want = rows[k - 1].context_tokens - REPLY_PRIMING_TOKENS
            assert rows[k].prefix_tokens == want
        else:
            assert rows[k].prefix_tokens == head
    assert len(set(seen_summaries)) > 1  # the run compacted: both branches were taken
    with pytest.raises(ConfigError, match="usage="):
        record_turn(mem, usage=[1, 2])  # type: ignore[arg-type]


def test_usage_shapes_and_recorded_cost() -> None:
    mem = ConversationMemory(400)
    mem.add("user", "hello there", id="u0")
    mem.context()
    openai = {"prompt_tokens": 120, "completion_tokens": 8}
    openai["prompt_tokens_details"] = {"cached_tokens": 100}  # type: ignore[assignment]
    rec = record_turn(mem, usage=openai, price={"input": 3.0, "cached_input": 0.3, "output": 15})
    assert rec["prompt_tokens"] == 120 and rec["cached_tokens"] == 100
    assert rec["cost"] == pytest.approx((20 * 3.0 + 100 * 0.3 + 8 * 15) / 1e6)
    bare = record_turn(mem, price={"input": 1.0})  # no usage: the context's own tokens
    assert bare["cost"] == pytest.approx(mem.stats().context_tokens / 1e6)
    assert "cached_tokens" not in bare and "cost" not in record_turn(mem)
    mem.add("assistant", "hi", id="a0", metadata={TURN_KEY: rec})
    [row] = turn_rows(mem.messages(), {"input": 99.0})  # the recorded cost wins
    assert row.cost == rec["cost"] and row.cached_tokens == 100
    assert cost_of(10, 50, 0, {"input": 1.0}) == pytest.approx(10 / 1e6)  # cached <= prompt


@pytest.mark.parametrize(
    ("price", "match"),
    [
        ({"inptu": 1.0}, "price\\['inptu'\\]: unknown"),
        ({"input": -1}, "price\\['input'\\]=-1"),
        ({"output": True}, "price\\['output'\\]=True"),
        ([1.0], "price=\\[1.0\\]"),
    ],
)
def test_bad_price_is_named(price: object, match: str) -> None:
    from convomem.session.timeline import timeline

    mem = ConversationMemory(400)
    mem.add("user", "hello", id="u0")
    with pytest.raises(ConfigError, match=match):
        record_turn(mem, price=price)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=match):
        timeline(mem, price=price)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="limit=-1"):
        timeline(mem, limit=-1)
