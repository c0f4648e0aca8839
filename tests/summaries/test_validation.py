"""validate_summary: the facts a summary drops or contradicts, and a 0-100 score."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, InvalidMessage
from convomem.model import Message
from convomem.summaries import RunningSummary, Summary, transcript
from convomem.summaries.validation import SummaryValidation, validate_summary

EXAMPLES = int(os.environ.get("CONVOMEM_HYPOTHESIS_EXAMPLES", "40"))

FILLER_WORDS = "ok sure thanks the a we can look into that now right let me check"
FILLER = st.lists(
    st.sampled_from(FILLER_WORDS.split()),
    min_size=1,
    max_size=12,
).map(" ".join)

# (text planted in a user message, the value the validator must name, a contradicting text)
PLANTED = [
    ("My order number is 1182.", "1182", "My order number is 1183."),
    ("I paid $45.20 yesterday.", "$45.20", "I paid $54.20 yesterday."),
    ("We booked 3 nights.", "3 nights", "We booked 5 nights."),
    ("Please email maya.chen@example.com.", "maya.chen@example.com", "Please email z@ex.org."),
    ("Please never call me after 6.", "never call me", "Please call me after 6."),
    ("My address is 12 Oak Street.", "12 Oak Street", "My address is 9 Elm Road."),
    ("Ticket ABX-2291 is open.", "ABX-2291", "Ticket ABX-2291 is open."),
    ("I am Dr. Priya Raman.", "Priya Raman", "I am Dr. Priya Raman."),
    ("The visit is on March 3.", "March 3", "The visit is on March 3."),
]

texts = st.lists(
    st.sampled_from(list("abcdefgh ABC 0123 $.,#-@!?\n"))
    | st.sampled_from(
        ["I prefer ", "my name is ", "order ", "never ", " nights", "don't ", "Maya "]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), max_size=8))
def test_the_concatenated_source_scores_100(rows: list[tuple[str, str]]) -> None:
    msgs = [Message(f"m{i}", role, content=text) for i, (role, text) in enumerate(rows)]
    v = validate_summary(msgs, transcript(msgs))
    assert v.score == 100, v.reasons
    assert not v.dropped and not v.contradicted
    assert validate_summary(msgs, "\n".join(m.text() for m in msgs)).score == 100


def _conversation(filler: list[str], planted: str, at: int) -> list[Message]:
    msgs = [
        Message(f"f{i}", "user" if i % 2 == 0 else "assistant", content=t)
        for i, t in enumerate(filler)
    ]
    msgs.insert(min(at, len(msgs)), Message("planted", "user", content=planted))
    return msgs


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(FILLER, min_size=1, max_size=6), st.sampled_from(PLANTED), st.integers(0, 6))
def test_dropping_a_planted_fact_lowers_the_score_and_names_it(
    filler: list[str], planted: tuple[str, str, str], at: int
) -> None:
    msgs = _conversation(filler, planted[0], at)
    assert validate_summary(msgs, transcript(msgs)).score == 100
    v = validate_summary(msgs, transcript([m for m in msgs if m.id != "planted"]))
    assert v.score < 100
    assert any(planted[1].casefold() in i.fact.casefold() for i in v.dropped), v.reasons
    assert all(i.source_id == "planted" for i in v.dropped)
    assert any(planted[1].casefold() in r.casefold() for r in v.reasons)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(FILLER, min_size=1, max_size=6),
    st.sampled_from([p for p in PLANTED if p[0] != p[2]]),
    st.integers(0, 6),
)
def test_a_contradiction_is_named(
    filler: list[str], planted: tuple[str, str, str], at: int
) -> None:
    msgs = _conversation(filler, planted[0], at)
    changed = [m if m.id != "planted" else m.replace(content=planted[2]) for m in msgs]
    v = validate_summary(msgs, transcript(changed))
    assert v.contradicted, v
    issue = v.contradicted[0]
    assert planted[1].casefold() in issue.fact.casefold()
    assert issue.source_id == "planted" and issue.summary_value
    assert "contradicts" in v.reasons[0]
    dropped_only = validate_summary(msgs, transcript([m for m in msgs if m.id != "planted"]))
    assert v.score <= dropped_only.score < 100  # a contradiction costs more than a drop


def test_a_paraphrase_that_keeps_the_facts_scores_100() -> None:
    msgs = [
        Message("1", "user", content="Hi, I'm Maya Chen. My order number is 1182."),
        Message("2", "assistant", content="Order 1182 ships on March 3 for $45.20."),
        Message("3", "user", content="I prefer email, please never call me."),
    ]
    summary = (
        "Maya Chen asked about order #1182 (order number is 1182), which ships March 3 "
        "for $45.20. She prefers email; never call her."
    )
    v = validate_summary(msgs, summary)
    assert v.score == 100, v.reasons


def test_negation_flipped_is_a_contradiction() -> None:
    msgs = [Message("1", "user", content="I don't like spicy food.")]
    assert validate_summary(msgs, "The user doesn't like spicy food.").score == 100
    v = validate_summary(msgs, "The user likes spicy food.")
    assert v.contradicted and "negation" in v.contradicted[0].reason
    assert v.score == 0


def test_inputs_summary_forms_and_errors() -> None:
    msgs = [Message("1", "user", content="My order number is 1182.")]
    assert validate_summary(msgs, Summary("order 1182")).score == 100
    assert validate_summary(msgs, Summary("nothing").to_message()).score < 100
    assert validate_summary("My order number is 1182.", "order 1182").score == 100
    assert validate_summary([], "anything").score == 100  # nothing to keep
    assert validate_summary(msgs, "").score == 0
    with pytest.raises(InvalidMessage, match="summary"):
        validate_summary(msgs, 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match=r"messages\[1\]"):
        validate_summary([msgs[0], "x"], "s")  # type: ignore[list-item]


# -- RunningSummary(validate=..., min_score=...) -------------------------------------------

SOURCE = [
    Message("u1", "user", content="Hi, my order number is 1182 and I paid $45.20."),
    Message("a1", "assistant", content="Thanks, order 1182 is on its way."),
]


def _fixed(text: str) -> object:
    def summarize(messages: object, previous: object = None) -> str:
        return text

    return summarize


def test_a_fold_below_min_score_uses_the_fallback() -> None:
    rs = RunningSummary(_fixed("The user asked about order 9999."), validate=True)
    summary = rs.fold(SOURCE)
    assert summary is not None and summary.degraded
    assert "9999" not in summary.text and rs.segments[0].degraded
    assert (rs.stats.validations, rs.stats.rejections, rs.stats.fallbacks) == (1, 1, 1)
    assert rs.last_validation is not None and rs.last_validation.contradicted
    assert rs.last_validation.score < rs.min_score


def test_a_faithful_fold_passes_and_the_ledger_counts_as_kept() -> None:
    rs = RunningSummary(_fixed("The user asked about a delivery."), validate=True)
    summary = rs.fold(SOURCE)  # the facts ledger carries order 1182 and $45.20 verbatim
    assert summary is not None and not summary.degraded
    assert (rs.stats.validations, rs.stats.rejections) == (1, 0)
    strict = RunningSummary(_fixed("The user asked about a delivery."), validate=True, facts=False)
    assert strict.fold(SOURCE).degraded  # type: ignore[union-attr]
    assert strict.stats.rejections == 1


def test_without_a_fallback_the_primary_is_kept_and_counted() -> None:
    rs = RunningSummary(_fixed("Order 9999."), validate=True, fallback=False)
    summary = rs.fold(SOURCE)
    assert summary is not None and "9999" in summary.text and not summary.degraded
    assert rs.stats.rejections == 1


def test_any_validator_sync_or_async_and_a_failing_one_does_not_reject() -> None:
    calls: list[str] = []

    def score_10(messages: object, text: str) -> int:
        calls.append(text)
        return 10

    rs = RunningSummary(_fixed("x"), validate=score_10, min_score=50)
    assert rs.fold(SOURCE).degraded and len(calls) == 1  # type: ignore[union-attr]

    async def ok(messages: object, text: str) -> SummaryValidation:
        return SummaryValidation(90, judge="async")

    rs2 = RunningSummary(_fixed("x"), validate=ok, min_score=50)
    assert not asyncio.run(rs2.afold(SOURCE)).degraded  # type: ignore[union-attr]
    assert rs2.last_validation is not None and rs2.last_validation.judge == "async"

    def broken(messages: object, text: str) -> int:
        raise RuntimeError("judge down")

    rs3 = RunningSummary(_fixed("x"), validate=broken)
    assert not rs3.fold(SOURCE).degraded  # type: ignore[union-attr]
    assert (rs3.stats.validation_errors, rs3.stats.rejections) == (1, 0)


def test_background_fold_keeps_the_fallback_when_the_primary_is_rejected() -> None:
    async def run() -> RunningSummary:
        rs = RunningSummary(_fixed("Order 9999."), validate=True)
        await rs.afold(SOURCE, background=True)
        await rs.wait()
        return rs

    rs = asyncio.run(run())
    assert rs.segments[0].degraded and "9999" not in rs.segments[0].text
    assert rs.stats.rejections == 1 and rs.stats.background_failures == 1


def test_validate_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="validate=42"):
        RunningSummary(validate=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="min_score=101"):
        RunningSummary(validate=True, min_score=101)
    rs = RunningSummary(_fixed("x"), validate=lambda m, t: "good")
    rs.fold(SOURCE)  # a malformed answer is a failed validation, not a rejection
    assert rs.stats.validation_errors == 1
    assert "expected a SummaryValidation" in str(rs.last_error)


def test_the_default_configuration_is_not_rejected_on_a_support_log() -> None:
    # Many users' emails and order ids, folded and merged by the default (extractive)
    # summarizer: what the ledger carries beside the narrative is credited (kept, never
    # a contradiction), merges included.
    rs = RunningSummary(reserve=300, validate=True, max_segments=2)
    for i in range(30):
        rs.fold(
            [
                Message(f"u{i}", "user", content=f"I am user{i}@x.com, order ORD-{1000 + i}."),
                Message(f"a{i}", "assistant", content=f"Order ORD-{1000 + i} ships on Friday."),
            ]
        )
    assert rs.stats.merges > 0 and rs.stats.validations > rs.stats.folds
    assert rs.stats.rejections == 0, rs.last_validation


def test_compress_is_validated_and_credits_the_facts_it_carries() -> None:
    rs = RunningSummary(_fixed("The user asked about a delivery."), validate=True)
    kept = rs.compress(SOURCE)  # the compression carries order 1182 and $45.20 itself
    assert not kept.degraded and rs.stats.rejections == 0 and rs.stats.validations == 1
    bad = RunningSummary(_fixed("The user asked about order 9999."), validate=True)
    assert bad.compress(SOURCE).degraded and bad.stats.rejections == 1
