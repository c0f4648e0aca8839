"""ExtractiveSummarizer keeps the point (issue 19 §4), held to oracles on generated
conversations: no line twice, every kept sentence whole (a sentence of a message as it
was written, or a clause of one), and a value in the summary entirely or not at all."""

from __future__ import annotations

import itertools
import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.model import Message
from convomem.summaries import ExtractiveSummarizer, RunningSummary, Summary
from convomem.summaries._extractive_parts import HEADLINE, display, headline, pieces
from convomem.summaries.extraction import extract_facts, split_sentences
from convomem.summaries.summary import TRUNCATION_MARKER, fit_whole, join_unique
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")
_LABEL = re.compile(r"^(?:system|user|assistant|tool)(?:\([^)]*\))?: ")

_VALUES = st.sampled_from(
    ["order 4417", "R-4417-1", "$14.95", "maya.chen@example.com", "June 14", "1550 Larimer St",
     "Maya Chen", "3 nights", "W-7730", "+1 720 555 0142"]
)  # fmt: skip
_WORDS = st.sampled_from(
    ["the", "refund", "is", "approved", "and", "ships", "tomorrow", "thanks", "your",
     "claim", "we", "checked", "the", "warehouse", "again", "Ada", "so", "I", "think"]
)  # fmt: skip


@st.composite
def sentence(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(_WORDS, _VALUES), min_size=2, max_size=40))
    out = []
    for p in parts:
        out.append(p)
        if draw(st.integers(0, 9)) == 0:
            out[-1] += ","
    return " ".join(out).capitalize() + draw(st.sampled_from([".", "!", "?"]))


@st.composite
def conversation(draw: st.DrawFn) -> list[Message]:
    n = draw(st.integers(1, 10))
    out = []
    pool: list[str] = []
    for i in range(n):
        role = draw(st.sampled_from(["user", "assistant", "tool"]))
        if role == "tool" and draw(st.booleans()):
            fields = draw(st.dictionaries(st.sampled_from(["id", "status", "total"]), _VALUES))
            text = json.dumps(fields)
        elif pool and draw(st.integers(0, 3)) == 0:
            text = draw(st.sampled_from(pool))  # a message said again
        else:
            text = " ".join(draw(st.lists(sentence(), min_size=1, max_size=4)))
        pool.append(text)
        out.append(Message(f"m{i}", role, content=text))
    return out


def bodies(summary: str) -> list[str]:
    """The summary's lines without their labels, headlines left out."""
    return [
        _LABEL.sub("", line)
        for line in summary.splitlines()
        if line.strip() and not line.startswith(HEADLINE)
    ]


def sources(messages: list[Message]) -> list[str]:
    return [" ".join(display(m.text(), m.role == "tool").split()) for m in messages]


def spans(text: str, value: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(re.escape(value), text)]


@settings(max_examples=120, deadline=None)
@given(conversation(), st.integers(16, 240))
def test_kept_sentences_are_whole_and_values_are_never_cut(msgs, budget):
    out = ExtractiveSummarizer(max_tokens=budget)(msgs)
    assert APPROX.count(out) <= budget
    assert TRUNCATION_MARKER.strip() not in out
    texts = sources(msgs)
    for body in bodies(out):
        for _, run in split_sentences(body):
            for piece in (p.strip() for p in run.split("…")):
                if not piece:
                    continue
                # whole: a run of a source text as written, where every value it
                # overlaps is inside it (some occurrence, in some message, is that run)
                places = [(t, a) for t in texts for a, _ in spans(t, piece)]
                assert places, (piece, texts)
                assert any(clean(text, at, at + len(piece)) for text, at in places), piece


def clean(text: str, at: int, end: int) -> bool:
    """No fact value of ``text`` crosses the edge of ``text[at:end]``."""
    return all(
        b <= at or a >= end or (at <= a and b <= end)
        for fact in extract_facts(text)
        for a, b in spans(text, fact.value)
    )


@settings(max_examples=80, deadline=None)
@given(conversation(), st.integers(16, 240))
def test_no_line_twice_in_a_summary(msgs, budget):
    out = ExtractiveSummarizer(max_tokens=budget)(msgs)
    lines = [" ".join(line.split()).casefold() for line in out.splitlines() if line.strip()]
    assert len(lines) == len(set(lines))
    sentences = [s.casefold() for body in bodies(out) for _, s in split_sentences(body)]
    assert len(sentences) == len(set(sentences))  # nor a sentence, across messages


@settings(max_examples=40, deadline=None)
@given(st.lists(conversation(), min_size=2, max_size=6))
def test_a_running_summary_never_says_a_line_twice(batches):
    rs = RunningSummary(reserve=300, max_segments=3)
    for k, batch in enumerate(batches):
        rs.fold([Message(f"{k}-{m.id}", m.role, content=m.content) for m in batch])
    current = rs.current()
    assert current is not None
    lines = [" ".join(x.split()).casefold() for x in current.text.splitlines() if x.strip()]
    assert len(lines) == len(set(lines))
    assert TRUNCATION_MARKER.strip() not in current.text


def test_a_duplicate_and_chatter_are_dropped_and_a_value_sentence_kept():
    msgs = [
        Message("a", "user", content="Hi Ada, any news on order 4417?"),
        Message("b", "assistant", content="Thanks, Maya!"),
        Message("c", "user", content="Hi Ada, any news on order 4417?"),
        Message("d", "assistant", content="Refund R-4417-1 of $14.95 is approved."),
    ]
    out = ExtractiveSummarizer(max_tokens=200)(msgs)
    assert out.count("any news on order 4417?") == 1
    assert "Thanks, Maya" not in out
    assert "Refund R-4417-1 of $14.95 is approved." in out


def test_a_segment_over_several_messages_says_what_it_covers():
    msgs = [
        Message("a", "user", content="Any news on order 4417? The tent is torn."),
        Message("b", "assistant", content="Sorry about order 4417, I opened a refund."),
        Message("c", "assistant", content="Refund R-4417-1 of $14.95 is approved, it "
                "reaches your card in 3-5 days."),
    ]  # fmt: skip
    out = ExtractiveSummarizer(max_tokens=120)(msgs)
    first = out.splitlines()[0]
    assert first.startswith(HEADLINE) and "order 4417" in first and "approved" in first
    assert APPROX.count(out) <= 120
    # A merge writes a new headline, never keeps the old one as a line.
    again = ExtractiveSummarizer(max_tokens=120)(msgs[:1], Summary(out))
    assert sum(line.startswith(HEADLINE) for line in again.splitlines()) <= 1
    # One message (a compression), a small budget, or no decision: no headline.
    assert HEADLINE not in ExtractiveSummarizer(max_tokens=120)(msgs[2:])
    assert HEADLINE not in ExtractiveSummarizer(max_tokens=40)(msgs)
    assert headline("order 4417", ["The tent is torn."]) is None


def test_a_tool_result_in_json_reads_as_its_fields():
    raw = json.dumps({"order_id": 4417, "status": "shipped", "eta": "2026-05-28"})
    assert display(raw, tool=True) == "order id: 4417; status: shipped; eta: 2026-05-28."
    assert display(raw, tool=False) == raw
    assert display("{not json", tool=True) == "{not json"


@given(st.lists(sentence(), min_size=1, max_size=3), st.integers(4, 60))
def test_pieces_are_runs_of_the_sentence_within_the_cap(parts, cap):
    text = " ".join(parts)
    cuts = pieces(text, cap, APPROX.count)
    assert cuts == sorted(cuts)
    assert all(b <= a2 for (_, b), (a2, _) in itertools.pairwise(cuts))
    for a, b in cuts:
        assert APPROX.count(text[a:b]) <= cap and text[a:b] == text[a:b].strip(" ,;")


@given(st.lists(st.sampled_from(["a b", "c d.", "A b c. D e.", "x", "a b"]), max_size=8))
def test_join_unique_and_fit_whole(texts):
    joined = join_unique(texts)
    lines = [x for x in joined.splitlines() if x]
    assert len(lines) == len({" ".join(x.split()).casefold() for x in lines})
    for limit in range(0, 12):
        fitted = fit_whole(joined, limit, APPROX.count)
        assert APPROX.count(fitted) <= limit or not fitted
        assert joined.startswith(fitted)
