"""What a user says changed: moves and switches, "X, not Y", and corrections.

``value_changes(text)``: ``(old, new)`` of "I switched from A to B" / "I moved from
Lisbon to Porto"; ``value_corrections(text)``: ``(old, new)`` of "it's 80202, not
80203"; ``correction(text)``: the value of "Sorry, typo: it's Chen." (the old value
unsaid). ``change_attribute`` gives the attribute when the user names it ("I changed my
mobile provider from Ziggo to Safaricom"). ``FactHistory`` applies them: the attribute
is whatever fact holds the old value, or what the previous message stated. Every pattern
is bounded and reads at most ``MAX_TEXT`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from ._profile_rules import NAME

MAX_TEXT: Final = 8_192
MAX_VALUE: Final = 80
END: Final = (
    # where a value ends: a conjunction, a new first-person clause, punctuation
    r"(?=\s+(?:over|than|because|but|since|when|if|instead|pero|porque|mais|parce|aber|weil)\b"
    r"|\s+(?i:and|y|et|und)\s+(?i:i|we|my|yo|mi|je|j['’]|mon|ich|mein)(?![\w])"
    r"|\s*[,.;!?\n]|\s+[-–—]\s|\s*$)"
)
_VALUE_CUT = re.compile(
    r",?\s+(?i:and|but|y|pero|et|mais|und|aber|so)\s+(?i:i|we|my|yo|je|j['’]|ich|mi|mon)\b"
    r"|,\s+(?i:please|thanks|thank|gracias|merci|danke)\b"
)


def clip(value: str) -> str:
    """A value without a following clause ("..., and I ...") or end punctuation."""
    value = _VALUE_CUT.split(value, maxsplit=1)[0]
    return " ".join(value.split()).strip(" .,!;:\"'")


_CHANGE = re.compile(
    r"(?i:\b(?:i|we)\s+(?:just\s+|recently\s+|finally\s+|have\s+|['’]ve\s+)?"
    r"(?:switched|changed|moved|went|upgraded|downgraded|transferred|swapped))"
    r"(?:\s+(?i:my|our)\s+(?P<a>[\w'’ -]{2,30}?))?\s+(?i:from)\s+"
    r"(?P<old>[^,.;!?\n]{1,60}?)\s+(?i:to|for)\s+(?P<new>[^,.;!?\n]{1,60}?)" + END
)
_NOT = re.compile(
    r"(?P<new>[\w.+-]+@[\w.-]+\.[A-Za-z]{2,}|\+?\d[\w:./-]{0,15}|[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+){0,2})"
    r",?\s+(?i:not)\s+"
    r"(?P<old>[\w.+-]+@[\w.-]+\.[A-Za-z]{2,}|\+?\d[\w:./-]{0,15}|[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+){0,2})"
    r"(?=\s*(?:[,.;!?]|$))"
)
_WHEN_TAIL = re.compile(
    r"(?i:\s+(?:(?:this|last|next)\s+(?:week|weekend|month|year)|today|yesterday|now"
    r"|recently|lately|on\s+\w+day|in\s+(?:the\s+)?(?:spring|summer|fall|autumn|winter)))+$"
)


def value_changes(text: str) -> list[tuple[str, str]]:
    """``(old, new)`` values a user says they changed ("I switched from FitLab to Iron
    Temple this month" -> ``("FitLab", "Iron Temple")``): the attribute is whatever
    fact holds the old value, which only the fact history knows."""
    if "from" not in text.lower():
        return []
    out = []
    for m in _CHANGE.finditer(text[:MAX_TEXT]):
        old, new = clip(m.group("old")), clip(_WHEN_TAIL.sub("", m.group("new")))
        if old and new and len(new) <= MAX_VALUE:
            out.append((old, new))
    return out


def value_corrections(text: str) -> list[tuple[str, str]]:
    """``(old, new)`` of "X, not Y" ("it's 80202, not 80203" -> ``("80203", "80202")``):
    a value corrected, numbers included (the user names both)."""
    if " not " not in text.lower():
        return []
    return [
        (m.group("old").rstrip(".,:"), m.group("new").rstrip(".,:"))
        for m in _NOT.finditer(text[:MAX_TEXT])
    ]


def change_attribute(clause: str) -> Iterator[tuple[str, str]]:
    """``(attribute, new)`` when the user names what changed ("I changed my mobile
    provider from Ziggo to Safaricom")."""
    if "from" in clause.lower():
        for m in _CHANGE.finditer(clause[:MAX_TEXT]):
            new = clip(_WHEN_TAIL.sub("", m.group("new")))
            if m.group("a") and new and len(new) <= MAX_VALUE:
                yield m.group("a"), new


_CUE = re.compile(
    r"(?i:^\W*(?:sorry|oops|whoops|actually|correction|wait|no\s+wait|my\s+bad|scratch\s+that"
    r"|typo|i\s+meant|i\s+mean)\b)"
)
VALUE: Final = (
    r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}"
    r"|\+?\(?\d[\d()\s.:/-]{0,18}\d(?:\s?[ap]\.?m\.?)?[A-Za-z]?"
    rf"|(?:[a-z]{{3,12}}\s+)?\d[\w-]{{0,12}}"
    rf"|{NAME})"
)
_SAYS = re.compile(
    rf"(?i:\b(?:it['’]s|it\s+is|i\s+meant|make\s+that|should\s+be|use|is(?:\s+at)?))\s+(?P<v>{VALUE})"
    r"(?=\s*(?:[,.;!?]|$|\s+(?i:instead|not|with|please|now)\b))"
)


def correction(text: str) -> str | None:
    """The corrected value of a message with a sentence that starts with a correction
    cue and says "it's X" / "I meant X" / "use X" (there or in the next sentence), else
    None."""
    parts = re.split(r"(?<=[.!?])\s+", text[:2000].strip())
    for i, sentence in enumerate(parts):
        if _CUE.search(sentence) is None:
            continue
        found = _SAYS.findall(" ".join(parts[i : i + 2]))
        if found:
            return str(found[0]).strip(" ,.") or None
    return None


def shape(value: str) -> str:
    """What kind of value a correction replaces: an email, a number, a name, or text."""
    if "@" in value:
        return "email"
    if any(ch.isdigit() for ch in value):
        return "number"
    return "name" if value[:1].isupper() else "text"
