"""The offline extractor's rules: what a user says about themself, what a tool returned.

``user_facts(text, when)`` reads first-person statements in English, Spanish, French and
German ("my name is", "me llamo", "je m'appelle", "ich heiße"; "I live in"; "I don't
like"; "allergic to"; "I have two kids"; "my X is Y" with relative dates resolved
against ``when``). ``tool_facts(text)`` reads the fields of a tool result (JSON,
``key=value`` pairs, ``Label: value``). Both return ``(attribute, value)`` pairs, first
mention of an attribute first. Every pattern is bounded (no nested unbounded repeats)
and texts are cut to ``MAX_TEXT`` characters, so a hostile message costs linear time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

from ._patterns import EMAIL
from ._words import NUMBER_WORD, RELATIVE_DATE, number_value, resolve_date
from .keyed import norm_attribute, norm_object

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
_END = (
    r"(?=\s+(?:over|than|because|but|since|when|if|instead|pero|porque|mais|parce|aber|weil)\b"
    r"|\s+(?i:and|y|et|und)\s+(?i:i|we|my|yo|mi|je|j['’]|mon|ich|mein)(?![\w])"
    r"|\s*[,.;!?\n]|\s*$)"
)
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
_IM_NAME = re.compile(
    rf"(?i:\b(?:{_IM}|this\s+is))\s+(?P<v>{_NAME_CAP})"
    r"(?=\s*(?:[,.!?]|$|\s+(?:and|from|here)\b))"
)
_NICK = re.compile(
    r"(?i:\b(?:call\s+me|i\s+go\s+by|people\s+call\s+me|everyone\s+calls\s+me|llámame"
    r"|appelle[sz]?-moi|nenn\s+mich|nennen\s+sie\s+mich))"
    rf"\s+(?P<v>{_NAME_ANY})"
)
_CITY = re.compile(
    r"(?i:\b(?:(?:i|we)\s+(?:now\s+|currently\s+|still\s+|just\s+|recently\s+|actually\s+)?"
    r"(?:live|moved|have\s+moved|relocated|have\s+relocated|reside)"
    rf"|(?:{_IM}|we(?:'re|’re|\s+are))\s+(?:now\s+|currently\s+)?(?:based|living|located)"
    r"|i['’]ve\s+moved|we['’]ve\s+moved|vivo|me\s+mudé|nos\s+mudamos|j['’]habite|je\s+vis"
    r"|on\s+habite|ich\s+wohne|ich\s+lebe|wir\s+wohnen|ich\s+bin\s+nach)"
    r"\s+(?:in|to|en|à|a|au|nach))"
    rf"\s+(?P<v>{_PLACE})"
)
_PHONE = re.compile(r"(?<![\w+])(?:\+?\d{1,3}[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4}(?!\w)")
_MY = re.compile(
    r"(?i:\b(?:my|our|mi|mis|mon|ma|mein|meine|unser|unsere))\s+"
    r"(?P<a>[\wÀ-ÿ'’-]{2,30}(?:\s+[\wÀ-ÿ'’-]{2,30}){0,3}?)"
    r"\s*(?:\s(?i:is|are|es|est|ist|will\s+be|was)\s+|:\s*)(?P<v>[^!?;\n]{1,120})"
)
_MY_SKIP: Final = _set(
    "name nombre nom bad fault guess question point problem pleasure apologies turn "
    "concern issue idea thought opinion understanding impression hope plan goal"
)
_VALUE_CUT = re.compile(
    r",?\s+(?i:and|but|y|pero|et|mais|und|aber|so)\s+(?i:i|we|my|yo|je|j['’]|ich|mi|mon)\b"
    r"|,\s+(?i:please|thanks|thank|gracias|merci|danke)\b"
)
_REL = re.compile(rf"(?i:{RELATIVE_DATE})")
_PREF_POS = re.compile(
    r"(?i:\bi\s+(?:really\s+|also\s+|just\s+|absolutely\s+|do\s+|still\s+|totally\s+"
    r"|truly\s+|actually\s+){0,3}(?:like|love|enjoy|adore|prefer)"
    rf"|\b{_IM}\s+(?:a\s+)?(?:big\s+|huge\s+|great\s+)?fan\s+of"
    r"|(?<!\bno\s)\bme\s+(?:gusta|gustan|encanta|encantan)|\bj['’](?:aime|adore)"
    r"|\bich\s+(?:mag|liebe)(?!\s+kein))"
    rf"\s+{_OBJ}"
)
_PREF_NEG = re.compile(
    r"(?i:\bi\s+(?:really\s+|just\s+|still\s+|also\s+){0,2}(?:don['’]t|do\s+not|can['’]t"
    r"|cannot|never|no\s+longer)\s+(?:really\s+)?(?:like|love|enjoy|stand|eat|drink)"
    r"|\bi\s+(?:really\s+|also\s+)?(?:hate|dislike|detest|loathe)"
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
    r"|\bi\s+(?:only\s+|mostly\s+|now\s+|strictly\s+)?(?:eat|keep|follow\s+an?)\s+)"
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


_CHANGE = re.compile(
    r"(?i:\b(?:i|we)\s+(?:just\s+|recently\s+|finally\s+|have\s+|['’]ve\s+)?"
    r"(?:switched|changed|moved|went|upgraded|downgraded|transferred|swapped)\s+from)\s+"
    r"(?P<old>[^,.;!?\n]{1,60}?)\s+(?i:to|for)\s+(?P<new>[^,.;!?\n]{1,60}?)" + _END
)
_WHEN_TAIL = re.compile(
    r"(?i:\s+(?:(?:this|last|next)\s+(?:week|weekend|month|year)|today|yesterday|now"
    r"|recently|lately|on\s+\w+day))+$"
)


def value_changes(text: str) -> list[tuple[str, str]]:
    """``(old, new)`` values a user says they changed ("I switched from FitLab to Iron
    Temple this month" -> ``("FitLab", "Iron Temple")``): the attribute is whatever
    fact holds the old value, which only the fact history knows."""
    if "from" not in text.lower():
        return []
    out = []
    for m in _CHANGE.finditer(text[:MAX_TEXT]):
        old, new = _clip(m.group("old")), _clip(_WHEN_TAIL.sub("", m.group("new")))
        if old and new and len(new) <= MAX_VALUE:
            out.append((old, new))
    return out


def _clip(value: str) -> str:
    value = _VALUE_CUT.split(value, maxsplit=1)[0]
    return " ".join(value.split()).strip(" .,!;:\"'")


def _sentences(text: str) -> Iterator[str]:
    """Sentences: a ``.``/``!``/``?`` followed by a space or the end, or a line break."""
    yield from (s for s in re.split(r"(?<=[.!?;])\s+|\n+", text) if s.strip())


def _number(text: str) -> str | None:
    n = number_value(text)
    return None if n is None else str(n)


def _value(raw: str, when: float | None) -> str:
    """A "my X is Y" value: a relative date resolved, a number word as digits."""
    v = _clip(raw)
    if _REL.fullmatch(v):
        return resolve_date(v, when) or v
    return _number(v) or v


def user_facts(text: str, when: float | None) -> list[tuple[str, str]]:
    """What a user states about themself in ``text`` (said at epoch ``when``)."""
    out: list[tuple[str, str]] = []
    lower = text == text.casefold()
    for s in _sentences(text[:MAX_TEXT]):
        out.extend(_sentence_facts(s, when, lower))
    return out


# Words without one of which a rule cannot match (checked on the lowercased sentence):
# most sentences skip most rules, which keeps a message's cost near one pass per rule.
_GATES: Final[dict[str, tuple[str, ...]]] = {
    "name": ("name", "llamo", "nombre", "appelle", "nom ", "heiß", "heiss"),
    "im": ("i'm", "i’m", "i am", "this is"),
    "nick": ("call", "go by", "llám", "appelle", "nenn"),
    "city": ("live", "moved", "reloc", "resid", "based", "living", "located", "vivo", "mud",
             "habite", "vis ", "wohne", "lebe", "nach"),
    "allergy": ("allerg", "alérg"),
    "pref": ("like", "love", "enjoy", "ador", "prefer", "fan ", "gust", "encant", "aime",
             "mag", "lieb", "hate", "dislike", "detest", "loath", "stand", "odio", "détest",
             "hasse"),
    "diet": ("veg", "pesc", "lactose", "gluten", "celiac", "coeliac", "diabet", "kosher",
             "halal", "végé", "végan"),
    "job": ("work", "travaille", "arbeite", "trabajo", " at ", " for ", "employ", "join"),
    "age": ("old", "age", "años", "ans", "jahre", "turned"),
    "count": ("have", "own", "got", "tengo", "j'ai", "j’ai", "habe"),
    "my": ("my ", "our ", "mi ", "mis ", "mon ", "ma ", "mein", "unser"),
}  # fmt: skip


def _gate(low: str, rule: str) -> bool:
    return any(w in low for w in _GATES[rule])


def _sentence_facts(s: str, when: float | None, lower: bool) -> Iterator[tuple[str, str]]:
    low = s.lower()
    yield from _identity(s, low, lower)
    if "@" in s:
        for m in EMAIL.finditer(s):
            yield "email", m.group()
    if sum(c.isdigit() for c in s[:4096]) >= 7:
        for m in _PHONE.finditer(s):
            yield "phone", m.group()
    yield from _likes(s, low)
    yield from _about(s, low)
    if _gate(low, "count"):
        yield from _counts(s, when)
    if _gate(low, "my"):
        yield from _my(s, when)


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
            yield "nickname", m.group("v")
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
            yield from _object_fact("pref", m.group("o"), "dislikes")
        for m in _PREF_POS.finditer(s):
            yield from _object_fact("pref", m.group("o"), "likes")
    if _gate(low, "diet"):
        for m in _DIET.finditer(s):
            yield "diet", m.group("v").casefold()


def _about(s: str, low: str) -> Iterator[tuple[str, str]]:
    if _gate(low, "job"):
        for pattern in (_JOB, _JOB_AT):
            for m in pattern.finditer(s):
                yield "job", _clip(m.group("v"))
                if m.group("e"):
                    yield "employer", m.group("e")
        for m in _EMPLOYER.finditer(s):
            yield "employer", m.group("e")
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
            yield _clip(m.group("a")), date


def _my(s: str, when: float | None) -> Iterator[tuple[str, str]]:
    for m in _MY.finditer(s):
        attr = norm_attribute(m.group("a"))
        if attr in _MY_SKIP or attr.split()[0] in _PRONOUNS:
            continue
        value = _value(m.group("v"), when)
        if value and len(value) <= MAX_VALUE:
            yield attr, value


def _object_fact(kind: str, raw: str, value: str) -> Iterator[tuple[str, str]]:
    obj = norm_object(raw)
    words = obj.split()
    if not words or len(words) > 5 or words[0] in _PRONOUNS or obj in _PRONOUNS:
        return
    yield f"{kind}:{obj}", value


# -- tool results ----------------------------------------------------------------------

_KV = re.compile(r"(?<![\w.])(?P<k>[A-Za-z][\w.-]{1,40})=(?P<v>\"[^\"\n]{0,80}\"|[^,;\s&]{1,80})")
_LABEL = re.compile(
    r"(?:^|(?<=[.;,\n]\s)|(?<=\n))(?P<k>[A-Z][\w -]{1,30}?):[ \t]*(?P<v>[^\n;,]{1,80}?)"
    r"(?=\.\s|\.$|[\n;,]|$)"
)
MAX_TOOL_FIELDS: Final = 40


def tool_facts(text: str) -> list[tuple[str, str]]:
    """The fields a tool result states: JSON leaves (nested keys joined), ``key=value``
    pairs, ``Label: value`` phrases; at most ``MAX_TOOL_FIELDS``."""
    text = text[:MAX_TEXT]
    out: list[tuple[str, str]] = []
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if data is not None:
            _leaves(data, (), out)
            return out[:MAX_TOOL_FIELDS]
    for m in _KV.finditer(text):
        out.append((m.group("k").replace("_", " "), m.group("v").strip('"')))
    for m in _LABEL.finditer(text):
        out.append((m.group("k"), m.group("v").strip()))
    return [(norm_attribute(k), v) for k, v in out if v][:MAX_TOOL_FIELDS]


def _leaves(data: Any, path: tuple[str, ...], out: list[tuple[str, str]]) -> None:
    if len(out) >= MAX_TOOL_FIELDS or len(path) > 6:
        return
    if isinstance(data, dict):
        for k, v in data.items():
            _leaves(v, (*path, str(k)), out)
    elif isinstance(data, list):
        for v in data[:20]:
            _leaves(v, path, out)
    elif data is not None and path:
        value = str(data)
        if 0 < len(value) <= MAX_VALUE:
            out.append((norm_attribute(" ".join(path)), value))
