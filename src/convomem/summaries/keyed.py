"""KeyedFact: one fact about someone, with a key, a value, provenance and validity.

A keyed fact answers "what is the user's X": its key is ``(subject, attribute)``
(``("user", "city")``), its value what was said (``"Porto"``). Preferences and allergies
are keyed by their object, so "I don't like sushi" and a later "I love sushi now" share
the key ``("user", "pref:sushi")`` and the second closes the first (supersession, see
``FactHistory``). ``valid_from`` is when the fact was stated (the message's
``created_at``) and ``valid_to`` when a newer value replaced it (``None``: current).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Final

from ..errors import ConfigError
from ._profile_rules import RELATIONS

SUBJECT_USER: Final = "user"

_ATTR_ALIASES: Final = {
    "email": "email", "e-mail": "email", "email address": "email", "e-mail address": "email",
    "correo": "email", "correo electrónico": "email", "courriel": "email",
    "adresse e-mail": "email", "e-mail-adresse": "email", "mail": "email",
    "phone": "phone", "phone number": "phone", "number": "phone", "cell": "phone",
    "cell number": "phone", "mobile": "phone", "mobile number": "phone", "teléfono": "phone",
    "numéro": "phone", "numéro de téléphone": "phone", "telefonnummer": "phone",
    "handynummer": "phone", "telephone number": "phone",
    "address": "address", "home address": "address", "dirección": "address",
    "adresse": "address", "name": "name", "nombre": "name", "nom": "name",
    "full name": "name", "first name": "name", "occupation": "job", "profession": "job",
    "ciudad": "city", "ville": "city", "stadt": "city", "hometown": "city",
}  # fmt: skip
"""Attribute spellings (casefolded) that mean one canonical attribute."""

_LEADING: Final = re.compile(
    r"^(?:(?:my|our|the|mi|mis|nuestro|nuestra|mon|ma|mes|notre|mein|meine|meinen|unser|unsere)\s+)?"
    r"(?:(?:new|current|present|updated|old|former|nuevo|nueva|nouveau|nouvelle|neue|neuer|neues)"
    r"\s+)?"
)


def norm_attribute(text: str) -> str:
    """The canonical attribute for ``text``: case-folded, ``_`` as spaces, "my"/"new"
    dropped, aliases mapped (``"E-mail address"`` -> ``"email"``); ``pref:``/``allergy:``
    objects keep their object normalized the same way as a value."""
    t = " ".join(text.replace("_", " ").casefold().split())
    if t.startswith("verbatim:"):
        return t
    for prefix in ("pref:", "allergy:"):
        if t.startswith(prefix):
            return prefix + norm_object(t[len(prefix) :])
    t = _LEADING.sub("", t, count=1)
    return _ATTR_ALIASES.get(t, t)


_ARTICLES: Final = re.compile(
    r"^(?:(?:the|a|an|some|any|el|la|los|las|al|le|les|du|de la|des|aux|au|à|à la|der|die"
    r"|das|den|dem|kein|keine|keinen|keiner|keinem|eating|drinking)\s+|l['’])+"
)
_TRAILING: Final = re.compile(
    r"(?:\s+(?:now|anymore|any more|these days|nowadays|at all|very much|so much|a lot"
    r"|too|as well|ahora|maintenant|jetzt|mehr|plus|nicht))+$"
)


def norm_object(text: str) -> str:
    """An object of a preference or allergy: case-folded, articles and trailing
    time words dropped (``"the cilantro"`` -> ``"cilantro"``, ``"sushi now"`` -> ``"sushi"``)."""
    t = " ".join(text.casefold().split()).strip(" .,!;:")
    t = _ARTICLES.sub("", t, count=1).strip()
    return _TRAILING.sub("", t).strip(" .,!;:")


def norm_value(text: str) -> str:
    """A value compared for equality: case-folded, whitespace collapsed, end punctuation off."""
    return " ".join(text.casefold().split()).strip(" .,!;:\"'")


@dataclass(frozen=True, slots=True)
class KeyedFact:
    """One fact: ``attribute`` of ``subject`` is ``value``, said in a message.

    ``source_role`` is ``"user"``, ``"assistant"`` or ``"tool"`` (tool output ranks
    lowest); ``session_id``/``message_id``/``seq`` say where it was said; ``valid_from``
    (epoch seconds, the message's time) and ``valid_to`` (when it was superseded;
    ``None`` while current) bound when it held.
    """

    attribute: str
    value: str
    subject: str = SUBJECT_USER
    source_role: str | None = None
    session_id: str | None = None
    message_id: str | None = None
    seq: int | None = None
    valid_from: float | None = None
    valid_to: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        """``(subject, canonical attribute)``: facts with one key supersede each other."""
        return (self.subject, norm_attribute(self.attribute))

    @property
    def current(self) -> bool:
        """True while no newer value has closed it."""
        return self.valid_to is None

    def statement(self) -> str:
        """The fact as one short line: ``"city: Porto"``, ``"dislikes: olives"``,
        ``"allergic to: peanuts"``, ``"contact by phone call: never"``, ``"health: type 1
        diabetes"``, ``"dog: Biscuit, a beagle"`` (a person or pet keyed by name)."""
        attr = self.attribute
        kind, sep, obj = attr.partition(":")
        if not sep:
            return f"{attr}: {self.value}"
        if kind == "pref":
            return f"{self.value}: {obj}"
        if kind == "allergy":
            return f"allergic to: {obj}"
        if kind == "verbatim":
            return f"{obj.split(':')[0]}: {self.value}"
        if kind == "contact":
            return f"contact by {obj}: {self.value}"
        if kind == "health":
            return f"health: {self.value}"
        if kind in RELATIONS:
            return f"{kind}: {self.value}"
        return f"{attr}: {self.value}"

    def closed(self, at: float | None) -> KeyedFact:
        """This fact with ``valid_to`` set (superseded at ``at``)."""
        return replace(self, valid_to=at if at is not None else self.valid_from or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return {
            "subject": self.subject,
            "attribute": self.attribute,
            "value": self.value,
            "source_role": self.source_role,
            "session_id": self.session_id,
            "message_id": self.message_id,
            "seq": self.seq,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "fact") -> KeyedFact:
        """Read ``to_dict``'s output back; a malformed field raises ``ConfigError``
        naming it and its value."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}={data!r}: must be a dict")
        out: dict[str, Any] = {}
        for name in ("attribute", "value", "subject"):
            v = data.get(name, SUBJECT_USER if name == "subject" else None)
            if not isinstance(v, str) or not v:
                raise ConfigError(f"{where}[{name!r}]={v!r}: must be a non-empty string")
            out[name] = v
        for name in ("source_role", "session_id", "message_id"):
            v = data.get(name)
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"{where}[{name!r}]={v!r}: must be a string or None")
            out[name] = v
        seq = data.get("seq")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
            raise ConfigError(f"{where}['seq']={seq!r}: must be an int or None")
        out["seq"] = seq
        for name in ("valid_from", "valid_to"):
            v = data.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ConfigError(f"{where}[{name!r}]={v!r}: must be epoch seconds or None")
            out[name] = None if v is None else float(v)
        return cls(**out)
