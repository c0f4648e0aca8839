"""Numbers written in words and relative dates, in English, Spanish, French and German.

Small, table-driven and deterministic: ``number_value("forty-two") == 42``,
``number_value("dreiundvierzig") == 43``; ``resolve_date("next Friday", when)`` is the
ISO date of the first Friday after ``when``. Both return ``None`` for anything else.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

_UNITS_TEXT: Final = {
    "en": "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen",
    "es": "cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce "
    "quince dieciséis diecisiete dieciocho diecinueve",
    "fr": "zéro un deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze "
    "quinze seize dix-sept dix-huit dix-neuf",
    "de": "null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn "
    "vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn",
}
_TENS_TEXT: Final = {
    "en": "twenty thirty forty fifty sixty seventy eighty ninety",
    "es": "veinte treinta cuarenta cincuenta sesenta setenta ochenta noventa",
    "fr": "vingt trente quarante cinquante soixante soixante-dix quatre-vingt quatre-vingt-dix",
    "de": "zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig",
}
_SMALL: dict[str, int] = {"a": 1, "an": 1, "una": 1, "un": 1, "une": 1, "ein": 1, "eine": 1}
_TENS: dict[str, int] = {}
for _lang, _text in _UNITS_TEXT.items():
    for _i, _w in enumerate(_text.split()):
        _SMALL.setdefault(_w, _i)
for _lang, _text in _TENS_TEXT.items():
    for _i, _w in enumerate(_text.split()):
        _TENS.setdefault(_w, 20 + 10 * _i)
_SMALL.update({"dozen": 12, "veintiuno": 21, "veintidós": 22, "veintitrés": 23, "ein": 1})
_DE_COMPOUND = re.compile(r"(\w+?)und(\w+)")
_ES_COMPOUND = re.compile(r"(\w+) y (\w+)")
_ES_VEINTI = re.compile(r"veinti(\w+)")

NUMBER_WORD: Final = (
    r"(?:\d{1,3}|[a-záéíóúüäößèçñ]+(?:[- ](?:y|et|und)[- ][a-záéíóúüäößèçñ]+"
    r"|-[a-záéíóúüäößèçñ]+)*)"
)
"""A pattern for one number: digits or words (checked with ``number_value``)."""


def number_value(text: str) -> int | None:
    """The integer ``text`` spells (digits, or words up to 99 in en/es/fr/de), or None."""
    t = text.strip().casefold()
    if t.isdigit():
        return int(t)
    if t in _SMALL:
        return _SMALL[t]
    if t in _TENS:
        return _TENS[t]
    parts = re.split(r"[- ]+(?:et[- ]+)?", t)
    if len(parts) == 2 and parts[0] in _TENS and parts[1] in _SMALL:
        return _TENS[parts[0]] + _SMALL[parts[1]]  # forty-two, trente-huit, vingt-et-un
    if len(parts) == 2 and "-".join(parts) in _TENS:
        return _TENS["-".join(parts)]
    m = _ES_COMPOUND.fullmatch(t)
    if m and m.group(1) in _TENS and m.group(2) in _SMALL:
        return _TENS[m.group(1)] + _SMALL[m.group(2)]  # treinta y dos
    m = _ES_VEINTI.fullmatch(t)
    if m and m.group(1) in _SMALL:
        return 20 + _SMALL[m.group(1)]
    m = _DE_COMPOUND.fullmatch(t)
    if m and m.group(2) in _TENS:
        unit = 1 if m.group(1) == "ein" else _SMALL.get(m.group(1))
        if unit is not None and unit < 10:
            return _TENS[m.group(2)] + unit  # dreiundvierzig
    return None


def _days(text: str) -> dict[str, int]:
    return {d: i for i, d in enumerate(text.split())}


_WEEKDAYS: Final = {
    **_days("monday tuesday wednesday thursday friday saturday sunday"),
    **_days("lunes martes miércoles jueves viernes sábado domingo"),
    **_days("lundi mardi mercredi jeudi vendredi samedi dimanche"),
    **_days("montag dienstag mittwoch donnerstag freitag samstag sonntag"),
}
_OFFSETS: Final = {
    "today": 0, "tonight": 0, "tomorrow": 1, "the day after tomorrow": 2, "yesterday": -1,
    "day after tomorrow": 2, "the day before yesterday": -2, "next week": 7,
    "hoy": 0, "mañana": 1, "pasado mañana": 2, "ayer": -1, "la próxima semana": 7,
    "aujourd'hui": 0, "demain": 1, "après-demain": 2, "hier": -1, "la semaine prochaine": 7,
    "heute": 0, "morgen": 1, "übermorgen": 2, "gestern": -1, "nächste woche": 7,
    "last night": -1, "this morning": 0, "this afternoon": 0, "this evening": 0,
}  # fmt: skip
_UNIT_DAYS: Final = {
    "day": 1, "days": 1, "week": 7, "weeks": 7, "día": 1, "días": 1, "semana": 7,
    "semanas": 7, "jour": 1, "jours": 1, "semaine": 7, "semaines": 7, "tag": 1, "tagen": 1,
    "woche": 7, "wochen": 7,
}  # fmt: skip
_IN = re.compile(r"(?:in|en|dans|within)\s+(\S+(?:[- ]\S+)?)\s+(\w+)")
_AGO = re.compile(r"(\S+(?:[- ]\S+)?)\s+(\w+)\s+ago|(?:hace|il\s+y\s+a|vor)\s+(\S+)\s+(\w+)")
_NEXT_DAY = re.compile(
    r"(?:(next|this|coming|on|el próximo|el|le|prochain|am|nächsten)\s+)?(\w+)(?:\s+prochain)?"
)
_LAST_DAY = re.compile(r"last\s+(\w+)")

RELATIVE_DATE: Final = (
    r"(?:the\s+day\s+(?:after\s+tomorrow|before\s+yesterday)|day\s+after\s+tomorrow"
    r"|today|tonight|tomorrow|yesterday|next\s+week|pasado\s+mañana|mañana|hoy|ayer"
    r"|last\s+night|this\s+(?:morning|afternoon|evening)"
    r"|(?:last|this|next)\s+(?:weekend|month|year)|(?:last|this)\s+week"
    r"|après-demain|demain|aujourd'hui|übermorgen|morgen|heute"
    r"|(?:in|en|dans)\s+\S+\s+(?:days?|weeks?|días?|semanas?|jours?|semaines?|tagen|wochen)"
    r"|(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d{1,2})\s+(?:days?|weeks?)\s+ago"
    r"|(?:hace|il\s+y\s+a|vor)\s+\S+\s+(?:días?|semanas?|jours?|semaines?|tagen|wochen)"
    r"|(?:(?:next|this|coming|on|last|el\s+próximo|am|nächsten)\s+)?"
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|lunes|martes|miércoles"
    r"|jueves|viernes|sábado|domingo|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche"
    r"|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag)(?:\s+prochain)?)"
)
"""A pattern for the relative dates ``resolve_date`` understands (match case-folded)."""


_PERIOD = re.compile(r"(last|this|next)\s+(week|weekend|month|year)")
_STEP: Final = {"last": -1, "this": 0, "next": 1}


def _period(which: str, unit: str, day: dt.date) -> str:
    """ "last week" -> "week of 2026-02-23" (its Monday), "this weekend" -> "weekend of
    2026-03-07" (its Saturday), "next month" -> "2026-04", "last year" -> "2025"."""
    step = _STEP[which]
    if unit == "week":
        monday = day - dt.timedelta(days=day.weekday()) + dt.timedelta(weeks=step)
        return f"week of {monday.isoformat()}"
    if unit == "weekend":  # this weekend: the one under way, else the coming one
        ahead = day.weekday() - 5 if day.weekday() >= 5 else (5 - day.weekday())
        saturday = (
            day - dt.timedelta(days=ahead) if day.weekday() >= 5 else day + dt.timedelta(days=ahead)
        )
        return f"weekend of {(saturday + dt.timedelta(weeks=step)).isoformat()}"
    if unit == "month":
        month = day.year * 12 + day.month - 1 + step
        return f"{month // 12:04d}-{month % 12 + 1:02d}"
    return f"{day.year + step:04d}"


def resolve_date(text: str, when: float | None) -> str | None:
    """The ISO date (``YYYY-MM-DD``) a relative date means, said at epoch ``when`` (UTC);
    None when ``when`` is unknown or ``text`` is not a relative date.

    "next Friday" and "on Friday" are the first Friday after the day it was said; "last
    Monday" the latest one before it; "in three days" adds days (weeks: 7), "two weeks
    ago" takes them away. A period is named as a period: "last week" -> "week of
    2026-02-23", "last weekend" -> "weekend of 2026-02-28", "next month" -> "2026-04".
    """
    if when is None:
        return None
    t = " ".join(text.casefold().split())
    day = dt.datetime.fromtimestamp(when, dt.UTC).date()
    if t in _OFFSETS:
        return (day + dt.timedelta(days=_OFFSETS[t])).isoformat()
    m = _PERIOD.fullmatch(t)
    if m:
        return _period(m.group(1), m.group(2), day)
    m = _IN.fullmatch(t)
    if m:
        n, unit = number_value(m.group(1)), _UNIT_DAYS.get(m.group(2))
        if n is not None and unit is not None:
            return (day + dt.timedelta(days=n * unit)).isoformat()
        return None
    m = _AGO.fullmatch(t)
    if m:
        n = number_value(m.group(1) or m.group(3))
        unit = _UNIT_DAYS.get(m.group(2) or m.group(4))
        if n is not None and unit is not None:
            return (day - dt.timedelta(days=n * unit)).isoformat()
        return None
    m = _LAST_DAY.fullmatch(t)
    if m and m.group(1) in _WEEKDAYS:
        back = (day.weekday() - _WEEKDAYS[m.group(1)]) % 7 or 7
        return (day - dt.timedelta(days=back)).isoformat()
    m = _NEXT_DAY.fullmatch(t)
    if m and m.group(2) in _WEEKDAYS:
        ahead = (_WEEKDAYS[m.group(2)] - day.weekday()) % 7 or 7
        return (day + dt.timedelta(days=ahead)).isoformat()
    return None
