"""FactHistory: the long-term facts about a user, with supersession and history.

Each key (subject + attribute) has versions, oldest first; at most one is current
(``valid_to is None``). A new value for a key closes the current one at the new one's
``valid_from`` ("I moved to Porto" closes "I live in Lisbon"); the same value again
changes nothing (nor does a shorter form of it: "Biscuit" restates "Biscuit, a beagle");
a statement older than the current value (a late, out-of-order message) is filed in the
history, closed, and does not replace it. A user's "I switched from A to B"
(``_keyed_rules.value_changes``) or "it's B, not A" gives B to the one current fact whose
value is A, whatever its attribute (the extractor cannot know it); "I moved from Lisbon
to Porto" with no fact holding Lisbon files Lisbon as the value before Porto. A
correction that does not name the old value ("Sorry, typo: it's Chen.",
``_keyed_rules.correction``) replaces what the user's previous message stated, when that
message stated one fact of its kind (a name, a number, an email) and the correction
states nothing else. ``current()`` answers today's values, ``get(attr, as_of=t)`` the
value at a time, ``history(attr)`` every value ("what was my old address?").

Each message is extracted once: ``add_messages`` remembers the ids it has read and
hands only unseen messages to the extractor, so a re-fold or a resumed session costs no
extraction. ``state()`` / ``from_state()`` are the JSON form persisted with a session's
derived state; ``from_state`` also reads a ``FactLedger`` state (``RunningSummary``'s
``"ledger"`` entry) so older states still load.

Ranking (``render``, ``_ranking``): the user's own statements first, then the
assistant's, then tool output; within a source the name, how (not) to contact them,
allergies and health before contact details, home and job, people, ids, plans, likes,
and bare amounts last. ``render(max_tokens)`` shows the longest ranked prefix that fits
and says how many facts it left out (they stay retrievable: recall indexes every
fact). A page of dollar amounts from a tool never pushes out "allergic to: peanuts",
and no place pushes out the user's name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from .. import _check
from ..errors import ConfigError, bounded_repr
from ..tokens import Tokenizer, get_tokenizer
from ._keyed_rules import correction, shape, value_changes, value_corrections
from ._ranking import HISTORY_HEADER, fact_rank, render_ranked, weight
from .extractor import Extractor, OfflineExtractor
from .fact_edits import FactEdits
from .keyed import SUBJECT_USER, KeyedFact, norm_attribute, norm_value

if TYPE_CHECKING:
    from ..model import Message

__all__ = ["FACTS_STATE_VERSION", "HISTORY_HEADER", "FactHistory", "fact_rank", "weight"]

FACTS_STATE_VERSION: Final = 1


class FactHistory(FactEdits):
    """Keyed facts with supersession, fed by an ``Extractor`` once per message.

    ``extractor`` defaults to ``OfflineExtractor()``; ``tokenizer`` measures
    ``render``; ``max_seen`` bounds the remembered message ids (the oldest are forgotten
    first: a message that old is not re-read in practice). Thread-safe.
    """

    def __init__(
        self,
        *,
        extractor: Extractor | None = None,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        max_seen: int = 200_000,
    ) -> None:
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise ConfigError(f"extractor={extractor!r}: must have an extract(messages) method")
        self.extractor: Extractor = OfflineExtractor() if extractor is None else extractor
        self._tok = get_tokenizer(tokenizer)
        self.max_seen = _check.positive_int("max_seen", max_seen)
        self._versions: dict[tuple[str, str], list[KeyedFact]] = {}
        self._seen: dict[str, None] = {}
        self._confirmed: dict[tuple[str, str], float] = {}  # latest time a key's value was said
        self._seq = 0
        # The keys the user's latest message stated: what a correction without the old
        # value ("Sorry, typo: it's Chen.") replaces. Not persisted: after a resume a
        # correction of the message before it is not applied.
        self._last_user: list[tuple[str, str]] = []
        self.extracted = 0
        """Messages handed to the extractor so far."""
        self._lock = threading.RLock()

    # -- writing -------------------------------------------------------------------------

    def add(self, facts: Iterable[KeyedFact], *, session_id: str | None = None) -> list[KeyedFact]:
        """Record facts (``session_id`` fills in a missing one); returns those that became
        current values. A non-``KeyedFact`` raises ``ConfigError`` before anything is kept."""
        items = list(facts)
        for f in items:
            if not isinstance(f, KeyedFact):
                raise ConfigError(f"fact={f!r}: must be a KeyedFact")
        out: list[KeyedFact] = []
        with self._lock:
            for f in items:
                self._seq += 1
                f = replace(
                    f,
                    session_id=f.session_id if f.session_id is not None else session_id,
                    seq=self._seq,
                    valid_to=None,
                )
                if self._file(f):
                    out.append(f)
        return out

    def _file(self, f: KeyedFact) -> bool:
        key, at = f.key, f.valid_from
        versions = self._versions.setdefault(key, [])
        cur = versions[-1] if versions and versions[-1].current else None
        if cur is None:
            versions.append(f)
            self._confirm(key, at)
            return True
        latest = self._confirmed.get(key, cur.valid_from)
        have, said = norm_value(cur.value), norm_value(f.value)
        if have == said or have.startswith(said + ","):
            self._confirm(key, at)  # restated: a value said before this is older news
            return False
        if at is not None and latest is not None and at < latest:
            # A late statement older than the current value: history, not news.
            later = [
                v.valid_from for v in versions if v.valid_from is not None and v.valid_from > at
            ]
            versions.append(f.closed(min(later, default=latest)))
            versions.sort(key=lambda v: (v.valid_to is None, v.valid_from or 0.0, v.seq or 0))
            return False
        versions[-1] = cur.closed(at)
        versions.append(f)
        self._confirmed.pop(key, None)
        self._confirm(key, at)
        return True

    def _confirm(self, key: tuple[str, str], at: float | None) -> None:
        if at is not None and at > self._confirmed.get(key, float("-inf")):
            self._confirmed[key] = at

    def unseen(self, messages: Iterable[Message]) -> list[Message]:
        """The messages not yet extracted (each id once, in order)."""
        out: list[Message] = []
        ids: set[str] = set()
        with self._lock:
            for m in messages:
                if m.id not in self._seen and m.id not in ids:
                    ids.add(m.id)
                    out.append(m)
        return out

    def _mark(self, messages: Sequence[Message]) -> None:
        seen = self._seen
        for m in messages:
            seen[m.id] = None
        self.extracted += len(messages)
        while len(seen) > self.max_seen:
            del seen[next(iter(seen))]

    def add_messages(
        self, messages: Iterable[Message], *, session_id: str | None = None
    ) -> list[KeyedFact]:
        """Extract the facts of the messages not read before and record them; returns the
        new current values. An extractor error propagates and marks nothing as read."""
        new = self.unseen(messages)
        if not new:
            return []
        facts = self.extractor.extract(new)
        return self._file_read(new, facts, session_id)

    async def aadd_messages(
        self, messages: Iterable[Message], *, session_id: str | None = None
    ) -> list[KeyedFact]:
        """Async twin of ``add_messages`` (uses the extractor's ``aextract`` if it has one)."""
        new = self.unseen(messages)
        if not new:
            return []
        aextract = getattr(self.extractor, "aextract", None)
        facts = await aextract(new) if aextract is not None else self.extractor.extract(new)
        return self._file_read(new, facts, session_id)

    def _file_read(
        self, messages: list[Message], facts: list[KeyedFact], session_id: str | None
    ) -> list[KeyedFact]:
        """Record what the extractor read in ``messages``, message by message, then the
        values their users say they changed or corrected (the module docstring)."""
        by_message: dict[str | None, list[KeyedFact]] = {}
        for f in facts:
            by_message.setdefault(f.message_id, []).append(f)
        with self._lock:
            self._mark(messages)
            out = self.add(by_message.pop(None, []), session_id=session_id)
            for m in messages:
                own = by_message.pop(m.id, [])
                user = m.role == "user" and not m.has_tool_result()
                changes = self._changes(m) if user else []  # read before m's own facts
                out += self.add(own, session_id=session_id)
                if user:
                    out += self._apply(changes, m, own, session_id)
                    self._last_user = [f.key for f in own]
            for rest in by_message.values():  # facts credited to messages not given
                out += self.add(rest, session_id=session_id)
            return out

    def _changes(self, m: Message) -> list[tuple[str, str, KeyedFact | None]]:
        """``(old, new, holder)`` of the values ``m`` says it changed, each holder the one
        current fact holding ``old`` before ``m`` (None: no fact or several)."""
        text = m.text()
        out: list[tuple[str, str, KeyedFact | None]] = []
        for pairs, numbers in ((value_changes(text), False), (value_corrections(text), True)):
            for old, new in pairs:
                holders = self._holding(old, numbers)
                out.append((old, new, holders[0] if len(holders) == 1 else None))
        return out

    def _apply(
        self,
        changes: list[tuple[str, str, KeyedFact | None]],
        m: Message,
        own: list[KeyedFact],
        session_id: str | None,
    ) -> list[KeyedFact]:
        """File the changes read before ``m``'s own facts; then a correction without
        the old value, when ``m`` states nothing else."""
        out: list[KeyedFact] = []
        for old, new, holder in changes:
            if holder is None:
                self._file_before(old, new, own)
                continue
            versions = self._versions.get(holder.key, [])
            if versions and versions[-1] is holder:  # not restated by m itself meanwhile
                out += self.add([self._restated(holder, new, m)], session_id=session_id)
        fixed = correction(m.text()) if not own and not changes else None
        if fixed is not None:
            said = self._corrected(fixed, m)
            if said is not None:
                out += self.add([said], session_id=session_id)
        return out

    @staticmethod
    def _restated(cur: KeyedFact, new: str, m: Message) -> KeyedFact:
        return KeyedFact(
            cur.attribute,
            new,
            subject=cur.subject,
            source_role="user",
            message_id=m.id,
            valid_from=m.created_at,
        )

    def _file_before(self, old: str, new: str, own: list[KeyedFact]) -> None:
        """ "I moved from Lisbon to Porto" and no fact held Lisbon: if the message filed
        Porto under some key, Lisbon is that key's value before it (from an unknown time
        until Porto's)."""
        for f in own:
            versions = self._versions.get(f.key, [])
            if (
                versions
                and versions[-1].current
                and norm_value(versions[-1].value) == norm_value(new)
            ):
                cur = versions[-1]
                if len(versions) == 1 or norm_value(versions[-2].value) != norm_value(old):
                    past = replace(cur, value=old, valid_from=None, valid_to=cur.valid_from or 0.0)
                    versions.insert(len(versions) - 1, past)
                return

    def _corrected(self, value: str, m: Message) -> KeyedFact | None:
        """The fact "it's ``value``" corrects: the one current fact of the previous user
        message whose value has the same shape (an email, a number, a name)."""
        cands = []
        for key in self._last_user:
            versions = self._versions.get(key, [])
            if versions and versions[-1].current and shape(versions[-1].value) == shape(value):
                cands.append(versions[-1])
        if len(cands) != 1:
            return None
        (cur,) = cands
        words = cur.attribute.casefold().split()
        said = value.split()
        if len(said) > len(words) and [w.casefold() for w in said[: len(words)]] == words:
            value = " ".join(said[len(words) :])  # "apartment 9B" corrects apartment: 24
        return self._restated(cur, value, m)

    def _holding(self, value: str, numbers: bool = False) -> list[KeyedFact]:
        """The current facts whose value is ``value`` (or starts with it and a comma:
        "BlueWave Pool, near the station"), the user's own first; none for a bare number
        unless ``numbers`` (many attributes could hold it)."""
        want = norm_value(value)
        if not want or (not numbers and want.replace(".", "").isdigit()):
            return []
        out = []
        for versions in self._versions.values():
            cur = versions[-1]
            have = norm_value(cur.value)
            if cur.current and (have == want or have.startswith(want + ",")):
                out.append(cur)
        users = [f for f in out if f.source_role == "user"]
        return users or out

    # -- reading -------------------------------------------------------------------------

    def current(self, subject: str | None = SUBJECT_USER) -> list[KeyedFact]:
        """The current value of every key (of ``subject``; ``None``: all), first seen first."""
        with self._lock:
            out = [
                vs[-1]
                for key, vs in self._versions.items()
                if vs and vs[-1].current and (subject is None or key[0] == subject)
            ]
        return sorted(out, key=lambda f: f.seq or 0)

    def get(
        self, attribute: str, *, subject: str = SUBJECT_USER, as_of: float | None = None
    ) -> KeyedFact | None:
        """The value of ``attribute`` now, or the one valid at epoch ``as_of``; None if unknown."""
        with self._lock:
            versions = self._versions.get((subject, norm_attribute(attribute)), [])
            if as_of is None:
                return versions[-1] if versions and versions[-1].current else None
            for v in reversed(versions):
                start = v.valid_from if v.valid_from is not None else float("-inf")
                end = v.valid_to if v.valid_to is not None else float("inf")
                if start <= as_of < end:
                    return v
        return None

    def history(
        self, attribute: str | None = None, *, subject: str = SUBJECT_USER
    ) -> list[KeyedFact]:
        """Every value of ``attribute`` (``None``: of every attribute), oldest first,
        superseded ones included (``valid_to`` set)."""
        with self._lock:
            if attribute is not None:
                return list(self._versions.get((subject, norm_attribute(attribute)), []))
            return [v for key, vs in self._versions.items() if key[0] == subject for v in vs]

    def __len__(self) -> int:
        """The number of current values."""
        return len(self.current(None))

    def __contains__(self, message_id: object) -> bool:
        """Whether the message with this id was already extracted."""
        return isinstance(message_id, str) and message_id in self._seen

    def render(self, max_tokens: int | None = None) -> str:
        """The current facts, best ranked first, one per line: within ``max_tokens``
        the longest ranked prefix that fits with a last line saying how many facts were
        left out; ``""`` when there are none or not even the best one fits."""
        return render_ranked(self.current(None), max_tokens, self._tok.count)

    # -- state ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A JSON-ready snapshot: every version and the ids already extracted."""
        with self._lock:
            return {
                "version": FACTS_STATE_VERSION,
                "seq": self._seq,
                "facts": [v.to_dict() for vs in self._versions.values() for v in vs],
                "seen": list(self._seen),
                "confirmed": [[s, a, t] for (s, a), t in self._confirmed.items()],
            }

    @classmethod
    def from_state(
        cls, data: Any, *, extractor: Extractor | None = None, **kwargs: Any
    ) -> FactHistory:
        """Rebuild from ``state()``, or from a ``FactLedger`` state (a dict with
        ``"facts"`` rows ``[kind, value, source_id, source_role, seq, mentions, tier]``:
        each becomes a verbatim fact keyed by kind and value). A malformed field raises
        ``ConfigError`` naming it."""
        out = cls(extractor=extractor, **kwargs)
        if not isinstance(data, dict):
            raise ConfigError(f"state={bounded_repr(data)}: must be a dict")
        rows = data.get("facts")
        if not isinstance(rows, list):
            raise ConfigError(f"state['facts']={bounded_repr(rows)}: must be a list")
        if "version" not in data:
            out.add(_legacy(rows))
            return out
        if data["version"] != FACTS_STATE_VERSION:
            raise ConfigError(
                f"state['version']={data['version']!r}: must be {FACTS_STATE_VERSION}"
            )
        seen = data.get("seen", [])
        if not isinstance(seen, list) or not all(isinstance(i, str) for i in seen):
            raise ConfigError(f"state['seen']={bounded_repr(seen)}: must be a list of message ids")
        seq = data.get("seq", 0)
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ConfigError(f"state['seq']={seq!r}: must be an int >= 0")
        facts = [KeyedFact.from_dict(r, f"state['facts'][{i}]") for i, r in enumerate(rows)]
        for f in facts:
            out._versions.setdefault(f.key, []).append(f)
        confirmed = data.get("confirmed", [])
        for i, row in enumerate(confirmed if isinstance(confirmed, list) else [None]):
            ok = (
                isinstance(row, list) and len(row) == 3 and all(isinstance(x, str) for x in row[:2])
            )
            if not ok or isinstance(row[2], bool) or not isinstance(row[2], int | float):
                where = f"state['confirmed'][{i}]={bounded_repr(row)}"
                raise ConfigError(f"{where}: must be [subject, attribute, time]")
            out._confirmed[(row[0], row[1])] = float(row[2])
        out._seen = dict.fromkeys(seen)
        out._seq = max([seq, *(f.seq or 0 for f in facts)])
        return out


def _legacy(rows: list[Any]) -> list[KeyedFact]:
    out: list[KeyedFact] = []
    for i, row in enumerate(rows):
        if not (
            isinstance(row, list) and len(row) >= 4 and all(isinstance(x, str) for x in row[:2])
        ):
            raise ConfigError(
                f"state['facts'][{i}]={row!r}: must be [kind, value, source_id, role, ...]"
            )
        kind, value, source_id, role = row[:4]
        out.append(
            KeyedFact(
                f"verbatim:{kind}:{norm_value(value)}",
                value,
                source_role=role if isinstance(role, str) else None,
                message_id=source_id if isinstance(source_id, str) else None,
            )
        )
    return out
