"""The words a recall index matches on: folded, stop words out, English stems.

Both backends index and query through ``terms`` (the SQLite partition's inverted index
and PostgreSQL's ``terms`` column), so a word matches the same way on either.

- **Folding**: lowercase, diacritics removed (``café`` = ``cafe``), split into runs of
  letters and digits (``fusion.query_terms``'s words).
- **Stop words**: the function words of English (``STOP_WORDS``: articles, pronouns,
  auxiliaries, common prepositions; what a question is made of) carry no topic: BM25
  gives them a small weight, but over tens of thousands of turns a question's seven
  function words still outvote its one topic word. Dropping them took BM25 over real
  conversations (LoCoMo dev) from 0.589 to 0.637 recall@10.
- **Stems**: the Snowball English stemmer (Porter2, ``stem``), so "painted", "painting"
  and "paints" are one word (+4.6 points with stop words out, same set). It is the
  published algorithm, checked against a reference implementation (tests).

A text in another language keeps its words (stems of an English rule set are still
consistent between a text and a query); only its stop words are not removed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

_STOP: Final = """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during
    each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves s t
    d ll m re ve
"""
STOP_WORDS: Final = frozenset(_STOP.split())
"""English function words (NLTK's list, contractions' fragments as the tokenizer splits
them: "don't" is "don" and "t")."""

_WORD: Final = re.compile(r"[^\W_]+")
_MEMO_LIMIT: Final = 1 << 17


def fold(text: str) -> str:
    """``text`` lowercased, its diacritics removed."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


_memo: dict[str, str | None] = {}


def term(word: str) -> str | None:
    """The index term of one folded word: its stem, or None for a stop word."""
    out = _memo.get(word, "")
    if out != "":
        return out
    out = None if word in STOP_WORDS else stem(word)
    if len(_memo) >= _MEMO_LIMIT:
        _memo.clear()
    _memo[word] = out
    return out


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept."""
    out = []
    for w in _WORD.findall(fold(text)):
        t = term(w)
        if t is not None:
            out.append(t)
    return out


def query_terms(text: str, limit: int = 64) -> list[str]:
    """The distinct index terms of a query, in order, at most ``limit``. A query of stop
    words only ("what did you do?") keeps them: something must match."""
    out = dict.fromkeys(terms(text))
    if not out:
        out = dict.fromkeys(stem(w) for w in _WORD.findall(fold(text)))
    return list(out)[:limit]


def analyze_words(words: Iterable[str]) -> dict[str, str | None]:
    """``{word: term}`` for distinct folded words (None: a stop word)."""
    return {w: term(w) for w in words}


# -- the Snowball English (Porter2) stemmer --------------------------------------------

_VOWELS: Final = frozenset("aeiouy")
_DOUBLES: Final = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_LI_ENDING: Final = frozenset("cdeghkmnrt")
_EXCEPTIONS: Final = {
    "skis": "ski",
    "skies": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "idly": "idl",
    "gently": "gentl",
    "ugly": "ugli",
    "early": "earli",
    "only": "onli",
    "singly": "singl",
    "sky": "sky",
    "news": "news",
    "howe": "howe",
    "atlas": "atlas",
    "cosmos": "cosmos",
    "bias": "bias",
    "andes": "andes",
}
_AFTER_1A: Final = frozenset(
    ("inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed")
)
_STEP2: Final = (
    ("ization", "ize"),
    ("ational", "ate"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("iveness", "ive"),
    ("tional", "tion"),
    ("biliti", "ble"),
    ("lessli", "less"),
    ("entli", "ent"),
    ("ation", "ate"),
    ("alism", "al"),
    ("aliti", "al"),
    ("ousli", "ous"),
    ("iviti", "ive"),
    ("fulli", "ful"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("abli", "able"),
    ("izer", "ize"),
    ("ator", "ate"),
    ("alli", "al"),
    ("bli", "ble"),
    ("ogi", "og"),
    ("li", ""),
)
_STEP3: Final = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("alize", "al"),
    ("icate", "ic"),
    ("iciti", "ic"),
    ("ative", ""),
    ("ical", "ic"),
    ("ness", ""),
    ("ful", ""),
)
_STEP4: Final = (
    "ement",
    "ance",
    "ence",
    "able",
    "ible",
    "ment",
    "ant",
    "ent",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
    "ion",
    "al",
    "er",
    "ic",
)


def _region(w: str, start: int) -> int:
    """Where the region after the first non-vowel that follows a vowel begins."""
    for i in range(start + 1, len(w)):
        if w[i] not in _VOWELS and w[i - 1] in _VOWELS:
            return i + 1
    return len(w)


def _short_syllable_end(w: str) -> bool:
    """Whether ``w`` ends in a short syllable."""
    n = len(w)
    if n == 2:
        return w[0] in _VOWELS and w[1] not in _VOWELS
    return (
        n >= 3
        and w[-3] not in _VOWELS
        and w[-2] in _VOWELS
        and w[-1] not in _VOWELS
        and w[-1] not in "wxY"
    )


def _step1b(w: str, r1: int) -> str:
    for suf in ("eedly", "ingly", "edly", "eed", "ing", "ed"):
        if not w.endswith(suf):
            continue
        if suf in ("eed", "eedly"):
            return w[: -len(suf)] + "ee" if len(w) - len(suf) >= r1 else w
        stem_part = w[: -len(suf)]
        if not any(c in _VOWELS for c in stem_part):
            return w
        w = stem_part
        if w.endswith(("at", "bl", "iz")):
            return w + "e"
        if w.endswith(_DOUBLES):
            return w[:-1]
        if _short_syllable_end(w) and r1 >= len(w):
            return w + "e"
        return w
    return w


def stem(word: str) -> str:
    """The Snowball English (Porter2) stem of a lowercase word."""
    if len(word) <= 2 or not word.isalpha():
        return word
    if word in _EXCEPTIONS:
        return _EXCEPTIONS[word]
    w = word.lstrip("'")
    if w.startswith("y"):
        w = "Y" + w[1:]
    w = "".join("Y" if c == "y" and i and w[i - 1] in _VOWELS else c for i, c in enumerate(w))
    if w.startswith(("gener", "arsen")):
        r1 = 5
    elif w.startswith("commun"):
        r1 = 6
    else:
        r1 = _region(w, 0)
    r2 = _region(w, r1)
    # step 1a
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith(("ied", "ies")):
        w = w[:-2] if len(w) > 4 else w[:-1]
    elif w.endswith("s") and not w.endswith(("us", "ss")) and any(c in _VOWELS for c in w[:-2]):
        w = w[:-1]
    if w in _AFTER_1A:
        return w
    w = _step1b(w, r1)
    # step 1c
    if len(w) > 2 and w[-1] in "yY" and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    for suf, rep in _STEP2:
        if w.endswith(suf):
            if len(w) - len(suf) >= r1:
                if suf == "ogi":
                    w = w[:-3] + "og" if w.endswith("logi") else w
                elif suf == "li":
                    w = w[:-2] if len(w) >= 3 and w[-3] in _LI_ENDING else w
                else:
                    w = w[: -len(suf)] + rep
            break
    for suf, rep in _STEP3:
        if w.endswith(suf):
            if len(w) - len(suf) >= r1 and (suf != "ative" or len(w) - 5 >= r2):
                w = w[: -len(suf)] + rep
            break
    for suf in _STEP4:
        if w.endswith(suf):
            if len(w) - len(suf) >= r2 and (suf != "ion" or w[-4:-3] in ("s", "t")):
                w = w[: -len(suf)]
            break
    if w.endswith("e"):
        if len(w) - 1 >= r2 or (len(w) - 1 >= r1 and not _short_syllable_end(w[:-1])):
            w = w[:-1]
    elif w.endswith("ll") and len(w) - 1 >= r2:
        w = w[:-1]
    return w.replace("Y", "y")
