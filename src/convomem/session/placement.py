"""Where the tiers go in a context, so that a provider's prompt cache keeps matching.

A provider bills (and serves fast) the longest prefix a request shares with an earlier
one. Between compactions a session's view only grows at its end, so the tiers must not
rewrite what comes before. The arrangement:

    [system] [summary] [profile] [older turns ...] [update N] [user N] ...

- The **profile** (the user's current facts, ranked, within the facts share) sits in the
  stable head, after the summary. It is frozen until the next compaction (which rewrites
  the prefix anyway); then it is rendered again with every fact known by then.
- What changes per turn goes right before the user message it was made for, and stays
  there on later turns: an **update** holds the facts that changed since the profile was
  frozen (``city: Porto (was: Lisbon)``) and the recalled snippets for that turn's query
  that the context does not hold yet, each text once, whole. An update leaves with its
  turn. A new query for the same turn makes that turn's update again (the prefix breaks
  once then).

So two contexts in a row differ by what was appended, and the profile is in every one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from ..model import Message
from ..summaries.supersession import FactHistory
from ..tokens import Tokenizer
from ._tier_render import RECALL_HEADER, Snippet, snippet_line

PROFILE_ID: Final = "convomem_profile"
UPDATE_PREFIX: Final = "convomem_update:"
PROFILE_HEADER: Final = "What the user has told us (their profile, kept across conversations):"
UPDATE_HEADER: Final = "Since then:"
MIN_UPDATE: Final = 96
"""Tokens an update may take at least (within the recall share): a couple of snippets."""


@dataclass(slots=True)
class Update:
    """The update made for one user message: its query, fact lines and snippets."""

    query: str | None
    facts: list[str] = field(default_factory=list)
    snippets: list[Snippet] = field(default_factory=list)
    message: Message | None = None
    tokens: int = 0
    short: bool = False
    """Made with less room than an update may take (the view was full): made again when
    there is more."""


class Placement:
    """The profile and the updates of one session's contexts (see the module docstring).
    ``facts_cap`` bounds the profile; the updates in the view share ``recall_cap``, one
    update taking at most a third of it (``turn_cap``)."""

    def __init__(self, tok: Tokenizer, session_id: str, facts_cap: int, recall_cap: int) -> None:
        self.tok = tok
        self.session_id = session_id
        self.facts_cap = facts_cap
        self.recall_cap = recall_cap
        self.profile: Message | None = None
        self.profile_tokens = 0
        self.stale = True  # a compaction happened: freeze the profile again
        self.known: dict[tuple[str, str], str] = {}  # the facts as the profile was frozen
        self.updates: dict[str, Update] = {}
        # What this context shows: everything, unless the view left less room (``fit``).
        self.shown_profile: Message | None = None
        self.hidden: set[str] = set()

    @property
    def turn_cap(self) -> int:
        """What one update may take: a third of the recall share, so the updates of a few
        turns share it (an update leaves with its turn), and at a small budget room for a
        couple of whole snippets (``MIN_UPDATE``) if the share holds that much."""
        return min(self.recall_cap, max(self.recall_cap // 3, MIN_UPDATE))

    def cap_for(self, user_id: str, room: int) -> int:
        """What the update of ``user_id`` may take: a turn's cap, within the recall share
        the other updates leave and ``room`` (what the context leaves, this update's own
        tokens included)."""
        done = self.updates.get(user_id)
        own = 0 if done is None else done.tokens
        return max(0, min(self.turn_cap, self.recall_cap - self.update_tokens() + own, room))

    def wants(self, user_id: str, query: str | None, room: int) -> bool:
        """Whether the update of ``user_id`` is to be made (again): none yet, another
        query, or one made short of room that more room would fill."""
        done = self.updates.get(user_id)
        return (
            done is None
            or done.query != query
            or (done.short and self.cap_for(user_id, room) > done.tokens)
        )

    def tokens(self) -> int:
        """What the profile and the updates in the view take now."""
        return self.profile_tokens + self.update_tokens()

    def update_tokens(self) -> int:
        """What the updates in the view take now."""
        return sum(u.tokens for u in self.updates.values())

    def shown(self) -> set[str]:
        """The lines of the snippets the updates show: a message is shown once, and so
        is another of the same text said the same day (it reads the same)."""
        sid = self.session_id
        return {snippet_line(s, sid) for u in self.updates.values() for s in u.snippets}

    # -- the profile --------------------------------------------------------------------

    def freeze(self, history: FactHistory | None, users: Iterable[str]) -> None:
        """Render the profile again (after a compaction: ``stale``); keep the updates of
        the user messages still in the view, without their facts (the profile holds them
        now)."""
        self.stale = False
        facts = [] if history is None else history.current(None)
        self.known = {f.key: f.value for f in facts}
        text = ""
        if history is not None and facts and self.facts_cap > 0:
            cap = self.facts_cap
            while cap > 0:
                body = history.render(cap)
                text = f"{PROFILE_HEADER}\n{body}" if body else ""
                if not text or self.tok.count_message(_system(PROFILE_ID, text)) <= self.facts_cap:
                    break
                cap -= max(1, self.tok.count_message(_system(PROFILE_ID, text)) - self.facts_cap)
            else:
                text = ""
        self.profile = _system(PROFILE_ID, text) if text else None
        self.profile_tokens = 0 if self.profile is None else self.tok.count_message(self.profile)
        alive = set(users)
        self.updates = {k: u for k, u in self.updates.items() if k in alive}
        for key, u in self.updates.items():
            u.facts = []
            self._render(key, u)

    # -- the updates --------------------------------------------------------------------

    def update(
        self,
        user_id: str,
        query: str | None,
        history: FactHistory | None,
        snippets: list[Snippet],
        room: int,
    ) -> Update:
        """The update of the newest user message ``user_id`` (made once per query): the
        facts changed since the profile was frozen and not said by an earlier update, and
        the ``snippets`` (best first; not in the view) not shown yet, within ``room``."""
        done = self.updates.get(user_id)
        cap = self.cap_for(user_id, room)
        if done is not None and done.query == query and (not done.short or cap <= done.tokens):
            return done
        self.updates.pop(user_id, None)
        said = {line for u in self.updates.values() for line in u.facts}
        facts: list[str] = []
        for f in [] if history is None else history.current(None):
            if self.known.get(f.key) == f.value:
                continue
            old = self.known.get(f.key)
            line = f"- {f.statement()}" + ("" if old is None else f" (was: {old})")
            if line not in said:
                facts.append(line)
        shown = self.shown()
        u = Update(query, facts, short=cap < self.turn_cap)
        cap = min(cap, self.turn_cap)
        self._render(user_id, u)
        while u.tokens > cap and u.facts:  # facts first in, last out: room for the newest
            u.facts.pop()
            self._render(user_id, u)
        for s in snippets:
            line = snippet_line(s, self.session_id)
            if line in shown:
                continue
            u.snippets.append(s)
            self._render(user_id, u)
            if u.tokens > cap:
                u.snippets.pop()
            else:
                shown.add(line)
        self._render(user_id, u)
        self.updates[user_id] = u
        return u

    def _render(self, user_id: str, u: Update) -> None:
        parts: list[str] = []
        if u.facts:
            parts.append("\n".join([UPDATE_HEADER, *u.facts]))
        if u.snippets:
            ordered = sorted(u.snippets, key=lambda s: s.at)
            parts.append(
                "\n".join([RECALL_HEADER, *(snippet_line(s, self.session_id) for s in ordered)])
            )
        u.message = _system(UPDATE_PREFIX + user_id, "\n\n".join(parts)) if parts else None
        u.tokens = 0 if u.message is None else self.tok.count_message(u.message)

    def forget(self, users: Iterable[str]) -> None:
        """Drop the updates of user messages that left the view."""
        alive = set(users)
        self.updates = {k: u for k, u in self.updates.items() if k in alive}

    # -- the context --------------------------------------------------------------------

    def fit(self, history: FactHistory | None, room: int, users: list[str]) -> int:
        """Choose what this context shows within ``room`` tokens: everything when it fits
        (the write path keeps room for it); else (pins grew, a compaction waits) the
        oldest updates are left out, then the profile is rendered smaller, for this
        context only (nothing frozen changes). Returns the tokens shown."""
        self.shown_profile, self.hidden = self.profile, set()
        total = self.tokens()
        for user in users:
            if total <= room:
                break
            u = self.updates.get(user)
            if u is not None and u.tokens:
                self.hidden.add(user)
                total -= u.tokens
        if total > room and self.profile is not None:
            total -= self.profile_tokens
            self.shown_profile = None
            cap = room - total
            while history is not None and cap > 0:
                body = history.render(cap)
                m = _system(PROFILE_ID, f"{PROFILE_HEADER}\n{body}") if body else None
                n = 0 if m is None else self.tok.count_message(m)
                if n <= room - total:
                    self.shown_profile, total = m, total + n
                    break
                cap -= max(1, n - (room - total))
        return total

    def arrange(self, messages: list[Message], summary: Message | None) -> list[Message]:
        """``messages`` (a view: system prompt, summary, history) with the profile after
        the summary (or the leading system messages) and each update before its user
        message: what ``fit`` chose."""
        at = 0
        while at < len(messages) and messages[at].role == "system":
            at += 1
            if messages[at - 1] is summary:
                break
        out = list(messages[:at])
        if self.shown_profile is not None:
            out.append(self.shown_profile)
        for m in messages[at:]:
            u = self.updates.get(m.id)
            if u is not None and u.message is not None and m.id not in self.hidden:
                out.append(u.message)
            out.append(m)
        last = self.updates.get("")  # made for an empty view
        if last is not None and last.message is not None and "" not in self.hidden:
            out.append(last.message)
        return out

    # -- state --------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What a durable session keeps, so that a resumed one sends the same context."""
        return {
            "stale": self.stale,
            "profile": None if self.profile is None else self.profile.text(),
            "known": [[k[0], k[1], v] for k, v in self.known.items()],
            "updates": {
                k: {
                    "query": u.query,
                    "facts": u.facts,
                    "snippets": [[*s[:5], list(s.at), s.neighbour] for s in u.snippets],
                }
                for k, u in self.updates.items()
            },
        }

    def load_state(self, data: Any) -> None:
        """Restore ``state()``; anything unusable starts over (the next context freezes
        the profile again)."""
        self.profile, self.profile_tokens, self.stale = None, 0, True
        self.known, self.updates = {}, {}
        if not isinstance(data, dict):
            return
        try:
            text = data["profile"]
            self.profile = None if text is None else _system(PROFILE_ID, str(text))
            self.profile_tokens = (
                0 if self.profile is None else self.tok.count_message(self.profile)
            )
            self.known = {(str(s), str(a)): str(v) for s, a, v in data["known"]}
            for k, u in data["updates"].items():
                snippets = [_snippet(row) for row in u["snippets"]]
                upd = Update(u["query"], [str(x) for x in u["facts"]], snippets)
                self._render(str(k), upd)
                self.updates[str(k)] = upd
            self.stale = bool(data["stale"])
        except (KeyError, TypeError, ValueError):
            self.profile, self.profile_tokens, self.stale = None, 0, True
            self.known, self.updates = {}, {}


def is_tier_message(m: Message) -> bool:
    """Whether ``m`` is a profile or an update a context carries (not a logged message)."""
    return m.role == "system" and (m.id == PROFILE_ID or m.id.startswith(UPDATE_PREFIX))


def _system(mid: str, text: str) -> Message:
    return Message(mid, "system", content=text)


def _snippet(row: list[Any]) -> Snippet:
    mid, session_id, kind, text, created_at, at, neighbour = row
    return Snippet(
        str(mid), str(session_id), str(kind), str(text), float(created_at),
        (int(at[0]), int(at[1])), bool(neighbour),
    )  # fmt: skip
