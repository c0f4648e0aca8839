"""FactLedger: ranking, bounded storage and the incremental selection, against a
brute-force model that re-sorts everything on every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from convomem.errors import ConfigError
from convomem.model import Message, ToolResultBlock
from convomem.summaries._fact import label
from convomem.summaries.facts import (
    FACTS_HEADER,
    KIND_VALUE,
    KINDS,
    SOURCE_TIER,
    Fact,
    FactLedger,
    render_facts,
)
from convomem.tokens import get_tokenizer

# -- the model ---------------------------------------------------------------------------


@dataclass
class Row:
    fact: Fact
    seq: int
    mentions: int
    tier: int

    def rank(self) -> tuple[int, int, int]:
        words = ("never", "don't", "do not", "allerg", "avoid")
        bump = 0
        if self.fact.kind == "preference":
            if any(w in self.fact.value.lower() for w in words):
                bump = 2
            elif any(c.isdigit() for c in self.fact.value):
                bump = 1
        return (self.tier, KIND_VALUE[self.fact.kind] + bump + min(self.mentions - 1, 2), self.seq)


class Model:
    """The ledger as the documentation states it, computed the slow and obvious way."""

    def __init__(self, count: Any, max_facts: int, max_stored: int | None) -> None:
        self.count = count
        self.max_facts = max_facts
        self.max_stored = max_stored
        self.rows: list[Row] = []
        self.seq = 0
        self.dropped = 0

    def cost(self, fact: Fact) -> int:
        return int(self.count(fact.value + "; "))

    def add(self, facts: list[Fact]) -> list[Fact]:
        new: list[Row] = []
        for f in facts:
            row = next((r for r in self.rows if r.fact.key == f.key), None)
            if row is not None:
                row.mentions += 1
                row.tier = max(row.tier, f.tier)
                continue
            self.seq += 1
            self.rows.append(Row(f, self.seq, 1, f.tier))
            new.append(self.rows[-1])
            while len(self.rows) > self.max_facts or (
                self.max_stored is not None
                and sum(self.cost(r.fact) for r in self.rows) > self.max_stored
            ):
                victim = min(self.rows, key=Row.rank)
                self.rows.remove(victim)
                self.dropped += 1
        return [r.fact for r in new if any(r is kept for kept in self.rows)]

    def estimate(self, rows: list[Row], omitted_line: bool) -> int:
        c = self.count
        total = c(FACTS_HEADER + "\n") + sum(self.cost(r.fact) for r in rows)
        total += sum(c(label(k)) + c("\n") for k in {r.fact.kind for r in rows})
        if omitted_line:
            total += c(f"\n({self.max_facts} more facts omitted)")
        return int(total)

    def select(self, budget: int | None) -> tuple[tuple[Fact, ...], int]:
        rows = self.rows
        by_seq = sorted(rows, key=lambda r: r.seq)
        if budget is None:
            return tuple(r.fact for r in by_seq), 0
        if self.estimate(rows, False) <= budget:
            chosen = list(rows)
        else:
            ranked = sorted(rows, key=Row.rank, reverse=True)
            fits = [k for k in range(len(ranked) + 1) if self.estimate(ranked[:k], True) <= budget]
            k = max(fits, default=0)
            chosen = ranked[:k]
        # Then shortened, lowest rank first, while the real rendering is over budget.
        chosen.sort(key=Row.rank)
        while chosen:  # nothing at all rather than a bare "omitted" note
            facts = tuple(r.fact for r in sorted(chosen, key=lambda r: r.seq))
            omitted = len(rows) - len(facts)
            if self.count(render_facts(facts, omitted)) <= budget:
                return facts, omitted
            chosen.pop(0)
        return (), 0


# -- strategies --------------------------------------------------------------------------

VALUES = ["order 1182", "Bob", "I'm allergic to peanuts", "$12.50", "#A-77", "March 3", "3 nights"]
ROLES = [None, "user", "assistant", "tool", "system"]

facts_st = st.builds(
    Fact,
    st.sampled_from(KINDS),
    st.one_of(st.sampled_from(VALUES), st.text("abcdef 12", min_size=1, max_size=14)).filter(
        lambda v: v.strip() != ""
    ),
    st.none(),
    st.sampled_from(ROLES),
)

TOKENIZERS = {
    "approx": get_tokenizer("approx"),
    "words": get_tokenizer("words"),
    # Not additive at all: the rendering can count more than the sum of its parts.
    "lumpy": get_tokenizer(lambda t: len(t) // 3 + 2 * t.count(";")),
}


POOL = [
    Fact(kind, value, None, role)
    for kind, value, role in [
        ("date", "March 3", "tool"),
        ("date", "March 3", "user"),
        ("reference", "order 1182", "tool"),
        ("preference", "I'm allergic to peanuts", "user"),
        ("number", "3 nights", None),
        ("amount", "$12.50", "tool"),
    ]
]
batches = st.lists(st.one_of(st.sampled_from(POOL), facts_st), max_size=6)


class LedgerMachine(RuleBasedStateMachine):
    """Random batches of facts into ledgers kept for eight consecutive budgets (so the
    edges of "fits" are hit); after each step each ledger equals the model."""

    @initialize(
        tok=st.sampled_from(sorted(TOKENIZERS)),
        max_facts=st.integers(1, 12),
        max_stored=st.one_of(st.none(), st.integers(1, 80)),
        base=st.integers(0, 70),
    )
    def setup(self, tok: str, max_facts: int, max_stored: int | None, base: int) -> None:
        self.tok = TOKENIZERS[tok]
        self.budgets: list[int | None] = [None, *range(base, base + 8)]
        self.ledgers = [
            FactLedger(
                tokenizer=self.tok, max_facts=max_facts, max_stored_tokens=max_stored, budget=b
            )
            for b in self.budgets
        ]
        self.model = Model(self.tok.count, max_facts, max_stored)

    @rule(batch=batches)
    def add(self, batch: list[Fact]) -> None:
        expected = self.model.add(batch)
        for led in self.ledgers:
            assert led.add(batch) == expected

    @rule(batch=batches, other=st.integers(0, 90))
    def preview_changes_nothing(self, batch: list[Fact], other: int) -> None:
        for led in self.ledgers[:3]:
            before = (led.entries(), led.dropped, led.next_seq)
            shown = led.preview(batch)
            assert (led.entries(), led.dropped, led.next_seq) == before
            shown_other = led.preview(batch, other)
            copy = led.copy()  # the same as adding for real to a copy
            copy.add(batch)
            assert shown == copy.render(led.budget)
            assert shown_other == copy.render(other)

    @precondition(lambda self: len(self.ledgers[0]) > 0)
    @rule()
    def restore_round_trip(self) -> None:
        for led in self.ledgers[:3]:
            again = FactLedger(
                tokenizer=self.tok,
                max_facts=led.max_facts,
                max_stored_tokens=led.max_stored_tokens,
                budget=led.budget,
            )
            again.restore(led.entries(), next_seq=led.next_seq, dropped=led.dropped)
            assert again.render(led.budget) == led.render(led.budget)
            assert again.entries() == led.entries()

    @rule()
    def clear(self) -> None:
        for led in self.ledgers:
            led.clear()
        self.model.rows.clear()
        self.model.dropped = 0

    @invariant()
    def matches_the_model(self) -> None:
        model = self.model
        rows = [
            (r.fact, r.seq, r.mentions, r.tier) for r in sorted(model.rows, key=lambda r: r.seq)
        ]
        for led in self.ledgers:
            assert led.entries() == rows
            assert led.dropped == model.dropped
            assert len(led) <= led.max_facts
            budget = led.budget  # the incrementally kept selection
            assert led.select(budget) == model.select(budget), budget
            if budget is not None:
                assert self.tok.count(led.render(budget)) <= budget
        led = self.ledgers[0]
        for budget in (0, 25, 60):  # any other budget: computed from scratch
            assert led.select(budget) == model.select(budget), budget


LedgerMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=15, deadline=None)
test_ledger_matches_the_model = LedgerMachine.TestCase


# -- the ranking, by example -------------------------------------------------------------


def test_tool_amounts_never_push_out_what_the_user_said() -> None:
    led = FactLedger(budget=40)
    led.add([Fact("preference", "I'm allergic to peanuts", "u1", "user")])
    led.add([Fact("amount", f"${n}.00", f"t{n}", "tool") for n in range(200)])
    for n in range(50):  # repeated amounts earn mentions, not a higher tier
        led.add([Fact("amount", f"${n}.00", "t", "tool")])
    facts, omitted = led.select(40)
    assert Fact("preference", "I'm allergic to peanuts", "u1", "user") in facts
    assert omitted > 0
    assert "I'm allergic to peanuts" in led.render(40)


def test_storage_drops_tool_output_before_the_users_words() -> None:
    led = FactLedger(max_facts=5)
    led.add([Fact("number", "3 nights", "u", "user")])
    led.add([Fact("reference", f"order {n}", "t", "tool") for n in range(20)])
    assert Fact("number", "3 nights", "u", "user") in led.facts
    assert led.dropped == 16 and len(led) == 5


def test_tiers_are_documented_and_a_tool_result_counts_as_tool() -> None:
    assert SOURCE_TIER["user"] > SOURCE_TIER["assistant"] > SOURCE_TIER["tool"]
    led = FactLedger()
    tool_result = Message(
        "t", "user", content=[ToolResultBlock("c1", "Order 77123 costs $40.00. I prefer cash.")]
    )
    led.add_messages([tool_result])
    assert {f.source_role for f in led.facts} == {"tool"}
    assert not any(f.kind == "preference" for f in led.facts)  # not typed by the user


def test_mentions_add_at_most_two() -> None:
    led = FactLedger()
    led.add([Fact("number", f"{n} nights") for n in range(20)])  # value 2: below both
    led.add([Fact("date", "March 3")] * 9)  # 3 + 2 = 5
    led.add([Fact("reference", "order 1")])  # 5, and newer: wins the tie
    singles = [led.select(b)[0] for b in range(60) if len(led.select(b)[0]) == 1]
    assert singles and all([f.value for f in facts] == ["order 1"] for facts in singles)


def test_a_mention_by_the_user_raises_the_tier() -> None:
    led = FactLedger()
    led.add([Fact("reference", "order 1182", "t", "tool")])
    led.add([Fact("reference", "Order 1182", "u", "user")])
    ((fact, seq, mentions, tier),) = led.entries()
    assert (fact.source_id, seq, mentions, tier) == ("t", 1, 2, 2)


def test_max_stored_tokens_bounds_storage() -> None:
    tok = get_tokenizer("approx")
    led = FactLedger(tokenizer=tok, max_stored_tokens=30)
    led.add([Fact("name", f"Person Number{n}") for n in range(40)])
    assert sum(tok.count(f.value + "; ") for f in led.facts) <= 30
    assert led.dropped == 40 - len(led)


# -- the work ------------------------------------------------------------------------------


def test_adding_to_a_big_ledger_costs_the_same_as_to_a_small_one() -> None:
    calls = 0

    def counting(text: str) -> int:
        nonlocal calls
        calls += 1
        return -(-len(text) // 4)

    def cost_of_one_more(size: int) -> int:
        nonlocal calls
        led = FactLedger(tokenizer=counting, budget=200)
        led.add([Fact("reference", f"order {n}", "t", "tool") for n in range(size)])
        led.render(200)
        calls = 0
        led.add([Fact("preference", "I prefer email", "u", "user")])
        led.render(200)
        return calls

    small, big = cost_of_one_more(20), cost_of_one_more(5000)
    assert small == big <= 3  # the fact's own cost, and one count of the rendering


def test_preview_does_not_copy_the_ledger() -> None:
    calls = 0

    def counting(text: str) -> int:
        nonlocal calls
        calls += 1
        return -(-len(text) // 4)

    led = FactLedger(tokenizer=counting, budget=100)
    led.add([Fact("date", f"March {n}") for n in range(1, 29)] * 50)
    calls = 0
    led.preview([Fact("name", "Alice")])
    assert calls <= 3


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_facts": 0}, "max_facts=0"),
        ({"max_stored_tokens": 0}, "max_stored_tokens=0"),
        ({"budget": -1}, "budget=-1"),
        ({"budget": 1.5}, "budget=1.5"),
    ],
)
def test_options_are_checked(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError) as info:
        FactLedger(**kwargs)
    assert str(info.value).startswith(name)


def test_restore_refuses_repeats_and_a_full_ledger() -> None:
    led = FactLedger()
    f = Fact("name", "Alice")
    with pytest.raises(ConfigError, match="appears twice"):
        led.restore([(f, 1, 1, 1), (f, 2, 1, 1)], next_seq=2, dropped=0)
    assert len(led) == 0
    led.add([f])
    with pytest.raises(ConfigError, match="must be empty"):
        led.restore([], next_seq=0, dropped=0)
    assert "alice" in led and "ALICE" in led and "Bob" not in led
