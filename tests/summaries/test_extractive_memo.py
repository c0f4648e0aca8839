"""ExtractiveSummarizer work: each distinct sentence counted once, a re-read summary
neither rescanned nor recounted, and the result independent of what the memos hold."""

from __future__ import annotations

from collections import Counter

from convomem.model import Message
from convomem.summaries import ExtractiveSummarizer, Summary
from convomem.summaries.extraction import fact_cache_info
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")


def conversation(n: int, tag: str) -> list[Message]:
    out = []
    for i in range(n):
        text = (
            f"My order ORD-{tag}{i} arrived on March {i % 27 + 1} with {i + 2} items. "
            f"Dr. Ada Stone from {tag.upper()} Logistics will call about ticket T-{i}{tag}! "
            f"Sentence {i} of the {tag} chat is plain filler about shipping delays."
        )
        out.append(Message(f"{tag}{i}", "user" if i % 2 == 0 else "assistant", content=text))
    return out


class CountingTok:
    """Counts like ``approx`` and records every text it was asked to count."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def __call__(self, text: str) -> int:
        self.seen[text] += 1
        return APPROX.count(text)


def previous(text: str) -> Summary:
    return Summary(text, "a", "b", 2, "extractive", None, 0.0, False)


def test_each_distinct_sentence_is_counted_once_across_calls() -> None:
    tok = CountingTok()
    s = ExtractiveSummarizer(80, tok)
    msgs = conversation(12, "cnt")
    first = s(msgs)
    out = s(msgs)
    assert out == first
    # Only the rendered result is verified by counting it again; every sentence once.
    repeated = {t: n for t, n in tok.seen.items() if n > 1 and t != out}
    assert repeated == {}


def test_a_reread_summary_is_neither_rescanned_nor_recounted() -> None:
    tok = CountingTok()
    s = ExtractiveSummarizer(120, tok)
    text = s(conversation(10, "reread"))
    new = conversation(3, "fresh")
    s(new, previous(text))  # the first read of the summary's sentences scans them
    scans = fact_cache_info().misses
    tok.seen.clear()
    again = s(new, previous(text))
    assert fact_cache_info().misses == scans
    sentences = [line.split(": ", 1)[-1] for line in text.splitlines()]
    assert not any(t in tok.seen for t in sentences if t)
    assert again


def test_the_result_does_not_depend_on_what_the_memos_hold() -> None:
    warm = ExtractiveSummarizer(100, APPROX)
    a = warm(conversation(9, "pure"))
    b = warm(conversation(9, "later"), previous(a))
    c = warm(conversation(4, "last"), previous(b))
    cold = ExtractiveSummarizer(100, APPROX)
    assert cold(conversation(4, "last"), previous(b)) == c
    # A summary written elsewhere (one line, several sentences) reads the same way too.
    outside = previous("user: Ada Stone paid $40 on May 3. She wants ORD-77 shipped. Thanks!")
    assert warm(conversation(2, "x"), outside) == ExtractiveSummarizer(100, APPROX)(
        conversation(2, "x"), outside
    )
