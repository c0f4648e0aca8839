"""RunningSummary state: JSON round trips rebuild an identical summary without calling a
summarizer, bad state is refused by field, and a state machine mixes saves into folds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.summaries import RunningSummary, Summary, TruncatingSummarizer
from convomem.summaries.snapshot import Coverage
from convomem.summaries.state import config_of, decode_ids, encode_ids

NAMES = ["Priya", "Tomasz", "Ingrid", "Kofi"]


def history(n: int, start: int = 0) -> list[Message]:
    out = []
    for i in range(start, start + n):
        role = ["user", "assistant", "tool"][i % 3]
        text = (
            f"{NAMES[i % 4]} asked about order {1000 + i} on March {i % 28 + 1}. "
            f"The weather was fine and the parcel moved slowly through the depot."
        )
        if i % 5 == 0:
            text += " I prefer email updates."
        out.append(Message(f"m{i}", role, content=text))  # type: ignore[arg-type]
    return out


class Refuses:
    """A summarizer that must not be called (a restored summary calls none)."""

    name = "refuses"

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        raise AssertionError("a summarizer was called while restoring")


class Echo:
    """Deterministic: the ids it was given."""

    name = "echo"

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        return "echo " + " ".join(m.id for m in messages)[:120]


# -- ids ---------------------------------------------------------------------------------

ids_st = st.lists(
    st.one_of(
        st.builds(
            lambda p, n: f"{p}{n}",
            st.sampled_from(["m", "msg_", "", "a0", "x-"]),
            st.integers(0, 40),
        ),
        st.text(max_size=6),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ids_st)
def test_ids_round_trip_and_runs_shrink_them(ids: list[str]) -> None:
    encoded = encode_ids(ids)
    assert decode_ids(json.loads(json.dumps(encoded))) == ids
    assert len(encoded) <= len(ids)


def test_consecutive_ids_become_one_run() -> None:
    ids = [f"m{i}" for i in range(10_000)] + ["x", "m007", "m008"]
    assert encode_ids(ids) == [["m", 0, 9999], "x", ["m00", 7, 8]]


# -- round trips ---------------------------------------------------------------------------


def summarizer_for(kind: str) -> Any:
    return {"extractive": None, "echo": Echo(), "truncating": TruncatingSummarizer(160)}[kind]


@settings(max_examples=30, deadline=None)
@given(
    folds=st.lists(st.integers(1, 7), min_size=0, max_size=10),
    reserve=st.integers(150, 700),
    segs=st.integers(1, 5),
    facts=st.booleans(),
    kind=st.sampled_from(["extractive", "echo", "truncating"]),
    external=st.booleans(),
)
def test_a_restored_summary_is_identical_and_calls_no_summarizer(
    folds: list[int], reserve: int, segs: int, facts: bool, kind: str, external: bool
) -> None:
    rs = RunningSummary(summarizer_for(kind), reserve=reserve, max_segments=segs, facts=facts)
    msgs = history(sum(folds) + 5)
    k = 0
    for n in folds:
        rs.fold(msgs[k : k + n])
        k += n
    if external and k:
        rs.set_text("An outside summary of what was said.")
    data = json.loads(json.dumps(rs.state()))  # plain JSON
    again = RunningSummary.from_state(data, Refuses())
    assert again.stats.summarizer_calls == 0
    a, b = rs.message(), again.message()
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (a.id, a.content, a.tokens, a.metadata) == (b.id, b.content, b.tokens, b.metadata)
    assert list(again.covered_ids) == list(rs.covered_ids)
    assert again.ledger.entries() == rs.ledger.entries()
    assert [s.text for s in again.segments] == [s.text for s in rs.segments]
    assert again.state() == data
    # Both go on the same way.
    same = RunningSummary.from_state(data, summarizer_for(kind))
    rs.fold(msgs[k:])
    same.fold(msgs[k:])
    assert rs.message() == same.message()


def test_load_state_into_a_configured_summary() -> None:
    rs = RunningSummary(reserve=300)
    rs.fold(history(12))
    other = RunningSummary(reserve=300)
    other.load_state(rs.state())
    assert other.message() == rs.message()
    mismatched = RunningSummary(reserve=400)
    with pytest.raises(ConfigError, match=r"state\['config'\]\['reserve'\]=300"):
        mismatched.load_state(rs.state())
    with pytest.raises(ConfigError, match="reserve=300: comes from the state"):
        RunningSummary.from_state(rs.state(), reserve=300)


# -- bad state -------------------------------------------------------------------------------


def broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    rs = RunningSummary(reserve=300)
    rs.fold(history(6))
    data = json.loads(json.dumps(rs.state()))
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


BAD: list[tuple[tuple[Any, ...], Any, str]] = [
    (("format",), "other", r"state\['format'\]='other'"),
    (("version",), 99, r"state\['version'\]=99"),
    (("config",), KeyError, r"state\['config'\]: missing"),
    (("segments", 0, "count"), -1, r"state\['segments'\]\[0\]\['count'\]=-1"),
    (("segments", 0, "text"), 5, r"state\['segments'\]\[0\]\['text'\]=5"),
    (("segments", 0, "degraded"), "no", r"\['degraded'\]='no'"),
    (("segments", 0, "created_at"), "now", r"\['created_at'\]='now'"),
    (("segments",), {}, r"state\['segments'\]=\{\}"),
    (("covered",), ["m0"], r"state\['covered'\]='<1 ids>': must hold 6 ids"),
    (("covered",), [["m", 5, 2]], r"state\['covered'\]\[0\]="),
    (("covered",), [["m", 0, 4], "m0"], "repeated ids"),
    (
        ("ledger", "facts", 0),
        ["planet", "x", None, None, 1, 1, 1],
        r"\['facts'\]\[0\]\[0\]='planet'",
    ),
    (("ledger", "facts", 0, 5), 0, r"\['facts'\]\[0\]\[5\]=0"),
    (("ledger", "facts", 0, 4), 10_000, r"\['facts'\]\[0\]\[4\]=10000"),
    (("ledger", "facts", 0, 6), 7, r"\['facts'\]\[0\]\[6\]=7"),
    (("ledger", "seq"), "x", r"state\['ledger'\]\['seq'\]='x'"),
]


@pytest.mark.parametrize(("path", "value", "match"), BAD)
def test_bad_state_names_the_field_and_changes_nothing(
    path: tuple[Any, ...], value: Any, match: str
) -> None:
    rs = RunningSummary(reserve=300)
    rs.fold(history(3, start=50))
    before = (rs.message(), list(rs.covered_ids), rs.ledger.entries(), rs.segments)
    with pytest.raises(ConfigError, match=match):
        rs.load_state(broken(path, value))
    assert (rs.message(), list(rs.covered_ids), rs.ledger.entries(), rs.segments) == before


def test_repeated_facts_in_a_state_are_refused() -> None:
    data = broken(("ledger", "dropped"), 0)
    data["ledger"]["facts"].append(list(data["ledger"]["facts"][0]))
    with pytest.raises(ConfigError, match="appears twice"):
        RunningSummary(reserve=300).load_state(data)


# -- saves mixed into a conversation ---------------------------------------------------------


class Recorder:
    """Records every real message id it summarizes (merges pass segments, not messages)."""

    name = "recorder"

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        real = [m.id for m in messages if not m.id.startswith("summary_segment_")]
        self.ids.extend(real)
        return "recorded " + " ".join(real)[:60]


class SaveAndFold(RuleBasedStateMachine):
    """Folds, compressions, external texts, clears and save/restore cycles: no message is
    ever summarized twice, coverage is exactly what was folded, the reserve holds, and a
    restore changes nothing that can be seen."""

    @initialize(reserve=st.integers(160, 500), segs=st.integers(1, 4), facts=st.booleans())
    def setup(self, reserve: int, segs: int, facts: bool) -> None:
        self.recorder = Recorder()
        self.rs = RunningSummary(self.recorder, reserve=reserve, max_segments=segs, facts=facts)
        self.msgs = history(80)
        self.folded: list[str] = []

    @rule(start=st.integers(0, 79), n=st.integers(0, 8))
    def fold(self, start: int, n: int) -> None:
        batch = self.msgs[start : start + n]
        self.rs.fold(batch)
        for m in batch:
            if m.id not in self.folded:
                self.folded.append(m.id)

    @rule(i=st.integers(0, 79))
    def compress(self, i: int) -> None:
        s = self.rs.compress([self.msgs[i]], summarizer=Echo())
        assert s.content.strip() or s.kept_original

    @rule(lazy=st.booleans())
    def save_and_restore(self, lazy: bool) -> None:
        before = self.rs.message()
        data = json.loads(json.dumps(self.rs.state()))
        if lazy:  # covered ids decoded on first use, the facts filed on first use
            self.rs = RunningSummary(self.recorder, **config_of(data))
            self.rs.load_state(data, lazy=True)
        else:
            self.rs = RunningSummary.from_state(data, self.recorder)
        assert self.rs.message() == before

    @rule()
    def clear(self) -> None:
        self.rs.clear()
        self.folded.clear()
        self.recorder.ids.clear()

    @invariant()
    def holds(self) -> None:
        rs = self.rs
        assert len(self.recorder.ids) == len(set(self.recorder.ids))  # never twice
        assert sorted(self.recorder.ids) == sorted(self.folded)
        # the encoding a save extends (seeded by a load, or the loaded one while a lazy
        # load was not decoded) is the encoding of them all
        assert rs.state()["covered"] == encode_ids(self.folded)
        assert list(rs.covered_ids) == self.folded
        s = rs.current()
        if self.folded:
            assert s is not None and s.count == len(self.folded)
        if s is not None:
            assert s.tokens is not None and s.tokens <= rs.reserve
        assert len(rs.segments) <= rs.max_segments


SaveAndFold.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
test_saves_mixed_into_folds = SaveAndFold.TestCase


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["msg_ab12_", "m", "", "x9"]), st.integers(0, 300)),
            st.text(alphabet="abf019_", max_size=4).map(lambda t: (t, None)),
        ),
        max_size=60,
    ),
    st.integers(0, 60),
)
def test_covered_ids_encode_in_decimal_and_hex_runs_and_extend(
    parts: list[tuple[str, int | None]], cut: int
) -> None:
    # Generated ids count in hex (msg_<hex>_<hex>); runs of either base round-trip, and
    # extending the last encoding with new ids gives the encoding of them all.
    ids: list[str] = []
    for prefix, n in parts:
        if n is None:
            ids.append(prefix or "z")
        else:
            ids += [f"{prefix}{k:x}" for k in range(n, n + 3)]
            ids += [f"{prefix}{k}" for k in range(n, n + 3)]
    ids = list(dict.fromkeys(ids))
    assert decode_ids(json.loads(json.dumps(encode_ids(ids)))) == ids
    coverage = Coverage(ids[:cut])
    assert coverage.encode() == encode_ids(ids[:cut])
    coverage.add(ids[cut:])
    assert coverage.encode() == encode_ids(ids)
    assert Coverage.loaded(coverage.encode(), lazy=True).encode() == encode_ids(ids)
    assert list(Coverage.loaded(coverage.encode(), lazy=True).keys()) == ids

    assert len(encode_ids([f"msg_ab_{k:x}" for k in range(1000)])) == 1
