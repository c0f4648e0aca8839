"""Forgetting whole conversations: keep the newest ones under a cap on distinct ids.

An agent that remembers what it listed (products, files, tickets) across many
conversations forgets the oldest *whole* conversation first, so what it keeps is
always a contiguous, most recent run of conversations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import Any

from .errors import ConfigError

__all__ = ["evict_conversations"]


def _check_conversations(conversations: Any) -> list[Sequence[str]]:
    if not isinstance(conversations, Sequence) or isinstance(conversations, str | bytes):
        raise ConfigError(
            f"conversations={conversations!r}: must be a list of conversations "
            "(each a list of string ids)"
        )
    out: list[Sequence[str]] = list(conversations)
    for i, conversation in enumerate(out):
        if not isinstance(conversation, list | tuple):
            raise ConfigError(f"conversations[{i}]={conversation!r}: must be a list of string ids")
        # A C-level pass over the types, so validation stays cheap next to the counting.
        if not set(map(type, conversation)) <= {str}:
            for j, id_ in enumerate(conversation):
                if not isinstance(id_, str):
                    raise ConfigError(f"conversations[{i}][{j}]={id_!r}: must be a string id")
    return out


def evict_conversations(conversations: Sequence[Sequence[str]], max_listings: int) -> list[str]:
    """Drop the oldest whole conversations until the rest mention at most ``max_listings``
    distinct ids; return those ids, each once, in order of first appearance.

    ``conversations`` is oldest first; each is the list of ids it mentions (repeats
    allowed). Runs in time linear in the number of mentions: one count per id, and an
    id leaves the distinct total only when its last kept mention is dropped. Empty
    conversations mention nothing; with ``max_listings=0`` every conversation that
    mentions anything is dropped. The input is never modified.

    >>> evict_conversations([["p1", "p2"], ["p2", "p3"], ["p4", "p1"]], 3)
    ['p4', 'p1']
    """
    if isinstance(max_listings, bool) or not isinstance(max_listings, int) or max_listings < 0:
        raise ConfigError(f"max_listings={max_listings!r}: must be a non-negative integer")
    convs = _check_conversations(conversations)
    counts = Counter(chain.from_iterable(convs))
    distinct = len(counts)
    start = 0
    while distinct > max_listings:  # ends: dropping every conversation leaves 0 ids
        for id_ in convs[start]:
            left = counts[id_] - 1
            counts[id_] = left
            if not left:
                distinct -= 1
        start += 1
    return list(dict.fromkeys(chain.from_iterable(convs[start:])))
