"""Forgetting whole conversations: keep the newest ones under a cap on distinct ids.

An agent that remembers what it listed (products, files, tickets) across many
conversations forgets the oldest *whole* conversation first, so what it keeps is
always a contiguous, most recent run of conversations.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

from ..errors import ConfigError

__all__ = ["evict_conversations"]


def _check_conversations(conversations: Any) -> list[Sequence[str]]:
    """The conversations as a list, after checking every conversation and every id.

    The common case costs two C-level passes over the types; the slow loops only run
    to name the first bad position (or for subclasses of list, tuple and str).
    """
    if not isinstance(conversations, Sequence) or isinstance(conversations, str | bytes):
        raise ConfigError(
            f"conversations={conversations!r}: must be a list of conversations "
            "(each a list of string ids)"
        )
    out: list[Sequence[str]] = list(conversations)
    if not set(map(type, out)) <= {list, tuple}:
        for i, conversation in enumerate(out):
            if not isinstance(conversation, list | tuple):
                raise ConfigError(
                    f"conversations[{i}]={conversation!r}: must be a list of string ids"
                )
    if not set(map(type, chain.from_iterable(out))) <= {str}:
        for i, conversation in enumerate(out):
            for j, id_ in enumerate(conversation):
                if not isinstance(id_, str):
                    raise ConfigError(f"conversations[{i}][{j}]={id_!r}: must be a string id")
    return out


def evict_conversations(conversations: Sequence[Sequence[str]], max_listings: int) -> list[str]:
    """Drop the oldest whole conversations until the rest mention at most ``max_listings``
    distinct ids; return those ids, each once, in order of first appearance.

    ``conversations`` is oldest first; each is the list of ids it mentions (repeats
    allowed). Empty conversations mention nothing; with ``max_listings=0`` every
    conversation that mentions anything is dropped. The input is never modified.

    Dropping the oldest while over the cap keeps the longest run of newest
    conversations that fits, because a longer run never mentions fewer ids. So the
    run is found from the newest end: add conversations to a set of ids until one more
    would pass the cap. That is linear in the mentions (besides the type checks, only
    the kept conversations and the first dropped one are touched) and needs no
    per-id counts.

    >>> evict_conversations([["p1", "p2"], ["p2", "p3"], ["p4", "p1"]], 3)
    ['p4', 'p1']
    """
    if isinstance(max_listings, bool) or not isinstance(max_listings, int) or max_listings < 0:
        raise ConfigError(f"max_listings={max_listings!r}: must be a non-negative integer")
    convs = _check_conversations(conversations)
    ids: set[str] = set()
    start = len(convs)  # convs[start:] is the run kept so far
    while start:
        ids.update(convs[start - 1])
        if len(ids) > max_listings:
            break
        start -= 1
    return list(dict.fromkeys(chain.from_iterable(convs[start:])))
