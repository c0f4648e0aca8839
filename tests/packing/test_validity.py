"""What the Packer sends is valid and honest: pins kept or reported, stray results repaired,
user-turn starts, over-budget results visible, broken tokenizers rejected."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _packing_support import PIN_SPECS, check_invariants, histories, kept_ids, oracle_recency
from convomem.errors import ConfigError, OverBudget, TokenizerError
from convomem.model import (
    Message,
    PinPolicy,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    starts_turn,
    validate_pairs,
)
from convomem.packing import Packer, PackResult
from convomem.strategies import FirstFit, Importance, Recency
from convomem.tokens import ApproxTokenizer, BaseTokenizer, Tokenizer, get_tokenizer

GIVEN = get_tokenizer("given")


def msg(i: str, role: str, tokens: int, **kw: Any) -> Message:
    return Message(i, role, tokens, **kw)


def call(i: str, tokens: int, *ids: str) -> Message:
    return Message(i, "assistant", tokens, content=[ToolUseBlock(c, "f", {}) for c in ids])


def result(i: str, tokens: int, *ids: str) -> Message:
    return Message(i, "tool", tokens, content=[ToolResultBlock(c, "r") for c in ids])


def ids(r: PackResult) -> list[str]:
    return [m.id for m in r.kept]


# ------------------------------------------------------------- issue 8 #3: pins survive


def test_a_system_message_inside_an_unanswered_exchange_is_kept_on_its_own() -> None:
    ms = [msg("u0", "user", 5), call("a1", 5, "c1", "c2"), msg("sys", "system", 5),
          result("t1", 5, "c1"), msg("u2", "user", 5)]  # fmt: skip
    for strategy in (Recency(), Recency(contiguous=True), FirstFit(), Importance()):
        r = Packer(budget=100, tokenizer=GIVEN, strategy=strategy).pack(ms)
        assert ids(r) == ["u0", "sys", "u2"] and r.fits and not r.lost_pins
        assert [d.reason for d in r.decisions][1:4] == ["unanswered", "pinned", "unanswered"]
    # Not pinned (pin=()): it goes with the exchange it sits in.
    r = Packer(budget=100, tokenizer=GIVEN, pin=()).pack(ms)
    assert ids(r) == ["u0", "u2"] and r.decisions[2].reason == "unanswered" and r.fits
    # Once the exchange completes, the system message is sent inside it.
    done = [*ms[:4], result("t2", 5, "c2"), ms[4]]
    assert ids(Packer(budget=100, tokenizer=GIVEN).pack(done)) == [m.id for m in done]


def test_the_last_user_message_typed_while_a_call_runs_is_kept() -> None:
    ms = [msg("u0", "user", 5), call("a1", 5, "c1", "c2"), msg("u1", "user", 5),
          result("t1", 5, "c1")]  # fmt: skip
    packer = Packer(budget=100, tokenizer=GIVEN, pin=("last_user",))
    r = packer.pack(ms)
    assert ids(r) == ["u0", "u1"] and r.decisions[2].reason == "pinned" and r.fits
    # The pin moves on: u1 is an ordinary part of the unfinished exchange again.
    r = packer.pack([*ms, msg("u3", "user", 5)])
    assert ids(r) == ["u0", "u3"] and r.decisions[2].reason == "unanswered"
    fresh = Packer(budget=100, tokenizer=GIVEN, pin=("last_user",)).pack([*ms, ms[0]])
    assert packer.pack([*ms, ms[0]]).decisions == fresh.decisions


def test_a_pinned_message_validity_forces_out_is_reported() -> None:
    ms = [msg("u0", "user", 5), call("a1", 5, "c1"), msg("u1", "user", 5)]
    for pin in ((1,), (-2,)):  # a static and a moving pin on the unanswered call
        r = Packer(budget=100, tokenizer=GIVEN, pin=pin).pack(ms)
        assert ids(r) == ["u0", "u1"] and r.lost_pins == {1: "unanswered"}
        assert not r.fits and r.token_count <= r.budget
        assert (
            "pinned message(s) not sent (part of a tool call that was never answered)"
            in (r.problems()[0])
        )
        assert "a1" in r.explain().splitlines()[0] and "(PINNED: not sent)" in r.explain()
        with pytest.raises(OverBudget, match="pinned message"):
            Packer(budget=100, pin=pin).pack_openai(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
                  "tool_calls": [{"id": "c", "type": "function",
                                  "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "user", "content": "again"}],
                strict=True,
            )  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(messages=histories(max_size=20), pins=PIN_SPECS, budget=st.integers(1, 150),
       unanswered=st.sampled_from(("drop", "stub")))  # fmt: skip
def test_every_pin_is_sent_or_reported(
    messages: list[Message], pins: tuple[Any, ...], budget: int, unanswered: Any
) -> None:
    r = Packer(budget=budget, tokenizer=GIVEN, pin=pins, unanswered=unanswered).pack(messages)
    check_invariants(messages, r, pins=pins, tokenizer=GIVEN)
    pinned = PinPolicy(pins).resolve(messages)
    kept = set(r.kept_indices)
    for i in pinned:
        m = messages[i]
        tool_free = m.role != "tool" and not m.has_tool_use() and not m.has_tool_result()
        if tool_free:
            assert i in kept  # never lost to a neighbouring exchange
        assert (i in kept) != (i in r.lost_pins)
    assert set(r.lost_pins) <= pinned


# ------------------------------------------------------- issue 8 #5: stray results stripped


def test_a_result_for_a_call_never_made_is_stripped_and_the_exchange_kept() -> None:
    ghost = Message("t", "tool", 7, content=[ToolResultBlock("c1", "42"),
                                             ToolResultBlock("ghost", "?")])  # fmt: skip
    ms = [msg("u0", "user", 5), call("a1", 5, "c1"), ghost, msg("u2", "user", 5)]
    r = Packer(budget=100, tokenizer=GIVEN).pack(ms)
    assert ids(r) == ["u0", "a1", "t", "u2"] and r.fits and validate_pairs(r.kept) == []
    sent = r.kept[2]
    assert sent is not ghost and sent.tool_result_ids() == ["c1"] and sent.tokens == 7
    assert r.repairs == {2: sent} and r.repaired == (sent,) and r.kept_indices == [0, 1, 2, 3]
    assert r.decisions[2].kept and r.decisions[2].reason == "recent"
    assert "sent repaired: results for 'ghost' answer no open call, left out" in r.explain()
    assert ms[2] is ghost and ghost.tool_result_ids() == ["c1", "ghost"]  # input untouched
    out = Packer(budget=100).pack_openai(
        [{"role": "user", "content": "hi"},
         {"role": "assistant", "content": None, "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "42"},
         {"role": "tool", "tool_call_id": "ghost", "content": "?"}]
    )  # fmt: skip
    assert [d.get("tool_call_id") for d in out] == [None, None, "c1"]  # ghost: an orphan


def test_a_result_answered_twice_is_sent_once() -> None:
    twice = Message("t", "tool", 5, content=[ToolResultBlock("x", "1"), ToolResultBlock("x", "2")])
    ms = [call("c", 5, "x"), twice, msg("a", "user", 1)]
    r = Packer(budget=1_000).pack(ms)
    assert ids(r) == ["c", "t", "a"] and r.kept[1].tool_result_ids() == ["x"]
    assert r.token_count == ApproxTokenizer().count_messages(r.kept)
    later = [*ms, result("again", 5, "x")]  # a whole message answering x again: an orphan
    r = Packer(budget=1_000).pack(later)
    assert ids(r) == ["c", "t", "a"] and r.decisions[3].reason == "orphan"


# ------------------------------------------------------------------------ start_on="user"


def test_start_on_drops_what_comes_before_the_first_user_turn() -> None:
    ms = [msg("s", "system", 5), msg("u0", "user", 50), msg("a0", "assistant", 5),
          msg("u1", "user", 5), msg("a1", "assistant", 5)]  # fmt: skip
    plain = Packer(budget=25, tokenizer=GIVEN).pack(ms)
    assert ids(plain) == ["s", "a0", "u1", "a1"]
    r = Packer(budget=25, tokenizer=GIVEN, start_on="user").pack(ms)
    assert ids(r) == ["s", "u1", "a1"] and r.fits
    assert [d.reason for d in r.decisions] == ["pinned", "budget", "start_on", "turn", "recent"]
    with pytest.raises(ConfigError, match="start_on='assistant'"):
        Packer(budget=25, start_on="assistant")  # type: ignore[arg-type]


def test_start_on_brings_in_the_turn_of_the_newest_exchange() -> None:
    """An agent loop: only the newest tool exchange fits. Dropping its user turn would
    send an exchange no request can start with: the current turn (the newest user
    message and its open exchange) is kept whole instead (over budget, and said so)."""
    ms = [msg("u0", "user", 5), msg("a0", "assistant", 5), msg("u1", "user", 10),
          call("c", 10, "x"), result("r", 10, "x")]  # fmt: skip
    for start_on in ("user", None):
        r = Packer(budget=25, tokenizer=GIVEN, start_on=start_on).pack(ms)
        assert ids(r) == ["u1", "c", "r"] and r.token_count == 30 and not r.fits
        assert [d.reason for d in r.decisions][2:] == ["turn"] * 3
        assert r.problems() == [
            "over budget by 5 tokens: the current turn (the newest user message and its open "
            "exchange) needs 30 tokens beside 0 pinned"
        ]
    # A pinned exchange before the first kept turn brings its turn in too.
    pinned = Packer(budget=30, tokenizer=GIVEN, start_on="user", pin=("tool_results",))
    r = pinned.pack([*ms, msg("a2", "assistant", 30), msg("u3", "user", 5)])
    assert ids(r) == ["u1", "c", "r", "u3"] and r.decisions[2].reason == "start_on"
    assert r.decisions[1].reason == "start_on" and not r.decisions[1].kept
    # No user turn at all: nothing can be sent, and the result says so.
    r = Packer(budget=100, tokenizer=GIVEN, start_on="user").pack(
        [msg("s", "system", 1), msg("a", "assistant", 1), call("c", 1, "x"), result("r", 1, "x")]
    )
    assert ids(r) == ["s"] and r.unstartable and not r.fits
    assert "no user turn to start on" in r.explain().splitlines()[0]
    r = Packer(budget=100, tokenizer=GIVEN, start_on="user", pin=(-1,)).pack(
        [msg("a", "assistant", 1), msg("u", "user", 1), call("c", 1, "x"), result("r", 1, "x")]
    )
    assert ids(r) == ["u", "c", "r"] and r.fits  # the pinned result's turn was kept anyway


@settings(max_examples=150, deadline=None)
@given(messages=histories(max_size=20), pins=PIN_SPECS, budget=st.integers(1, 150),
       which=st.integers(0, 3), unanswered=st.sampled_from(("drop", "stub")))  # fmt: skip
def test_start_on_user_against_a_brute_force_oracle(
    messages: list[Message], pins: tuple[Any, ...], budget: int, which: int, unanswered: Any
) -> None:
    strategy = (Recency(), Recency(contiguous=True), FirstFit(), Importance())[which]
    kw: dict[str, Any] = dict(budget=budget, tokenizer=GIVEN, pin=pins, unanswered=unanswered)
    plain = Packer(strategy=strategy, **kw).pack(messages)
    r = Packer(strategy=strategy, start_on="user", **kw).pack(messages)
    check_invariants(messages, r, pins=pins, tokenizer=GIVEN)
    # Oracle: the kept messages, then the rule applied message by message.
    rest = [m for m in r.kept if m.role != "system"]
    assert not rest or starts_turn(rest[0])
    assert r.unstartable == (not rest and any(m.role != "system" for m in messages))
    before = {d.index for d in plain.decisions if d.kept}
    after = {d.index for d in r.decisions if d.kept}
    added = after - before
    assert all(r.decisions[i].reason == "start_on" for i in added)
    for i in before - after:
        assert r.decisions[i].reason == "start_on" or i in r.lost_pins
        assert i < min((j for j in after if messages[j].role != "system"), default=len(messages))
    if added:  # one turn brought in, only when no kept turn came before every pin
        assert len({messages[i].id for i in added if starts_turn(messages[i])}) == 1
    if not any(d.reason == "start_on" for d in r.decisions):
        assert kept_ids(r) == kept_ids(plain)


def test_the_oracle_module_agrees_without_start_on() -> None:
    ms = [msg("s", "system", 5), msg("u", "user", 5), msg("a", "assistant", 5)]
    r = Packer(budget=12, tokenizer=GIVEN).pack(ms)
    assert kept_ids(r) == oracle_recency(ms, 12, ("system",), GIVEN)


# ---------------------------------------------------------------- over budget is visible


def test_min_keep_over_budget_is_visible() -> None:
    ms = [msg("s", "system", 5), msg("u", "assistant", 48)]
    r = Packer(budget=40, tokenizer=GIVEN).pack(ms)
    assert ids(r) == ["s", "u"] and r.token_count == 53 and not r.fits and r.headroom == -13
    assert r.decisions[1].reason == "min_keep"
    head = r.explain().splitlines()[0]
    assert "53 of 40 tokens" in head and "DOES NOT FIT" in head
    assert "over budget by 13 tokens: min_keep kept 1 message(s) that do not fit" in head
    assert r.problems() == ["over budget by 13 tokens: min_keep kept 1 message(s) that do not fit"]
    big = Packer(budget=4, tokenizer=GIVEN).pack(ms)
    assert "pinned messages alone need 5 tokens" in big.problems()[0]
    ok = Packer(budget=100, tokenizer=GIVEN).pack(ms)
    assert ok.fits and ok.problems() == [] and "(fits, headroom 47)" in ok.explain()


def test_pack_openai_and_anthropic_return_the_result_or_raise() -> None:
    dicts = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi " * 60}]
    packer = Packer(budget=20)
    out = packer.pack_openai(dicts)
    assert out == dicts and out[0] is dicts[0]  # the caller's own dicts
    packed = packer.pack_openai(dicts, result=True)
    messages, res = packed
    assert messages == dicts and isinstance(res, PackResult) and not res.fits
    assert packed.fits is False and packed.result is res and res.decisions[1].reason == "turn"
    with pytest.raises(OverBudget, match=r"packed \d+ tokens for a budget of 20: over budget") as e:
        packer.pack_openai(dicts, strict=True)
    assert isinstance(e.value.result, PackResult) and not e.value.result.fits
    assert packer.pack_openai(dicts[:1], strict=True, result=True).fits
    anth = [{"role": "user", "content": "hi " * 60}]
    system, messages, res = packer.pack_anthropic(anth, system="be brief", result=True)
    assert system == "be brief" and messages == anth and not res.fits
    with pytest.raises(OverBudget):
        packer.pack_anthropic(anth, system="be brief", strict=True)
    for bad in ("yes", 1, None):
        with pytest.raises(ConfigError, match="result="):
            packer.pack_openai(dicts, result=bad)  # type: ignore[call-overload]
        with pytest.raises(ConfigError, match="strict="):
            packer.pack_anthropic(anth, strict=bad)  # type: ignore[call-overload]


# ------------------------------------------------------------ issue 8 #12: bad tokenizers


class Returns(BaseTokenizer):
    name = "returns"

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value

    def count(self, text: str) -> int:
        return self.value  # type: ignore[no-any-return]


class Foreign:
    """A tokenizer that is not a BaseTokenizer (only the protocol)."""

    name = "foreign"

    def __init__(self, value: Any) -> None:
        self.value = value

    def count(self, text: str) -> Any:
        return self.value

    def count_message(self, message: Message) -> Any:
        return self.value

    def count_messages(self, messages: Any) -> Any:
        return self.value


@pytest.mark.parametrize("value", [-50, 2.5, 3.0, None, "7", True, [1]])
@pytest.mark.parametrize("kind", [Returns, Foreign, "function"])
def test_a_tokenizer_returning_a_bad_count_is_a_tokenizer_error(value: Any, kind: Any) -> None:
    tok: Any = (lambda text: value) if kind == "function" else kind(value)
    ms = [msg("s", "system", None), msg("u", "user", None)]
    packer = Packer(budget=100, tokenizer=tok)
    before = packer.pack([])
    with pytest.raises(TokenizerError) as err:
        packer.pack(ms)
    if kind is not Returns or not isinstance(value, int) or isinstance(value, bool):
        assert repr(value) in str(err.value)
    with pytest.raises(TokenizerError):
        Packer(budget=100, tokenizer=tok).pack_openai([{"role": "user", "content": "x"}])
    assert packer.pack([]).fits == before.fits  # still usable


def test_integer_like_counts_are_accepted_and_batches_are_checked() -> None:
    class Index:
        def __init__(self, n: int) -> None:
            self.n = n

        def __index__(self) -> int:
            return self.n

    class Batch(Foreign):
        def __init__(self, counts: list[Any]) -> None:
            super().__init__(3)
            self.counts = counts
            self.batches = 0

        def count_many(self, messages: Any) -> list[Any]:
            self.batches += 1
            return self.counts

    ms = [msg("a", "user", None), msg("b", "user", None)]
    tok = Batch([Index(2), 5])
    r = Packer(budget=100, tokenizer=tok).pack(ms)
    assert r.token_count == 7 and tok.batches == 1 and [d.tokens for d in r.decisions] == [2, 5]
    with pytest.raises(TokenizerError, match=r"count_many returned list \[1\] for 2 messages"):
        Packer(budget=100, tokenizer=Batch([1])).pack(ms)
    with pytest.raises(TokenizerError, match=r"counted -1 tokens for message id='b'"):
        Packer(budget=100, tokenizer=Batch([1, -1])).pack(ms)
    assert isinstance(tok, Tokenizer)


def test_stubs_and_summaries_are_checked_too() -> None:
    from convomem.packing import countable_stub

    with pytest.raises(TokenizerError):
        countable_stub("x", Foreign(-1))  # type: ignore[arg-type]
    stub = countable_stub("x", GIVEN)
    assert stub.tokens is not None and stub.tokens > 0
    content = [TextBlock("a"), ToolResultBlock("x", "b")]
    assert Message("m", "tool", content=content).tool_result_ids() == ["x"]


def test_moving_pins_find_messages_split_around_an_orphan() -> None:
    """Found by a property test: an orphan inside an unanswered exchange's span sits
    after the exchange's split-off messages, so positions are not in message order."""
    ms = [msg("u0", "user", 1), call("a1", 1, "c1"), msg("u2", "user", 1), call("a3", 1, "c2"),
          msg("u4", "user", 1), result("ghost", 1, "nobody"), msg("u6", "user", 1),
          result("r1", 1, "c1")]  # fmt: skip
    bad = ["recent", "unanswered", "unanswered", "unanswered", "unanswered", "orphan"]
    for pin, u6 in (((-3,), "turn"), ((5,), "turn"), ((-2,), "pinned"),
                    (("last_user",), "pinned")):  # fmt: skip
        packer = Packer(budget=100, tokenizer=GIVEN, pin=pin)
        packer.pack(ms[:3])
        r = packer.pack(ms)
        assert r.decisions == Packer(budget=100, tokenizer=GIVEN, pin=pin).pack(ms).decisions
        assert [d.reason for d in r.decisions] == [*bad, u6, "unanswered"]
        assert r.lost_pins == ({5: "orphan"} if u6 == "turn" else {})
        # u6, the newest user message, is sent on its own: by its pin, or as the turn
        assert [m.id for m in r.kept] == ["u0", "u6"]


def test_a_moving_pin_in_a_chunk_start_on_must_drop_is_reported() -> None:
    """Found by the oracle test: last_user inside an exchange that starts the list with
    an assistant message and has no user turn before it."""
    ms = [call("a0", 0, "c1"), msg("u1", "user", 0), msg("s2", "system", 0), result("r3", 0, "c1")]
    r = Packer(budget=1, tokenizer=GIVEN, start_on="user", pin=("last_user",)).pack(ms)
    assert ids(r) == [] and r.unstartable and not r.fits
    assert r.lost_pins == {1: "start_on", 2: "start_on"}  # last_user and the system pin
    assert [d.reason for d in r.decisions] == ["start_on"] * 4


# -- a call repeating the id of a call still open (a re-sent assistant turn) -------------


def test_a_call_repeating_an_open_call_is_never_sent_twice() -> None:
    """Found by a fuzz of issue 8: [a3(c3), d4(c1), d5(c1), r6(c1, c3)] made c1 twice in
    one request. The repeat is stripped (a message of nothing but repeats is an orphan,
    never sent) the same way in the Packer, History and ConversationMemory."""
    from convomem.session import ConversationMemory
    from convomem.views.window import History

    ms = [
        msg("u", "user", 5, content="go"),
        call("a3", 5, "c3"),
        call("d4", 5, "c1"),
        call("d5", 5, "c1"),
        result("r6", 5, "c1", "c3"),
        Message("d7", "assistant", 5, content=[TextBlock("again"), ToolUseBlock("c8", "f", {})]),
        Message("d8", "assistant", 5, content=[TextBlock("retry"), ToolUseBlock("c8", "f", {})]),
        result("r9", 5, "c8"),
    ]
    res = Packer(budget=1000, tokenizer="given").pack(ms)
    hist = History(1000, tokenizer="given")
    mem = ConversationMemory(1000, tokenizer="given")
    for m in ms:
        hist.add(m)
        mem.add_message(m)
    for kept in (res.kept, hist.kept(), mem.context("messages")):
        assert validate_pairs(kept) == []
        ids = [m.id for m in kept]
        assert "d5" not in ids and "d8" in ids  # d8 keeps its text, without the call
        (d8,) = [m for m in kept if m.id == "d8"]
        assert d8.text() == "retry" and not d8.has_tool_use()
    assert "calls 'c8' repeat an open call" in res.explain()
    assert [m.id for m in mem.messages()] == [m.id for m in ms]  # the log keeps them all


@st.composite
def repeating(draw: st.DrawFn) -> list[Message]:
    """Histories whose assistant turns may repeat the ids of earlier calls."""
    out: list[Message] = []
    made: list[str] = []
    for i in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["user", "call", "repeat", "result"]))
        if kind == "user":
            out.append(msg(f"u{i}", "user", 3, content="hi"))
        elif kind == "call" or not made:
            ids = [f"c{i}_{k}" for k in range(draw(st.integers(1, 2)))]
            made += ids
            out.append(call(f"a{i}", 4, *ids))
        elif kind == "repeat":
            ids = draw(st.lists(st.sampled_from(made), min_size=1, max_size=2))
            text = [TextBlock("again")] if draw(st.booleans()) else []
            blocks = [*text, *(ToolUseBlock(c, "f", {}) for c in ids)]
            out.append(Message(f"d{i}", "assistant", 4, content=blocks))
        else:
            ids = draw(st.lists(st.sampled_from(made), min_size=1, max_size=2))
            out.append(result(f"r{i}", 3, *ids))
    return out


@settings(max_examples=100, deadline=None)
@given(ms=repeating(), budget=st.integers(5, 80))
def test_no_engine_makes_a_call_twice(ms: list[Message], budget: int) -> None:
    from convomem.session import ConversationMemory
    from convomem.views.window import History

    hist = History(budget, tokenizer="given")
    mem = ConversationMemory(200, tokenizer="given", summary=False)
    for m in ms:
        hist.add(m)
        mem.add_message(m)
    res = Packer(budget=budget, tokenizer="given").pack(ms)
    for kept in (res.kept, mem.context("messages")):
        assert validate_pairs(kept) == [], [m.id for m in kept]
    # A window keeps the exchange still in flight (its calls await results): no repeat.
    assert [p for p in validate_pairs(hist.kept()) if p.kind == "repeated_call"] == []
