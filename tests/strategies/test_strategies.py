"""Budget strategies and windows: invariants for every combination, brute-force oracles."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _packing_support import (
    PIN_SPECS,
    check_invariants,
    histories,
    kept_ids,
    oracle_importance,
    oracle_recency,
    originals,
)
from convomem.errors import ConfigError, ConvomemError
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.packing import Packer
from convomem.strategies import (
    FirstFit,
    HeadTail,
    Importance,
    MaxAge,
    MaxTurns,
    Recency,
    default_scorer,
)
from convomem.tokens import get_tokenizer

GIVEN = get_tokenizer("given")
FEW = settings(max_examples=25, deadline=None)
MANY = settings(max_examples=80, deadline=None)


def drop_assistant_text(messages: list[Message]) -> list[Message]:
    """A plain-function stage: drop assistant messages that call no tool."""
    return [m for m in messages if m.role != "assistant" or m.has_tool_use()]


def drop_every_other(messages: list[Message]) -> list[Message]:
    """A filter that can break tool pairs (the Packer must repair after it)."""
    return messages[::2]


STRATEGIES: dict[str, Any] = {
    "recency": lambda: Recency(),
    "recency0": lambda: Recency(min_keep=0),
    "recency3": lambda: Recency(min_keep=3),
    "contiguous": lambda: Recency(contiguous=True),
    "first_fit": lambda: FirstFit(),
    "first_fit2": lambda: FirstFit(min_keep=2),
    "importance": lambda: Importance(),
    "max_turns": lambda: [MaxTurns(2), Recency()],
    "max_age": lambda: [MaxAge(30, now=lambda: 100.0), FirstFit(min_keep=0)],
    "head_tail": lambda: [HeadTail(1, 2), Recency(contiguous=True)],
    "function": lambda: [drop_assistant_text, Importance()],
    "pair_breaker": lambda: [drop_every_other, Recency()],
    "stacked": lambda: [
        MaxTurns(3),
        drop_every_other,
        HeadTail(2, 2),
        MaxAge(50, now=lambda: 80.0),
        Recency(min_keep=2),
    ],
}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@FEW
@given(
    messages=histories(),
    budget=st.integers(1, 200),
    pins=PIN_SPECS,
    unanswered=st.sampled_from(("drop", "stub")),
)
def test_every_strategy_keeps_the_invariants(
    name: str, messages: list[Message], budget: int, pins: tuple[Any, ...], unanswered: str
) -> None:
    packer = Packer(budget=budget, tokenizer=GIVEN, strategy=STRATEGIES[name](), pin=pins,
                    unanswered=unanswered)  # fmt: skip
    result = packer.pack(messages)
    check_invariants(messages, result, pins=pins, tokenizer=GIVEN)
    # The standalone strategy (fresh table) and a second Packer agree with the first.
    again = Packer(budget=budget, tokenizer=GIVEN, strategy=STRATEGIES[name](), pin=pins,
                   unanswered=unanswered).pack(messages)  # fmt: skip
    assert [d.reason for d in again.decisions] == [d.reason for d in result.decisions]


@MANY
@given(
    messages=histories(),
    budget=st.integers(1, 200),
    pins=PIN_SPECS,
    min_keep=st.integers(0, 3),
    contiguous=st.booleans(),
    unanswered=st.sampled_from(("drop", "stub")),
)
def test_recency_matches_brute_force(
    messages: list[Message],
    budget: int,
    pins: tuple[Any, ...],
    min_keep: int,
    contiguous: bool,
    unanswered: str,
) -> None:
    strategy = Recency(min_keep=min_keep, contiguous=contiguous)
    result = Packer(budget=budget, tokenizer=GIVEN, strategy=strategy, pin=pins,
                    unanswered=unanswered).pack(messages)  # fmt: skip
    expected = oracle_recency(messages, budget, pins, GIVEN, min_keep=min_keep,
                              contiguous=contiguous, unanswered=unanswered)  # fmt: skip
    assert kept_ids(result) == expected
    check_invariants(messages, result, pins=pins, tokenizer=GIVEN)


@MANY
@given(
    messages=histories(),
    budget=st.integers(1, 200),
    pins=PIN_SPECS,
    min_keep=st.integers(0, 3),
)
def test_first_fit_matches_brute_force(
    messages: list[Message], budget: int, pins: tuple[Any, ...], min_keep: int
) -> None:
    result = Packer(budget=budget, tokenizer=GIVEN, strategy=FirstFit(min_keep=min_keep),
                    pin=pins).pack(messages)  # fmt: skip
    expected = oracle_recency(messages, budget, pins, GIVEN, min_keep=min_keep, newest_first=False)
    assert kept_ids(result) == expected


def by_length(message: Message) -> float:
    return float(len(message.text()) % 3)


@MANY
@given(
    messages=histories(),
    budget=st.integers(1, 200),
    pins=PIN_SPECS,
    custom=st.booleans(),
)
def test_importance_matches_brute_force(
    messages: list[Message], budget: int, pins: tuple[Any, ...], custom: bool
) -> None:
    scorer = by_length if custom else default_scorer
    strategy = Importance(scorer if custom else None)
    result = Packer(budget=budget, tokenizer=GIVEN, strategy=strategy, pin=pins).pack(messages)
    assert kept_ids(result) == oracle_importance(messages, budget, pins, GIVEN, scorer)


@MANY
@given(messages=histories(), budget=st.integers(1, 200), pins=PIN_SPECS)
def test_standalone_strategy_equals_packer(
    messages: list[Message], budget: int, pins: tuple[Any, ...]
) -> None:
    from convomem.model import PinPolicy

    for strategy in (Recency(), FirstFit(), Importance(), Recency(contiguous=True)):
        alone = strategy.pack(messages, budget=budget, tokenizer=GIVEN,
                              pinned_indices=PinPolicy(pins).resolve(messages))  # fmt: skip
        packed = Packer(budget=budget, tokenizer=GIVEN, strategy=strategy, pin=pins).pack(messages)
        assert [m.id for m in alone.kept] == [m.id for m in packed.kept]
        assert [d.reason for d in alone.decisions] == [d.reason for d in packed.decisions]


# ---------------------------------------------------------------------- unit behaviour


def msg(i: str, role: str, tokens: int, **kw: Any) -> Message:
    return Message(i, role, tokens, **kw)


def call(i: str, tokens: int, *ids: str) -> Message:
    return Message(i, "assistant", tokens, content=[ToolUseBlock(c, "f", {}) for c in ids])


def result(i: str, tokens: int, *ids: str) -> Message:
    return Message(i, "tool", tokens, content=[ToolResultBlock(c, "r") for c in ids])


def test_recency_skips_a_big_chunk_and_keeps_older_small_ones() -> None:
    ms = [msg("s", "system", 5), msg("u1", "user", 5), msg("a1", "assistant", 90),
          msg("u2", "user", 10)]  # fmt: skip
    r = Packer(budget=30, tokenizer=GIVEN).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u1", "u2"]
    assert [d.reason for d in r.decisions] == ["pinned", "recent", "budget", "turn"]
    c = Packer(budget=30, tokenizer=GIVEN, strategy=Recency(contiguous=True)).pack(ms)
    assert [m.id for m in c.kept] == ["s", "u2"]


def test_min_keep_forces_the_newest_chunk_over_budget() -> None:
    ms = [msg("s", "system", 5), msg("u1", "user", 5), msg("a2", "assistant", 100)]
    r = Packer(budget=30, tokenizer=GIVEN).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u1", "a2"]
    assert [d.reason for d in r.decisions] == ["pinned", "turn", "min_keep"]
    assert not r.fits and r.headroom == 30 - 110
    r0 = Packer(budget=30, tokenizer=GIVEN, strategy=Recency(min_keep=0)).pack(ms)
    assert [m.id for m in r0.kept] == ["s", "u1"] and r0.fits
    f = Packer(budget=30, tokenizer=GIVEN, strategy=FirstFit(min_keep=2)).pack(ms)
    assert [d.reason for d in f.decisions] == ["pinned", "turn", "min_keep"]
    # The current turn counts among the newest chunks min_keep forces: nothing more.
    turn = [msg("s", "system", 5), msg("a1", "assistant", 100), msg("u2", "user", 100)]
    r = Packer(budget=30, tokenizer=GIVEN).pack(turn)
    assert [m.id for m in r.kept] == ["s", "u2"] and not r.fits
    assert [d.reason for d in r.decisions] == ["pinned", "budget", "turn"]


def test_pins_overflowing_the_budget_are_reported_not_cut() -> None:
    ms = [msg("s", "system", 50), msg("a", "assistant", 5)]
    r = Packer(budget=10, tokenizer=GIVEN, strategy=Recency(min_keep=0)).pack(ms)
    assert [m.id for m in r.kept] == ["s"]
    assert not r.fits and "pinned messages alone need 50 tokens" in r.problems()[0]
    # The current turn is sent with them all the same.
    r = Packer(budget=10, tokenizer=GIVEN, strategy=Recency(min_keep=0)).pack(
        [*ms, msg("u", "user", 5)]
    )
    assert [m.id for m in r.kept] == ["s", "u"] and not r.fits


def test_importance_drops_low_scores_first_older_first() -> None:
    ms = [msg("s", "system", 10), msg("a1", "assistant", 10), msg("u1", "user", 10),
          call("c", 5, "x"), result("r", 5, "x"), msg("a2", "assistant", 10),
          msg("u2", "user", 10)]  # fmt: skip
    r = Packer(budget=35, tokenizer=GIVEN, strategy=Importance(), pin=()).pack(ms)
    # assistants (0) go first, the older first; then the older user (1)
    assert [m.id for m in r.kept] == ["s", "c", "r", "u2"]
    r2 = Packer(budget=55, tokenizer=GIVEN, strategy=Importance(), pin=()).pack(ms)
    assert [m.id for m in r2.kept] == ["s", "u1", "c", "r", "a2", "u2"]


def test_default_scorer_order() -> None:
    scores = [
        default_scorer(msg("s", "system", 1)),
        default_scorer(call("c", 1, "x")),
        default_scorer(result("r", 1, "x")),
        default_scorer(msg("u", "user", 1)),
        default_scorer(msg("a", "assistant", 1)),
    ]
    assert scores[0] > scores[1] == scores[2] > scores[3] > scores[4]


def test_importance_rejects_a_scorer_returning_no_number() -> None:
    ms = [msg("u", "user", 10), msg("a", "assistant", 10)]
    bad = Importance(lambda m: "high")  # type: ignore[arg-type, return-value]
    with pytest.raises(ConvomemError, match="must return a number"):
        Packer(budget=5, tokenizer=GIVEN, strategy=bad).pack(ms)


def test_max_turns_keeps_the_last_turns_and_system() -> None:
    ms = [msg("s", "system", 1), msg("u1", "user", 1), msg("a1", "assistant", 1),
          msg("u2", "user", 1), call("c", 1, "x"), result("r", 1, "x"),
          msg("a2", "assistant", 1), msg("u3", "user", 1), msg("a3", "assistant", 1)]  # fmt: skip
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[MaxTurns(2), Recency()], pin=()).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u2", "c", "r", "a2", "u3", "a3"]
    assert [d.reason for d in r.decisions[:3]] == ["recent", "max_turns", "max_turns"]
    every = Packer(budget=100, tokenizer=GIVEN, strategy=[MaxTurns(3), Recency()]).pack(ms)
    assert len(every.kept) == len(ms)


def test_max_turns_and_budget_compose() -> None:
    ms = [msg("s", "system", 1)] + [
        m for k in range(10) for m in (msg(f"u{k}", "user", 10), msg(f"a{k}", "assistant", 10))
    ]
    r = Packer(budget=45, tokenizer=GIVEN, strategy=[MaxTurns(5), Recency()]).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u8", "a8", "u9", "a9"]
    assert r.fits
    reasons = {d.id: d.reason for d in r.decisions}
    assert reasons["u0"] == "max_turns" and reasons["u7"] == "budget"


def test_max_age_drops_old_chunks_and_keeps_untimestamped() -> None:
    ms = [msg("s", "system", 1, created_at=0.0), msg("old", "user", 1, created_at=10.0),
          msg("none", "user", 1), msg("new", "user", 1, created_at=95.0)]  # fmt: skip
    clock = [100.0]
    window = MaxAge(20, now=lambda: clock[0])
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[window, Recency()]).pack(ms)
    assert [m.id for m in r.kept] == ["s", "none", "new"]
    assert r.decisions[1].reason == "max_age"
    clock[0] = 200.0
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[window, Recency()]).pack(ms)
    assert [m.id for m in r.kept] == ["s", "none", "new"]  # "new" is the current turn
    assert r.decisions[3].reason == "turn"
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[window, Recency()]).pack(ms[:3])
    assert [m.id for m in r.kept] == ["s", "none"]  # "none" is the turn; "old" is too old


def test_head_tail_keeps_both_ends() -> None:
    ms = [msg("s", "system", 1)] + [msg(f"u{k}", "user", 1) for k in range(6)]
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[HeadTail(2, 1), Recency()]).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u0", "u1", "u5"]
    assert {d.reason for d in r.decisions[3:6]} == {"head_tail"}
    r = Packer(budget=100, tokenizer=GIVEN, strategy=[HeadTail(0, 9), Recency()]).pack(ms)
    assert len(r.kept) == len(ms)


@pytest.mark.parametrize(
    ("make", "option"),
    [
        (lambda: Recency(min_keep=-1), "min_keep"),
        (lambda: Recency(min_keep=True), "min_keep"),
        (lambda: Recency(contiguous="yes"), "contiguous"),
        (lambda: FirstFit(min_keep=1.5), "min_keep"),
        (lambda: Importance(scorer=3), "scorer"),
        (lambda: MaxTurns(0), "n"),
        (lambda: MaxTurns("3"), "n"),
        (lambda: MaxAge(0), "seconds"),
        (lambda: MaxAge(float("inf")), "seconds"),
        (lambda: MaxAge(10, now=5), "now"),
        (lambda: HeadTail(-1, 2), "head"),
        (lambda: HeadTail(1, None), "tail"),
        (lambda: HeadTail(0, 0), "head"),
    ],
)
def test_bad_options_name_the_option(make: Any, option: str) -> None:
    with pytest.raises(ConfigError, match=f"^{option}="):
        make()


def test_max_age_clock_must_return_a_number() -> None:
    window = MaxAge(10, now=lambda: "noon")  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError, match="now"):
        Packer(budget=10, strategy=[window, Recency()]).pack([msg("u", "user", 1)])


def test_stub_mode_answers_unanswered_calls() -> None:
    ms = [
        msg("u", "user", 5),
        call("c", 5, "x", "y"),
        result("r", 5, "y"),
        msg("a", "assistant", 5),
    ]
    r = Packer(budget=100, tokenizer="approx", unanswered="stub").pack(ms)
    ids = [m.id for m in r.kept]
    assert ids == ["u", "c", "r", "stub_x", "a"]
    assert [s.id for s in r.stubs] == ["stub_x"] and r.stubs[0].metadata["convomem_stub"]
    assert [m.id for m in originals(r)] == ["u", "c", "r", "a"]
    d = Packer(budget=100, tokenizer="approx").pack(ms)
    assert [m.id for m in d.kept] == ["u", "a"]
    assert [x.reason for x in d.decisions] == ["turn", "unanswered", "unanswered", "recent"]


def table_chunks(messages: list[Message], pins: tuple[Any, ...]) -> list[tuple[list[int], str]]:
    """The Packer's table chunks (unanswered calls dropped), by brute force: ``(input
    indices, kind)``, kind ``"pinned"``, ``"free"``, ``"orphan"`` or ``"unanswered"``.

    A valid chunk is one table chunk (stray results are repaired, not fatal); an
    unsendable one is split: each tool-free message on its own (sent when pinned), then
    the rest. Kind ``"turn"``: pinned only by the current turn."""
    from _packing_support import tool_free, turn_pins
    from convomem.model import PinPolicy, group_pairs

    policy = PinPolicy(pins).resolve(messages)
    pinned_at = policy | turn_pins(messages, GIVEN, "drop")

    def kind(idx: list[int]) -> str:
        return "pinned" if policy.intersection(idx) else "turn"

    out: list[tuple[list[int], str]] = []
    for c in group_pairs(messages, pinned_at):
        if not (c.orphan or c.pending):
            out.append((list(c.indices), kind(c.indices) if c.pinned else "free"))
            continue
        bad = "orphan" if c.orphan else "unanswered"
        rest = []
        for i in c.indices:
            if tool_free(messages[i]):
                out.append(([i], kind([i]) if i in pinned_at else bad))
            else:
                rest.append(i)
        out.append((rest, bad))
    out.sort(key=lambda e: e[0][0])
    return out


def window_oracle(messages: list[Message], pins: tuple[Any, ...], window: Any) -> dict[str, str]:
    """Brute-force reasons for a window followed by a budget that keeps everything."""
    chunks = table_chunks(messages, pins)
    reasons: dict[str, str] = {}
    free = []
    for idx, kind in chunks:
        if kind == "free":
            free.append(idx)
        else:
            reasons.update((messages[i].id, kind) for i in idx)
    if isinstance(window, MaxTurns):
        starts = [idx[0] for idx, _ in chunks if messages[idx[0]].role == "user"
                  and not messages[idx[0]].has_tool_result()]  # fmt: skip
        cut = starts[-window.n] if len(starts) >= window.n else 0
        keep = [c for c in free if c[0] >= cut or messages[c[0]].role == "system"]
    elif isinstance(window, HeadTail):  # the tail counts the current turn's chunks
        head = free[: window.head]
        floor = head[-1][0] if head else -1
        after = [idx for idx, k in chunks if idx[0] > floor and k in ("free", "turn")]
        tail = after[max(0, len(after) - window.tail) :] if window.tail else []
        keep = head + [c for c in tail if c in free]
    else:
        cutoff = window.now() - window.seconds
        keep = []
        for c in free:
            ts = [messages[i].created_at for i in c if messages[i].created_at is not None]
            if not ts or max(ts) >= cutoff:
                keep.append(c)
    for c in free:
        reason = "recent" if c in keep else window.reason
        reasons.update((messages[i].id, reason) for i in c)
    return reasons


@MANY
@given(
    messages=histories(),
    pins=PIN_SPECS,
    which=st.sampled_from(("turns", "head_tail", "age")),
    n=st.integers(1, 4),
    m=st.integers(0, 3),
)
def test_windows_match_brute_force_with_their_reasons(
    messages: list[Message], pins: tuple[Any, ...], which: str, n: int, m: int
) -> None:
    window: Any = {
        "turns": MaxTurns(n),
        "head_tail": HeadTail(n, m),
        "age": MaxAge(10 * n, now=lambda: 100.0),
    }[which]
    packer = Packer(budget=100_000, tokenizer=GIVEN, strategy=[window, Recency(min_keep=0)],
                    pin=pins)  # fmt: skip
    result = packer.pack(messages)
    assert {d.id: d.reason for d in result.decisions} == window_oracle(messages, pins, window)
