"""The quick tests that skip a pattern pass never change what a scan finds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.summaries import extraction

PIECES = [
    "I paid 40 dollars",
    "$12.50",
    "EUR 30",
    "5 cents",
    "30 bucks",
    "£7",
    "¥300",
    "US$9",
    "on Monday",
    "next Friday",
    "March 3",
    "3rd of May",
    "2024-05-01",
    "10:30",
    "7 pm",
    "order ORD-1234",
    "#A77",
    "3 nights",
    "555-123-4567",
    "Dr. Ada Stone",
    "Sunday best",
    "INR 500",
    "a price of 361.25",
    "day",
    "today",
    "pounds",
    "cent",
    "x@y.org",
    "\n",
    ". ",
]


def reference_scan(text: str, preferences: bool) -> extraction.Scan:
    """The scan with every pass run (no quick test)."""
    atomic = tuple((kind, pattern, None) for kind, pattern, _ in extraction._ATOMIC)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(extraction, "_ATOMIC", atomic)
        return extraction._scan(text, preferences)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=8), st.booleans())
def test_a_scan_finds_what_a_scan_of_every_pass_finds(pieces: list[str], prefs: bool) -> None:
    text = " ".join(pieces)
    assert extraction._scan(text, prefs) == reference_scan(text, prefs)


def test_amounts_and_dates_are_still_found() -> None:
    facts = extraction.extract_facts("I paid 40 dollars on Monday and $12.50 on March 3.")
    got = {(f.kind, f.value) for f in facts}
    assert {("amount", "40 dollars"), ("amount", "$12.50")} <= got
    assert {("date", "Monday"), ("date", "March 3")} <= got
    plain = extraction.extract_facts("The price is 361.25 for 2 items.")
    assert not [f for f in plain if f.kind in ("amount", "date")]
