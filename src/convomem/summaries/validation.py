"""Summary validation: which facts of the source a summary drops or contradicts.

``validate_summary(messages, summary)`` is offline and deterministic. The source's facts
are the facts extractor's (``summaries.extraction``: names, reference numbers and codes,
ids, emails, dates, amounts, quantities, the user's preferences), plus ``my <attribute>
is <value>`` statements. A fact is *kept* when its value appears in the summary (case and
spacing aside); a preference when most of its content words appear in one clause of the
summary, with the same polarity. A fact is *contradicted* when the summary gives another
value for the same key: another number for ``order``, another amount in the same
currency, another count of ``nights``, another value for ``my address``, or a preference
with its negation flipped ("never call me" summarized as "call the user"). The score
(0-100) is the weighted share of the source's facts kept, a contradiction costing twice
a drop; weights are ``KIND_VALUE``.

An LLM judge with the same result type lives in ``validation_llm``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from ..errors import InvalidMessage
from ..model import Message
from ._fact import KIND_VALUE, Fact
from .extraction import extract_facts, extract_from_messages, split_sentences
from .summary import Summary

__all__ = ["Issue", "SummaryValidation", "validate_summary"]


@dataclass(frozen=True, slots=True)
class Issue:
    """One fact of the source the summary lost (``dropped``) or changed (``contradicted``).

    ``fact`` is the source's text for it (``"order 1182"``); ``summary_value`` what the
    summary says instead (a contradiction); ``fact_kind`` the extractor's kind (None from
    a judge that does not say); ``source_id`` the message it came from.
    """

    problem: Literal["dropped", "contradicted"]
    fact: str
    reason: str
    summary_value: str | None = None
    fact_kind: str | None = None
    source_id: str | None = None


@dataclass(frozen=True, slots=True)
class SummaryValidation:
    """How faithful a summary is to its source: a 0-100 score and the reasons.

    ``checked`` counts the source facts weighed; ``judge`` names who validated
    (``"offline"`` or ``"llm:<model>"``).
    """

    score: int
    dropped: tuple[Issue, ...] = ()
    contradicted: tuple[Issue, ...] = ()
    checked: int = 0
    judge: str = "offline"

    @property
    def reasons(self) -> tuple[str, ...]:
        """One line per issue: contradictions first."""
        return tuple(i.reason for i in (*self.contradicted, *self.dropped))

    def passes(self, min_score: float) -> bool:
        """True when ``score >= min_score``."""
        return self.score >= min_score

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data: score, judge, checked, the issues and the reasons."""
        return {
            "score": self.score,
            "judge": self.judge,
            "checked": self.checked,
            "dropped": [asdict(i) for i in self.dropped],
            "contradicted": [asdict(i) for i in self.contradicted],
            "reasons": list(self.reasons),
        }


# -- normalizing and keys ------------------------------------------------------------------

_WORD = re.compile(r"[\w'’-]+")
_NEGATOR_TEXT = (
    "not no never nobody nothing nor without cannot can't can’t don't don’t doesn't doesn’t "
    "didn't didn’t won't won’t isn't isn’t aren't wasn't shouldn't wouldn't avoid hate hates "
    "dislike dislikes stop"
)
_NEGATORS: Final = frozenset(_NEGATOR_TEXT.split())
_STOP_TEXT = (
    "i i'm i’m i'd i’d me my mine we our you your the a an to of and or for in on at is are am "
    "be was were it this that with as by please really also much strongly definitely generally "
    "usually always would do does did user user's customer customer's they their them he she "
    "his her prefer prefers preferred like likes liked love loves rather"
)
_STOP: Final = frozenset(_STOP_TEXT.split())
_REF = re.compile(
    r"^(?P<label>[A-Za-z]+)(?:\s+(?:number|no\.?|num|id|code))?(?:\s+is\s+|\s*:\s*|\s+|\s*)"
    r"#?(?P<code>\S+)$",
    re.IGNORECASE,
)
_COUNT = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s?(?P<unit>[A-Za-z%]+)$")
_AMOUNT = re.compile(r"^(?P<pre>US\$|[$€£¥]|[A-Z]{3})?\s?(?P<n>[\d,]+(?:\.\d+)?)\s?(?P<post>\S*)")
_KV = re.compile(  # within one line: a transcript's next "user:" is not a value
    r"\b(?:my|your|his|her|their|the user's|the user’s|user's|the customer's|customer's)[ \t]+"
    r"(?P<key>(?:[\w-]+[ \t]+){0,2}?[\w-]+)[ \t]+(?:is|are|was|=)[ \t]+"
    r"(?P<value>[^.,;!?\n]{1,60})",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[,;:]\s+|\s+(?:and|but|while|whereas)\s+", re.IGNORECASE)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _stem(word: str) -> str:
    word = word.casefold().replace("’", "'")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _contains(haystack: str, value: str) -> bool:
    """``value`` (normalized) in ``haystack`` (normalized), not inside a longer word."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", haystack) is not None


def _key(f: Fact) -> tuple[str, str] | None:
    """The key under which two values of one fact compete, or None (no key)."""
    v = " ".join(f.value.split())
    if f.kind == "reference":
        m = _REF.match(v)
        return ("reference", m.group("label").casefold()) if m else None
    if f.kind == "number":
        m = _COUNT.match(v)
        return ("number", _stem(m.group("unit"))) if m else None
    if f.kind == "amount":
        m = _AMOUNT.match(v)
        if m:
            unit = (m.group("pre") or m.group("post") or "").casefold().rstrip("s")
            return ("amount", unit)
    if f.kind == "email":
        return ("email", "")
    return None


def _value(f: Fact) -> str:
    """The part of a keyed fact's text that is its value (the code, the number)."""
    v = " ".join(f.value.split())
    m = _REF.match(v) if f.kind == "reference" else None
    if m:
        return m.group("code").casefold()
    m = _COUNT.match(v) if f.kind == "number" else None
    if m:
        return m.group("n")
    m = _AMOUNT.match(v) if f.kind == "amount" else None
    if m:
        return m.group("n").replace(",", "")
    return _norm(v)


def _kv_pairs(text: str) -> list[tuple[str, str]]:
    return [(_norm(m.group("key")), _norm(m.group("value"))) for m in _KV.finditer(text)]


def _negated(words: Iterable[str]) -> bool:
    return sum(1 for w in words if w.replace("’", "'") in _NEGATORS or w.endswith("n't")) % 2 == 1


def _content(words: Iterable[str]) -> set[str]:
    return {_stem(w) for w in words if w.replace("’", "'") not in _STOP | _NEGATORS}


# -- the offline validator -----------------------------------------------------------------


def _source_texts(messages: Sequence[Message] | str) -> tuple[list[Fact], str]:
    if isinstance(messages, str):
        return extract_facts(messages), messages
    if isinstance(messages, Message) or not isinstance(messages, Sequence):
        raise InvalidMessage("messages", messages, "must be a list of Message or a string")
    msgs: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise InvalidMessage(f"messages[{i}]", m, "must be a Message")
        msgs.append(m)
    return extract_from_messages(msgs), "\n".join(m.text() for m in msgs)


def _summary_text(summary: Summary | Message | str) -> str:
    if isinstance(summary, Summary):
        return summary.content
    if isinstance(summary, Message):
        return summary.text()
    if not isinstance(summary, str):
        raise InvalidMessage("summary", summary, "must be a string, a Summary or a Message")
    return summary


def validate_summary(
    messages: Sequence[Message] | str, summary: Summary | Message | str
) -> SummaryValidation:
    """Check ``summary`` against its source ``messages`` (or a source text), offline.

    Returns the facts of the source the summary drops or contradicts and a 0-100 score
    (100: every fact kept, none contradicted; also 100 when the source has no facts).
    """
    facts, source = _source_texts(messages)
    text = _summary_text(summary)
    hay = _norm(text)
    # where a preference may be restated: each sentence and each of its clauses
    candidates: list[list[str]] = []
    for _, sentence in split_sentences(text):
        parts = _CLAUSE.split(sentence)
        for part in parts if len(parts) == 1 else [sentence, *parts]:
            candidates.append(_WORD.findall(part.casefold()))
    # what the summary says for each key, from its own facts and "my X is Y" statements
    said: dict[tuple[str, str], list[str]] = {}
    own = extract_facts(text, preferences=False)
    hay_facts = {_norm(f.value) for f in own}  # kept as the extractor reads them too
    for f in own:
        # a label at the end of one line and a value on the next are not one fact
        k = _key(f) if "\n" not in f.value else None
        if k is not None:
            said.setdefault(k, []).append(_value(f))
    for k2, v in _kv_pairs(text):
        said.setdefault(("kv", k2), []).append(v)
    known: dict[tuple[str, str], set[str]] = {}
    for f in facts:
        k = _key(f)
        if k is not None:
            known.setdefault(k, set()).add(_value(f))
    for k2, v in _kv_pairs(source):
        known.setdefault(("kv", k2), set()).add(v)

    # "my address is X" in the source, another value for it in the summary
    kv_clash: dict[str, tuple[str, str]] = {}
    for (kind, key), values in said.items():
        sources = known.get(("kv", key)) if kind == "kv" else None
        for v in values if sources else ():
            if not any(v in src or src in v for src in sources or ()):
                kv_clash.setdefault(key, (v, sorted(sources or ())[0]))

    dropped: list[Issue] = []
    contradicted: list[Issue] = []
    total = lost = 0.0
    seen: set[tuple[str, str]] = set()
    reported: set[tuple[str, str]] = set()
    for f in facts:
        if f.key in seen:
            continue
        seen.add(f.key)
        weight = KIND_VALUE.get(f.kind, 2)
        total += weight
        if f.kind == "preference":
            m = _KV.search(f.value)
            clash = kv_clash.pop(_norm(m.group("key")), None) if m else None
            issue = _kv_issue(m.group("key"), *clash, f) if m and clash else None
            if issue is None and not _contains(hay, _norm(f.value)):  # verbatim is kept
                issue = _check_preference(f, candidates)
        else:
            issue = _check_atomic(f, hay, hay_facts, said, known, reported)
        if issue is None:
            continue
        if issue.problem == "contradicted":
            contradicted.append(issue)
            lost += 2 * weight
        else:
            dropped.append(issue)
            lost += weight
    for key, (v, src) in kv_clash.items():  # statements the extractor did not take
        contradicted.append(_kv_issue(key, v, src, None))
        total += KIND_VALUE["preference"]
        lost += 2 * KIND_VALUE["preference"]
    score = 100 if total == 0 else max(0, round(100 * (1 - lost / total)))
    if (dropped or contradicted) and score == 100:
        score = 99  # an issue always shows in the score
    return SummaryValidation(score, tuple(dropped), tuple(contradicted), len(seen))


def _check_atomic(
    f: Fact,
    hay: str,
    hay_facts: set[str],
    said: dict[tuple[str, str], list[str]],
    known: dict[tuple[str, str], set[str]],
    reported: set[tuple[str, str]],
) -> Issue | None:
    """A contradiction when the summary gives this fact's key a value the source never
    gave it (once per key), else a drop when the value is missing."""
    k = _key(f)
    if k is not None and k in said and k not in reported:
        other = [v for v in said[k] if v not in known.get(k, set())]
        if other:
            reported.add(k)
            return Issue(
                "contradicted",
                f.value,
                f"contradicts the source: the summary has {other[0]!r} for {k[1] or k[0]}, "
                f"the source says {f.value!r} (message {f.source_id})",
                other[0],
                f.kind,
                f.source_id,
            )
    value = _norm(f.value)
    if value in hay_facts or _contains(hay, value):
        return None
    if k is not None and _contains(hay, _value(f)):
        return None  # "ticket #A-17" kept as "A-17"
    return Issue(
        "dropped",
        f.value,
        f"dropped {f.kind} {f.value!r} (message {f.source_id})",
        None,
        f.kind,
        f.source_id,
    )


def _kv_issue(key: str, said: str, source: str, f: Fact | None) -> Issue:
    key = _norm(key)
    return Issue(
        "contradicted",
        f.value if f is not None else f"{key} is {source}",
        f"contradicts the source: the summary says {key} is {said!r}, the source says "
        f"{source!r}" + (f" (message {f.source_id})" if f is not None else ""),
        said,
        f.kind if f is not None else None,
        f.source_id if f is not None else None,
    )


def _check_preference(f: Fact, clauses: list[list[str]]) -> Issue | None:
    words = _WORD.findall(f.value.casefold())
    need = _content(words)
    if not need:
        return None
    best: list[str] | None = None
    best_share = 0.0
    for clause in clauses:
        share = len(need & {_stem(w) for w in clause}) / len(need)
        if share > best_share or (share == best_share and best and len(clause) < len(best)):
            best, best_share = clause, share
    if best is None or best_share < 0.6:
        return Issue(
            "dropped",
            f.value,
            f"dropped preference {f.value!r} (message {f.source_id})",
            None,
            f.kind,
            f.source_id,
        )
    if _negated(words) != _negated(best):
        said = " ".join(best)
        return Issue(
            "contradicted",
            f.value,
            f"contradicts the source: the summary says {said!r}, the source says "
            f"{f.value!r} (negation flipped; message {f.source_id})",
            said,
            f.kind,
            f.source_id,
        )
    return None
