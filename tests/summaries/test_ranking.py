"""The profile's ranking and render: within a budget the longest ranked prefix, what it
omits ranked below all it shows, the user's name never traded for anything (issue 19)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.summaries._ranking import HISTORY_HEADER, fact_rank, render_ranked, weight
from convomem.summaries.keyed import KeyedFact
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")

_ATTRS = st.sampled_from(
    ["name", "city", "contact:phone call", "allergy:peanuts", "pref:jazz", "dog:biscuit",
     "order number", "total", "health:asthma", "flight to kyoto", "favourite colour"]
)  # fmt: skip
_VALUES = st.sampled_from(
    ["Dana Okafor", "Accra", "never", "yes", "likes", "Biscuit, a beagle", "AC-558201",
     "$14.95", "asthma", "2026-03-07", "blue", "Porto"]
)  # fmt: skip
_FACTS = st.lists(
    st.builds(
        KeyedFact,
        _ATTRS,
        _VALUES,
        source_role=st.sampled_from(["user", "assistant", "tool", None]),
        valid_from=st.floats(0, 100),
        seq=st.integers(0, 50),
    ),
    max_size=30,
    unique_by=lambda f: f.key,
)


@settings(max_examples=150, deadline=None)
@given(_FACTS, st.integers(0, 200))
def test_the_render_is_the_longest_ranked_prefix_that_fits(facts, budget):
    text = render_ranked(facts, budget, APPROX.count)
    assert APPROX.count(text) <= budget
    ranked = sorted(facts, key=fact_rank, reverse=True)
    lines = [f"- {f.statement()}" for f in ranked]
    if not text:  # nothing, or not even the best fact fits with the header and the note
        if facts:
            note = [f"({len(lines) - 1} more facts omitted)"] if len(lines) > 1 else []
            assert APPROX.count("\n".join([HISTORY_HEADER, lines[0], *note])) > budget
        return
    shown = text.splitlines()[1:]
    omitted = 0
    if shown and shown[-1].endswith("more facts omitted)"):
        omitted = int(shown.pop().split()[0].strip("("))
    assert shown == lines[: len(shown)]  # a prefix of the ranking: all omitted rank lower
    assert omitted == len(lines) - len(shown)
    if omitted:  # and the longest: one more line would not fit
        longer = "\n".join([HISTORY_HEADER, *lines[: len(shown) + 1]])
        if len(shown) + 1 < len(lines):
            longer += f"\n({omitted - 1} more facts omitted)"
        assert APPROX.count(longer) > budget
    assert render_ranked(facts, None, APPROX.count).splitlines()[1:] == lines


def test_the_name_and_refusals_outrank_places_likes_and_amounts():
    def user(attr: str, value: str, t: float) -> KeyedFact:
        return KeyedFact(attr, value, source_role="user", valid_from=t)

    name = user("name", "Dana Okafor", 0.0)
    later = [user(f"pref:thing {i}", "likes", 10.0 + i) for i in range(40)]
    later += [user("city", "Accra", 99.0), user("contact:phone call", "never", 1.0)]
    text = render_ranked([name, *later], 60, APPROX.count)
    assert text.splitlines()[1:3] == ["- name: Dana Okafor", "- contact by phone call: never"]
    assert "omitted" in text
    assert weight("name") > weight("city") > weight("pref:jazz") > weight("total", "$14.95")
