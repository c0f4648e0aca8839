"""Fact extraction on huge and hostile text, the scan window, and the memo."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message
from convomem.summaries.extraction import (
    MAX_SCAN_CHARS,
    MAX_VALUE_CHARS,
    extract_facts,
    extract_message,
    fact_cache_info,
    scan_text,
    scan_window,
    split_sentences,
)

_n = itertools.count()


def fresh(text: str) -> str:
    """The text with a tag no other test uses (the memo is shared by the process)."""
    return f"{text} [t{next(_n)}]"


# -- the memo ----------------------------------------------------------------------------


def test_a_text_is_scanned_once() -> None:
    text = fresh("Order 5512 for Maya Chen ships on 2026-05-01.")
    before = fact_cache_info()
    a = extract_facts(text, source_id="x")
    b = extract_facts(text, source_id="y", source_role="tool")
    after = fact_cache_info()
    assert after.misses - before.misses == 1 and after.hits - before.hits >= 1
    assert [(f.kind, f.value) for f in a] == [(f.kind, f.value) for f in b]
    assert {f.source_id for f in a} == {"x"} and {f.source_role for f in b} == {"tool"}
    extract_facts(text, preferences=False)  # another question about the same text
    assert fact_cache_info().misses - after.misses == 1


def test_extract_message_reports_whether_it_scanned() -> None:
    m = Message("m", "user", content=fresh("I prefer the aisle, order 771."))
    facts, scanned = extract_message(m)
    assert scanned and any(f.kind == "preference" for f in facts)
    assert extract_message(m) == (facts, False)
    assert extract_message(Message("e", "user", content="")) == ([], False)


def test_the_summarizer_view_shares_the_scan() -> None:
    text = fresh("Ticket #Q-12 is open. Call 555-010-2000 tomorrow.")
    extract_facts(text)
    before = fact_cache_info().misses
    scan = scan_text(text, True)
    assert fact_cache_info().misses == before
    assert [s for _, s in scan.sentences] == [s for _, s in split_sentences(text)]
    assert {v for _, _, v in scan.spans} >= {"Ticket #Q-12", "555-010-2000"}


# -- huge text -----------------------------------------------------------------------------


def test_the_window_keeps_head_and_tail_cut_at_spaces() -> None:
    text = "start " + "word " * 40_000 + "end"
    window = scan_window(text)
    assert len(window) <= MAX_SCAN_CHARS + 3
    assert window.startswith("start word") and window.endswith("word end")
    assert "\n…\n" in window and "wor\n" not in window and "\nord" not in window
    short = "just a short text"
    assert scan_window(short) is short and scan_window(text, None) is text


def test_facts_at_both_ends_of_a_huge_message_are_found() -> None:
    filler = "the queue moved slowly and nothing else happened at all. " * 4_000  # 228 KB
    text = fresh(f"My order 90210 is missing. {filler}Please call Dana Scully at dana@x.org.")
    values = {f.value for f in extract_facts(text)}
    assert {"order 90210", "dana@x.org", "Dana Scully"} <= values
    middle = f"{filler[:100_000]} order 31337 {filler[:100_000]}"
    assert "order 31337" not in {f.value for f in extract_facts(middle)}  # documented
    assert "order 31337" in {f.value for f in extract_facts(middle, max_chars=None)}


HOSTILE = {
    "dots": "." * 60_000,
    "bangs": "!?" * 30_000 + " x",
    "hyphens": "a-" * 30_000,
    "double hyphens": "--a" * 20_000,
    "digit id": "a1-" * 20_000,
    "comma groups": "123," * 15_000,
    "digits": "7" * 60_000,
    "spaces": " " * 60_000,
    "one word": "a" * 60_000,
    "title case": "Aa " * 20_000,
    "preferences": "I like it and " * 5_000,
    "dotted words": "a.b" * 20_000,
    "references": "order " * 10_000,
    "hashes": "#a" * 30_000,
    "at signs": "a@" * 30_000,
    "newlines": "\n" * 60_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_is_scanned_whole_and_yields_sane_facts(name: str) -> None:
    text = HOSTILE[name]
    facts = extract_facts(text, max_chars=None)  # the whole text, not a window
    for f in facts:
        limit = 160 if f.kind == "preference" else MAX_VALUE_CHARS
        assert 0 < len(f.value) <= limit
    assert len({f.key for f in facts}) == len(facts)
    assert sum(len(s) for _, s in split_sentences(text)) <= len(text)


def test_a_long_id_is_noise_not_a_fact() -> None:
    assert extract_facts("see " + "ab12-" * 50 + "x please", max_chars=None) == []
    assert [f.value for f in extract_facts("see AB12-CD34 please")] == ["AB12-CD34"]


# -- properties ----------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aA1 .-#@$,:!?\n")), max_size=400))
def test_any_text_gives_facts_in_order_each_once(text: str) -> None:
    facts = extract_facts(text, max_chars=None)
    assert len({f.key for f in facts}) == len(facts)
    for f in facts:
        assert f.value and f.value == f.value.strip()
    sentences = split_sentences(text)
    for start, s in sentences:
        assert text[start : start + len(s)] == s
    assert [a for a, _ in sentences] == sorted(a for a, _ in sentences)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=3000), st.integers(64, 2000))
def test_the_window_is_bounded_and_keeps_both_ends(text: str, limit: int) -> None:
    window = scan_window(text, limit)
    if len(text) <= limit:
        assert window == text
    else:
        assert len(window) <= limit + 3
        head, _, tail = window.partition("\n…\n")
        assert text.startswith(head) and text.endswith(tail)


def test_my_name_is_states_a_name_not_a_preference():
    """The known defect: "My name is Ada" was filed as a preference clause."""
    from convomem.summaries.facts import extract_facts

    for text, name in [("My name is Ada.", "Ada"), ("my name is bob", "bob")]:
        kinds = [(f.kind, f.value) for f in extract_facts(text)]
        assert ("self", name) in kinds  # the user's own: it outranks every other name
        assert not any(k == "preference" for k, _ in kinds)
        tool = [(f.kind, f.value) for f in extract_facts(text, preferences=False)]
        assert ("name", name) in tool  # not the user's words: a name like any other
    other = extract_facts("My name is Ada and my favourite colour is blue.")
    assert [f.value for f in other if f.kind == "preference"] == ["my favourite colour is blue"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I moved to Accra last year.", [("place", "Accra")]),
        ("We flew from Lisbon to Denver.", [("place", "Lisbon"), ("place", "Denver")]),
        ("Ship it to 1550 Larimer St, Denver.", [("place", "Larimer St"), ("place", "Denver")]),
        ("I talked to Ada yesterday.", [("name", "Ada")]),  # "to" alone is no place
        ("Call me Bea.", [("self", "Bea")]),
        ("Don't call me Bob.", [("name", "Bob")]),  # a refusal, not their name
        ("Yep John, aww, my daughter Sara's party.", [("name", "John"), ("name", "Sara")]),
    ],
)
def test_places_and_the_users_own_name_are_told_from_other_names(text, expected):
    from convomem.summaries.facts import extract_facts

    got = [(f.kind, f.value) for f in extract_facts(text) if f.kind in ("self", "name", "place")]
    assert got == expected


def test_the_ledger_never_trades_the_users_name_for_a_place():
    """Issue 19: "name: Accra" in place of "My name is Dana Okafor" as the chat grew."""
    from convomem.model import Message
    from convomem.summaries.facts import FactLedger
    from convomem.tokens import get_tokenizer

    tok = get_tokenizer("approx")
    for budget in (30, 60, 120):
        ledger = FactLedger(budget=budget)
        ledger.add_messages([Message("n", "user", content="Hi, my name is Dana Okafor.")])
        for i, place in enumerate(["Accra", "Lagos", "Kumasi", "Tamale", "Cape Coast"] * 8):
            ledger.add_messages(
                [Message(f"p{i}", "user", content=f"We drove to {place} and met Kofi{i}.")]
            )
        text = ledger.render(budget)
        assert tok.count(text) <= budget
        assert "the user's name: Dana Okafor" in text, text
    assert FactLedger().render(5) == ""  # nothing fits: nothing, not a bare header
