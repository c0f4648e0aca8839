"""The regular expressions of fact extraction and sentence splitting.

Each pattern is linear on any input: a match may only start at the beginning of a run
(a lookbehind or a word boundary stops it from restarting inside a run of digits,
dots or hyphenated words), and open-ended parts are possessive or bounded, so no input
makes the engine rescan a run from each of its characters.
"""

from __future__ import annotations

import re
from typing import Final

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_ORD = r"(?:st|nd|rd|th)?"

EMAIL: Final = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")

AMOUNT: Final = re.compile(
    r"(?:(?<![\w$€£¥])(?:US\$|[$€£¥]|(?:USD|EUR|GBP|CHF|CAD|AUD|JPY|INR)\s?)"
    r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s?(?:k|K|million|billion|bn)\b)?)"
    r"|(?:(?<!\d,)\b(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s?"
    r"(?:USD|EUR|GBP|CHF|CAD|AUD|JPY|INR|dollars?|euros?|pounds?|cents?|bucks)\b)"
)

DATE: Final = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    rf"|\b(?:(?:next|last|this|coming)\s+)?(?:{_WEEKDAY},?\s+)?{_MONTH}\.?\s+\d{{1,2}}{_ORD}"
    r"(?:,?\s+\d{4})?\b"
    rf"|\b(?:{_WEEKDAY},?\s+)?\d{{1,2}}{_ORD}\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+\d{{4}})?"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\b(?:(?:next|last|this|coming)\s+)?{_WEEKDAY}\b"
    r"|\b\d{1,2}(?::\d{2})?\s?(?:[ap]m|[AP]M|[ap]\.m\.)(?!\w)"
    r"|\b(?:[01]?\d|2[0-3]):[0-5]\d\b"
)

_REF_WORDS = (
    r"order|ticket|invoice|case|account|acct|booking|reservation|confirmation|reference|ref"
    r"|tracking|customer|policy|claim|flight|room|seat|item|sku|pnr|transaction|receipt"
    r"|member(?:ship)?|subscription|contract|shipment|parcel|package|serial|license|licence"
    r"|incident|id"
)
REFERENCE: Final = re.compile(
    rf"\b(?i:{_REF_WORDS})(?:\s+(?i:number|no\.?|num|id|code)(?!\w))?"
    r"(?:\s+(?i:is)\s+|\s*:\s*|\s+|\s*(?=#))#?"
    r"(?=[A-Za-z0-9_-]{0,80}\d)[A-Za-z0-9][A-Za-z0-9_-]*\b"
    r"|\b(?i:card\s+ending\s+(?:in\s+)?)\d{4}\b"
)

# The lookaheads read at most 80 characters: unbounded, they would rescan the rest of
# "a-a-a-..." from every hyphen (quadratic); a longer "id" is noise anyway.
ID: Final = re.compile(
    r"(?<![\w#])#[A-Za-z0-9][A-Za-z0-9_-]*"
    r"|\b(?=[A-Za-z0-9_-]{0,80}\d)(?=[A-Za-z0-9_-]{0,80}[A-Za-z])"
    r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b"
    r"|\b[A-Z]{2,}\d{2,}[A-Z0-9]*\b"
)

NUMBER: Final = re.compile(
    r"(?<![\w+])(?:\+?\d{1,3}[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4}(?!\w)"
    r"|\b\d+(?:\.\d+)?\s?(?:%|percent\b|nights?\b|days?\b|weeks?\b|months?\b|years?\b"
    r"|hours?\b|hrs?\b|minutes?\b|mins?\b|people\b|persons?\b|adults?\b|children\b|kids\b"
    r"|guests?\b|items?\b|units?\b|pieces?\b|seats?\b|rooms?\b|bags?\b|kg\b|lbs?\b|km\b"
    r"|miles?\b|cm\b|mm\b|GB\b|MB\b|TB\b)"
)

_TITLE = r"(?:Mr|Mrs|Ms|Mx|Dr|Prof|Sir|Madam|Miss|Mister|Doctor)"
_NAME_WORD = r"(?:[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:['’-][A-Z][a-z]+)*|[A-Z]['’][A-Z][a-z]+)"
NAME: Final = re.compile(
    rf"(?:\b{_TITLE}\.?\s+)?\b{_NAME_WORD}"
    rf"(?:\s+(?:(?:van|von|de|da|del|der|den|la|le|di|du|bin|al)\s+)?{_NAME_WORD})*\b"
)
TITLE_PREFIX: Final = re.compile(rf"{_TITLE}\.?\s")

# "My name is Ada" states a name, not a preference (also lowercase: "my name is bob");
# "call me Bea", "I go by Bea", "the name's Bond" too, capitalized only ("call me back").
NAME_INTRO: Final = re.compile(
    r"(?i:\bmy\s+(?:(?:first|full|real)\s+)?name\s+is)\s+"
    r"(?P<v>[A-Z][\w'’-]{0,30}(?:\s+[A-Z][\w'’-]{0,30}){0,3}|[a-z][\w'’-]{1,30})"
    r"|(?<![’'])(?i:\b(?:my|the)\s+name['’]s|\b(?:you\s+can\s+)?call\s+me|\bi\s+go\s+by"
    r"|\bi['’]m\s+called)\s+(?P<c>[A-Z][\w'’-]{0,30}(?:\s+[A-Z][\w'’-]{0,30}){0,3})"
)
# Before a capitalized run, a place: "in", "from", "near", "moved to", "visited"...
PLACE_BEFORE: Final = re.compile(
    r"(?i:\b(?:in|from|near|into|across|around|outside|via|visit(?:ed|ing)?"
    r"|(?:move|moved|moving|went|go|going|flew|fly|flying|travel(?:l?ed|l?ing)?|trip|drove"
    r"|drive|driving|back|relocated|relocating|shipped|shipping|headed|heading|returned"
    r"|returning|got\s+back)\s+to)\s+(?:the\s+)?)$"
)
STREET_END: Final = re.compile(
    r"\b(?:St|Street|Ave|Avenue|Rd|Road|Lane|Ln|Blvd|Boulevard|Drive|Way|Square|Place)\.?$"
)

PREF_MAX_CHARS: Final = 160
# A clause runs to the end of its sentence (at most twice the kept length is read); a
# "." inside a word ("maya.chen@x.com", "$12.50") does not end it.
_PREF_CLAUSE = rf"(?:[^.!?\n;]|[.!?](?=[^\s.!?])){{0,{2 * PREF_MAX_CHARS}}}+"
PREFERENCE: Final = re.compile(
    r"(?i:\bI(?:\s+|'d\s+|’d\s+)"
    r"(?:really\s+|also\s+|much\s+|strongly\s+|definitely\s+|generally\s+|usually\s+"
    r"|always\s+|would\s+|do\s+not\s+|don't\s+|don’t\s+|can't\s+|cannot\s+|can’t\s+)*"
    r"(?:prefer|like|love|hate|dislike|enjoy|loathe|detest|rather|stand)\b"
    rf"{_PREF_CLAUSE}"
    r"|\bI(?:'m|’m|\s+am)\s+(?:allergic|vegetarian|vegan|lactose|gluten|diabetic|left-handed)"
    rf"{_PREF_CLAUSE}"
    r"|\bplease\s+(?:always|never|don't|don’t|do\s+not|avoid|stop|only)\b"
    rf"{_PREF_CLAUSE}"
    r"|(?<![\w'’])(?:always|never)\s+(?:call|email|e-mail|text|message|contact|send|use|book"
    r"|schedule|ship|ask|phone)\b"
    rf"{_PREF_CLAUSE}"
    r"|\bmy\s+(?!(?:(?:first|last|full|middle|real)\s+)?name\b)(?:[\w-]+\s+){0,3}?(?:is|are)\s+"
    rf"{_PREF_CLAUSE}"
    r"|\b(?:call\s+me|I\s+go\s+by)\s+"
    rf"{_PREF_CLAUSE})"
)

# Capitalized words that are not names (sentence starters, greetings, calendar words).
_NOT_NAMES_TEXT = """
    I Im I'm I’m I'll I've I'd The A An This That These Those My Your Our Their His Her Its
    We You He She They It Hi Hello Hey Dear Thanks Thank Please Yes Yeah No Nope Ok Okay Sure
    Great Good Fine Well So And But Or If When What Why How Where Who Whom Whose Which Also
    Just Sorry Sounds Let Lets Let's Can Could Would Should Will Shall May Might Must Do Does
    Did Done Is Are Was Were Be Been Have Has Had Not Any All Some Many Much Most More There
    Here Then Now Today Tomorrow Tonight Yesterday Unfortunately Actually Maybe Perhaps Of In
    On At For To From By With As After Before Once Since Until While Because Although Though
    Note Got One Two Three First Second Next Last Another Every Each Both Either Neither None
    Nothing Something Anything Everything Someone Anyone Everyone Nobody Welcome Cheers Bye
    Goodbye Regards Best Kind Sincerely Hmm Oh Ah Wow Alright Absolutely Certainly Definitely
    Indeed Exactly Right Perfect Awesome Nice Cool Correct Understood Noted Got Happy Glad
    Also However Therefore Meanwhile Otherwise Additionally Finally Again Still Yet Even Only
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May
    June July August September October November December Jan Feb Mar Apr Jun Jul Aug Sep Sept
    Oct Nov Dec Summary Key User Assistant System Tool Mr Mrs Ms Dr Prof Yep Yup Aww Aw
    Awww Woohoo Wooo Yay Haha Lol Omg Fri Mon Tue Tues Wed Thu Thurs Sat Sun Always Never
    Gotta Gonna Congrats Congratulations Amazing Sounds Totally Nah Btw Guess Wait Ooh Oops
    Whoa Hooray Thx Ugh Oof Cheers Sweet Wonderful Incredible Fantastic Lovely Haven't Hope
"""
NOT_NAMES: Final = frozenset(_NOT_NAMES_TEXT.split())

# A run of end marks is only tried from its start (else "....." is rescanned from each dot).
SENTENCE_END: Final = re.compile(r"(?<![.!?])[.!?]++[\"')\]]*+\s+|\n+")
_ABBREVIATIONS_TEXT = "mr mrs ms mx dr prof sr jr st vs etc inc ltd co no e.g i.e approx dept fig"
ABBREVIATIONS: Final = frozenset(_ABBREVIATIONS_TEXT.split())
