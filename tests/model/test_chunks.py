"""Tool-pair chunks: grouping, validation and repair, against brute-force oracles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import (
    STUB_RESULT,
    Chunk,
    ChunkBuilder,
    Message,
    PairProblem,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    check_pins,
    group_pairs,
    repair_pairs,
    resolve_pins,
    stub_result,
    validate_pairs,
)


def user(mid: str, text: str = "hi") -> Message:
    return Message(mid, "user", content=text)


def say(mid: str, text: str = "ok") -> Message:
    return Message(mid, "assistant", content=text)


def call(mid: str, *call_ids: str) -> Message:
    return Message(
        mid,
        "assistant",
        content=[ToolUseBlock(c, "tool", {"n": i}) for i, c in enumerate(call_ids)],
    )


def result(mid: str, *call_ids: str) -> Message:
    return Message(mid, "tool", content=[ToolResultBlock(c, f"result {c}") for c in call_ids])


def layout(chunks: Sequence[Chunk]) -> list[list[str]]:
    return [[m.id for m in c.messages] for c in chunks]


# -- group_pairs: worked examples --------------------------------------------------------


def test_plain_messages_are_singletons() -> None:
    ms = [user("u1"), say("a1"), user("u2")]
    chunks = group_pairs(ms)
    assert layout(chunks) == [["u1"], ["a1"], ["u2"]]
    assert [c.indices for c in chunks] == [[0], [1], [2]]
    assert not any(c.pending or c.orphan or c.pinned for c in chunks)


def test_parallel_calls_answered_in_any_order() -> None:
    ms = [
        user("u1"),
        call("a1", "c1", "c2", "c3"),
        result("t3", "c3"),
        result("t1", "c1"),
        result("t2", "c2"),
        say("a2"),
    ]
    chunks = group_pairs(ms)
    assert layout(chunks) == [["u1"], ["a1", "t3", "t1", "t2"], ["a2"]]
    exchange = chunks[1]
    assert exchange.indices == [1, 2, 3, 4]
    assert (exchange.start, exchange.stop, len(exchange)) == (1, 5, 4)
    assert not exchange.pending and not exchange.orphan


def test_results_in_one_message_anthropic_style() -> None:
    ms = [call("a1", "c1", "c2"), result("r", "c2", "c1"), user("u")]
    assert layout(group_pairs(ms)) == [["a1", "r"], ["u"]]


def test_interleaved_messages_join_the_exchange() -> None:
    ms = [call("a1", "c1"), user("u1"), say("a2"), result("t1", "c1"), user("u2")]
    assert layout(group_pairs(ms)) == [["a1", "u1", "a2", "t1"], ["u2"]]


def test_overlapping_exchanges_merge() -> None:
    ms = [call("a1", "c1"), call("a2", "c2"), result("t1", "c1"), user("u"), result("t2", "c2")]
    assert layout(group_pairs(ms)) == [["a1", "a2", "t1", "u", "t2"]]


def test_orphan_results_stay_alone() -> None:
    ms = [result("t0", "ghost"), call("a1", "c1"), result("tx", "nobody"), result("t1", "c1")]
    chunks = group_pairs(ms)
    assert layout(chunks) == [["t0"], ["a1", "t1"], ["tx"]]
    assert [c.orphan for c in chunks] == [True, False, True]
    assert [c.start for c in chunks] == [0, 1, 2]


def test_second_answer_to_a_call_is_an_orphan() -> None:
    ms = [call("a1", "c1"), result("t1", "c1"), result("t1b", "c1")]
    chunks = group_pairs(ms)
    assert layout(chunks) == [["a1", "t1"], ["t1b"]]
    assert chunks[1].orphan


def test_unanswered_calls_are_pending() -> None:
    ms = [call("a1", "c1", "c2"), result("t2", "c2"), user("u")]
    chunks = group_pairs(ms)
    assert layout(chunks) == [["a1", "t2"], ["u"]]
    assert chunks[0].pending == {"c1"}
    assert "pending=['c1']" in repr(chunks[0])


def test_pinned_index_pins_the_whole_chunk() -> None:
    ms = [user("u0"), call("a1", "c1"), user("u1"), result("t1", "c1"), user("u2")]
    chunks = group_pairs(ms, pinned_indices={2})
    assert layout(chunks) == [["u0"], ["a1", "u1", "t1"], ["u2"]]
    assert [c.pinned for c in chunks] == [False, True, False]
    assert "pinned" in repr(chunks[1])


def test_builder_sums_tokens_and_discards() -> None:
    b = ChunkBuilder()
    first = b.add(call("a1", "c1"), 0, tokens=10)
    b.add(user("u"), 1, tokens=5)
    joined = b.add(result("t1", "c1"), 2, tokens=7, pinned=True)
    assert joined is first
    assert (first.tokens, first.pinned, list(b.chunks)) == (22, True, [first])
    gone = b.add(call("a2", "c2"), 3, tokens=1)
    assert b.chunks.pop() is gone
    b.discard(gone)
    late = b.add(result("t2", "c2"), 4, tokens=2)
    assert late.orphan  # its call left the window: the result cannot rejoin it


# -- group_pairs against a brute-force oracle -------------------------------------------


@st.composite
def histories(draw: st.DrawFn, max_size: int = 14) -> list[Message]:
    """Random histories with unique call ids: calls, results (some orphaned, some repeated,
    some answering several calls at once), and unrelated messages in between."""
    out: list[Message] = []
    issued: list[str] = []
    n = draw(st.integers(0, max_size))
    for i in range(n):
        kind = draw(st.sampled_from(["user", "say", "call", "result", "result", "multi"]))
        mid = f"m{i}"
        if kind == "user":
            out.append(user(mid))
        elif kind == "say":
            out.append(say(mid))
        elif kind == "call":
            k = draw(st.integers(1, 3))
            ids = [f"c{len(issued) + j}" for j in range(k)]
            issued.extend(ids)
            text = [TextBlock("thinking")] if draw(st.booleans()) else []
            out.append(
                Message(mid, "assistant", content=[*text, *(ToolUseBlock(c, "f") for c in ids)])
            )
        else:
            pool = [*issued, "ghost"]
            k = 1 if kind == "result" else draw(st.integers(1, 3))
            ids = [draw(st.sampled_from(pool)) for _ in range(k)]
            text = [TextBlock("also this")] if kind == "multi" and draw(st.booleans()) else []
            out.append(
                Message(
                    mid,
                    "tool" if not text else "user",
                    content=[*(ToolResultBlock(c, "r") for c in ids), *text],
                )
            )
    return out


def oracle_chunks(ms: Sequence[Message], pinned: set[int]) -> list[dict[str, Any]]:
    """Chunks by union-find: a result joins everything from its call up to itself."""
    n = len(ms)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    open_calls: dict[str, int] = {}
    orphan = [False] * n
    for i, m in enumerate(ms):
        rids = m.tool_result_ids()
        if rids:
            matched = [r for r in dict.fromkeys(rids) if r in open_calls]
            if not matched:
                orphan[i] = True
                continue
            lo = min(open_calls[r] for r in matched)
            for j in range(lo, i):
                if not orphan[j]:
                    parent[find(j)] = find(i)
            for r in matched:
                del open_calls[r]
        for c in m.tool_use_ids():
            open_calls[c] = i
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    out = []
    for idx in sorted(groups.values()):
        calls = {c for i in idx for c in ms[i].tool_use_ids()}
        answered = {r for i in idx for r in ms[i].tool_result_ids()}
        out.append(
            {
                "indices": idx,
                "orphan": orphan[idx[0]],
                "pending": calls - answered,
                "pinned": any(i in pinned for i in idx),
            }
        )
    return out


@settings(max_examples=300, deadline=None)
@given(histories(), st.sets(st.integers(0, 13), max_size=3))
def test_group_pairs_matches_oracle(ms: list[Message], pinned: set[int]) -> None:
    chunks = group_pairs(ms, pinned)
    got = [
        {"indices": c.indices, "orphan": c.orphan, "pending": c.pending, "pinned": c.pinned}
        for c in chunks
    ]
    assert got == oracle_chunks(ms, pinned)
    for c in chunks:
        for a, i in zip(c.messages, c.indices, strict=True):
            if a is not ms[i]:  # a copy without stray results (answering no open call)
                assert not c.orphan and a.id == ms[i].id
                assert a.tool_result_ids() == list(dict.fromkeys(a.tool_result_ids()))
                assert set(a.tool_result_ids()) < set(ms[i].tool_result_ids()) or len(
                    a.tool_result_ids()
                ) < len(ms[i].tool_result_ids())
        assert validate_pairs(c.messages) == [] or c.orphan or c.pending
    assert sorted(i for c in chunks for i in c.indices) == list(range(len(ms)))


# -- validate_pairs ----------------------------------------------------------------------


def oracle_problems(ms: Sequence[Message]) -> list[tuple[str, int, str]]:
    """Quadratic re-statement: each result needs an unanswered earlier call, and each call
    needs a later result."""
    problems = []
    answered: set[tuple[int, str]] = set()
    for i, m in enumerate(ms):
        for r in m.tool_result_ids():
            calls = [j for j in range(i) if r in ms[j].tool_use_ids() and (j, r) not in answered]
            if calls:
                answered.add((calls[-1], r))
            else:
                problems.append(("orphan_result", i, r))
    for j, m in enumerate(ms):
        for c in m.tool_use_ids():
            if (j, c) not in answered:
                problems.append(("missing_result", j, c))
    return sorted(problems, key=lambda p: p[1])


def test_validate_pairs_examples() -> None:
    assert validate_pairs([]) == []
    assert validate_pairs([call("a", "c1"), result("t", "c1")]) == []
    problems = validate_pairs([result("t0", "x"), call("a", "c1", "c2"), result("t", "c2")])
    assert problems == [
        PairProblem("orphan_result", 0, "x"),
        PairProblem("missing_result", 1, "c1"),
    ]
    assert str(problems[0]) == "message 0 answers tool call 'x', made nowhere before"
    assert str(problems[1]) == "message 1 calls tool 'c1', which no result answers"


def test_result_before_its_call_is_an_orphan() -> None:
    problems = validate_pairs([result("t", "c1"), call("a", "c1")])
    assert [(p.kind, p.index) for p in problems] == [("orphan_result", 0), ("missing_result", 1)]


@settings(max_examples=300, deadline=None)
@given(histories())
def test_validate_pairs_matches_oracle(ms: list[Message]) -> None:
    got = [(p.kind, p.index, p.tool_use_id) for p in validate_pairs(ms)]
    assert sorted(got) == sorted(oracle_problems(ms))
    assert [p[1] for p in got] == sorted(p[1] for p in got)


# -- repair_pairs ------------------------------------------------------------------------


def test_repair_valid_history_is_identity() -> None:
    ms = [user("u"), call("a", "c1", "c2"), result("t2", "c2"), result("t1", "c1"), say("s")]
    for mode in ("drop", "stub"):
        out = repair_pairs(ms, dangling=mode)  # type: ignore[arg-type]
        assert all(a is b for a, b in zip(out, ms, strict=True))


def test_repair_drop() -> None:
    ms = [
        result("t0", "ghost"),
        user("u"),
        call("a1", "c1", "c2"),
        result("t1", "c1"),
        say("s"),
        call("a2", "c3"),
        result("t3", "c3"),
    ]
    out = repair_pairs(ms)
    assert [m.id for m in out] == ["u", "s", "a2", "t3"]
    assert validate_pairs(out) == []


def test_repair_stub() -> None:
    ms = [user("u"), call("a1", "c1", "c2"), result("t1", "c1"), say("s"), result("tx", "gh")]
    out = repair_pairs(ms, dangling="stub")
    assert [m.id for m in out[:3]] == ["u", "a1", "t1"]
    stub = out[3]
    assert stub.role == "tool"
    assert stub.content == (ToolResultBlock("c2", STUB_RESULT, is_error=True),)
    assert stub.metadata == {"convomem_stub": True}
    assert [m.id for m in out[4:]] == ["s"]
    assert validate_pairs(out) == []


def test_stub_result_is_deterministic() -> None:
    assert stub_result("c9").id == stub_result("c9").id
    assert stub_result("c9").id != stub_result("c8").id
    assert stub_result("c9").tool_result_ids() == ["c9"]


def test_repair_strips_stray_results_from_a_kept_message() -> None:
    answered = Message(
        "r",
        "user",
        content=[
            ToolResultBlock("c1", "ok"),
            ToolResultBlock("ghost", "??"),
            ToolResultBlock("c1", "again"),
            TextBlock("and thanks"),
        ],
    )
    ms = [call("a", "c1"), answered]
    for mode in ("drop", "stub"):
        out = repair_pairs(ms, dangling=mode)  # type: ignore[arg-type]
        assert validate_pairs(out) == []
        assert [m.id for m in out] == ["a", "r"]
        assert out[1].content == (ToolResultBlock("c1", "ok"), TextBlock("and thanks"))
        assert ms[1] is answered and len(answered.content) == 4  # the input is untouched


def test_repair_rejects_unknown_mode() -> None:
    with pytest.raises(ConfigError, match="dangling='keep'"):
        repair_pairs([user("u")], dangling="keep")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(histories(), st.sampled_from(["drop", "stub"]))
def test_repair_always_validates_and_preserves_order(ms: list[Message], mode: Any) -> None:
    out = repair_pairs(ms, dangling=mode)
    assert validate_pairs(out) == []
    position = {m.id: i for i, m in enumerate(ms)}
    kept = [m for m in out if not m.metadata.get("convomem_stub")]
    assert [position[m.id] for m in kept] == sorted(position[m.id] for m in kept)
    # exactly the messages of complete, non-orphan chunks are kept (drop) ...
    oracle = oracle_chunks(ms, set())
    if mode == "drop":
        expect = [i for c in oracle if not c["orphan"] and not c["pending"] for i in c["indices"]]
    else:  # ... and with stubs, also those of unanswered exchanges
        expect = [i for c in oracle if not c["orphan"] for i in c["indices"]]
        stubs = [m for m in out if m.metadata.get("convomem_stub")]
        missing = {p.tool_use_id for p in validate_pairs(ms) if p.kind == "missing_result"}
        assert sorted(r for s in stubs for r in s.tool_result_ids()) == sorted(missing)
    assert [position[m.id] for m in kept] == sorted(expect)
    for m in kept:  # unchanged messages are the original objects
        original = ms[position[m.id]]
        assert m is original or (m.has_tool_result() and m.content != original.content)


# -- pins --------------------------------------------------------------------------------


def test_resolve_pins() -> None:
    ms = [
        Message("s", "system", content="sys"),
        user("u1"),
        say("a1"),
        user("u2"),
        result("t", "c"),
        Message("p", "assistant", content="important", priority=2),
    ]
    assert resolve_pins(ms, ()) == {5}  # priority 2 is always pinned
    assert resolve_pins(ms, ["system"]) == {0, 5}
    assert resolve_pins(ms, ["first_user", "last_user"]) == {1, 3, 5}
    assert resolve_pins(ms, ["tool_results"]) == {4, 5}
    assert resolve_pins(ms, [0, -1, 99, -99]) == {0, 5}
    assert resolve_pins([], ["last_user", 0]) == set()
    assert resolve_pins(ms, "system") == {0, 5}


@pytest.mark.parametrize("bad", ["everything", True, None, 1.5])
def test_check_pins_rejects_bad_specs(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        check_pins([bad])
    assert f"pin={bad!r}" in str(info.value)


@pytest.mark.parametrize("bad", [1.5, object, "everything"])
def test_check_pins_rejects_a_bare_bad_spec(bad: Any) -> None:
    with pytest.raises(ConfigError, match="unknown pin spec"):
        check_pins(bad)


def test_check_pins_accepts_bare_specs() -> None:
    assert check_pins(None) == ()
    assert check_pins("system") == ("system",)
    assert check_pins(-1) == (-1,)
    assert check_pins(("system", 2)) == ("system", 2)


# -- a call repeating the id of a call still open ---------------------------------------


def test_a_message_of_nothing_but_repeated_calls_is_an_orphan() -> None:
    ms = [call("a1", "c1"), call("a2", "c1"), result("t1", "c1")]
    chunks = group_pairs(ms)
    assert layout(chunks) == [["a1", "t1"], ["a2"]]
    assert chunks[1].orphan and not chunks[0].pending
    assert validate_pairs(ms) == [PairProblem("repeated_call", 1, "c1")]
    assert str(validate_pairs(ms)[0]) == (
        "message 1 calls tool 'c1' again, while that call is still unanswered"
    )
    assert [m.id for m in repair_pairs(ms)] == ["a1", "t1"]


def test_a_repeated_call_is_left_out_of_a_copy_that_keeps_the_rest() -> None:
    again = Message(
        "a2",
        "assistant",
        content=[TextBlock("retrying"), ToolUseBlock("c1", "f"), ToolUseBlock("c2", "f")],
    )
    ms = [call("a1", "c1"), again, result("t1", "c1"), result("t2", "c2")]
    (chunk,) = group_pairs(ms)
    copy = chunk.messages[1]
    assert copy is not again and copy.id == "a2"
    assert copy.tool_use_ids() == ["c2"] and copy.text() == "retrying"
    assert validate_pairs(chunk.messages) == []
    assert validate_pairs(repair_pairs(ms)) == []


def test_a_call_id_reused_after_its_answer_is_a_new_exchange() -> None:
    ms = [call("a1", "c1"), result("t1", "c1"), call("a2", "c1"), result("t2", "c1")]
    assert layout(group_pairs(ms)) == [["a1", "t1"], ["a2", "t2"]]
    assert validate_pairs(ms) == []
