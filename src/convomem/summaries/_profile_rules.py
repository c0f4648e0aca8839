"""The offline rules for the rest of a user's profile: people and pets, how to contact
them and how not to, health, jobs by name, street addresses, dated events, corrections.

Each rule reads one clause (``_clauses``) or one sentence and yields ``(attribute,
value)`` pairs; ``_keyed_rules.user_facts`` calls them. Attributes:

- people and pets: the relation, keyed by the person or pet when a user may have
  several (``"sister:anika"`` -> ``"Anika"``, ``"dog:biscuit"`` -> ``"Biscuit, a
  beagle"``), by the relation alone when there is one (``"husband"``, ``"landlord"``);
- ``"contact:<channel>"``: ``"never"``, ``"not before 10 am"``, ``"preferred"``
  ("never call me", "I'm not on WhatsApp", "email only");
- ``"health:<condition>"``: the condition as said ("type 1 diabetes");
- ``"job"`` / ``"employer"`` for "I'm a pharmacist (at Vantage Labs)";
- ``"address"`` (or the kind said: ``"delivery address"``) for a street address the
  user says is theirs;
- an event with a relative date: what happens -> the ISO date it means ("I fly to Kyoto
  in two days" -> ``"fly to Kyoto"``: ``"2026-04-13"``).

``correction(text)`` reads a correction without the old value ("Sorry, typo: it's
Chen."); ``FactHistory`` applies it to what the previous user message stated.
Negative cases are in the tests beside each rule ("my friend got promoted last week"
is no event: no date it can mean; "I'm a big fan" is no job).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from ._words import RELATIVE_DATE, resolve_date


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TITLE = r"(?:(?:Mr|Mrs|Ms|Mx|Dr|Prof)\.?\s+)"
_CAPWORD = r"[A-ZÀ-ÖØ-Þ][A-Za-zÀ-ÖØ-öø-ÿ'’-]{0,30}"
_PARTICLE = r"(?:(?:van|von|de|da|del|di|du|le|la)\s+)"
NAME: Final = rf"(?:{_TITLE}?{_CAPWORD}(?:\s+{_PARTICLE}?{_CAPWORD}){{0,2}})"
"""A person's or pet's name: capitalized words, an optional title."""

_NOT_NAMES: Final = _words(
    "I Is Are Was Has Had Just Still Always Never Also Really Not The A An And But So He She "
    "They It This That My Our Your His Her Their Who Which Lives Works Loves"
)

SINGLE: Final = _words(
    "husband wife partner spouse boyfriend girlfriend fiance fiancé fiancée mom mum mother "
    "dad father boss manager supervisor landlord landlady doctor dentist therapist lawyer "
    "accountant roommate flatmate stepmom stepdad stepmother stepfather"
)
"""Relations a user usually has one of: keyed by the relation."""
SEVERAL: Final = _words(
    "sister brother son daughter kid child cousin friend coworker colleague neighbor "
    "neighbour aunt uncle niece nephew grandma grandmother grandpa grandfather grandson "
    "granddaughter stepson stepdaughter teammate"
)
"""Relations a user may have several of: keyed by relation and name."""
PETS: Final = _words(
    "dog cat puppy kitten parrot bird hamster rabbit bunny horse turtle tortoise snake "
    "lizard ferret goldfish fish gecko pony"
)
RELATIONS: Final = SINGLE | SEVERAL | PETS
_REL = r"(?:best\s+friend|guinea\s+pig|" + "|".join(sorted(RELATIONS, key=len, reverse=True)) + ")"

_MY_REL_NAME = re.compile(
    rf"(?i:\b(?:my|our)\s+(?:(?:new|old|little|big|older|younger|eldest|youngest)\s+)?)"
    rf"(?P<r>(?i:{_REL}))(?:['’]s\s+name(?:\s+is)?|\s+(?i:is\s+)?(?i:called|named)|\s+is)?,?\s+"
    rf"(?P<n>{NAME})(?![\w'’])"
    r"(?:,?\s+(?i:is|was)\s+(?P<d>(?i:an?)\s+[a-z][a-z -]{2,30}?)"
    r"(?=\s*(?:[,.;!?]|$|\s+(?i:and|who|but|from|with)\b)))?"
)
_HAVE_PET = re.compile(
    rf"(?i:\b(?:i|we)\s+(?:have|own|got|adopted)\s+(?:a|an)\s+)(?P<d>(?:[a-z]+\s+)?)"
    rf"(?P<r>(?i:{_REL}))\s+(?i:named|called)\s+(?P<n>{NAME})"
)
_NAME_IS_MY = re.compile(rf"(?P<n>{NAME}),?\s+(?i:is\s+my|my)\s+(?P<r>(?i:{_REL}))\b")


def _person(rel: str, name: str, desc: str = "") -> Iterator[tuple[str, str]]:
    rel = " ".join(rel.casefold().split())
    name = re.sub(r"['’]s$", "", name)  # "my daughter Sara's birthday": Sara
    first = name.split()[0].rstrip(".")
    if first in _NOT_NAMES or name in _NOT_NAMES:
        return
    value = f"{name}, {desc.strip()}" if desc.strip() else name
    if rel in SINGLE:
        yield rel, value
    else:
        yield f"{rel}:{name.casefold()}", value


def people(clause: str) -> Iterator[tuple[str, str]]:
    """Relations and pets named in ``clause`` ("my dog Biscuit is a beagle", "my
    sister, Anika", "under my husband's name, Tomás Reyes", "Renata is my manager")."""
    for m in _MY_REL_NAME.finditer(clause):
        yield from _person(m.group("r"), m.group("n"), m.group("d") or "")
    for m in _HAVE_PET.finditer(clause):
        yield from _person(m.group("r"), m.group("n"), m.group("d").strip())
    for m in _NAME_IS_MY.finditer(clause):
        if m.start() == 0 or clause[m.start() - 1] in " ,":
            yield from _person(m.group("r"), m.group("n"))


# -- contact ------------------------------------------------------------------------------

_CHANNELS: Final = {
    "call": "phone call", "calls": "phone call", "phone": "phone call", "ring": "phone call",
    "phone calls": "phone call", "text": "text", "texts": "text", "sms": "text",
    "text messages": "text", "message": "text", "messages": "text", "email": "email",
    "e-mail": "email", "emails": "email", "mail": "email", "whatsapp": "whatsapp",
    "telegram": "telegram", "signal": "signal", "messenger": "messenger",
    "facebook": "facebook", "instagram": "instagram", "linkedin": "linkedin",
    "slack": "slack", "wechat": "wechat", "viber": "viber", "voicemail": "voicemail",
}  # fmt: skip
_CHANNEL = (
    r"(?:phone\s+calls|text\s+messages|" + "|".join(sorted(_CHANNELS, key=len, reverse=True)) + ")"
)
_PLATFORM = r"(?:whatsapp|telegram|signal|messenger|facebook|instagram|linkedin|slack|wechat|viber)"


def _window(n: str) -> str:
    time = r"\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)?"
    return rf"(?:\s+(?P<w{n}>(?:before|after|past)\s+{time}))?"


_NEVER = re.compile(
    r"(?i:\b(?:never|don['’]t|do\s+not|please\s+don['’]t|no\s+need\s+to|stop)\s+(?:ever\s+)?"
    rf"(?P<c>call|phone|ring|text|email|e-mail|message|contact)\s+me\b(?!\s+(?-i:[A-Z][a-z]))"
    rf"{_window('1')}"
    rf"|\bdon['’]t\s+send\s+me\s+(?:any\s+)?(?P<c2>{_CHANNEL})\b{_window('2')}"
    rf"|\bno\s+(?:more\s+)?(?P<c3>phone\s+calls|calls|texts|text\s+messages|emails|sms){_window('3')}"
    rf"|\b(?:i['’]m|i\s+am)\s+not\s+on\s+(?P<c4>{_PLATFORM})"
    rf"|\bi\s+(?:don['’]t|do\s+not|never)\s+(?:use|have|check)\s+(?P<c5>{_PLATFORM}|voicemail))\b"
)
_ONLY = re.compile(
    rf"(?i:\b(?P<c>email|e-mail|text|texts|sms|{_PLATFORM})\s+only\b"
    rf"|\bonly\s+(?:by\s+|via\s+)?(?P<c2>email|e-mail|text|{_PLATFORM})\b"
    rf"|\b(?:reach|contact)\s+me\s+(?:by|via|on|through)\s+(?P<c3>{_CHANNEL})\b"
    rf"|\bi['’]d\s+rather\s+(?:you\s+)?(?:get|check|use|receive)\s+(?:an?\s+)?(?P<c4>{_CHANNEL})\b"
    rf"|\bbest\s+(?:way\s+)?to\s+reach\s+me\s+is\s+(?:by\s+|via\s+)?(?P<c5>{_CHANNEL}))"
)


def contact(clause: str) -> Iterator[tuple[str, str]]:
    """How to reach the user and how not to ("never call me", "no calls before 10 am",
    "I'm not on WhatsApp", "email only")."""
    for m in _NEVER.finditer(clause):
        word = next(g for g in m.group("c", "c2", "c3", "c4", "c5") if g)
        word = " ".join(word.casefold().split())
        channel = "any" if word == "contact" else _CHANNELS.get(word, word)
        window = m.group("w1") or m.group("w2") or m.group("w3")
        yield f"contact:{channel}", f"not {' '.join(window.split())}" if window else "never"
    for m in _ONLY.finditer(clause):
        word = next(g for g in m.group("c", "c2", "c3", "c4", "c5") if g)
        word = " ".join(word.casefold().split())
        yield f"contact:{_CHANNELS.get(word, word)}", "preferred"


# -- health ---------------------------------------------------------------------------------

_CONDITION = (
    r"(?:(?:type\s+[12]\s+|gestational\s+)?diabetes|asthma|c[oe]?eliac(?:\s+disease)?|migraines?"
    r"|hypertension|high\s+blood\s+pressure|low\s+blood\s+pressure|epilepsy|eczema|arthritis"
    r"|adhd|anxiety|depression|ibs|crohn['’]?s(?:\s+disease)?|lupus|(?:a\s+)?heart\s+(?:murmur"
    r"|condition)|sleep\s+apnea|psoriasis|gout|glaucoma|tinnitus|insomnia|ana?emia"
    r"|hypothyroidism|hyperthyroidism|multiple\s+sclerosis|ptsd|dyslexia|scoliosis"
    r"|(?:chronic\s+)?back\s+pain|fibromyalgia|endometriosis|pcos|copd|a\s+pacemaker"
    r"|prediabetes|high\s+cholesterol)"
)
_HEALTH = re.compile(
    r"(?i:\b(?:i\s+(?:have|had|get|suffer\s+from|live\s+with|deal\s+with)|i['’]ve\s+(?:got|had)"
    r"|(?:i\s+was|i['’]ve\s+been|i['’]m|i\s+am)\s+(?:recently\s+)?(?:diagnosed\s+with"
    r"|being\s+treated\s+for|treated\s+for))\s+(?:(?:a|an|mild|severe|chronic|bad|occasional)\s+)*)"
    rf"(?P<c>(?i:{_CONDITION}))\b"
)


def health(clause: str) -> Iterator[tuple[str, str]]:
    """Conditions the user says they have ("I have type 1 diabetes", "I get migraines")."""
    for m in _HEALTH.finditer(clause):
        said = " ".join(m.group("c").split())
        yield f"health:{said.casefold().removeprefix('a ')}", said


# -- jobs by name ----------------------------------------------------------------------------

_JOB_HEAD = (
    r"(?:analyst|teacher|designer|electrician|midwife|nurse|engineer|pharmacist|technician"
    r"|welder|developer|programmer|doctor|physician|surgeon|lawyer|attorney|accountant|chef|cook"
    r"|driver|writer|artist|scientist|researcher|consultant|architect|plumber|carpenter"
    r"|mechanic|librarian|professor|lecturer|dentist|therapist|pilot|paramedic|firefighter"
    r"|police\s+officer|clerk|cashier|barista|photographer|journalist|editor|musician|farmer"
    r"|baker|veterinarian|vet|psychologist|economist|realtor|receptionist|secretary|translator"
    r"|interpreter|tutor|coach|instructor|dancer|actor|actress|administrator|coordinator"
    r"|counselor|counsellor|social\s+worker|data\s+scientist|student|intern|bartender|waiter"
    r"|waitress|plasterer|painter|tailor|butcher|optician|radiographer|paralegal|auditor"
    r"|banker|broker|stylist|hairdresser|manager|sales\s*person|salesman|saleswoman)"
)
_JOB_NAMED = re.compile(
    r"(?i:\b(?:i['’]m|i\s+am|i\s+work\s+as|as|i\s+became|i['’]ve\s+become|i\s+trained\s+as)"
    r"\s+(?:a|an)\s+)"
    rf"(?P<v>(?:(?!(?i:big|huge|great|real|total)\b)[A-Za-z-]{{3,20}}\s+){{0,2}}(?i:{_JOB_HEAD}))"
    rf"(?:s\b)?(?:\s+(?i:at|for|with)\s+(?P<e>{NAME}))?(?![\w-])"
)


def job(clause: str) -> Iterator[tuple[str, str]]:
    """ "I'm a pharmacist (at Vantage Labs)", "as a civil engineer": a known occupation."""
    for m in _JOB_NAMED.finditer(clause):
        yield "job", " ".join(m.group("v").split())
        if m.group("e"):
            yield "employer", m.group("e")


# -- street addresses -------------------------------------------------------------------------

_STREET_WORD = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Row|Court|Ct|Drive|Dr|Way|Boulevard|Blvd|Place"
    r"|Pl|Square|Sq|Terrace|Close|Crescent|Highway|Hwy|Parkway|Alley|Quay)\b"
)
STREET: Final = re.compile(
    r"\b\d{1,5}[A-Za-z]?,?\s+"
    r"(?:(?:Rua|Calle|Via|Rue|Avenida|Av\.)(?:\s+(?:[a-zà-ÿ]{1,3}|[A-ZÀ-Þ][\w'’-]*)){1,4}"
    rf"|(?:[A-ZÀ-Þ][\w'’.-]*\s+){{1,3}}{_STREET_WORD}\.?"
    r"|[A-ZÀ-Þ][\wÀ-ÿ'’-]*(?:stra(?:ß|ss)e|weg|gasse|straat|laan|gade|vej))"
    r"(?:,\s+[A-ZÀ-Þ][\w'’-]+(?:\s+[A-ZÀ-Þ][\w'’-]+)?){0,2}(?:,?\s+[A-Z]{2})?(?:,?\s+\d{4,5})?"
)
_MINE = re.compile(
    r"(?i:\b(?:my|our)\s+(?P<k>(?:(?:new|home|delivery|shipping|billing|mailing|work|office|"
    r"current)\s+)?address)\b|\bwhere\s+(?:i|we)\s+(?:live|stay)\b|\b(?:i|we)\s+(?:now\s+)?"
    r"(?:live|stay)\s+at\b|\b(?:i['’]m|i\s+am|we['’]re)\s+(?:now\s+)?at\b|\bmy\s+place\b)"
)


def address(sentence: str) -> Iterator[tuple[str, str]]:
    """A street address in a sentence that says it is the user's ("my new address is",
    "because that's where I live", "I live at")."""
    mine = _MINE.search(sentence)
    if mine is None:
        return
    m = STREET.search(sentence)
    if m is not None:
        kind = mine.group("k")
        kind = " ".join(kind.casefold().split()) if kind else "address"
        if kind in ("new address", "home address", "current address"):
            kind = "address"
        yield kind, m.group().rstrip(" ,.")


# -- events on relative dates --------------------------------------------------------------------

_DATE = re.compile(rf"(?i:\s*,?\s*\b(?P<d>{RELATIVE_DATE}))\b")
_OTHERS = re.compile(
    r"(?i:^(?:my|our)\s+(?:(?:team\s+)?(?:lead|leader)|parents|family|folks|siblings|team|in-laws"
    rf"|{_REL})s?\b(?!['’]s))"
)
_FIRST = re.compile(
    r"(?i:^(?:(?:so|and|but|well|also|actually|oh),?\s+)?(?:i|we|my|our|it['’]s\s+my|it\s+is\s+my"
    r"|i['’]m|i['’]ve|we['’]re|we['’]ve)\b|^(?:the|a|an|my|our)\s+\w+\s+(?:is\s+|are\s+)?"
    r"(?:coming|comes|arrives|arriving|visits|visiting|will\s+come)\b)"
)
_PAST = re.compile(
    r"(?i:\b(?:\w{2,}ed|had|went|was|were|did|got|saw|met|began|left|took|made|came|ate|flew"
    r"|ran|broke|bought|found|lost|won|fell|gave|told|said|sold|sent|spent|wrote|paid)\b)"
)
_BARE_DAY = re.compile(r"(?:on\s+)?((?:mon|tues|wednes|thurs|fri|satur|sun)day)")
_FUTURE = re.compile(r"tomorrow|next|in\s|coming|the\s+day\s+after|day\s+after")
_STRIP_HEAD = re.compile(
    r"(?i:^(?:(?:so|and|but|well|also|actually|oh),?\s+)?(?:(?:i|we)\s+(?:have|had|got)\s+"
    r"(?:a|an|my|our)\s+|it['’]s\s+my\s+|it\s+is\s+my\s+|(?:i|we)['’](?:m|re|ve)\s+"
    r"|(?:i|we)\s+|(?:my|our|the)\s+|(?:a|an)\s+))"
)


def event(clause: str, when: float | None) -> Iterator[tuple[str, str]]:
    """What the user does or has on a relative date, and the date it means ("I fly to
    Kyoto in two days", "I sprained my ankle three weeks ago", "the electrician is
    coming tomorrow"). Only first-person clauses, or a visitor coming; only dates the
    message's time resolves."""
    if when is None:
        return
    m = _DATE.search(clause)
    if m is None:
        return
    rest = (clause[: m.start()] + " " + clause[m.end() :]).strip(" ,.!?")
    if _FIRST.search(rest) is None or _OTHERS.search(rest):
        return  # someone else's plans ("our manager is on leave until Friday") are theirs
    phrase = " ".join(m.group("d").casefold().split())
    if _PAST.search(clause[: m.start()]) is not None:
        bare = _BARE_DAY.fullmatch(phrase)
        if bare is not None:
            phrase = f"last {bare.group(1)}"  # "I started on Monday": the one before
        elif _FUTURE.match(phrase):
            return  # "I had it tomorrow": no date it can mean
    date = resolve_date(phrase, when)
    if date is None:
        return
    what = _STRIP_HEAD.sub("", rest, count=1)
    what = re.sub(r"(?i:\s+(?:is|are|was|will\s+be|'s|’s))$", "", what).strip(" ,.")
    words = what.split()
    if 1 <= len(words) <= 8:
        yield " ".join(words), date
