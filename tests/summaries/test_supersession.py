"""FactHistory: supersession against an oracle, history, as_of, once-per-message, state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.summaries.extractor import OfflineExtractor
from convomem.summaries.keyed import KeyedFact
from convomem.summaries.supersession import HISTORY_HEADER, FactHistory
from convomem.tokens import get_tokenizer


class Counting(OfflineExtractor):
    """An offline extractor that records which message ids it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def extract(self, messages: Sequence[Message]) -> list[KeyedFact]:
        self.ids.extend(m.id for m in messages)
        return super().extract(messages)


def said(mid: str, text: str, at: float) -> Message:
    return Message(mid, "user", content=text, created_at=at)


def test_a_new_value_closes_the_old_and_the_history_answers():
    h = FactHistory()
    h.add_messages([said("a", "I live in Lisbon.", 100.0), said("b", "I moved to Porto.", 200.0)])
    now = h.get("city")
    assert now is not None and (now.value, now.valid_from, now.valid_to) == ("Porto", 200.0, None)
    old, new = h.history("city")
    assert (old.value, old.valid_from, old.valid_to, old.message_id) == (
        "Lisbon",
        100.0,
        200.0,
        "a",
    )
    assert new == now
    assert h.get("city", as_of=150.0) == old
    assert h.get("city", as_of=250.0) == now
    assert h.get("city", as_of=50.0) is None
    assert [f.value for f in h.current()] == ["Porto"]


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_switched_from_a_to_b_supersedes_whatever_fact_holds_a(twin: str):
    """The attribute is never said ("I switched from X to Y"): the fact holding X has it."""
    h = FactHistory()
    msgs = [
        said("a", "My gym is BlueWave Pool, near the station.", 1.0),
        said("b", "I switched from BlueWave Pool to Iron Temple this month.", 2.0),
    ]
    if twin == "sync":
        h.add_messages(msgs, session_id="s")
    else:
        asyncio.run(h.aadd_messages(msgs, session_id="s"))
    now = h.get("gym")
    assert now is not None and (now.value, now.message_id, now.valid_from) == (
        "Iron Temple",
        "b",
        2.0,
    )
    assert [v.valid_to for v in h.history("gym")] == [2.0, None]


@pytest.mark.parametrize(
    "text",
    [
        "I switched from Lyon to Nice.",  # no fact holds Lyon
        "I switched from Porto to Faro.",  # two facts hold Porto: which one is unknowable
        "I went from 2 to 3 sessions a week.",  # a bare number: many attributes could hold it
        "The bus went from Porto to Faro.",  # not the user's change
    ],
)
def test_a_change_whose_old_value_is_not_one_fact_changes_nothing(text: str):
    h = FactHistory()
    h.add_messages([said("a", "I live in Porto. My favourite city is Porto. I have 2 kids.", 1.0)])
    assert {(f.attribute, f.value) for f in h.current()} == {
        ("city", "Porto"),
        ("favourite city", "Porto"),
        ("kids", "2"),
    }
    before = h.history()
    h.add_messages([said("b", text, 2.0)])
    assert h.history() == before


def test_a_move_states_the_city_and_only_the_city():
    """ "I moved from Porto to Faro" says the city; the favourite city also held Porto but
    the move is not about it."""
    h = FactHistory()
    h.add_messages([said("a", "I live in Porto. My favourite city is Porto.", 1.0)])
    h.add_messages([said("b", "I moved from Porto to Faro.", 2.0)])
    assert {(f.attribute, f.value) for f in h.current()} == {
        ("city", "Faro"),
        ("favourite city", "Porto"),
    }
    assert [(f.value, f.valid_to) for f in h.history("city")] == [("Porto", 2.0), ("Faro", None)]


def test_a_move_from_an_unknown_city_files_it_as_the_value_before():
    h = FactHistory()
    h.add_messages([said("a", "I moved from Lisbon to Porto last month.", 5.0)])
    assert [(f.value, f.valid_from, f.valid_to) for f in h.history("city")] == [
        ("Lisbon", None, 5.0),
        ("Porto", 5.0, None),
    ]
    assert h.get("city", as_of=1.0).value == "Lisbon"  # type: ignore[union-attr]
    back = FactHistory.from_state(json.loads(json.dumps(h.state())))
    assert back.history("city") == h.history("city")


@pytest.mark.parametrize(
    ("before", "fix", "attribute", "value"),
    [
        ("My zip code is 80203.", "Sorry, typo: it's 80202, not 80203.", "zip code", "80202"),
        ("My apartment is 24.", "Correction, it's apartment 9B.", "apartment", "9B"),
        ("I'm Maya Chan.", "Sorry, I misspelled it: it's Maya Chen.", "name", "Maya Chen"),
        ("My email is m@old.io", "Actually, use m@new.io instead.", "email", "m@new.io"),
    ],
)
def test_a_correction_replaces_what_the_previous_message_said(before, fix, attribute, value):
    h = FactHistory()
    h.add_messages([said("a", before, 1.0), Message("r", "assistant", content="Noted.")])
    h.add_messages([said("b", fix, 2.0)])
    now = h.get(attribute)
    assert now is not None and (now.value, now.message_id) == (value, "b")
    assert len(h.history(attribute)) == 2


@pytest.mark.parametrize(
    "fix",
    [
        "Actually, it's fine.",  # no value
        "Sorry, it's 12.",  # the previous message stated no number
        "Correction: my city is Rome.",  # states its own fact: that is what it says
    ],
)
def test_a_correction_that_fits_nothing_changes_nothing(fix):
    h = FactHistory()
    h.add_messages([said("a", "My name is Ada.", 1.0), said("b", fix, 2.0)])
    assert h.get("name").value == "Ada"  # type: ignore[union-attr]
    assert len(h.history("name")) == 1


def test_a_correction_only_reaches_back_one_user_message():
    h = FactHistory()
    h.add_messages([said("a", "My zip is 80203.", 1.0), said("b", "How are you?", 2.0)])
    h.add_messages([said("c", "Sorry, typo: it's 80202.", 3.0)])
    assert h.get("zip").value == "80203"  # type: ignore[union-attr]


def test_a_shorter_restatement_is_not_a_change():
    h = FactHistory()
    h.add_messages([said("a", "My dog Biscuit is a beagle.", 1.0)])
    h.add_messages([said("b", "My dog Biscuit is sick.", 2.0)])
    assert [f.value for f in h.history("dog:biscuit")] == ["Biscuit, a beagle"]


def test_the_same_value_again_changes_nothing_and_a_late_older_value_is_history():
    h = FactHistory()
    assert h.add([KeyedFact("city", "Porto", valid_from=200.0)])
    assert h.add([KeyedFact("city", "porto", valid_from=300.0)]) == []
    assert h.add([KeyedFact("city", "Lisbon", valid_from=100.0)]) == []  # said earlier
    assert h.get("city").value == "Porto"  # type: ignore[union-attr]
    assert [(f.value, f.valid_to) for f in h.history("city")] == [
        ("Lisbon", 200.0),
        ("Porto", None),
    ]


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(st.sampled_from(["city", "email", "pref:tea"]), st.sampled_from("abc"),
                  st.integers(0, 5)),
        max_size=25,
    )
)  # fmt: skip
def test_current_values_match_a_brute_force_oracle_and_survive_a_state_round_trip(rows):
    h = FactHistory()
    h.add([KeyedFact(k, v, valid_from=float(t)) for k, v, t in rows])
    # Oracle: the value stated at the latest time wins; among equal times, the last said.
    oracle: dict[str, tuple[int, int, str]] = {}
    for i, (k, v, t) in enumerate(rows):
        if k not in oracle or (t, i) >= oracle[k][:2]:
            oracle[k] = (t, i, v)
    assert {f.key[1]: f.value for f in h.current()} == {k: v for k, (_, _, v) in oracle.items()}
    for k in {k for k, _, _ in rows}:
        versions = h.history(k)
        assert sum(f.current for f in versions) == 1
        assert all(f.valid_to is not None for f in versions[:-1])
    back = FactHistory.from_state(json.loads(json.dumps(h.state())))
    assert back.current() == h.current()
    assert back.history() == h.history()


def test_each_message_is_extracted_once_across_refolds_and_a_resume():
    ex = Counting()
    h = FactHistory(extractor=ex)
    a, b, c = said("a", "I live in Rome.", 1.0), said("b", "hi", 2.0), said("c", "I'm vegan.", 3.0)
    h.add_messages([a, b])
    h.add_messages([a, b, c])
    h.add_messages([c, c])
    assert ex.ids == ["a", "b", "c"]
    assert "a" in h and "zzz" not in h
    ex2 = Counting()
    resumed = FactHistory.from_state(h.state(), extractor=ex2)
    resumed.add_messages([a, b, c, said("d", "I'm vegan.", 4.0)])
    assert ex2.ids == ["d"]
    assert resumed.extracted == 1


def test_async_twin_records_the_same_facts():
    msgs = [said("a", "My email is a@b.io", 1.0), said("b", "My new email is c@d.io", 2.0)]
    sync, asynced = FactHistory(), FactHistory()
    sync.add_messages(msgs, session_id="s1")
    asyncio.run(asynced.aadd_messages(msgs, session_id="s1"))
    assert sync.history() == asynced.history()
    assert sync.get("email").session_id == "s1"  # type: ignore[union-attr]


def test_user_facts_outrank_tool_amounts_in_a_tight_render():
    h = FactHistory()
    h.add_messages([said("u", "I'm allergic to peanuts.", 1.0)])
    prices = {f"item_{i}_price": f"${i}.99" for i in range(30)}
    h.add_messages([Message("t", "tool", content=json.dumps(prices), created_at=2.0)])
    tok = get_tokenizer("approx")
    for budget in (30, 60, 150):
        text = h.render(budget)
        assert tok.count(text) <= budget
        assert "allergic to: peanuts" in text
        assert "omitted" in text
    assert "omitted" not in h.render(tok.count(h.render()))  # all of it fits: all of it
    assert h.render(None).count("\n- ") == 31
    assert h.render(1) == ""
    assert FactHistory().render() == ""
    assert h.render().startswith(HISTORY_HEADER)


def test_an_old_fact_ledger_state_still_loads():
    old = {"seq": 2, "dropped": 0, "facts": [
        ["preference", "I prefer email", "m1", "user", 1, 1, 2],
        ["reference", "order 1182", "m2", "user", 2, 1, 2],
    ]}  # fmt: skip
    h = FactHistory.from_state(old)
    assert [f.statement() for f in h.current()] == [
        "preference: I prefer email",
        "reference: order 1182",
    ]
    assert h.current()[1].message_id == "m2"


@pytest.mark.parametrize(
    ("state", "field"),
    [
        ([], "state="),
        ({"version": 1}, "state['facts']"),
        ({"version": 2, "facts": []}, "state['version']"),
        ({"version": 1, "facts": [{"attribute": "x"}]}, "state['facts'][0]['value']"),
        ({"version": 1, "facts": [], "seen": [1]}, "state['seen']"),
        ({"version": 1, "facts": [{"attribute": "x", "value": "y", "valid_from": "z"}]},
         "state['facts'][0]['valid_from']"),
        ({"facts": [["kind"]]}, "state['facts'][0]"),
        ({"version": 1, "facts": [], "confirmed": [["user", "city"]]}, "state['confirmed'][0]"),
    ],
)  # fmt: skip
def test_a_malformed_state_is_refused_naming_the_field(state, field):
    with pytest.raises(ConfigError) as err:
        FactHistory.from_state(state)
    assert field in str(err.value)


def test_bad_input_writes_nothing():
    h = FactHistory()
    with pytest.raises(ConfigError, match="fact="):
        h.add([KeyedFact("city", "Oslo"), "city: Rome"])  # type: ignore[list-item]
    assert h.current() == []
    with pytest.raises(ConfigError, match="extractor="):
        FactHistory(extractor=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_seen"):
        FactHistory(max_seen=0)


def test_seen_ids_are_bounded_oldest_first():
    ex = Counting()
    h = FactHistory(extractor=ex, max_seen=2)
    msgs = [said(i, "hello", 1.0) for i in "abc"]
    h.add_messages(msgs)
    assert "a" not in h and "c" in h
    h.add_messages(msgs[1:])
    assert ex.ids == ["a", "b", "c"]
