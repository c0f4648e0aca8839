"""The incremental window: the seed, a brute-force oracle, pins, tool pairs, hysteresis."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, ConvomemError, InvalidMessage, NotAMessage, TokenizerError
from convomem.model import (
    Chunk,
    Message,
    PinSpec,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    group_pairs,
    opens_exchange,
    resolve_pins,
    starts_turn,
)
from convomem.tokens import ApproxTokenizer
from convomem.views.window import History, longest_fitting_run

# -- helpers -----------------------------------------------------------------------------


def call(id: str, tokens: int, *call_ids: str) -> Message:
    blocks = [ToolUseBlock(c, "lookup", {"q": c}) for c in call_ids]
    return Message(id, "assistant", tokens, content=blocks)


def result(id: str, tokens: int, *call_ids: str, role: str = "tool") -> Message:
    blocks = [ToolResultBlock(c, f"result of {c}") for c in call_ids]
    return Message(id, role, tokens, content=blocks)


def state(h: History) -> tuple[Any, ...]:
    return (h.messages(), h.total(), h.over_limit(), len(h))


class Oracle:
    """The window recomputed from scratch after every add, straight from the definition.

    Pins are resolved over every message added so far, the candidate window (what was
    kept plus the new message) is regrouped into chunks, an orphan newcomer is dropped,
    and, when the total passes the limit, the oldest chunks that are neither pinned nor
    part of the current turn (the chunk holding the newest turn start; the exchanges
    started after the turn of the newest call, while they await a result or are the
    newest chunk) go until the total is at most the target (the limit when there is
    none).
    """

    def __init__(
        self,
        limit: int,
        pin: tuple[PinSpec, ...] = (),
        keep_tool_pairs: bool = True,
        target: int | None = None,
    ) -> None:
        self.limit = limit
        self.cut = limit if target is None else target
        self.pin = pin
        self.pairs = keep_tool_pairs
        self.added: list[Message] = []
        self.kept: list[int] = []  # positions in self.added
        self.episode = -1  # the newest turn start before the newest call kept

    def add(self, m: Message) -> list[str]:
        self.added.append(m)
        pos = len(self.added) - 1
        pinned = resolve_pins(self.added, self.pin)
        cand = [*self.kept, pos]
        msgs = [self.added[i] for i in cand]
        local_pins = [j for j, i in enumerate(cand) if i in pinned]
        if self.pairs:
            chunks = group_pairs(msgs, local_pins)
        else:
            chunks = [Chunk([x], [j], j in local_pins, 0) for j, x in enumerate(msgs)]
        orphan: list[str] = []
        if chunks and chunks[-1].orphan:
            assert chunks[-1].indices == [len(cand) - 1]
            orphan = [m.id]
            chunks.pop()
        assert not any(c.orphan for c in chunks)
        total = sum(x.tokens or 0 for c in chunks for x in c.messages)
        turn = max((i for i in [*self.kept, pos] if starts_turn(self.added[i])), default=-1)
        current = [c for c in chunks if cand.index(turn) in c.indices] if turn >= 0 else []
        if not orphan and m.has_tool_use():
            pairs = [(x, j) for c in chunks for x, j in zip(c.messages, c.indices, strict=True)]
            (held,) = [x for x, j in pairs if j == len(cand) - 1]
            if held.has_tool_use():  # a call (not only repeats of open ones): an episode
                starts = [i for i in range(pos) if starts_turn(self.added[i])]
                self.episode = starts[-1] if starts else -1
        current += [
            c
            for c in chunks
            if opens_exchange(c.messages[0])
            and cand[c.indices[0]] > self.episode
            and (c.pending or c is chunks[-1])
        ]
        dropped: list[str] = []
        keep: list[Chunk] = []
        over = total > self.limit
        for c in chunks:
            if over and total > self.cut and not c.pinned and not any(c is k for k in current):
                total -= sum(x.tokens or 0 for x in c.messages)
                dropped.extend(x.id for x in c.messages)
            else:
                keep.append(c)
        self.kept = [cand[j] for c in keep for j in c.indices]
        self.total = total
        return dropped + orphan

    def messages(self) -> list[str]:
        return [self.added[i].id for i in self.kept]


@st.composite
def conversations(draw: st.DrawFn, tools: bool = True, max_size: int = 40) -> list[Message]:
    """Messages with plain turns and, optionally, tool calls, results, orphans, repeats."""
    kinds = ["user", "assistant", "system", "tool"]
    if tools:
        kinds += ["call", "call", "result", "result", "multi", "bogus", "user_result", "both"]
    n = draw(st.integers(0, max_size))
    out: list[Message] = []
    calls: list[str] = []
    for i in range(n):
        kind = draw(st.sampled_from(kinds))
        tokens = draw(st.integers(0, 3) | st.integers(0, 60))  # small ones make ties, zeros
        priority = draw(st.sampled_from((0, 0, 0, 0, 0, 1, 2)))
        mid = f"m{i}"
        if kind in ("result", "multi", "user_result", "both") and not calls:
            kind = "bogus"
        if kind == "call":
            new = [f"c{i}_{j}" for j in range(draw(st.integers(1, 2)))]
            calls += new
            blocks: list[Any] = [ToolUseBlock(c, "f") for c in new]
            m = Message(mid, "assistant", tokens, content=blocks, priority=priority)
        elif kind in ("result", "user_result"):
            # Anthropic-style results come in user messages; a system one is odd but legal.
            role = draw(st.sampled_from(("tool", "tool", "system"))) if kind == "result" else "user"
            c = draw(st.sampled_from(calls))
            blocks = [ToolResultBlock(c, "ok")]
            m = Message(mid, role, tokens, content=blocks, priority=priority)
        elif kind == "multi":
            cs = draw(st.lists(st.sampled_from(calls), min_size=2, max_size=3))
            blocks = [ToolResultBlock(c, "ok") for c in cs]
            m = Message(mid, "tool", tokens, content=blocks, priority=priority)
        elif kind == "both":
            c = draw(st.sampled_from(calls))
            new_call = f"c{i}_0"
            calls.append(new_call)
            blocks = [ToolResultBlock(c, "ok"), ToolUseBlock(new_call, "g")]
            m = Message(mid, "assistant", tokens, content=blocks, priority=priority)
        elif kind == "bogus":
            blocks = [ToolResultBlock(f"nowhere{i}", "?")]
            m = Message(mid, "tool", tokens, content=blocks, priority=priority)
        elif draw(st.booleans()):
            m = Message(mid, kind, tokens, priority=priority)
        else:  # the same plain turn, as blocks
            m = Message(mid, kind, tokens, content=[TextBlock("hi")], priority=priority)
        out.append(m)
    return out


pin_specs = st.lists(
    st.sampled_from(["system", "first_user", "last_user", "tool_results", 0, 1, 3, -1, -2, -3, -5]),
    max_size=4,
).map(tuple)
limits = st.integers(1, 150)


def check_against_oracle(
    msgs: list[Message],
    limit: int,
    pin: tuple[PinSpec, ...],
    pairs: bool,
    target_frac: float | None,
) -> None:
    target = None if target_frac is None else int(limit * target_frac)
    h = History(limit, pin=pin, keep_tool_pairs=pairs, target=target)
    o = Oracle(limit, pin, pairs, target)
    seen: list[str] = []
    for m in msgs:
        got = h.add(m)
        assert got == o.add(m), m
        assert h.messages() == o.messages()
        assert h.total() == o.total
        assert h.over_limit() == (o.total > limit)
        assert len(h) == len(o.kept)
        seen.extend(got)
    # No silent loss: every message is kept or was dropped, exactly once, in order.
    assert sorted(seen + h.messages(), key=lambda i: int(i[1:])) == [m.id for m in msgs]


targets = st.none() | st.floats(0, 1)


@settings(max_examples=100, deadline=None)
@given(conversations(tools=False), limits, targets)
def test_plain_matches_oracle(msgs: list[Message], limit: int, frac: float | None) -> None:
    check_against_oracle(msgs, limit, (), True, frac)


@settings(max_examples=150, deadline=None)
@given(conversations(tools=False), limits, pin_specs, targets)
def test_pins_match_oracle(
    msgs: list[Message], limit: int, pin: tuple[PinSpec, ...], frac: float | None
) -> None:
    check_against_oracle(msgs, limit, pin, True, frac)


@settings(max_examples=150, deadline=None)
@given(conversations(), limits, targets)
def test_tool_pairs_match_oracle(msgs: list[Message], limit: int, frac: float | None) -> None:
    check_against_oracle(msgs, limit, (), True, frac)


@settings(max_examples=250, deadline=None)
@given(conversations(), limits, pin_specs, targets)
def test_everything_matches_oracle(
    msgs: list[Message], limit: int, pin: tuple[PinSpec, ...], frac: float | None
) -> None:
    check_against_oracle(msgs, limit, pin, True, frac)


@settings(max_examples=150, deadline=None)
@given(conversations(), limits, pin_specs, targets)
def test_without_tool_pairs_matches_oracle(
    msgs: list[Message], limit: int, pin: tuple[PinSpec, ...], frac: float | None
) -> None:
    check_against_oracle(msgs, limit, pin, False, frac)


@settings(max_examples=40, deadline=None)
@given(conversations(max_size=120), st.integers(40, 300), pin_specs, targets)
def test_long_conversations_match_oracle(
    msgs: list[Message], limit: int, pin: tuple[PinSpec, ...], frac: float | None
) -> None:
    check_against_oracle(msgs, limit, pin, True, frac)


# -- the seed and plain behaviour -----------------------------------------------------


def test_seed_example() -> None:
    h = History(100)
    assert h.add(Message("s", "system", 20)) == []
    assert h.add(Message("u1", "user", 30)) == []
    assert h.add(Message("a1", "assistant", 40)) == []
    assert h.add(Message("u2", "user", 25)) == ["s"]
    assert h.messages() == ["u1", "a1", "u2"]
    # Bigger than the limit on its own: it goes, and so does everything but the current
    # turn (the newest user message), which the window never drops.
    assert h.add(Message("t1", "tool", 120)) == ["u1", "a1", "t1"]
    assert h.messages() == ["u2"] and h.total() == 25 and len(h) == 1


def test_seed_example_exactly_without_the_turn() -> None:
    """``keep_turn=False, result_limit=None`` is the seed's window exactly: a message
    bigger than the limit on its own leaves it empty."""
    h = History(100, keep_turn=False, result_limit=None)
    assert not h.keep_turn
    assert h.add(Message("s", "system", 20)) == []
    assert h.add(Message("u1", "user", 30)) == []
    assert h.add(Message("a1", "assistant", 40)) == []
    assert h.add(Message("u2", "user", 25)) == ["s"]
    assert h.messages() == ["u1", "a1", "u2"]
    assert h.add(Message("t1", "tool", 120)) == ["u1", "a1", "u2", "t1"]
    assert h.messages() == [] and h.total() == 0 and not h.over_limit()


def test_total_equal_to_limit_fits() -> None:
    h = History(50)
    assert h.add(Message("a", "user", 20)) == []
    assert h.add(Message("b", "assistant", 30)) == []
    assert h.total() == 50 and h.messages() == ["a", "b"] and not h.over_limit()


def test_reading_api() -> None:
    h = History(100, target=60)
    a, b = Message("a", "user", 10), Message("b", "assistant", 20)
    assert h.add_many([a, b]) == []
    assert h.kept() == [a, b] and len(h) == 2 and "a" in h and "z" not in h
    assert (h.limit, h.target, h.keep_tool_pairs, h.tokenizer.name) == (100, 60, True, "given")
    assert "limit=100" in repr(h) and "total=30" in repr(h)


def test_target_compacts_only_past_the_limit_and_cuts_to_target() -> None:
    h = History(100, target=50)
    for i in range(5):
        assert h.add(Message(f"m{i}", "user", 20)) == []  # 100: fits, no compaction
    assert h.add(Message("m5", "user", 20)) == ["m0", "m1", "m2", "m3"]  # 120 -> 40
    assert h.messages() == ["m4", "m5"] and h.total() == 40
    for i in range(6, 9):
        assert h.add(Message(f"m{i}", "user", 20)) == []  # the kept prefix stays stable
    assert h.messages()[:2] == ["m4", "m5"]


def test_target_zero_empties_all_but_the_current_turn_on_compaction() -> None:
    h = History(10, target=0)
    h.add(Message("a", "user", 6))
    assert h.add(Message("b", "user", 6)) == ["a"]  # b is the current turn
    assert h.add(Message("c", "assistant", 6)) == ["c"]
    assert h.messages() == ["b"] and h.total() == 6


def test_words_tokenizer_counts_content() -> None:
    h = History(12, tokenizer="words")
    assert h.add(Message("a", "user", content="one two three")) == []  # 3 + 4
    assert h.total() == 7
    assert h.add(Message("b", "user", content="four five")) == ["a"]  # 7 + 6 > 12


def test_function_tokenizer_and_given_counts_trusted() -> None:
    h = History(100, tokenizer=len)
    h.add(Message("a", "user", content="x" * 10))
    h.add(Message("b", "user", 3, content="x" * 50))  # a given count is trusted
    assert h.total() == 14 + 3


# -- no re-summing: each message is looked up exactly once ------------------------------


class CountingTokenizer(ApproxTokenizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def count_message(self, message: Message) -> int:
        self.calls[message.id] = self.calls.get(message.id, 0) + 1
        return super().count_message(message)


def agent_loop(n: int, *, tokens: bool = True) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        t = 10 + i % 7 if tokens else None
        if i % 5 == 1:
            out.append(call(f"a{i}", t or 0, f"c{i}") if tokens else _call_free(i))
        elif i % 5 == 2:
            out.append(
                result(f"r{i}", t or 0, f"c{i - 1}")
                if tokens
                else Message(f"r{i}", "tool", content=[ToolResultBlock(f"c{i - 1}", f"result {i}")])
            )
        elif i % 11 == 0:
            out.append(Message(f"s{i}", "system", t, content=f"rule {i}"))
        else:
            out.append(Message(f"u{i}", "user", t, content=f"question number {i}"))
    return out


def _call_free(i: int) -> Message:
    return Message(f"a{i}", "assistant", content=[ToolUseBlock(f"c{i}", "f", {"i": i})])


@pytest.mark.parametrize("pin", [(), ("system", "last_user", -2)])
def test_each_message_is_looked_up_exactly_once(pin: tuple[PinSpec, ...]) -> None:
    tok = CountingTokenizer()
    h = History(200, tokenizer=tok, pin=pin, target=150)
    msgs = agent_loop(3000)
    dropped = 0
    for m in msgs:
        dropped += len(h.add(m))
        h.total()
        h.over_limit()
    h.messages()
    assert dropped > 2500  # steady eviction happened
    assert len(tok.calls) == len(msgs) and set(tok.calls.values()) == {1}


def test_each_message_is_tokenized_once() -> None:
    tok = ApproxTokenizer()
    h = History(300, tokenizer=tok)
    msgs = agent_loop(2000, tokens=False)
    for m in msgs:
        h.add(m)
    h.messages()
    assert tok.tokenizations == len(msgs)


# -- tool pairs --------------------------------------------------------------------------


def test_call_and_result_are_dropped_together() -> None:
    h = History(100)
    h.add(Message("u", "user", 10))
    h.add(call("a", 30, "c1"))
    h.add(result("r", 30, "c1"))
    assert h.add(Message("u2", "user", 50)) == ["u", "a", "r"]
    assert h.messages() == ["u2"]


def test_parallel_results_in_any_order_join_their_call() -> None:
    h = History(100)
    h.add(call("a", 10, "c1", "c2"))
    h.add(result("r2", 10, "c2"))
    h.add(Message("note", "user", 10))
    h.add(result("r1", 10, "c1"))  # everything from the call to its last result is one unit
    assert h.add(Message("big", "user", 65)) == ["a", "r2", "note", "r1"]


def test_orphan_result_is_dropped_on_arrival() -> None:
    h = History(100)
    h.add(Message("u", "user", 10))
    assert h.add(result("r", 5, "never")) == ["r"]
    assert h.messages() == ["u"] and h.total() == 10


def test_result_after_its_call_was_dropped_is_dropped() -> None:
    h = History(50)
    h.add(call("a", 20, "c1"))
    # The call awaits its result: the open exchange, kept with the turn, over the limit.
    assert h.add(Message("u", "user", 40)) == [] and h.over_limit()
    assert h.add(call("b", 5, "c2")) == ["a"]  # a newer exchange: the older call goes
    assert h.add(result("r", 5, "c1")) == ["r"]  # its result has no call left
    assert h.messages() == ["u", "b"]


def test_a_call_awaiting_its_result_waits_for_it() -> None:
    h = History(50)
    h.add(call("a", 20, "c1"))
    assert h.add(Message("u", "user", 40)) == []  # typed while the tool runs
    assert h.add(result("r", 5, "c1")) == []  # the exchange is whole: a, u, r
    assert h.messages() == ["a", "u", "r"] and h.total() == 65 and h.over_limit()
    assert h.add(Message("a2", "assistant", 5)) == ["a2"]  # newest, and not the turn
    assert h.add(Message("u2", "user", 5)) == ["a", "u", "r"]
    assert h.messages() == ["u2"] and not h.over_limit()


def test_without_tool_pairs_every_message_is_its_own_unit() -> None:
    h = History(50, keep_tool_pairs=False)
    h.add(call("a", 20, "c1"))
    h.add(result("r", 20, "c1"))
    assert h.add(Message("u", "user", 20)) == ["a"]
    assert h.messages() == ["r", "u"]
    assert h.add(result("r2", 5, "never")) == []  # kept: no pairing to protect


def test_pinned_call_in_held_table_takes_its_late_result() -> None:
    # The pinned call is set aside while compacting; its late result must still merge
    # everything from the call on, including newer pinned chunks set aside with it.
    h = History(30, pin=(0, "system"))
    h.add(call("a", 10, "c1"))
    h.add(Message("s", "system", 10))
    h.add(Message("u", "user", 5))
    assert h.add(Message("u2", "user", 8)) == ["u"]
    assert h.messages() == ["a", "s", "u2"] and not h.over_limit()
    assert h.add(result("r", 5, "c1")) == []  # joins the exchange a..r, all pinned
    assert h.messages() == ["a", "s", "u2", "r"] and h.over_limit() and h.total() == 33
    # u2 is inside the pinned exchange now; u3, the current turn, stays over the limit
    assert h.add(Message("u3", "user", 1)) == []
    assert h.messages() == ["a", "s", "u2", "r", "u3"] and h.over_limit()
    assert h.add(Message("a3", "assistant", 1)) == ["a3"]


# -- pins --------------------------------------------------------------------------------


def test_pinned_messages_are_never_dropped() -> None:
    h = History(100, pin="system")
    h.add(Message("s", "system", 20))
    h.add(Message("u1", "user", 30))
    h.add(Message("a1", "assistant", 40))
    assert h.add(Message("u2", "user", 25)) == ["u1"]
    assert h.messages() == ["s", "a1", "u2"]


def test_pins_alone_over_the_limit_are_kept_and_reported() -> None:
    h = History(50, pin=["system"])
    h.add(Message("s1", "system", 30))
    assert h.add(Message("a", "assistant", 10)) == []
    assert h.add(Message("s2", "system", 30)) == ["a"]
    assert h.messages() == ["s1", "s2"] and h.total() == 60 and h.over_limit()
    assert h.add(Message("a2", "assistant", 1)) == ["a2"]
    assert h.add(Message("u2", "user", 1)) == []  # the current turn stays, over the limit
    assert h.messages() == ["s1", "s2", "u2"] and h.total() == 61


def test_priority_two_is_always_pinned() -> None:
    h = History(50)
    h.add(Message("keep", "user", 40, priority=2))
    assert h.add(Message("a", "assistant", 20)) == ["a"]
    assert h.messages() == ["keep"]
    assert h.add(Message("u", "user", 20)) == []  # the current turn: kept, over the limit
    assert h.messages() == ["keep", "u"] and h.over_limit()
    assert h.add(Message("u2", "user", 5)) == ["u"]


def test_last_user_pin_moves_and_releases() -> None:
    h = History(60, pin="last_user")
    h.add(Message("u1", "user", 30))
    assert h.add(Message("a1", "assistant", 40)) == ["a1"]  # u1 is the last user: pinned
    assert h.add(Message("u2", "user", 30)) == []
    assert h.add(Message("a2", "assistant", 10)) == ["u1"]  # u1 released, now droppable
    assert h.messages() == ["u2", "a2"]


def test_released_pin_set_aside_is_dropped_first() -> None:
    # -1 pins the newest message; a big one is set aside while compacting, and once a
    # newer message arrives it is the oldest droppable unit, older than the deque.
    h = History(50, pin=[-1])
    h.add(Message("a", "user", 10))
    assert h.add(Message("big", "user", 80)) == ["a"]
    assert h.over_limit()
    assert h.add(Message("b", "user", 10)) == ["big"]
    assert h.messages() == ["b"] and not h.over_limit()


def test_tool_results_pin_any_role() -> None:
    h = History(50, pin="tool_results")
    h.add(call("a", 10, "c1"))
    h.add(result("r", 10, "c1", role="system"))  # pinned as a result, whatever its role
    assert h.add(Message("b", "assistant", 40)) == ["b"]
    assert h.messages() == ["a", "r"]


@pytest.mark.parametrize("pairs", [True, False])
def test_released_last_user_goes_before_a_plain_message(pairs: bool) -> None:
    h = History(1, pin="last_user", keep_tool_pairs=pairs)
    h.add(Message("u1", "user", 0))
    h.add(Message("a1", "assistant", 1))
    assert h.add(Message("a2", "assistant", 1)) == ["a1"]  # u1 pinned: set aside
    assert h.add(Message("u2", "user", 0)) == []  # releases u1, which still fits
    assert h.add(Message("a3", "assistant", 1)) == ["u1", "a2"]  # oldest first
    assert h.messages() == ["u2", "a3"]


def test_positional_pins() -> None:
    h = History(30, pin=[1, -2])
    for i in range(4):
        h.add(Message(f"m{i}", "user", 10))
    assert h.messages() == ["m1", "m2", "m3"]  # m0 dropped; m1 (index 1), m2 (-2) pinned


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [-5, True, 1.5, "100", None])
def test_bad_limit(limit: Any) -> None:
    with pytest.raises(ConfigError, match=rf"limit={limit!r}"):
        History(limit)


def test_a_limit_of_zero_keeps_only_zero_token_messages() -> None:
    """The seed's interface: History(0) is valid; zero-token messages fit, and a message
    with tokens drops everything from the oldest end, itself included, but the current
    turn (the newest user message)."""
    h = History(0)
    assert h.add(Message("a", "user", 0)) == []
    assert h.add(Message("z", "user", 0)) == []
    assert h.messages() == ["a", "z"]
    assert h.add(Message("b", "assistant", 3)) == ["a", "b"]
    assert h.add(Message("c", "user", 0)) == []
    assert h.messages() == ["z", "c"]
    assert h.total() == 0
    assert not h.over_limit()


@pytest.mark.parametrize("target", [-1, 101, True, 2.5, "10"])
def test_bad_target(target: Any) -> None:
    with pytest.raises(ConfigError, match=rf"target={target!r}"):
        History(100, target=target)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="pin='everything'"):
        History(100, pin=["system", "everything"])
    with pytest.raises(ConfigError, match="keep_tool_pairs='yes'"):
        History(100, keep_tool_pairs="yes")  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match="nonsense"):
        History(100, tokenizer="nonsense")


def _loaded() -> History:
    h = History(60, pin=[-1, 1, "last_user"])
    for m in (Message("u0", "user", 10), call("a1", 10, "c1"), Message("u2", "user", 10)):
        h.add(m)
    return h


@pytest.mark.parametrize(
    ("bad", "error", "text"),
    [
        ("not a message", NotAMessage, "must be a Message"),
        ({"id": "x", "role": "user"}, NotAMessage, "must be a Message"),
        (Message("u2", "user", 1), InvalidMessage, "id='u2'"),
        (Message("nocount", "user"), TokenizerError, "nocount"),
    ],
)
def test_bad_message_leaves_state_untouched(bad: Any, error: type[Exception], text: str) -> None:
    h = _loaded()
    before = state(h)
    with pytest.raises(error, match=text) as info:
        h.add(bad)
    assert isinstance(info.value, ConvomemError)
    assert state(h) == before
    # Positions did not move either: the failed add took none.
    ref = _loaded()
    for m in (result("r", 10, "c1"), Message("u4", "user", 30), Message("a5", "assistant", 5)):
        assert h.add(m) == ref.add(m)
        assert state(h) == state(ref)


def test_not_a_message_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        History(10).add(42)  # type: ignore[arg-type]


def test_bad_count_from_a_custom_tokenizer() -> None:
    class Broken(ApproxTokenizer):
        def count_message(self, message: Message) -> int:
            return -3

    h = History(10, tokenizer=Broken())
    with pytest.raises(TokenizerError, match="-3"):
        h.add(Message("a", "user", content="x"))
    assert state(h) == ([], 0, False, 0)


def test_add_many_is_checked_whole() -> None:
    h = _loaded()
    before = state(h)
    batch = [Message("n1", "user", 5), Message("n2", "user", 5), Message("n1", "user", 5)]
    with pytest.raises(InvalidMessage, match=r"messages\[2\]\.id='n1'"):
        h.add_many(batch)
    with pytest.raises(NotAMessage, match=r"messages\[1\]"):
        h.add_many([Message("n1", "user", 5), None])  # type: ignore[list-item]
    with pytest.raises(TokenizerError):
        h.add_many([Message("n1", "user", 5), Message("n2", "user")])
    assert state(h) == before
    ref = _loaded()
    good = [Message("n1", "user", 30), Message("n2", "assistant", 25), result("r", 1, "c1")]
    expected = [d for m in good for d in ref.add(m)]
    assert h.add_many(good) == expected and state(h) == state(ref)


def test_a_dropped_id_may_come_back() -> None:
    h = History(10)
    h.add(Message("a", "user", 10))
    assert h.add(Message("b", "user", 10)) == ["a"]
    assert h.add(Message("a", "user", 5)) == ["b"]


# -- longest_fitting_run -----------------------------------------------------------------


def test_longest_fitting_run_seed() -> None:
    counts = [9000, 2000, 2500, 3000, 1500, 4000, 2000, 1000]
    assert longest_fitting_run(counts, 10000) == (4, 8)


def test_longest_fitting_run_edges() -> None:
    assert longest_fitting_run([], 5) == (0, 0)
    assert longest_fitting_run([7, 8], 5) == (2, 2)  # nothing fits: the empty run at the end
    assert longest_fitting_run([0, 0, 9], 0) == (0, 2)
    assert longest_fitting_run((3, 3, 3), 9) == (0, 3)


def brute_run(counts: list[int], target: int) -> tuple[int, int]:
    n = len(counts)
    best = (n, n)
    for start in range(n):
        for stop in range(start + 1, n + 1):
            if sum(counts[start:stop]) <= target:
                length, best_len = stop - start, best[1] - best[0]
                if length > best_len or (length == best_len and start > best[0]):
                    best = (start, stop)
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=25), st.integers(0, 60))
def test_longest_fitting_run_matches_brute_force(counts: list[int], target: int) -> None:
    assert longest_fitting_run(counts, target) == brute_run(counts, target)


@pytest.mark.parametrize(
    ("counts", "target", "text"),
    [
        ([1, -2], 5, r"counts\[1\]=-2"),
        ([1, True], 5, r"counts\[1\]=True"),
        ([1.5], 5, r"counts\[0\]=1.5"),
        ("123", 5, "counts='123'"),
        (None, 5, "counts=None"),
        ([1], -1, "target=-1"),
        ([1], False, "target=False"),
    ],
)
def test_longest_fitting_run_bad_input(counts: Any, target: Any, text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        longest_fitting_run(counts, target)
