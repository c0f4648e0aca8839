"""Which texts a message is embedded under (its *keys*) for the vector search.

A message's vector similarity to a query is the best cosine over its keys:

- ``"message"``: the whole text (always);
- ``"sentences"``: each sentence of a text that has several. A fact said in passing
  ("As a pharmacist, I'm on my feet a lot.") inside a turn about something else is
  diluted in the whole text's vector; its own sentence is not. Sentences of fewer than
  ``MIN_WORDS`` words ("Thanks!") are no key: they would match any short query;
- ``"exchange"``: for a reply (any message that is not the user's) that follows a user
  message in the same ``add`` call, the user's text and the reply together. A question
  about what the assistant said ("Which novel did you recommend?") is phrased like the
  user's request, not like the reply that holds the answer;
- ``"facts"``: for a user message, each fact the offline extractor reads in it
  (``OfflineExtractor``'s rules: "I eat vegan", "I work as a pharmacist") said plainly
  ("my diet is vegan", "my job is pharmacist"), at most ``MAX_FACTS``. A question asks
  for the attribute ("What kind of diet do I follow?") that the message only implies;
  the statement names it (MiniLM cosine 0.30 -> 0.49 for that pair). This is the
  LongMemEval paper's key expansion with user facts, with rules instead of an LLM.

A ``RecallIndex`` uses the kinds its ``keys=`` names, else those its embedder declares
(``recall_keys``: HashingEmbedder the text alone, MiniLM and OpenAI all four, E5 its
text and exchange, which did best on dev for it).
Measured on the LongMem dev set with MiniLM (bench/README.md): vectors alone,
recall_any@10 0.733 with the message key only, 0.892 with the first three, 0.950 with
all four (the held-out set, never tuned on: 0.775 either way); each key costs an
embedding at ingest and a column in the search's scan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ..errors import ConfigError
from ..summaries._keyed_rules import user_facts

KINDS: Final = ("message", "sentences", "exchange", "facts")
MIN_WORDS: Final = 3
MAX_SENTENCES: Final = 16
"""Sentence keys of one message at most (its first ones): bounds a long text's cost."""
MAX_FACTS: Final = 4
"""Fact keys of one message at most (its first facts)."""

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def keys_for(embedder: object, keys: object) -> tuple[str, ...]:
    """``keys`` checked, or (None) what the embedder declares (``recall_keys``; every
    kind when it declares none)."""
    return check_keys(getattr(embedder, "recall_keys", KINDS) if keys is None else keys)


def check_keys(keys: object) -> tuple[str, ...]:
    """``keys`` as a tuple of known key kinds, ``"message"`` first and always there."""
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise ConfigError(f"keys={keys!r}: must be a list of {list(KINDS)}")
    unknown = [k for k in keys if k not in KINDS]
    if unknown or "message" not in keys:
        raise ConfigError(f"keys={keys!r}: must hold 'message' and only {list(KINDS)}")
    return tuple(k for k in KINDS if k in keys)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after ``.!?;`` and at line breaks) of at least
    ``MIN_WORDS`` words, at most ``MAX_SENTENCES``; none when there is only one."""
    parts = [p.strip() for p in _SENTENCE_END.split(text)]
    parts = [p for p in parts if p]
    if len(parts) < 2:
        return []
    return [p for p in parts if len(p.split()) >= MIN_WORDS][:MAX_SENTENCES]


def fact_statements(text: str, when: float | None) -> list[str]:
    """The user facts in ``text`` (said at epoch ``when``) as plain first-person
    statements, at most ``MAX_FACTS``: ``"my city is Porto"``, ``"I like tea"``,
    ``"I am allergic to peanuts"``."""
    out: dict[str, None] = {}
    for attribute, value in user_facts(text, when):
        kind, _, obj = attribute.partition(":")
        if kind == "pref" and obj:
            out[f"I {value.removesuffix('s')} {obj}"] = None
        elif kind == "allergy" and obj:
            out[f"I am allergic to {obj}"] = None
        else:
            out[f"my {attribute.replace('_', ' ')} is {value}"] = None
        if len(out) == MAX_FACTS:
            break
    return list(out)


def message_keys(
    text: str,
    exchange: str | None,
    kinds: tuple[str, ...],
    role: str = "user",
    when: float | None = None,
) -> list[str]:
    """The distinct keys of a message's ``text`` (the text itself first); ``exchange``:
    the user text it answers, if any; ``role`` and ``when`` (its epoch, for relative
    dates): whose facts it may state."""
    keys = {text: None}
    if "sentences" in kinds:
        keys.update(dict.fromkeys(sentences(text)))
    if "exchange" in kinds and exchange:
        keys[f"{exchange}\n{text}"] = None
    if "facts" in kinds and role == "user":
        keys.update(dict.fromkeys(fact_statements(text, when)))
    return list(keys)


def exchanges(roles_texts: Sequence[tuple[str, str]]) -> list[str | None]:
    """For each ``(role, text)`` of one session in order: the latest non-blank user
    text before it when it is a reply (not the user's), else None."""
    out: list[str | None] = []
    last: str | None = None
    for role, text in roles_texts:
        if role == "user":
            out.append(None)
            if text.strip():
                last = text
        else:
            out.append(last)
    return out
