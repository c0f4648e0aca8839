"""The Packer: its cache never changes results, known peer failures, API and errors."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _packing_support import PIN_SPECS, check_invariants, histories, originals
from convomem.errors import ConfigError, ConvomemError, InvalidMessage, TokenizerError
from convomem.model import Message, PinPolicy, ToolResultBlock, ToolUseBlock, validate_pairs
from convomem.packing import (
    Call,
    ChunkStrategy,
    ChunkTable,
    Packer,
    PackResult,
    Pipeline,
    Selection,
    Strategy,
)
from convomem.packing.mintree import MinTree as _MinTree
from convomem.strategies import FirstFit, Importance, MaxTurns, Recency
from convomem.tokens import ApproxTokenizer, Tokenizer, get_tokenizer

GIVEN = get_tokenizer("given")


def msg(i: str, role: str, tokens: int, **kw: Any) -> Message:
    return Message(i, role, tokens, **kw)


def call(i: str, tokens: int, *ids: str) -> Message:
    return Message(i, "assistant", tokens, content=[ToolUseBlock(c, "f", {}) for c in ids])


def result(i: str, tokens: int, *ids: str) -> Message:
    return Message(i, "tool", tokens, content=[ToolResultBlock(c, "r") for c in ids])


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.id, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
        r.fits,
        [m.id for m in r.dropped],
    )


# ----------------------------------------------------------------- the cache is invisible


@st.composite
def call_sequences(draw: Any) -> list[list[Message]]:
    """Lists one Packer sees in a row: growth, repeats, rebuilt copies, truncations,
    unrelated lists and edited middles (with a new id or the same id)."""
    base = draw(histories(max_size=30))
    other = draw(histories(max_size=10, prefix="o"))
    n = draw(st.integers(0, len(base)))
    out: list[list[Message]] = []
    for op in draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=8)):
        if op == "grow":
            n = min(len(base), n + draw(st.integers(1, 3)))
            out.append(base[:n])
        elif op == "same":
            out.append(base[:n])
        elif op == "rebuild":
            out.append([Message.from_dict(m.to_dict()) for m in base[:n]])
        elif op == "truncate":
            n = max(0, n - draw(st.integers(1, 3)))
            out.append(base[:n])
        elif op == "other":
            out.append(list(other))
        elif op in ("mutate", "mutate_same_id") and n:
            at = draw(st.integers(0, n - 1))
            old = base[at]
            if op == "mutate":
                new = msg(f"x{at}", "user", draw(st.integers(0, 40)))
            else:
                new = old.replace(content="edited", tokens=draw(st.integers(0, 40)))
            out.append([*base[:at], new, *base[at + 1 : n + 1]])
    return out


OPS = ("grow", "grow", "grow", "same", "rebuild", "truncate", "other", "mutate", "mutate_same_id")

CACHED_STRATEGIES = (
    lambda: Recency(),
    lambda: Recency(min_keep=0, contiguous=True),
    lambda: FirstFit(),
    lambda: Importance(),
    lambda: [MaxTurns(2), Recency(min_keep=2)],
)


@settings(max_examples=100, deadline=None)
@given(
    seq=call_sequences(),
    budget=st.integers(1, 150),
    pins=PIN_SPECS,
    which=st.integers(0, len(CACHED_STRATEGIES) - 1),
    unanswered=st.sampled_from(("drop", "stub")),
)
def test_a_reused_packer_returns_what_a_fresh_one_returns(
    seq: list[list[Message]], budget: int, pins: tuple[Any, ...], which: int, unanswered: str
) -> None:
    make = CACHED_STRATEGIES[which]
    reused = Packer(budget=budget, tokenizer=GIVEN, strategy=make(), pin=pins,
                    unanswered=unanswered)  # fmt: skip
    for messages in seq:
        got = reused.pack(messages)
        fresh = Packer(budget=budget, tokenizer=GIVEN, strategy=make(), pin=pins,
                       unanswered=unanswered).pack(messages)  # fmt: skip
        assert fingerprint(got) == fingerprint(fresh)
        for a, b in zip(originals(got), originals(fresh), strict=True):
            assert a is b  # the caller's objects, never cached copies
        check_invariants(messages, got, pins=PinPolicy(pins).specs, tokenizer=GIVEN)


def test_kept_are_the_callers_objects_after_a_rebuild() -> None:
    ms = [msg("s", "system", 5), msg("u", "user", 5), msg("a", "assistant", 5)]
    packer = Packer(budget=100, tokenizer=GIVEN)
    packer.pack(ms)
    rebuilt = [Message.from_dict(m.to_dict()) for m in ms]
    r = packer.pack(rebuilt)
    assert all(a is b for a, b in zip(r.kept, rebuilt, strict=True))
    assert r.dropped == []


# ------------------------------------------------------------ work counts (no re-counting)


class CountingTokenizer(ApproxTokenizer):
    """Counts every count_message call, cached or not."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def count_message(self, message: Message) -> int:
        self.calls += 1
        return super().count_message(message)


def agent_history(n: int) -> list[Message]:
    out = [Message("sys", "system", content="You are helpful. " * 20)]
    for k in range(n):
        if k % 4 == 2:
            out.append(
                Message(f"c{k}", "assistant", content=[ToolUseBlock(f"t{k}", "f", {"k": k})])
            )
        elif k % 4 == 3:
            out.append(Message(f"r{k}", "tool", content=[ToolResultBlock(f"t{k - 1}", "x" * k)]))
        else:
            out.append(Message(f"m{k}", "user" if k % 2 else "assistant", content=f"text {k} " * 9))
    return out


def test_each_message_is_tokenized_once_and_the_prefix_is_not_even_looked_up() -> None:
    history = agent_history(2_000)
    tok = CountingTokenizer()
    packer = Packer(budget=500, tokenizer=tok, result_limit=None)  # nothing to reduce
    first = packer.pack(history[:1_000])
    assert not first.fits or len(first.kept) < 1_000
    assert tok.tokenizations == 1_000  # LlamaIndex re-tokenizes the history per drop
    for n in range(1_001, 1_050):
        calls = tok.calls
        packer.pack(history[:n])
        assert tok.calls - calls == 1  # only the new message
    assert tok.tokenizations == 1_049
    rebuilt = [Message.from_dict(m.to_dict()) for m in history[:1_050]]
    calls = tok.calls
    packer.pack(rebuilt)
    assert tok.calls - calls == 1 and tok.tokenizations == 1_050


def test_the_same_list_appended_in_place_is_seen_as_grown() -> None:
    history = agent_history(50)
    packer = Packer(budget=300)
    live: list[Message] = []
    for m in history:
        live.append(m)
        assert fingerprint(packer.pack(live)) == fingerprint(Packer(budget=300).pack(live))


# ------------------------------------------------------------- failures of other libraries


def test_never_starts_with_an_orphan_tool_result() -> None:
    """LangChain's trim_messages can cut between a call and its result."""
    ms = [msg("s", "system", 5), msg("u", "user", 5), call("c", 60, "x"), result("r", 5, "x"),
          msg("a", "assistant", 5), msg("u2", "user", 5)]  # fmt: skip
    for strategy in (Recency(), Recency(contiguous=True), FirstFit(), Importance()):
        r = Packer(budget=40, tokenizer=GIVEN, strategy=strategy).pack(ms)
        assert validate_pairs(r.kept) == []
        assert [m.role for m in r.kept[1:2]] != ["tool"]
        assert ("c" in [m.id for m in r.kept]) == ("r" in [m.id for m in r.kept])


def test_no_orphan_result_mid_list() -> None:
    """AutoGen's token-limited context drops a call and keeps its result mid-list."""
    ms = [msg("u1", "user", 5), call("c", 50, "x", "y"), result("ry", 3, "y"),
          msg("a2", "assistant", 3), result("rx", 3, "x"), msg("a", "assistant", 5)]  # fmt: skip
    r = Packer(budget=30, tokenizer=GIVEN).pack(ms)
    assert [m.id for m in r.kept] == ["u1", "a"]
    assert validate_pairs(r.kept) == []
    # The newest user message typed while the tool ran is in that exchange: it goes with
    # it (the current turn), over the budget, and the result says so.
    ms[3] = msg("u2", "user", 3)
    r = Packer(budget=30, tokenizer=GIVEN).pack(ms)
    assert [m.id for m in r.kept] == ["c", "ry", "u2", "rx", "a"] and not r.fits
    assert validate_pairs(r.kept) == [] and r.decisions[3].reason == "turn"


def test_already_orphaned_results_are_dropped_even_when_pinned() -> None:
    """convopack keeps tool results that arrive without their call. A pinned one cannot be
    sent either: the result says so (``fits`` False, ``lost_pins``, ``explain``)."""
    ms = [msg("u", "user", 5), result("r", 5, "gone"), msg("a", "assistant", 5)]
    r = Packer(budget=1_000, tokenizer=GIVEN, pin=("tool_results",)).pack(ms)
    assert [m.id for m in r.kept] == ["u", "a"]
    assert r.decisions[1].reason == "orphan"
    assert r.lost_pins == {1: "orphan"} and not r.fits and r.token_count <= r.budget
    head = r.explain().splitlines()[0]
    assert "DOES NOT FIT" in head and "1 pinned message(s) not sent" in head and "'r'" in head
    assert "(PINNED: not sent)" in r.explain()


# --------------------------------------------------------------------------- the API


@pytest.mark.parametrize("budget", [0, -5, True, 2.5, "100", None])
def test_budget_must_be_positive(budget: Any) -> None:
    with pytest.raises(ConfigError, match="budget must be positive") as err:
        Packer(budget=budget)
    assert repr(budget) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="pin="):
        Packer(budget=10, pin=("nope",))
    with pytest.raises(ConfigError, match="unanswered="):
        Packer(budget=10, unanswered="keep")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="a window only filters"):
        Packer(budget=10, strategy=MaxTurns(3))
    with pytest.raises(ConfigError, match="plain function only filters"):
        Packer(budget=10, strategy=lambda ms: ms)
    with pytest.raises(ConfigError, match="only the last stage"):
        Packer(budget=10, strategy=[Recency(), Recency()])
    with pytest.raises(ConfigError, match="strategy="):
        Packer(budget=10, strategy=42)
    with pytest.raises(ConfigError, match=r"strategy=\[\]"):
        Packer(budget=10, strategy=[])
    with pytest.raises(ConfigError, match="not a window"):
        Packer(budget=10, strategy=[3, Recency()])


def test_tokenizer_and_strategy_are_resolved() -> None:
    assert Packer(budget=10).tokenizer is get_tokenizer("approx")
    tok = ApproxTokenizer()
    assert Packer(budget=10, tokenizer=tok).tokenizer is tok
    assert isinstance(Packer(budget=10, tokenizer=len).tokenizer, Tokenizer)
    p = Packer(budget=10, strategy=[MaxTurns(2), Recency()])
    assert isinstance(p.strategy, Pipeline) and p.strategy.name == "max_turns -> recency"
    assert isinstance(Packer(budget=10).strategy, Recency)
    assert isinstance(Recency(), Strategy) and isinstance(p.strategy, Strategy)
    assert "Packer(budget=10" in repr(p)


def test_bad_messages_raise_and_leave_the_cache_usable() -> None:
    ms = [msg("s", "system", 5), msg("u", "user", 5)]
    packer = Packer(budget=100, tokenizer=GIVEN)
    packer.pack(ms)
    with pytest.raises(InvalidMessage, match="messages"):
        packer.pack("hello")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match=r"messages\[2\]"):
        packer.pack([*ms, {"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(TokenizerError):
        packer.pack([*ms, Message("x", "user", content="no count")])
    more = [*ms, msg("a", "assistant", 5)]
    assert fingerprint(packer.pack(more)) == fingerprint(
        Packer(budget=100, tokenizer=GIVEN).pack(more)
    )


def test_a_busy_packer_packs_on_a_fresh_table() -> None:
    ms = agent_history(30)
    packer = Packer(budget=200)
    packer.pack(ms[:10])
    with packer._lock:  # another call is running
        busy = packer.pack(ms)
    assert fingerprint(busy) == fingerprint(Packer(budget=200).pack(ms))
    assert fingerprint(packer.pack(ms)) == fingerprint(busy)


def test_result_fields_and_explain() -> None:
    ms = [msg("s", "system", 5), msg("u1", "user", 50), call("c", 5, "x"), msg("u2", "user", 5)]
    r = Packer(budget=40, tokenizer=GIVEN, unanswered="stub").pack(ms)
    assert [m.id for m in r.kept] == ["s", "c", "stub_x", "u2"]
    assert r.dropped == [ms[1]] and r.dropped[0] is ms[1]
    assert r.summary is None and r.budget == 40 and r.strategy == "recency"
    assert r.token_count == GIVEN.count_messages(r.kept) and r.fits
    assert r.reason_counts() == {"pinned": 1, "budget": 1, "turn": 2}  # c: awaits, stubbed
    text = r.explain()
    assert text.splitlines()[0].startswith("recency: kept 3 of 4 messages")
    for m in ms:
        assert m.id in text
    assert "stub" in text.splitlines()[-1]
    assert "fits=True" in repr(r)


def test_from_kept_for_custom_strategies() -> None:
    ms = [msg("u1", "user", 5), msg("a1", "assistant", 5), msg("u2", "user", 5)]
    summary = Message("sum", "system", 3, content="earlier: hello")
    r = PackResult.from_kept(ms, [ms[2]], budget=20, tokenizer=GIVEN, summary=summary,
                             reasons={0: "summarized"}, strategy="mine")  # fmt: skip
    assert r.kept == [summary, ms[2]] and r.token_count == 8
    assert [d.reason for d in r.decisions] == ["summarized", "budget", "fits"]
    with pytest.raises(ConvomemError, match="not one of the input"):
        PackResult.from_kept(ms, [msg("zz", "user", 1)], budget=20, tokenizer=GIVEN)
    with pytest.raises(ConvomemError, match="out of order"):
        PackResult.from_kept(ms, [ms[2], ms[0]], budget=20, tokenizer=GIVEN)


# ------------------------------------------------------------------ user strategies


class KeepRandom:
    """A user strategy in a few lines: keeps a random subset (pairs may break)."""

    name = "keep_random"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pack(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: Tokenizer,
        pinned_indices: Iterable[int],
    ) -> PackResult:
        kept = [m for m in messages if self.rng.random() < 0.6]
        return PackResult.from_kept(messages, kept, budget=budget, tokenizer=tokenizer)


@settings(max_examples=80, deadline=None)
@given(messages=histories(), seed=st.integers(0, 1000), pins=PIN_SPECS,
       unanswered=st.sampled_from(("drop", "stub")))  # fmt: skip
def test_user_strategies_are_kept_valid_and_pinned(
    messages: list[Message], seed: int, pins: tuple[Any, ...], unanswered: str
) -> None:
    r = Packer(budget=10_000, tokenizer=GIVEN, strategy=KeepRandom(seed), pin=pins,
               unanswered=unanswered).pack(messages)  # fmt: skip
    check_invariants(messages, r, pins=PinPolicy(pins).specs, tokenizer=GIVEN)


def test_user_strategy_sees_a_valid_list_with_pins() -> None:
    seen: dict[str, Any] = {}

    class Spy:
        name = "spy"

        def pack(self, messages: Any, *, budget: int, tokenizer: Any, pinned_indices: Any) -> Any:
            seen.update(messages=list(messages), pins=list(pinned_indices), budget=budget)
            return PackResult.from_kept(messages, [], budget=budget, tokenizer=tokenizer)

    ms = [msg("s", "system", 5), result("o", 5, "gone"), msg("u", "user", 5)]
    r = Packer(budget=50, tokenizer=GIVEN, strategy=Spy()).pack(ms)
    assert [m.id for m in seen["messages"]] == ["s", "u"] and seen["pins"] == [0, 1]
    # the pin and the current turn survive a strategy that drops them
    assert [m.id for m in r.kept] == ["s", "u"]
    assert [d.reason for d in r.decisions] == ["pinned", "orphan", "turn"]


def test_user_strategy_errors_name_the_strategy() -> None:
    class Liar:
        name = "liar"

        def pack(self, messages: Any, *, budget: int, tokenizer: Any, pinned_indices: Any) -> Any:
            fake = PackResult.from_kept([msg("z", "user", 1)], [], budget=1, tokenizer=tokenizer)
            fake.kept = [msg("z", "user", 1)]
            return fake

    class Wrong:
        name = "wrong"

        def pack(self, messages: Any, *, budget: int, tokenizer: Any, pinned_indices: Any) -> Any:
            return list(messages)

    with pytest.raises(ConvomemError, match=r"'liar'.*not one of the messages"):
        Packer(budget=10, tokenizer=GIVEN, strategy=Liar()).pack([msg("u", "user", 1)])
    with pytest.raises(ConvomemError, match=r"'wrong'.*must return a PackResult"):
        Packer(budget=10, tokenizer=GIVEN, strategy=Wrong()).pack([msg("u", "user", 1)])


def test_function_stages_filter_and_are_checked() -> None:
    ms = [msg("s", "system", 5), msg("u", "user", 5), msg("a", "assistant", 5)]

    def no_system(messages: list[Message]) -> list[Message]:
        return [m for m in messages if m.role != "system"]

    def only_users(messages: list[Message]) -> list[Message]:
        return [m for m in messages if m.role == "user"]

    r = Packer(budget=100, tokenizer=GIVEN, strategy=[only_users, Recency()]).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u"] and r.decisions[2].reason == "filtered"
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[no_system, Recency()]).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u", "a"]  # pinned messages survive every stage

    def reverse(messages: list[Message]) -> list[Message]:
        return messages[::-1]

    def invent(messages: list[Message]) -> list[Message]:
        return [*messages, msg("new", "user", 1)]

    def nothing(messages: list[Message]) -> Any:
        return None

    for fn in (reverse, invent):
        with pytest.raises(ConvomemError, match=rf"stage .*{fn.__name__}.*subsequence"):
            Packer(budget=100, tokenizer=GIVEN, strategy=[fn, Recency()]).pack(ms)
    with pytest.raises(ConvomemError, match=r"nothing.*list of messages"):
        Packer(budget=100, tokenizer=GIVEN, strategy=[nothing, Recency()]).pack(ms)


def test_pack_openai() -> None:
    dicts = [
        {"role": "system", "content": "be brief"},
        {"role": "tool", "tool_call_id": "gone", "content": "orphan"},
        {"role": "user", "content": "hi " * 400},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": "thanks"},
    ]  # fmt: skip
    out = Packer(budget=100).pack_openai(dicts)
    assert [d["role"] for d in out] == ["system", "assistant", "tool", "user"]


def test_pack_anthropic() -> None:
    messages = [
        {"role": "user", "content": "hi " * 400},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "42"}]},
        {"role": "assistant", "content": "The answer is 42."},
        {"role": "user", "content": "thanks"},
    ]  # fmt: skip
    # The newest chunks that fit start with the tool call: the request must start with
    # a user turn, so they are dropped ("start_on") and the request starts at "thanks".
    system, out = Packer(budget=100).pack_anthropic(messages, system="be brief")
    assert system == "be brief"
    assert out == [{"role": "user", "content": "thanks"}]
    system, out = Packer(budget=100).pack_anthropic(messages, system="be brief", start_on=None)
    assert [(d["role"], d["content"][0]["type"]) for d in out[:2]] == [
        ("assistant", "tool_use"),
        ("user", "tool_result"),
    ]
    assert len(out) == 4


# ------------------------------------------------------------------- async and I/O calls


async def test_pack_async_equals_pack() -> None:
    ms = agent_history(60)
    a = await Packer(budget=300, strategy=[MaxTurns(5), Recency()]).pack_async(ms)
    b = Packer(budget=300, strategy=[MaxTurns(5), Recency()]).pack(ms)
    assert fingerprint(a) == fingerprint(b)
    c = await Recency().pack_async(ms, budget=300, pinned_indices=[0])
    assert [m.id for m in c.kept] == [m.id for m in b.kept]


class Summarizing(ChunkStrategy):
    """A stage doing I/O the way SummaryEvict will: Recency, then one summary call."""

    name = "summarizing"

    def __init__(self, summarize: Any, placement: Any = "head") -> None:
        self.summarize = summarize
        self.placement = placement
        self.fallbacks = 0

    def plan(self, table: ChunkTable, budget: int) -> Any:
        sel = Recency().select(table, budget - 10)
        try:
            text = yield Call(self.summarize, ("dropped",), offload=True)
        except ValueError:
            self.fallbacks += 1
            return sel
        sel.summary = Message("summary", "system", 10, content=text)
        sel.placement = self.placement
        sel.default = "summarized"
        return sel


def test_a_stage_can_add_a_summary_and_mark_summarized() -> None:
    ms = [msg("s", "system", 5), msg("u1", "user", 50), msg("u2", "user", 5)]
    for placement, order in (
        ("head", ["summary", "s", "u2"]),
        ("after_system", ["s", "summary", "u2"]),
    ):
        r = Packer(budget=40, tokenizer=GIVEN, strategy=Summarizing(str.upper, placement)).pack(ms)
        assert [m.id for m in r.kept] == order and r.summary is r.kept[order.index("summary")]
        assert r.token_count == 20 and r.decisions[1].reason == "summarized"
        check_invariants(ms, r, pins=("system",), tokenizer=GIVEN)


def test_io_errors_are_thrown_into_the_plan() -> None:
    def boom(_: str) -> str:
        raise ValueError("down")

    s = Summarizing(boom)
    r = Packer(budget=40, tokenizer=GIVEN, strategy=s).pack([msg("u", "user", 5)])
    assert s.fallbacks == 1 and r.summary is None


async def _async_summary(text: str) -> str:
    await asyncio.sleep(0)
    return "async " + text


def test_async_call_from_sync_pack_outside_a_loop_runs() -> None:
    r = Packer(budget=40, tokenizer=GIVEN, strategy=Summarizing(_async_summary)).pack(
        [msg("u", "user", 5)]
    )
    assert r.summary is not None and r.summary.content == "async dropped"


async def test_async_call_from_sync_pack_inside_a_loop_says_use_pack_async() -> None:
    packer = Packer(budget=40, tokenizer=GIVEN, strategy=Summarizing(_async_summary))
    with pytest.raises(RuntimeError, match="pack_async"):
        packer.pack([msg("u", "user", 5)])
    r = await packer.pack_async([msg("u", "user", 5)])
    assert r.summary is not None and r.summary.content == "async dropped"


async def test_sync_calls_run_off_the_loop_in_pack_async() -> None:
    threads: list[int] = []

    def summarize(text: str) -> str:
        threads.append(threading.get_ident())
        return text

    await Packer(budget=40, tokenizer=GIVEN, strategy=Summarizing(summarize)).pack_async(
        [msg("u", "user", 5)]
    )
    assert threads and threads[0] != threading.get_ident()


async def test_user_strategy_pack_async_is_used() -> None:
    calls: list[str] = []

    class Both:
        name = "both"

        def pack(self, messages: Any, *, budget: int, tokenizer: Any, pinned_indices: Any) -> Any:
            calls.append("sync")
            return PackResult.from_kept(messages, messages, budget=budget, tokenizer=tokenizer)

        async def pack_async(
            self, messages: Any, *, budget: int, tokenizer: Any, pinned_indices: Any
        ) -> Any:
            calls.append("async")
            return PackResult.from_kept(messages, messages, budget=budget, tokenizer=tokenizer)

    packer = Packer(budget=40, tokenizer=GIVEN, strategy=Both())
    await packer.pack_async([msg("u", "user", 5)])
    assert calls == ["async"]


# ------------------------------------------------------------------------- internals


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.lists(st.integers(0, 20), max_size=40), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 40), min_size=4, max_size=4),
    queries=st.lists(st.tuples(st.integers(-1, 45), st.integers(-1, 25)), max_size=15),
)
def test_min_tree_finds_the_nearest_fit(
    values: list[list[int]], cuts: list[int], queries: list[tuple[int, int]]
) -> None:
    tree = _MinTree()
    leaves: list[int] = []
    for vals, cut in zip(values, cuts, strict=False):
        lo = min(cut, len(leaves))
        leaves = leaves[:lo] + vals
        tree.assign(lo, vals, len(leaves))
        for j, r in queries:
            prev = [i for i in range(len(leaves)) if i < j and leaves[i] <= r]
            nxt = [i for i in range(len(leaves)) if i >= j and leaves[i] <= r]
            assert tree.prev_le(j, r) == (prev[-1] if prev else -1)
            assert tree.next_le(max(j, 0), r) == (nxt[0] if nxt and max(j, 0) <= nxt[0] else -1)


@settings(max_examples=80, deadline=None)
@given(messages=histories(max_size=30), pins=PIN_SPECS, cut=st.integers(0, 30))
def test_incremental_pins_match_resolve_pins(
    messages: list[Message], pins: tuple[Any, ...], cut: int
) -> None:
    packer = Packer(budget=10_000, tokenizer=GIVEN, strategy=Recency(min_keep=0), pin=pins)
    packer.pack(messages[:cut])
    r = packer.pack(messages)
    pinned = {d.index for d in r.decisions if d.reason == "pinned"}
    pins_at = PinPolicy(pins).resolve(messages)
    fresh = ChunkTable.build(messages, tokenizer=GIVEN, pinned_indices=pins_at)
    expected = {i for p in fresh.pinned_positions() for i in fresh.chunks[p].indices}
    assert pinned == expected


def test_selection_defaults() -> None:
    table = ChunkTable.build([msg("u", "user", 1)], tokenizer=GIVEN)
    sel = Selection(table)
    assert sel.kept == {} and sel.default == "budget" and sel.placement == "head"


def test_the_same_object_twice_and_empty_inputs() -> None:
    u = msg("u", "user", 5)
    ms = (msg("s", "system", 5), u, msg("a", "assistant", 5), u)

    def keep_all(messages: list[Message]) -> list[Message]:
        return list(messages)

    for strategy in (Recency(), [keep_all, Recency()]):
        r = Packer(budget=100, tokenizer=GIVEN, strategy=strategy).pack(ms)
        assert r.kept == list(ms) and all(d.kept for d in r.decisions)
    r = Packer(budget=100, tokenizer=GIVEN, strategy=KeepRandom(1)).pack(ms)
    assert len(r.kept) == sum(d.kept for d in r.decisions) and r.kept[0] is ms[0]
    r = PackResult.from_kept(ms, [u, u], budget=100, tokenizer=GIVEN)
    assert [d.kept for d in r.decisions] == [False, True, False, True]
    empty = Packer(budget=10).pack([])
    assert empty.kept == [] and empty.dropped == [] and empty.fits and empty.token_count == 0


def test_messages_without_ids_and_tuples_pack() -> None:
    from convomem.model import TextBlock

    ms = (Message(role="system", content="rules"), Message(role="user", content=[TextBlock("hi")]))
    r = Packer(budget=100).pack(ms)
    assert r.kept == list(ms) and len({m.id for m in ms}) == 2


def test_a_memo_belongs_to_its_owner_object() -> None:
    """Memos are keyed by owner; an owner freed and another made at the same address
    (CPython reuses it at once) must not inherit the old one's values."""
    packer = Packer(budget=100, tokenizer=GIVEN)
    packer.pack([msg("u", "user", 1)])
    table = packer._live
    for _ in range(200):
        owner = Recency()
        memo = table.memo(owner)
        assert memo == [] and table.memo(owner) is memo
        memo.append("value of a strategy now gone")
        del owner
    assert len(table._memo) <= 64


def test_recency_is_packings_and_the_old_homes_name_the_same_class() -> None:
    from convomem import Recency as root
    from convomem.packing import Recency
    from convomem.strategies import Recency as strategies
    from convomem.strategies.budget import Recency as budget

    assert root is strategies is budget is Recency
    assert Recency.__module__ == "convomem.packing.recency"


def test_keep_turn_false_packs_the_turn_like_any_other_message() -> None:
    """The current turn is kept before anything else, over budget if need be; with
    ``keep_turn=False`` it is one more message for the strategy (Recency keeps the newest
    that fit: the long reply, and not the question before it)."""
    msgs = [
        Message("q", "user", 30, content="the question"),
        Message("r", "assistant", 80, content="a long reply"),
    ]
    kept = Packer(budget=100, tokenizer="given").pack(msgs)
    assert [m.id for m in kept.kept] == ["q", "r"] and not kept.fits
    assert kept.decisions[0].reason == "turn"
    plain = Packer(budget=100, tokenizer="given", keep_turn=False).pack(msgs)
    assert [m.id for m in plain.kept] == ["r"] and plain.fits
    assert [d.reason for d in plain.decisions] == ["budget", "recent"]
    with pytest.raises(ConfigError, match="keep_turn="):
        Packer(budget=100, keep_turn="no")  # type: ignore[arg-type]
