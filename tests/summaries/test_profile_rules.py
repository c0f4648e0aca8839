"""The offline rules for real phrasing: clauses, negation, people and pets, health,
jobs, addresses, dated events, changes and corrections (issue 19 §2), each with the
phrasings it must not read."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message
from convomem.summaries._changes import correction, value_changes, value_corrections
from convomem.summaries._clauses import clauses, sentences
from convomem.summaries.extractor import OfflineExtractor

AT = dt.datetime(2026, 3, 5, 10, tzinfo=dt.UTC).timestamp()  # a Thursday


def pairs(text: str, at: float | None = AT) -> set[tuple[str, str]]:
    facts = OfflineExtractor().extract([Message(role="user", content=text, created_at=at)])
    return {(f.key[1], f.value) for f in facts}


def statements(text: str) -> set[str]:
    facts = OfflineExtractor().extract([Message(role="user", content=text, created_at=AT)])
    return {f.statement() for f in facts}


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I'm allergic to peanuts and live in Oslo", ["I'm allergic to peanuts", "I live in Oslo"]),
        ("My boss is Dmitri Volkov, she signs off on expenses.",
         ["My boss is Dmitri Volkov", "she signs off on expenses."]),
        ("I love hiking, chess and jazz.", ["I love hiking, chess and jazz."]),
        ("I work at Smith and Sons and love it.", ["I work at Smith and Sons", "I love it."]),
        ("Please never call me; I don't pick up.", ["Please never call me", "I don't pick up."]),
    ],
)  # fmt: skip
def test_clauses_split_at_a_new_subject_or_verb_never_inside_a_list(sentence, expected):
    assert clauses(sentence) == expected


def test_sentences_keep_abbreviations_amounts_and_emails_whole():
    text = "My landlord Ms. Okoye wants $12.50 e.g. now. Mail a.b@c.io today!\nNext"
    assert list(sentences(text)) == [
        "My landlord Ms. Okoye wants $12.50 e.g. now.",
        "Mail a.b@c.io today!",
        "Next",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # clause boundaries: two facts, neither runs into the other
        ("I'm allergic to peanuts and live in Oslo.",
         {("allergy:peanuts", "yes"), ("city", "Oslo")}),
        # negation: how not to contact them
        ("Please never call me, I don't pick up.", {("contact:phone call", "never")}),
        ("No calls before 10 am, please.", {("contact:phone call", "not before 10 am")}),
        ("I'm not on WhatsApp.", {("contact:whatsapp", "never")}),
        ("Please don't send me text messages.", {("contact:text", "never")}),
        ("Email only, please.", {("contact:email", "preferred")}),
        ("I don't eat pork.", {("pref:pork", "avoids")}),
        ("I can't stand jazz.", {("pref:jazz", "dislikes")}),
        # moves and changes
        ("I moved from Lisbon to Porto.", {("city", "Porto")}),
        ("I changed my mobile provider from Ziggo to Safaricom.",
         {("mobile provider", "Safaricom")}),
        ("I went vegan last year.", {("diet", "vegan")}),
        # possessives and appositions
        ("My dog Biscuit is a beagle.", {("dog:biscuit", "Biscuit, a beagle")}),
        ("My sister, Anika, lives two streets away.", {("sister:anika", "Anika")}),
        ("My landlord Ms. Okoye raised the rent.", {("landlord", "Ms. Okoye")}),
        ("I have a cat named Luna.", {("cat:luna", "Luna")}),
        ("The lease is under my wife's name, Amina Novak.", {("wife", "Amina Novak")}),
        ("Helen Park is my manager.", {("manager", "Helen Park")}),
        ("My card number is CLUB-2045 in case you need it.", {("card number", "CLUB-2045")}),
        ("My phone plan is with Orange.", {("phone plan", "Orange")}),
        # dates relative to the message's time
        ("I fly to Kyoto in two days.", {("fly to kyoto", "2026-03-07")}),
        ("I sprained my ankle three weeks ago.", {("sprained my ankle", "2026-02-12")}),
        ("The electrician is coming tomorrow.", {("electrician is coming", "2026-03-06")}),
        ("I started at Acme on Monday.", {("employer", "Acme")}),
        ("I joined a choir on Monday.", {("joined a choir", "2026-03-02")}),
        ("I joined an online group last week.", {("joined an online group", "week of 2026-02-23")}),
        ("We're moving next month.", {("moving", "2026-04")}),
        # health, jobs, addresses, indirect statements
        ("My doctor says I have type 1 diabetes.", {("health:type 1 diabetes", "type 1 diabetes")}),
        ("I get migraines when I skip sleep.", {("health:migraines", "migraines")}),
        ("My colleagues know I'm a high school teacher by training.",
         {("job", "high school teacher")}),
        ("Everyone at work calls me Dee.", {("nickname", "Dee")}),
        ("Please ship to 40 Canal Street because that's where I live.",
         {("address", "40 Canal Street")}),
        ("My delivery address is now my office: 1550 Larimer St, Denver, CO 80202.",
         {("delivery address", "1550 Larimer St, Denver, CO 80202")}),
        ("I bank with N26.", {("bank", "N26")}),
        ("My zip code is 02193.", {("zip code", "02193")}),  # as said: no leading zero lost
        ("My daughter is seven.", {("daughter", "7")}),
        ("I have a new phone number: +254 712 345 678.", {("phone", "+254 712 345 678")}),
    ],
)  # fmt: skip
def test_real_phrasings(text: str, expected: set[tuple[str, str]]):
    assert pairs(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "My desk is right next to the printer.",  # a state, not a value
        "My knee is a bit sore after the hike.",
        "My parents are thinking about retiring early.",
        "My team lead is on parental leave this month.",
        "My manager is traveling to Tokyo next month.",
        "A coworker brought homemade bread to the office yesterday.",  # not the user's
        "My friend got promoted last week.",  # no date "last week" can be resolved to
        "My neighbor's cat, Pickles, got stuck in a tree.",  # the neighbor's cat
        "Call me back tomorrow.",  # not a nickname
        "Don't call me Bob.",  # a refusal, not a nickname
        "I'm a big fan of jazz.",  # not a job
        "The new cafe on Elmwood Avenue is always packed.",  # not the user's address
        "Actually, it's fine.",  # a correction cue without a value
        "I had it done tomorrow.",  # a past event on a future date: no date
    ],
)
def test_what_is_not_a_fact_about_the_user(text: str):
    assert not {p for p in pairs(text) if not p[0].startswith("pref:")}, pairs(text)


def test_someone_elses_plans_are_not_the_users_events():
    assert pairs("Our manager, Gustavo, is on leave until Friday.") == {("manager", "Gustavo")}
    assert pairs("My sister is visiting tomorrow.") == set()


def test_statements_read_as_a_profile():
    assert statements("Never call me. My dog Biscuit is a beagle. I have asthma.") == {
        "contact by phone call: never",
        "dog: Biscuit, a beagle",
        "health: asthma",
    }


def test_changes_and_corrections():
    assert value_changes("I moved from Lisbon to Porto last month.") == [("Lisbon", "Porto")]
    assert value_corrections("Sorry, typo: it's 80202, not 80203.") == [("80203", "80202")]
    assert value_corrections("I like tea, not coffee.") == []  # not values: a preference
    assert correction("Okay. Correction, it's apartment 9B. Thanks!") == "apartment 9B"
    assert correction("Oops, autocorrect. It's Yuki Lindqvist.") == "Yuki Lindqvist"
    assert correction("It's Yuki Lindqvist.") is None  # no cue: not a correction
    assert correction("Actually, it's fine.") is None  # a cue, no value


_PIECES = st.sampled_from(
    ["I ", "my ", "dog ", "Biscuit ", "is a ", "never ", "call me ", "and live in ", "Oslo",
     "moved from ", " to ", "Sorry, ", "it's ", "not ", "80202", ", ", ". ", "Ms. ", "ago ",
     "two weeks ", "have ", "asthma ", "at ", "1550 Larimer St ", "where I live "]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=40))
def test_any_text_gives_bounded_well_formed_pairs(parts: list[str]):
    text = "".join(parts)
    facts = OfflineExtractor().extract([Message("m", "user", content=text or ".", created_at=AT)])
    assert len({f.key for f in facts}) == len(facts)
    assert all(f.value.strip() and len(f.value) <= 200 for f in facts)
    assert all(f.statement().strip() for f in facts)
