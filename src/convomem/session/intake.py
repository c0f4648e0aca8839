"""How a batch enters a session's log: duplicates judged, derived ids made fresh, each
message scored and counted once, before anything is written.

A message whose id a format converter *derived* from its content (``model.is_derived_id``)
and that the log already holds gets a fresh one (``<id>~<n>``, ``n`` from the newest
seq): converting two equal texts one at a time never collides. A given id is kept as it
is: over a durable session (idempotent appends) a message the view holds with the same
content is not appended again and other content raises ``MessageConflict``; a message
the view holds as a copy is re-sent for the store to compare; over a plain store a given
id already in the log raises ``InvalidMessage``.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from .._io import Gen
from ..errors import ConfigError, InvalidMessage, MessageConflict
from ..model import Message, is_derived_id
from .journal import PlainJournal
from .state import LogBook

Sorted = tuple[list[Message], list[tuple[Message, int]], list[Message]]
"""``(out, todo, resend)``: the batch as it will be logged, the new messages with their
counts, and re-sent messages the view holds as a copy."""


class Intake:
    """The intake of one session (see the module docstring)."""

    def __init__(
        self,
        journal: PlainJournal,
        book: LogBook,
        scorer: Callable[[Message], int] | None,
        count: Callable[[Message], int],
    ) -> None:
        self.journal = journal
        self.book = book
        self.scorer: Any = scorer
        self.count = count

    def sort(
        self, batch: list[Message], wheres: list[str], skip: int
    ) -> Gen[tuple[list[Message], list[tuple[Message, int]], list[Message]]]:
        """What to append: the messages as they will be logged (``out``), the new ones
        with their counts (``todo``), and re-sent ones the view holds as a copy (the
        store compares them). Raises what a duplicate is, before anything is written."""
        j = self.journal
        logged = self.book.logged
        check = [
            m.id for m in batch if (is_derived_id(m.id) or not j.idempotent) and m.id not in logged
        ]
        held = (yield from j.existing(check)) if check else set()
        out: list[Message] = []
        todo: list[tuple[Message, int]] = []
        resend: list[Message] = []
        taken: set[str] = set()
        for given, where in zip(batch, wheres, strict=True):
            hit = logged.get(given.id)
            if not is_derived_id(given.id):
                if j.idempotent and hit is not None:
                    scored, _ = self.prepare(given)  # as it was logged
                    if hit[1] is not None and hit[1] != scored:
                        raise MessageConflict(
                            j.session_id, given.id, hit[0], "is in the log with other content"
                        )
                    out.append(scored if hit[1] is None else hit[1])
                    if hit[1] is None:
                        resend.append(scored)
                    continue
                if given.id in taken or (not j.idempotent and (hit or given.id in held)):
                    raise InvalidMessage(f"{where}.id", given.id, "is already in the log")
            elif hit is not None or given.id in held or given.id in taken or skip:
                given = self._fresh_id(given, skip, taken)
            m, t = self.prepare(given)
            taken.add(m.id)
            todo.append((m, t))
            out.append(m)
        return out, todo, resend

    def _fresh_id(self, m: Message, skip: int, taken: AbstractSet[str]) -> Message:
        n = max(skip, self.book.last)
        while f"{m.id}~{n}" in self.book.logged or f"{m.id}~{n}" in taken:
            n += 1
        return m.replace(id=f"{m.id}~{n}")

    def prepare(self, m: Message) -> tuple[Message, int]:
        """Score and count a new message; nothing is changed."""
        if self.scorer is not None:
            p = self.scorer(m)
            if isinstance(p, bool) or p not in (0, 1, 2):
                raise ConfigError(
                    f"scorer={self.scorer!r}: returned {p!r} for message id={m.id!r}; "
                    "must return 0, 1 or 2"
                )
            if p != m.priority:
                m = m.replace(priority=p)
        return m, self.count(m)
