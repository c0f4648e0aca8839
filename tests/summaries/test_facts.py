"""Key-facts extraction and the FactLedger."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.summaries.facts import (
    FACTS_HEADER,
    KIND_VALUE,
    Fact,
    FactLedger,
    extract_facts,
    extract_from_messages,
    render_facts,
    split_sentences,
)
from convomem.tokens import get_tokenizer


def pairs(text: str, **kw: bool) -> list[tuple[str, str]]:
    return [(f.kind, f.value) for f in extract_facts(text, **kw)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Hi, my order 1182 never arrived and I talked to Bob Jones on March 3.",
            [("reference", "order 1182"), ("name", "Bob Jones"), ("date", "March 3")],
        ),
        (
            "Your ticket #A-77 was opened on 2026-03-14.",
            [("reference", "ticket #A-77"), ("date", "2026-03-14")],
        ),
        ("We refunded $12.50 and 30 EUR.", [("amount", "$12.50"), ("amount", "30 EUR")]),
        ("The total was $1,200.00 in the end.", [("amount", "$1,200.00")]),
        (
            "Send it to alice.smith+shop@example.co.uk please.",
            [("email", "alice.smith+shop@example.co.uk")],
        ),
        (
            "It shipped 3/14/2026 and arrives next Monday at 3pm.",
            [("date", "3/14/2026"), ("date", "next Monday"), ("date", "3pm")],
        ),
        ("Use INV-2026-001, see also #4521.", [("id", "INV-2026-001"), ("id", "#4521")]),
        ("The reference is XK-12.", [("reference", "reference is XK-12")]),
        (
            "A room for 3 nights, 2 adults. Call 555-123-4567.",
            [("number", "3 nights"), ("number", "2 adults"), ("number", "555-123-4567")],
        ),
        ("Dr. Jones will call. Thanks Alice, see you.", [("name", "Dr. Jones"), ("name", "Alice")]),
        (
            "The order number is 99812 and the card ending in 4242 was charged.",
            [("reference", "order number is 99812"), ("reference", "card ending in 4242")],
        ),
        ("I prefer email over phone.", [("preference", "I prefer email over phone")]),
        (
            "I really love window seats! I hate waiting.",
            [("preference", "I really love window seats"), ("preference", "I hate waiting")],
        ),
        ("Please never call me after 8pm.", [("preference", "Please never call me after 8pm")]),
        (
            "I'd rather pay by card; my favorite color is blue.",
            [("preference", "I'd rather pay by card"), ("preference", "my favorite color is blue")],
        ),
        ("I'm allergic to peanuts.", [("preference", "I'm allergic to peanuts")]),
    ],
)
def test_realistic_sentences(text: str, expected: list[tuple[str, str]]) -> None:
    got = pairs(text)
    for item in expected:
        assert item in got, (item, got)


def test_a_date_is_not_a_name_and_spans_are_claimed_once() -> None:
    got = pairs("We spoke on March 3 about order 1182.")
    assert ("date", "March 3") in got
    assert not any(k == "name" for k, _ in got)
    assert [v for k, v in got if k == "reference"] == ["order 1182"]
    assert not any(k == "id" for k, _ in got)


def test_a_lone_capitalized_word_opening_a_sentence_is_not_a_name() -> None:
    assert pairs("Shipping takes a while. Great news though.") == []
    assert ("name", "Alice Smith") in pairs("Alice Smith called about it.")
    assert ("name", "Carol") in pairs("Yesterday I met Carol.")


def test_facts_come_in_order_of_appearance_each_once() -> None:
    facts = extract_facts("order 1182, then #B-9, then order 1182 again", source_id="m7")
    assert [f.value for f in facts] == ["order 1182", "#B-9"]
    assert all(f.source_id == "m7" for f in facts)


def test_preferences_only_from_user_messages() -> None:
    msgs = [
        Message("u", "user", content="I prefer email. My order 17 is late."),
        Message("a", "assistant", content="I love helping! Order 17 is on its way."),
    ]
    facts = extract_from_messages(msgs)
    prefs = [f for f in facts if f.kind == "preference"]
    assert [f.source_id for f in prefs] == ["u", "u"]  # "I prefer email", "My order 17 is late"
    assert any(f.kind == "reference" and f.source_id == "a" for f in facts)
    assert extract_facts("I prefer tea", preferences=False) == []


def test_split_sentences_keeps_abbreviations_and_decimals() -> None:
    sents = [s for _, s in split_sentences("Dr. Smith paid $12.50 today. e.g. this one!\nNext")]
    assert sents == ["Dr. Smith paid $12.50 today.", "e.g. this one!", "Next"]
    text = "  One.  Two? "
    for start, s in split_sentences(text):
        assert text[start : start + len(s)] == s


def test_fact_key_folds_case_and_whitespace() -> None:
    assert Fact("reference", "Order  1182").key == Fact("reference", "order 1182", "x").key
    assert Fact("name", "Bob").key != Fact("preference", "Bob").key


# -- ledger ------------------------------------------------------------------------


def test_ledger_dedups_keeps_first_seen_order_and_source() -> None:
    led = FactLedger()
    new = led.add_messages([Message("m1", "user", content="My order 1182 is late, ask Bob Lee.")])
    assert [f.value for f in new] == ["My order 1182 is late, ask Bob Lee", "order 1182", "Bob Lee"]
    again = led.add_messages([Message("m2", "user", content="Order 1182? Bob Lee knows.")])
    assert again == []  # "Order 1182" and "Bob Lee" were seen: counted as mentions
    ref = next(f for f in led.facts if f.kind == "reference")
    assert ref.source_id == "m1"
    assert led.mentions(ref) == 2
    assert "ORDER 1182" in led and Fact("name", "bob lee") in led and 3 not in led
    assert [f.value for f in led][:3] == [f.value for f in new]
    assert len(led) == len(led.facts)


def test_render_is_verbatim_grouped_by_kind() -> None:
    led = FactLedger()
    led.add([Fact("name", "Alice"), Fact("reference", "order 1182"), Fact("name", "Bob")])
    text = led.render()
    assert text.splitlines() == [FACTS_HEADER, "- name: Alice; Bob", "- reference: order 1182"]
    assert FactLedger().render() == ""
    assert render_facts([], omitted=2) == ""  # a bare "omitted" note says nothing


def test_render_respects_the_token_share_and_says_what_it_dropped() -> None:
    tok = get_tokenizer("approx")
    led = FactLedger(tokenizer=tok)
    led.add(Fact("number", f"{i} nights") for i in range(30))  # low value, oldest
    led.add([Fact("preference", "I prefer email"), Fact("reference", "order 1182")])
    text = led.render(40)
    assert tok.count(text) <= 40
    assert "I prefer email" in text and "order 1182" in text
    facts, omitted = led.select(40)
    assert omitted == len(led) - len(facts) > 0
    assert f"({omitted} more facts omitted)" in text
    kept_numbers = [f.value for f in facts if f.kind == "number"]
    # among equals the oldest go first: what is kept is the newest
    assert kept_numbers == [f"{i} nights" for i in range(30)][-len(kept_numbers) :]
    assert len(led) == 32  # omitted facts stay in the ledger


def test_repeated_mentions_raise_a_fact_over_its_peers() -> None:
    led = FactLedger()
    led.add([Fact("date", "March 3")] + [Fact("date", f"March {d}") for d in range(10, 28)])
    led.add([Fact("date", "March 3"), Fact("date", "March 3")])
    facts, omitted = led.select(30)
    assert omitted > 0 and Fact("date", "March 3") in facts


def test_tiny_budget_renders_nothing_rather_than_overflowing() -> None:
    led = FactLedger()
    led.add([Fact("name", "Alice")])
    assert led.render(2) == ""


def test_max_facts_drops_oldest_least_valuable() -> None:
    led = FactLedger(max_facts=3)
    led.add([Fact("preference", "I like tea"), Fact("number", "3 nights"), Fact("name", "Bo")])
    led.add([Fact("number", "4 nights")])
    assert [f.value for f in led] == ["I like tea", "Bo", "4 nights"]
    assert led.dropped == 1


def test_copy_is_independent_and_clear_forgets() -> None:
    led = FactLedger()
    led.add([Fact("name", "Alice")])
    other = led.copy()
    other.add([Fact("name", "Bob")])
    assert len(led) == 1 and len(other) == 2
    assert led.render() != other.render()
    led.clear()
    assert len(led) == 0 and led.render() == ""


def test_bad_input_is_a_typed_error() -> None:
    with pytest.raises(ConfigError, match="max_facts=0"):
        FactLedger(max_facts=0)
    led = FactLedger()
    led.add([Fact("name", "Alice")])
    with pytest.raises(ConfigError, match="fact='Bob'"):
        led.add(["Bob"])  # type: ignore[list-item]
    assert [f.value for f in led] == ["Alice"]


def test_kind_values_cover_every_kind() -> None:
    from convomem.summaries.facts import KINDS

    assert set(KINDS) == set(KIND_VALUE)


# -- properties --------------------------------------------------------------------

FILLER_TEXT = (
    "the package was late and we checked again today because support looked into this "
    "shipping problem with some care while everyone waited for news about the weather"
)
FILLER = FILLER_TEXT.split()
NAMES = ["Alice", "Bob", "Carol", "Dmitri", "Esther", "Farouk", "Greta", "Hiro"]


@st.composite
def planted_text(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    planters = [
        lambda: ("reference", f"order {draw(st.integers(100, 99999))}"),
        lambda: ("email", f"{draw(st.sampled_from(['ann', 'bo.k', 'c_d']))}@example.com"),
        lambda: ("amount", f"${draw(st.integers(1, 999))}.{draw(st.integers(0, 99)):02d}"),
        lambda: (
            "date",
            f"20{draw(st.integers(10, 39))}-{draw(st.integers(1, 12)):02d}-"
            f"{draw(st.integers(1, 28)):02d}",
        ),
        lambda: ("id", f"#{draw(st.sampled_from('ABCXZ'))}-{draw(st.integers(1, 9999))}"),
        lambda: ("name", draw(st.sampled_from(NAMES))),
        lambda: (
            "preference",
            f"I prefer {draw(st.sampled_from(['tea', 'email', 'aisle seats']))}",
        ),
    ]
    n = draw(st.integers(1, 6))
    chosen = [draw(st.sampled_from(planters))() for _ in range(n)]
    sentences: list[str] = []
    for kind, value in chosen:
        for _ in range(draw(st.integers(0, 3))):
            words = draw(st.lists(st.sampled_from(FILLER), min_size=3, max_size=12))
            sentences.append(" ".join(words) + ".")
        lead = " ".join(draw(st.lists(st.sampled_from(FILLER), min_size=1, max_size=5)))
        if kind == "name":
            sentences.append(f"{lead} with {value} yesterday.")
        elif kind == "preference":
            sentences.append(f"{value}.")
        else:
            sentences.append(f"{lead} {value} {draw(st.sampled_from(FILLER))}.")
    return " ".join(sentences), chosen


@settings(max_examples=80, deadline=None)
@given(planted_text())
def test_planted_facts_in_filler_are_extracted(case: tuple[str, list[tuple[str, str]]]) -> None:
    text, planted = case
    facts = extract_facts(text)
    for kind, value in planted:
        # an id right after a keyword ("package #A-1") is a reference: it carries its context
        kinds = {kind, "reference"} if kind == "id" else {kind}
        assert any(f.kind in kinds and value in f.value for f in facts), (kind, value, facts)
    assert not any(f.kind == "name" and f.value not in NAMES for f in facts)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(KIND_VALUE)), st.text(min_size=1, max_size=30)),
        max_size=40,
    ),
    st.integers(0, 200),
)
def test_rendering_never_exceeds_its_share(items: list[tuple[str, str]], budget: int) -> None:
    tok = get_tokenizer("approx")
    led = FactLedger(tokenizer=tok)
    led.add(Fact(k, v) for k, v in items)  # type: ignore[arg-type]
    assert tok.count(led.render(budget)) <= budget
    facts, omitted = led.select(budget)
    assert omitted in (0, len(led) - len(facts))


def test_a_preference_clause_is_not_cut_at_a_dot_inside_a_word() -> None:
    from convomem.summaries.facts import extract_facts

    text = "Great. My email is maya.chen@example.com. I prefer the $12.50 plan, thanks!"
    prefs = [f.value for f in extract_facts(text) if f.kind == "preference"]
    assert prefs == ["My email is maya.chen@example.com", "I prefer the $12.50 plan, thanks"]
