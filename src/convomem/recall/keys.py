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
  user's request, not like the reply that holds the answer.

A ``RecallIndex`` uses the kinds its ``keys=`` names, else those its embedder declares
(``recall_keys``: HashingEmbedder one, trained models all three). Measured on the
LongMem dev set with MiniLM (bench/README.md): vectors alone, recall_any@10 0.733 with
the message key only, 0.892 with all three; each key costs an embedding at ingest and a
column in the search's scan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ..errors import ConfigError

KINDS: Final = ("message", "sentences", "exchange")
MIN_WORDS: Final = 3
MAX_SENTENCES: Final = 16
"""Sentence keys of one message at most (its first ones): bounds a long text's cost."""

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


def message_keys(text: str, exchange: str | None, kinds: tuple[str, ...]) -> list[str]:
    """The distinct keys of a message's ``text`` (the text itself first); ``exchange``:
    the user text it answers, if any."""
    keys = {text: None}
    if "sentences" in kinds:
        keys.update(dict.fromkeys(sentences(text)))
    if "exchange" in kinds and exchange:
        keys[f"{exchange}\n{text}"] = None
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
