"""KeyedFact: keys, normalization, statements and the dict form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.summaries.keyed import KeyedFact, norm_attribute, norm_object


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("E-mail address", "email"), ("my new email", "email"), ("correo electrónico", "email"),
        ("Phone_Number", "phone"), ("Mi dirección", "address"), ("meine neue Adresse", "address"),
        ("booking code", "booking code"), ("pref:The Cilantro", "pref:cilantro"),
        ("allergy:las nueces", "allergy:nueces"), ("pref:l'opéra", "pref:opéra"),
    ],
)  # fmt: skip
def test_attributes_are_canonical(raw: str, canonical: str):
    assert norm_attribute(raw) == canonical


def test_objects_drop_articles_and_time_words_only_as_whole_words():
    assert norm_object("sushi now") == "sushi"
    assert norm_object("keinen Kaffee mehr") == "kaffee"
    assert norm_object("theatre") == "theatre"  # "the" is only an article before a space
    assert norm_object("lasagna") == "lasagna"


def test_statements():
    assert KeyedFact("city", "Porto").statement() == "city: Porto"
    assert KeyedFact("pref:olives", "dislikes").statement() == "dislikes: olives"
    assert KeyedFact("allergy:peanuts", "yes").statement() == "allergic to: peanuts"


@given(
    st.builds(
        KeyedFact,
        st.text(min_size=1),
        st.text(min_size=1),
        st.text(min_size=1),
        st.none() | st.text(),
        st.none() | st.text(),
        st.none() | st.text(),
        st.none() | st.integers(),
        st.none() | st.floats(allow_nan=False, allow_infinity=False),
        st.none() | st.floats(allow_nan=False, allow_infinity=False),
    )
)
def test_the_dict_form_round_trips(fact: KeyedFact):
    assert KeyedFact.from_dict(fact.to_dict()) == fact


def test_a_bad_dict_names_the_field():
    with pytest.raises(ConfigError, match=r"fact\['seq'\]"):
        KeyedFact.from_dict({"attribute": "a", "value": "b", "seq": True})
    with pytest.raises(ConfigError, match=r"fact\['session_id'\]"):
        KeyedFact.from_dict({"attribute": "a", "value": "b", "session_id": 3})
    with pytest.raises(ConfigError, match="fact="):
        KeyedFact.from_dict(["a", "b"])
