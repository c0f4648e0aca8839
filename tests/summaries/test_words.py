"""Number words and relative dates, against brute-force oracles."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.summaries._words import number_value, resolve_date

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
_ONES += "fifteen sixteen seventeen eighteen nineteen"
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety"
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def spell(n: int) -> str:
    """English for 0..99, the plain way ("forty-two")."""
    ones, tens = _ONES.split(), _TENS.split()
    if n < 20:
        return ones[n]
    t, u = divmod(n, 10)
    return tens[t - 2] + ("" if u == 0 else "-" + ones[u])


@given(st.integers(0, 99))
def test_english_number_words_read_back(n: int):
    assert number_value(spell(n)) == n
    assert number_value(str(n)) == n


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("treinta", 30), ("treinta y dos", 32), ("veintidós", 22), ("dos", 2),
        ("trente-huit", 38), ("vingt-et-un", 21), ("deux", 2),
        ("dreiundvierzig", 43), ("einundzwanzig", 21), ("zwei", 2), ("Forty-Two", 42),
    ],
)  # fmt: skip
def test_spanish_french_german_number_words(text: str, n: int):
    assert number_value(text) == n


@pytest.mark.parametrize("text", ["", "many", "forty-forty", "undund", "twenty-zwei x"])
def test_anything_else_is_not_a_number(text: str):
    assert number_value(text) is None


def _at(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, 10, tzinfo=dt.UTC).timestamp()


@settings(max_examples=50)
@given(st.dates(dt.date(2000, 1, 1), dt.date(2100, 1, 1)), st.integers(0, 6))
def test_next_weekday_is_the_first_one_strictly_after(day: dt.date, wd: int):
    got = dt.date.fromisoformat(resolve_date(f"next {DAYS[wd].capitalize()}", _at(day)) or "")
    oracle = next(
        day + dt.timedelta(d) for d in range(1, 8) if (day + dt.timedelta(d)).weekday() == wd
    )
    assert got == oracle
    back = dt.date.fromisoformat(resolve_date(f"last {DAYS[wd]}", _at(day)) or "")
    assert back == next(
        day - dt.timedelta(d) for d in range(1, 8) if (day - dt.timedelta(d)).weekday() == wd
    )


@settings(max_examples=50)
@given(st.dates(dt.date(2000, 1, 1), dt.date(2100, 1, 1)), st.integers(1, 30))
def test_in_n_days_and_weeks(day: dt.date, n: int):
    assert resolve_date(f"in {spell(n)} days", _at(day)) == (day + dt.timedelta(n)).isoformat()
    assert resolve_date(f"in {n} weeks", _at(day)) == (day + dt.timedelta(7 * n)).isoformat()


def test_fixed_offsets_in_four_languages():
    at = _at(dt.date(2026, 3, 5))
    for text, iso in [
        ("tomorrow", "2026-03-06"), ("the day after tomorrow", "2026-03-07"),
        ("yesterday", "2026-03-04"), ("mañana", "2026-03-06"), ("demain", "2026-03-06"),
        ("übermorgen", "2026-03-07"), ("heute", "2026-03-05"), ("next week", "2026-03-12"),
    ]:  # fmt: skip
        assert resolve_date(text, at) == iso, text


def test_no_time_or_no_date_resolves_to_none():
    assert resolve_date("tomorrow", None) is None
    assert resolve_date("in a while", 0.0) is None
    assert resolve_date("blue", 0.0) is None
