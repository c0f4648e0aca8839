"""FactHistory's editing by id (``summaries.fact_edits``): ids, put, remove, versions,
held to a plain oracle over random edit sequences mixed with extracted statements."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message
from convomem.summaries.fact_edits import fact_id
from convomem.summaries.keyed import KeyedFact, norm_value
from convomem.summaries.supersession import FactHistory


def manual(
    attribute: str, value: str, at: float | None = 1000.0, subject: str = "user"
) -> KeyedFact:
    return KeyedFact(
        attribute, value, subject=subject, source_role="user", message_id="manual:k1", valid_from=at
    )


def roundtrip(h: FactHistory) -> FactHistory:
    return FactHistory.from_state(json.loads(json.dumps(h.state())))


def test_ids_are_stable_across_a_restart_and_differ_between_versions() -> None:
    h = FactHistory()
    h.add_messages([Message(role="user", content="I live in Lisbon.", created_at=100.0)])
    h.add_messages([Message(role="user", content="I moved to Porto.", created_at=200.0)])
    ids = [fact_id(v) for v in h.versions()]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.startswith("f_") for i in ids)
    again = roundtrip(h)
    assert [fact_id(v) for v in again.versions()] == ids
    assert again.find(ids[0]) is not None and again.find(ids[0]).value == "Lisbon"  # type: ignore[union-attr]
    assert again.find("f_0000") is None


def test_a_value_set_by_hand_supersedes_and_keeps_the_old_one() -> None:
    h = FactHistory()
    h.add_messages([Message(role="user", content="I live in Lisbon.", created_at=500.0)])
    (lisbon,) = h.current()
    porto = h.put(manual("city", "Porto", at=100.0))  # an earlier clock: moved to 500
    assert porto.valid_from == 500.0 and porto.current
    assert h.get("city").value == "Porto"  # type: ignore[union-attr]
    old = h.find(fact_id(lisbon))
    assert old is not None and old.valid_to == 500.0 and not old.current
    assert h.put(manual("city", " porto. ")) is porto  # the same value: nothing changes
    assert [v.value for v in h.history("city")] == ["Lisbon", "Porto"]


def test_a_corrected_attribute_closes_the_old_key() -> None:
    h = FactHistory()
    gym = h.put(manual("gym", "BlueWave Pool"))
    pool = h.put(manual("pool", "BlueWave Pool"), replaces=gym)
    assert h.get("gym") is None and h.get("pool") == pool
    assert h.find(fact_id(gym)).valid_to == pool.valid_from  # type: ignore[union-attr]


def test_remove_deletes_one_version_and_never_revives_an_older_one() -> None:
    h = FactHistory()
    a = h.put(manual("city", "Lisbon", at=1.0))
    b = h.put(manual("city", "Porto", at=2.0))
    assert h.remove(fact_id(b)) == b
    assert h.get("city") is None and [v.value for v in h.versions()] == ["Lisbon"]
    assert h.remove(fact_id(b)) is None
    assert h.remove(fact_id(h.find(fact_id(a)) or a)) is not None
    assert h.versions() == [] and len(h) == 0
    # a new statement of the key after a removal is current again
    h.add_messages([Message(role="user", content="I live in Faro.", created_at=3.0)])
    assert h.get("city").value == "Faro"  # type: ignore[union-attr]


def test_a_removed_fact_is_not_extracted_again_from_its_message() -> None:
    h = FactHistory()
    m = Message(role="user", content="My email is ana@example.com", created_at=10.0)
    h.add_messages([m])
    (f,) = h.current()
    h.remove(fact_id(f))
    h.add_messages([m])
    again = roundtrip(h)
    again.add_messages([m])
    assert h.current() == [] and again.current() == []


ATTRS = ["city", "email", "job", "pref:tea"]
VALUES = ["a", "b", "c", "B"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(ATTRS), st.sampled_from(VALUES)),
        st.tuples(st.just("remove"), st.integers(0, 30), st.just("")),
        st.tuples(st.just("say"), st.sampled_from(["Lisbon", "Porto"]), st.just("")),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_edits_match_an_oracle(script: list[tuple[str, object, str]]) -> None:
    h = FactHistory()
    # the oracle: per key, its versions [value, alive-and-current?] in filing order
    oracle: dict[str, list[list[object]]] = {}
    clock = 0.0
    for kind, arg, value in script:
        clock += 1.0
        if kind == "put":
            attr = str(arg)
            vs = oracle.setdefault(attr, [])
            cur = next((v for v in vs if v[1]), None)
            if cur is not None and norm_value(str(cur[0])) == norm_value(value):
                assert h.put(manual(attr, value, at=clock)).value == cur[0]
                continue
            if cur is not None:
                cur[1] = False
            vs.append([value, True])
            h.put(manual(attr, value, at=clock))
        elif kind == "say":
            h.add_messages([Message(role="user", content=f"I live in {arg}.", created_at=clock)])
            vs = oracle.setdefault("city", [])
            cur = next((v for v in vs if v[1]), None)
            if cur is None or norm_value(str(cur[0])) != norm_value(str(arg)):
                if cur is not None:
                    cur[1] = False
                vs.append([str(arg), True])
        else:
            every = h.versions()
            if not every:
                assert h.remove("f_none") is None
                continue
            target = every[int(str(arg)) % len(every)]
            position = h.history(target.key[1]).index(target)  # the oracle keeps this order
            assert h.remove(fact_id(target)) == target
            del oracle[target.key[1]][position]
        ids = [fact_id(v) for v in h.versions()]
        assert len(ids) == len(set(ids))
        for attr in set(oracle) | {"city"}:
            want = next((v[0] for v in oracle.get(attr, []) if v[1]), None)
            got = h.get(attr)
            assert (got.value if got else None) == want
            assert [v.value for v in h.history(attr)] == [v[0] for v in oracle.get(attr, [])]
            assert sum(1 for v in h.history(attr) if v.current) == (want is not None)
        again = roundtrip(h)
        assert [fact_id(v) for v in again.versions()] == ids
