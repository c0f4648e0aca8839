"""Editing a user's facts by id: ``fact_id`` and the ``FactEdits`` part of ``FactHistory``.

A user's facts are corrected by hand over the service (``PATCH`` / ``DELETE
/v1/users/{id}/facts/{fact_id}``, the MCP tools, the inspector's form), so each version
of a fact needs an id that survives restarts and replicas and never names another fact.
It is derived, not stored: a hash of the version's subject, canonical attribute, value,
``valid_from`` and ``seq``. ``seq`` is the version's place in the user's history,
assigned once when it is filed and kept in the stored state, so no two versions share
it; closing a version (``valid_to``) keeps its id, and a new value is a new version
with a new id. A history started over (its user's last session deleted) numbers from 1
again, but the rest of the hash then differs, so an old id finds nothing rather than
another fact.

``FactEdits`` is a part of ``FactHistory`` (it works on the history's own versions
under its lock): ``versions`` lists every version, ``find`` looks one up by id, ``put``
files a value set by hand as the current one, ``remove`` deletes a version.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace
from typing import Final

from .keyed import KeyedFact, norm_attribute, norm_value

__all__ = ["FACT_ID_PREFIX", "FactEdits", "fact_id"]

FACT_ID_PREFIX: Final = "f_"


def fact_id(f: KeyedFact) -> str:
    """``"f_"`` and 20 hex digits of SHA-256 over the version's identity (see above)."""
    raw = json.dumps(
        [f.subject, norm_attribute(f.attribute), f.value, f.valid_from, f.seq],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return FACT_ID_PREFIX + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:20]


class FactEdits:
    """The editing methods of ``FactHistory`` (which owns the state declared here)."""

    _versions: dict[tuple[str, str], list[KeyedFact]]
    _confirmed: dict[tuple[str, str], float]
    _seq: int
    _lock: threading.RLock

    def versions(self, subject: str | None = None) -> list[KeyedFact]:
        """Every version of every key (of ``subject``; None: all), current and superseded,
        key by key in first-seen order, oldest first within a key."""
        with self._lock:
            return [v for k, vs in self._versions.items() if subject in (None, k[0]) for v in vs]

    def find(self, id_: str) -> KeyedFact | None:
        """The version whose ``fact_id`` is ``id_`` (None: no such version)."""
        return next((v for v in self.versions() if fact_id(v) == id_), None)

    def put(self, fact: KeyedFact, *, replaces: KeyedFact | None = None) -> KeyedFact:
        """Make ``fact`` (set by hand) the current value of its key; returns it as filed.

        It supersedes the key's current value, and ``replaces`` (the current value of
        another key, when an attribute is corrected), both closed where it starts; its
        start is moved to no earlier than any time the key already holds, so valid times
        stay in order whatever the clocks said. The same value as the current one (with
        nothing to replace) changes nothing and returns the current one."""
        with self._lock:
            key = fact.key
            if replaces is not None and replaces.key == key:
                replaces = None  # the key's current value is superseded anyway
            versions = self._versions.setdefault(key, [])
            cur = versions[-1] if versions and versions[-1].current else None
            same = cur is not None and norm_value(cur.value) == norm_value(fact.value)
            if cur is not None and same and replaces is None:
                return cur
            held = [fact.valid_from, self._confirmed.get(key)]
            held += [t for v in versions for t in (v.valid_from, v.valid_to)]
            if replaces is not None:
                held.append(replaces.valid_from)
            at = max((t for t in held if t is not None), default=None)
            self._seq += 1
            new = replace(fact, seq=self._seq, valid_from=at, valid_to=None)
            if cur is not None:
                versions[-1] = cur.closed(at)
            if replaces is not None:
                old = self._versions.get(replaces.key, [])
                if old and old[-1] == replaces:
                    old[-1] = replaces.closed(at)
            versions.append(new)
            self._confirmed.pop(key, None)
            if at is not None:
                self._confirmed[key] = at
            return new

    def remove(self, id_: str) -> KeyedFact | None:
        """Delete the version with this id, current or superseded; returns it (None: no
        such id). A removed current value leaves its key without one (an earlier value
        stays superseded: it does not come back). The messages it was read from stay
        read, so it is not extracted from them again."""
        with self._lock:
            for key, versions in self._versions.items():
                for i, v in enumerate(versions):
                    if fact_id(v) == id_:
                        del versions[i]
                        if v.current:
                            self._confirmed.pop(key, None)
                        if not versions:
                            del self._versions[key]
                        return v
        return None
