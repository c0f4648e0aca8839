"""The offline extractor's rules for what a user says about themself.

``user_facts(text, when)`` reads first-person statements in English, Spanish, French and
German ("my name is", "me llamo", "je m'appelle", "ich heiße"; "I live in"; "I don't
like"; "allergic to"; "I have two kids"; "my X is Y" with relative dates resolved
against ``when``), clause by clause (``_clauses``: "I'm allergic to peanuts and live in
Oslo" is two statements), and the rest of the profile (``_profile_rules``: people and
pets, contact preferences and refusals, health, jobs, addresses, dated events). It
returns ``(attribute, value)`` pairs, first mention of an attribute first.
``value_changes`` and ``correction`` read changes ("I moved from Lisbon to Porto",
"it's 80202, not 80203", "Sorry, typo: it's Chen") that ``FactHistory`` applies. Every
pattern is bounded (no nested unbounded repeats) and texts are cut to ``MAX_TEXT``
characters, so a hostile message costs linear time. Tool results: ``_tool_rules``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from . import _profile_rules as profile
from ._changes import END as _END
from ._changes import (
    change_attribute,
    clip,
    correction,
    shape,
    value_changes,
    value_corrections,
)
from ._clauses import clauses, sentences
from ._patterns import EMAIL
from ._tool_rules import MAX_TOOL_FIELDS, tool_facts
from ._words import NUMBER_WORD, RELATIVE_DATE, number_value, resolve_date
from .keyed import norm_attribute, norm_object

__all__ = [
    "MAX_TEXT",
    "MAX_TOOL_FIELDS",
    "correction",
    "shape",
    "tool_facts",
    "user_facts",
    "value_changes",
    "value_corrections",
]

MAX_TEXT: Final = 8_192
MAX_VALUE: Final = 80


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_W = r"[A-Za-zÀ-ÖØ-öø-ÿ]"
_CAP = r"[A-ZÀ-ÖØ-Þ]"
_NAME_WORD = rf"{_CAP}(?:{_W}|['’-]){{0,30}}"
_NAME_CAP = rf"{_NAME_WORD}(?:\s+(?:(?:van|von|de|da|del|la|le|di|du)\s+)?{_NAME_WORD}){{0,3}}"
_NAME_ANY = rf"(?:{_NAME_CAP}|[a-zà-ÿ]{{2,30}}(?:\s+[a-zà-ÿ]{{2,30}})?(?=\s*(?:[,.!?]|$)))"
_PLACE = rf"(?:{_NAME_CAP}|[a-zà-ÿ]{{2,30}})"
_IM = r"i(?:'m|’m|\s+am)"
_OBJ = rf"(?P<o>[^,.;!?\n]{{1,60}}?){_END}"

_NAME = re.compile(
    r"(?i:\b(?:my\s+name\s+is|my\s+name['’]s|the\s+name['’]s|me\s+llamo|mi\s+nombre\s+es"
    r"|je\s+m['’]appelle|mon\s+nom\s+est|ich\s+heiße|ich\s+heisse|mein\s+name\s+ist))"
    rf"\s+(?P<v>{_NAME_ANY})"
)
_NOT_A_NAME: Final = _set(
    "Allergic Vegan Vegetarian Based Sorry Fine Good Okay Ok Here Back Done Ready Not So Just "
    "Still Also Really Very Looking Trying Going Afraid Glad Happy Sure Interested New "
    "Living Moving Calling Writing Working"
)
_NOT_NICKNAMES: Final = _set(
    "back later tomorrow tonight today again anytime soon now anything whatever when if after "
    "before at on in please maybe sometime any first right asap"
)
_IM_NAME = re.compile(
    rf"(?i:\b(?:{_IM}|this\s+is))\s+(?P<v>{_NAME_CAP})"
    r"(?=\s*(?:[,.!?]|$|\s+(?:and|from|here)\b))"
)
_NICK = re.compile(
    r"(?i:\b(?:calls?\s+me|i\s+go\s+by|known\s+as|llámame"
    r"|appelle[sz]?-moi|nenn\s+mich|nennen\s+sie\s+mich))"
    rf"\s+(?P<v>{_NAME_ANY})"
)
_CITY = re.compile(
    r"(?i:\b(?:(?:i|we)\s+(?:now\s+|currently\s+|still\s+|just\s+|recently\s+|actually\s+)?"
    r"(?:live|moved|have\s+moved|relocated|have\s+relocated|reside"
    rf"|moved\s+from\s+{_PLACE}(?=\s+to\b))"
    rf"|(?:{_IM}|we(?:'re|’re|\s+are))\s+(?:now\s+|currently\s+)?(?:based|living|located)"
    r"|i['’]ve\s+moved|we['’]ve\s+moved|vivo|me\s+mudé|nos\s+mudamos|j['’]habite|je\s+vis"
    r"|on\s+habite|ich\s+wohne|ich\s+lebe|wir\s+wohnen|ich\s+bin\s+nach)"
    r"\s+(?:in|to|en|à|a|au|nach))"
    rf"\s+(?P<v>{_PLACE})"
)
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}(?:[\s.-]?\(?\d{1,4}\)?){2,5}"
    r"|(?:\d{1,3}[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4})(?![\w])"
)
_MY = re.compile(
    r"(?i:\b(?:my|our|mi|mis|mon|ma|mein|meine|unser|unsere))\s+"
    r"(?P<a>[\wÀ-ÿ'’-]{2,30}(?:\s+[\wÀ-ÿ'’-]{2,30}){0,3}?)"
    r"\s*(?:\s(?i:is|are|es|est|ist|will\s+be|was)\s+|:\s*)(?P<v>[^!?;\n]{1,120})"
)
_MY_SKIP: Final = _set(
    "name nombre nom bad fault guess question point problem pleasure apologies turn "
    "concern issue idea thought opinion understanding impression hope goal day week "
    "life head heart mind time schedule mistake advice feeling sense gut"
)
# A "my X is Y" value starting with one of these words describes a state, not a value
# ("my desk is right next to the printer", "my knee is a bit sore").
_STATE_START: Final = _set(
    "a-bit a-little a-lot kind sort pretty quite really very so too not no always never still "
    "just also right up down out off over back away here there fine good great ok okay busy "
    "tired sore sick late early broken full empty closed open sure ready done bad better worse "
    "same different similar like about around almost probably maybe actually currently that "
    "this what how why one the your his her their our my it its on in at to for from by into "
    "onto near next under with without important key awesome amazing great nice cool "
    "beautiful wonderful hard tough easy crucial essential everything huge big small "
    "special perfect fun interesting exciting incredible fantastic terrible awful lovely "
    "cute adorable sweet happy sad proud lucky blessed grateful thankful"
)
_VALUE_TAIL = re.compile(
    r"\s+(?i:in\s+case|if|so\s+that|so|because|since|which|who|when|but|though|although"
    r"|as\s+long\s+as|for\s+now|by\s+the\s+way|btw)\b"
)
_LEAD = re.compile(r"(?i:^(?:now|still|currently|actually|officially)\s+)")
_PREP = re.compile(r"(?i:^(?:with|at|on|in)\s+)(?=[A-Z0-9+(])")
_PARTICLES: Final = _set("de da das do dos del la le di du van von of the y")
_REL = re.compile(rf"(?i:{RELATIVE_DATE})")
_PREF_POS = re.compile(
    r"(?i:\bi\s+(?:really\s+|also\s+|just\s+|absolutely\s+|do\s+|still\s+|totally\s+"
    r"|truly\s+|actually\s+){0,3}(?:like|love|enjoy|adore|prefer)"
    rf"|\b{_IM}\s+(?:a\s+)?(?:big\s+|huge\s+|great\s+)?fan\s+of"
    rf"|\b{_IM}\s+(?:really\s+|so\s+|very\s+)?(?:passionate\s+about|interested\s+in)"
    rf"|\b{_IM}\s+(?:now\s+|currently\s+|also\s+)?(?P<learn>learning)(?:\s+how)?(?:\s+to)?"
    r"|(?<!\bno\s)\bme\s+(?:gusta|gustan|encanta|encantan)|\bj['’](?:aime|adore)"
    r"|\bich\s+(?:mag|liebe)(?!\s+kein))"
    rf"\s+{_OBJ}"
)
_PREF_NEG = re.compile(
    r"(?i:\bi\s+(?:really\s+|just\s+|still\s+|also\s+){0,2}(?:don['’]t|do\s+not|can['’]t"
    r"|cannot|never|no\s+longer)\s+(?:really\s+)?(?:like|love|enjoy|stand)"
    r"|\bi\s+(?:really\s+|also\s+)?(?:hate|dislike|detest|loathe)"
    r"|\bi\s+(?:really\s+|just\s+|still\s+|also\s+){0,2}(?:don['’]t|do\s+not|never|no\s+longer"
    r"|can['’]t|cannot)\s+(?P<avoid>eat|drink)"
    rf"|\b{_IM}\s+not\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of"
    r"|\bno\s+me\s+(?:gusta|gustan)|\b(?:yo\s+)?odio|\bje\s+n['’]aime\s+pas|\bje\s+déteste"
    r"|\bich\s+mag(?=\s+kein)|\bich\s+hasse)"
    rf"\s+{_OBJ}"
)
_PRONOUNS: Final = _set(
    "that this it how what when to you your them those these where having being if so i me "
    "him her us "
    "eso esto ça cela das es the way"
)
_ALLERGY = re.compile(
    r"(?i:\ballergic\s+to|\ballergy\s+to|\balérgic[oa]s?\s+a|\ballergique\s+(?:à|a)"
    r"|\ballergique(?=\s+(?:aux|au)\b)|\ballergisch\s+(?:gegen|auf))"
    rf"\s+{_OBJ}"
)
_ALLERGY_NOUN = re.compile(r"(?i:\b(?:a|an)\s+(?P<o>[a-z]{3,20})\s+allergy\b)")
_DIET = re.compile(
    rf"(?i:\b(?:{_IM}|soy|je\s+suis|ich\s+bin)\s+(?:a\s+|strictly\s+|strict\s+|on\s+an?\s+)?"
    r"|\bi\s+(?:only\s+|mostly\s+|now\s+|strictly\s+)?(?:eat|keep|follow\s+an?)\s+"
    r"|\b(?:i|we)\s+(?:just\s+|recently\s+|finally\s+)?(?:went|became|turned|have\s+gone|['’]ve\s+gone)\s+)"
    r"(?P<v>(?i:vegetarian[oa]?|vegan[oa]?|pescatarian|végétarien(?:ne)?|végane?"
    r"|vegetarier(?:in)?|veganer(?:in)?|lactose[- ]intolerant|gluten[- ]free|celiac|coeliac"
    r"|diabetic|kosher|halal))\b"
)
_JOB = re.compile(
    r"(?i:\b(?:i\s+work\s+as|je\s+travaille\s+comme|ich\s+arbeite\s+als|trabajo\s+como)"
    r"\s+(?:(?:a|an|un|une|una|ein|eine)\s+)?)(?P<v>[^,.;!?\n]{2,40}?)"
    rf"(?:\s+(?i:at|for)\s+(?P<e>{_NAME_CAP}))?{_END}"
)
_JOB_AT = re.compile(
    rf"(?i:\b{_IM}\s+(?:a|an)\s+)(?P<v>[a-z]{{3,20}}(?:\s+[a-z]{{3,20}})?)"
    rf"\s+(?i:at|for)\s+(?P<e>{_NAME_CAP})"
)
_EMPLOYER = re.compile(
    r"(?i:\bi\s+(?:now\s+|still\s+)?work\s+(?:at|for)"
    r"|\bi\s+(?:just\s+|recently\s+)?(?:started|began)\s+(?:a\s+new\s+job\s+|working\s+)?at"
    rf"|\b{_IM}\s+(?:now\s+)?employed\s+(?:at|by)|\bi\s+got\s+a\s+job\s+(?:at|with)"
    r"|\bi\s+(?:just\s+|recently\s+|have\s+)?joined"
    rf"|\bi\s+(?:just\s+)?(?:left|quit)\s+{_NAME_CAP}\s+(?:and|to)\s+"
    r"(?:started\s+at|start\s+at|joined|join))"
    rf"\s+(?P<e>{_NAME_CAP})"
)
_AGE = re.compile(
    rf"(?i:\b(?:{_IM}|tengo|j['’]ai|ich\s+bin)\s+)(?P<n>{NUMBER_WORD})"
    r"(?i:\s+(?:years?\s+old|years?\s+of\s+age|años|ans|jahre\s+alt))"
    rf"|(?i:\bi\s+(?:just\s+)?turned\s+)(?P<t>{NUMBER_WORD})\b"
)
_COUNT_HEAD = re.compile(
    r"(?i:\b(?:i|we)\s+(?:have|own|have\s+got)|\bi['’]ve\s+got|\bwe['’]ve\s+got|\btengo"
    r"|\bj['’]ai|\bich\s+habe|\bwir\s+haben)\s+"
)
_COUNT_ITEM = re.compile(
    rf"(?P<n>{NUMBER_WORD})\s+(?P<noun>[\wÀ-ÿ]{{3,20}})(?:\s*(?:,|and|y|et|und)\s+|(?=[\s,.;!?]|$))"
)
_NOT_COUNTED: Final = _set(
    "years year años ans jahre questions question problems problem issues issue minutes "
    "things thing times ideas days hours weeks months more other"
)
_NOT_A_COUNT: Final = _set("a an un une una uno ein eine")
_EVENT = re.compile(
    r"(?i:\b(?:i|we)\s+have\s+(?:a|an|my|our)\s+)(?P<a>[\w'’ -]{3,40}?)\s+(?:(?i:on)\s+)?"
    rf"(?P<d>(?i:{RELATIVE_DATE}))\b"
)


_BRAND = r"[A-Z][\w&'’-]{0,30}"
_BANK = re.compile(rf"(?i:\bi\s+bank\s+(?:with|at))\s+(?P<v>{_BRAND}(?:\s+{_BRAND}){{0,2}})")


def _number(text: str) -> str | None:
    n = number_value(text)
    return None if n is None else str(n)


def _value(raw: str, when: float | None) -> str | None:
    """A "my X is Y" value: a relative date resolved, a number word as digits, an id or
    a name without what follows it; None when it describes a state ("right next to the
    printer", "a bit sore", "traveling to Tokyo")."""
    v = _VALUE_TAIL.split(clip(raw), maxsplit=1)[0]
    v = _PREP.sub("", _LEAD.sub("", v, count=1), count=1).strip(" .,!;:\"'")
    if not v:
        return None
    if _REL.fullmatch(v):
        return resolve_date(v, when) or v
    number = None if v[:1].isdigit() else _number(v)  # "seven" -> 7; "02193" stays as said
    if number is not None:
        return number
    words = v.split()
    if v[0].isdigit() or v[0] in "+(" or "@" in words[0] or v[0].isupper():
        kept = [words[0]]
        for w in words[1:]:
            if not (w[0].isupper() or any(c.isdigit() for c in w) or w in _PARTICLES):
                break
            kept.append(w)
        return " ".join(kept).rstrip(" ,.;:")
    first = words[0].casefold()
    two = "-".join(x.casefold() for x in words[:2])
    if len(words) > 4 or first in _STATE_START or two in _STATE_START:
        return None
    if first.endswith(("ing", "ed")) and first not in ("red", "bed", "wing", "king", "ring"):
        return None
    return v


def user_facts(text: str, when: float | None) -> list[tuple[str, str]]:
    """What a user states about themself in ``text`` (said at epoch ``when``), clause
    by clause; a street address by sentence."""
    out: list[tuple[str, str]] = []
    lower = text == text.casefold()
    for s in sentences(text[:MAX_TEXT]):
        if any(c.isdigit() for c in s):
            out.extend(profile.address(s))
        for c in clauses(s):
            out.extend(_clause(c, when, lower))
    return out


# Words without one of which a rule cannot match (checked on the lowercased clause):
# most clauses skip most rules, which keeps a message's cost near one pass per rule.
_GATES: Final[dict[str, tuple[str, ...]]] = {
    "name": ("name", "llamo", "nombre", "appelle", "nom ", "heiß", "heiss"),
    "im": ("i'm", "i’m", "i am", "this is"),
    "nick": ("call", "go by", "known as", "llám", "appelle", "nenn"),
    "city": ("live", "moved", "reloc", "resid", "based", "living", "located", "vivo", "mud",
             "habite", "vis ", "wohne", "lebe", "nach"),
    "allergy": ("allerg", "alérg"),
    "pref": ("like", "love", "enjoy", "ador", "prefer", "fan ", "gust", "encant", "aime", "learn",
             "passion", "interest",
             "mag", "lieb", "hate", "dislike", "detest", "loath", "stand", "odio", "détest",
             "hasse", "eat", "drink"),
    "diet": ("veg", "pesc", "lactose", "gluten", "celiac", "coeliac", "diabet", "kosher",
             "halal", "végé", "végan"),
    "job": ("work", "travaille", "arbeite", "trabajo", " at ", " for ", "employ", "join",
            "bank"),
    "named_job": ("i'm a", "i’m a", "i am a", "as a", "as an", "became", "become", "trained"),
    "age": ("old", "age", "años", "ans", "jahre", "turned"),
    "count": ("have", "own", "got", "tengo", "j'ai", "j’ai", "habe"),
    "my": ("my ", "our ", "mi ", "mis ", "mon ", "ma ", "mein", "unser"),
    "people": ("my ", "our ", "named", "called", "name"),
    "contact": ("call", "phone", "ring", "text", "email", "e-mail", "mail", "message",
                "contact", "sms", "only", "reach", "app", "gram", "signal", "book", "slack",
                "linkedin", "chat", "viber"),
    "health": ("have", "had", "get", "suffer", "live with", "deal", "got", "diagnos",
               "treated"),
}  # fmt: skip


def _gate(low: str, rule: str) -> bool:
    return any(w in low for w in _GATES[rule])


def _clause_facts(c: str, when: float | None, lower: bool) -> Iterator[tuple[str, str]]:
    low = c.lower()
    yield from _identity(c, low, lower)
    if "@" in c:
        for m in EMAIL.finditer(c):
            yield "email", m.group()
    if sum(ch.isdigit() for ch in c[:4096]) >= 7:
        for m in _PHONE.finditer(c):
            if 7 <= sum(ch.isdigit() for ch in m.group()) <= 15:
                yield "phone", m.group()
    yield from _likes(c, low)
    yield from _about(c, low)
    if _gate(low, "people"):
        yield from profile.people(c)
    if _gate(low, "contact"):
        yield from profile.contact(c)
    if _gate(low, "health"):
        yield from profile.health(c)
    if _gate(low, "count"):
        yield from _counts(c, when)
    if _gate(low, "my"):
        yield from _my(c, when)
    yield from change_attribute(c)


def _clause(c: str, when: float | None, lower: bool) -> list[tuple[str, str]]:
    """A clause's facts; an event on a relative date only when nothing else was read
    ("I moved to Porto last month" is the city, not an event)."""
    out = list(_clause_facts(c, when, lower))
    return out or list(profile.event(c, when))


def _identity(s: str, low: str, lower: bool) -> Iterator[tuple[str, str]]:
    if _gate(low, "name"):
        for m in _NAME.finditer(s):
            yield "name", m.group("v")
    if _gate(low, "im"):
        for m in _IM_NAME.finditer(s):
            first = m.group("v").split()[0]
            if first not in _NOT_A_NAME and first.casefold() not in ("a", "an", "the"):
                yield "name", m.group("v")
        if lower:  # "hey, i'm marta, nice to meet you": a casual lowercase introduction
            for m in re.finditer(r"\b(?:i['’]m|i\s+am)\s+([a-zà-ÿ]{2,20})\s*(?:,|$)", s):
                if m.group(1).capitalize() not in _NOT_A_NAME and m.group(1) not in _PRONOUNS:
                    yield "name", m.group(1)
    if _gate(low, "nick"):
        for m in _NICK.finditer(s):
            before = low[max(0, m.start() - 12) : m.start()]
            said = m.group("v")
            refused = re.search(r"(?:n['’]t|never|not|no)\s+(?:\w+\s+)?$", before)
            if not refused and said.split()[0].casefold() not in _NOT_NICKNAMES:
                yield "nickname", said
    if _gate(low, "city"):
        for m in _CITY.finditer(s):
            yield "city", m.group("v")


def _likes(s: str, low: str) -> Iterator[tuple[str, str]]:
    if _gate(low, "allergy"):
        for m in _ALLERGY.finditer(s):
            yield from _object_fact("allergy", m.group("o"), "yes")
        for m in _ALLERGY_NOUN.finditer(s):
            yield from _object_fact("allergy", m.group("o"), "yes")
    if _gate(low, "pref"):
        for m in _PREF_NEG.finditer(s):
            said = "avoids" if m.group("avoid") else "dislikes"
            yield from _object_fact("pref", m.group("o"), said)
        for m in _PREF_POS.finditer(s):
            yield from _object_fact(
                "pref", m.group("o"), "learning" if m.group("learn") else "likes"
            )
    if _gate(low, "diet"):
        for m in _DIET.finditer(s):
            yield "diet", m.group("v").casefold()


def _about(s: str, low: str) -> Iterator[tuple[str, str]]:
    if _gate(low, "job"):
        for pattern in (_JOB, _JOB_AT):
            for m in pattern.finditer(s):
                yield "job", clip(m.group("v"))
                if m.group("e"):
                    yield "employer", m.group("e")
        for m in _EMPLOYER.finditer(s):
            yield "employer", m.group("e")
        for m in _BANK.finditer(s):
            yield "bank", m.group("v")
    if _gate(low, "named_job"):
        yield from profile.job(s)
    if _gate(low, "age"):
        for m in _AGE.finditer(s):
            n = _number(m.group("n") or m.group("t"))
            if n is not None and 0 < int(n) < 130:
                yield "age", n


def _counts(s: str, when: float | None) -> Iterator[tuple[str, str]]:
    for m in _COUNT_HEAD.finditer(s):
        pos = m.end()
        while (item := _COUNT_ITEM.match(s, pos)) is not None:  # items follow the head
            word, noun = item.group("n"), item.group("noun").casefold()
            n = _number(word)
            if n is None or word.casefold() in _NOT_A_COUNT or noun in _NOT_COUNTED:
                break
            yield noun, n
            if not re.search(r"(?:,|and|y|et|und)\s*$", item.group()):
                break
            pos = item.end()
    for m in _EVENT.finditer(s):
        date = resolve_date(m.group("d"), when)
        if date is not None:
            yield clip(m.group("a")), date


def _my(s: str, when: float | None) -> Iterator[tuple[str, str]]:
    for m in _MY.finditer(s):
        raw = m.group("a")
        attr = norm_attribute(raw)
        words = attr.split()
        if attr in _MY_SKIP or words[0] in _PRONOUNS or words[-1] in _MY_SKIP:
            continue
        value = _value(m.group("v"), when)
        if not value or len(value) > MAX_VALUE:
            continue
        rel = words[0].removesuffix("'s").removesuffix("’s")
        named = len(words) > 1 and (words[1] == "name" or raw.split()[1][:1].isupper())
        bare = len(words) == 1 and not value.isdigit() and not value.startswith(("a ", "an "))
        if rel in profile.RELATIONS and (named or bare):
            continue  # "my dog Biscuit is...", "my sister is Anika": people() reads those
        yield attr, value


def _object_fact(kind: str, raw: str, value: str) -> Iterator[tuple[str, str]]:
    obj = norm_object(raw)
    words = obj.split()
    if not words or len(words) > 5 or words[0] in _PRONOUNS or obj in _PRONOUNS:
        return
    yield f"{kind}:{obj}", value
