"""OfflineExtractor: keyed facts from what a user says and what a tool returns."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message
from convomem.summaries._keyed_rules import MAX_TEXT
from convomem.summaries.extractor import AsyncExtractor, Extractor, OfflineExtractor
from convomem.summaries.keyed import KeyedFact, norm_attribute, norm_value

DEV = Path(__file__).parents[2] / "bench" / "data" / "facts_dev.json"
AT = dt.datetime(2026, 3, 5, 10, tzinfo=dt.UTC).timestamp()  # a Thursday
ROLES = ("user", "tool", "assistant")


def pairs(text: str, role: str = "user", at: float | None = AT) -> set[tuple[str, str]]:
    facts = OfflineExtractor().extract([Message(role=role, content=text, created_at=at)])
    return {(f.key[1], f.value) for f in facts}


def test_every_development_set_expectation_is_extracted_exactly():
    """The set the extractor is tuned on (the held-out one is only for bench_facts)."""
    for case in json.loads(DEV.read_text(encoding="utf-8"))["cases"]:
        for m in case["messages"]:
            at = dt.datetime.fromisoformat(m["at"].replace("Z", "+00:00")).timestamp()
            got = {(a, norm_value(v)) for a, v in pairs(m["text"], m["role"], at)}
            want = {(norm_attribute(a), norm_value(v)) for a, v in m["expect"]}
            assert got == want, (case["id"], m["text"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Ada", {("name", "Ada")}),
        ("I hate cilantro and I'm allergic to shellfish.",
         {("pref:cilantro", "dislikes"), ("allergy:shellfish", "yes")}),
        ("my new phone number is 415-555-0100", {("phone", "415-555-0100")}),
        ("I have a dentist appointment next Monday", {("dentist appointment", "2026-03-09")}),
        ("My daughter is seven", {("daughter", "7")}),
        ("Je m'appelle Marc et j'habite à Paris.", {("name", "Marc"), ("city", "Paris")}),
        ("Ich heiße Lena.", {("name", "Lena")}),
        ("Just so you know, I eat pescatarian.", {("diet", "pescatarian")}),
        ("I follow a vegan diet and I keep it simple.", {("diet", "vegan")}),
        ("I'm on a gluten-free diet.", {("diet", "gluten-free")}),
        ("I left Initech and started at Vandelay Imports on Monday.",
         {("employer", "Vandelay Imports")}),
        ("I quit Globex to join Hooli.", {("employer", "Hooli")}),
        ("I started working at Northwind last week.", {("employer", "Northwind")}),
        ("I'm employed by Acme Corp.", {("employer", "Acme Corp")}),
        # not a diet, not an employer
        ("I eat vegetables a lot.", set()),
        ("I left Austin and moved to Lyon.", {("city", "Lyon")}),
        ("I started at nine and left at noon.", set()),
    ],
)  # fmt: skip
def test_phrasings(text: str, expected: set[tuple[str, str]]):
    assert pairs(text) == expected


def test_a_name_is_never_filed_as_a_preference():
    assert pairs("My name is Ada and I like tea.") == {("name", "Ada"), ("pref:tea", "likes")}


def test_relative_dates_need_the_message_time():
    assert pairs("My flight is tomorrow.") == {("flight", "2026-03-06")}
    assert pairs("My flight is tomorrow.", at=None) == {("flight", "tomorrow")}


def test_tool_results_yield_their_fields_json_pairs_and_labels():
    nested = json.dumps({"policy": {"number": "PL-1", "renewal_date": "2026-12-01"}, "x": None})
    assert pairs(nested, "tool") == {
        ("policy number", "PL-1"),
        ("policy renewal date", "2026-12-01"),
    }
    assert pairs("status=shipped, eta=2026-03-09", "tool") == {
        ("status", "shipped"),
        ("eta", "2026-03-09"),
    }
    assert pairs("Done. Confirmation code: QX7P2M.", "tool") == {("confirmation code", "QX7P2M")}
    # A tool's output never yields the user's preferences, nor the assistant's anything.
    assert pairs("I don't like olives.", "tool") == set()
    assert pairs("My name is Ada.", "assistant") == set()


def test_provenance_and_protocols():
    m = Message("m9", "user", content="I live in Oslo.", created_at=AT)
    ex = OfflineExtractor()
    (fact,) = ex.extract([m])
    assert fact == KeyedFact("city", "Oslo", source_role="user", message_id="m9", valid_from=AT)
    assert fact.current and fact.key == ("user", "city")
    assert asyncio.run(ex.aextract([m])) == [fact]
    assert ex.calls == 2
    assert isinstance(ex, Extractor) and isinstance(ex, AsyncExtractor)


def test_work_is_bounded_on_hostile_text():
    """Only the first MAX_TEXT characters are read; patterns are bounded (no rescans)."""
    tail = " My name is Zed."
    assert pairs("my " * (MAX_TEXT // 3 + 10) + tail) == set()
    assert pairs("a-" * 20_000 + "@" + "." * 20_000, "tool") == set()


def test_one_value_per_key_per_message_the_first_wins():
    assert pairs("I live in Rome. I live in Milan.") == {("city", "Rome")}


_PIECES = st.sampled_from(
    ["I ", "my ", "name is ", "Ada ", "don't like ", "allergic to ", "live in ", "two ",
     "tomorrow", "{", '"a": ', "=", ":", ", and I ", ". ", "@x.io ", "555-123-4567 ", "ß", "ñ"]
)  # fmt: skip


@settings(max_examples=80)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=30), st.sampled_from(ROLES))
def test_any_text_yields_well_formed_facts_never_an_error(parts: list[str], role: str):
    text = "".join(parts)
    m = Message("m", role, content=text or ".", created_at=AT)
    facts = OfflineExtractor().extract([m])
    assert facts == OfflineExtractor().extract([m])  # deterministic
    keys = [f.key for f in facts]
    assert len(keys) == len(set(keys))
    assert all(f.value.strip() and len(f.value) <= 200 for f in facts)
