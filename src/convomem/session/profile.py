"""The profile tier: the user's current facts, in every context of the user's sessions.

``Profile`` holds one user's ``FactHistory`` as one memory sees it: read once from the
recall index's facts table (shared by the user's sessions; without an index it is this
memory's own), fed each new message once (``extract``), saved back compare-and-set after
a compaction and on flush (a save that loses to another session of the user re-reads,
merges what this memory extracted since its last save, and saves again), and rendered
within its share of the budget (``render``): the reserve a compaction keeps free for it
is what it renders now, up to that share.

Its I/O are generators of ``_io.Call`` requests, driven by the session's drivers. A
failure is the caller's to record (``Tiers``): a tier never fails a session's operation.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from .._io import Gen, call
from ..errors import ConcurrentUpdate
from ..model import Message
from ..retry import RetryPolicy, retry_if_exception_type, stop_after_attempt, wait_none
from ..summaries.keyed import KeyedFact
from ..summaries.supersession import FactHistory
from ..tokens import Tokenizer

SAVES: Final = RetryPolicy(
    stop=stop_after_attempt(8), wait=wait_none(), retry=retry_if_exception_type(ConcurrentUpdate)
)
"""A facts save that loses to another session of the user re-reads, merges, saves again."""


class Profile:
    """One user's facts as one memory sees them (see the module docstring). ``index``:
    the recall index keeping them (None: this memory's own); ``cap``: the tokens the
    profile may take in a context."""

    def __init__(
        self,
        *,
        index: Any,
        extractor: Any,
        tokenizer: Tokenizer,
        cap: int,
        scope: tuple[str | None, str | None, str],
    ) -> None:
        self.index = index
        self.extractor = extractor
        self.tok = tokenizer
        self.cap = cap
        self.user_id, self.tenant, self.session_id = scope
        self.history: FactHistory | None = None
        self.version = 0
        self.pending: list[str] = []  # ids extracted since the last save
        self.tokens = 0  # what the facts take rendered at their share (the reserve)
        self.extracted = 0  # messages this memory handed to the extractor
        self.saves = self.conflicts = 0

    @property
    def degraded(self) -> bool:
        """The extractor's model failed on its last batch (its offline rules stood in)."""
        return bool(getattr(self.extractor, "degraded", False))

    def load(self) -> Gen[None]:
        """Read the user's facts, once."""
        if self.history is not None:
            return
        if self.index is None:
            self._loaded(FactHistory(extractor=self.extractor, tokenizer=self.tok))
            return
        self._loaded((yield from self._read()))

    def _read(self) -> Gen[FactHistory]:
        h: FactHistory = yield call(
            self.index.facts,
            self.user_id,
            tenant=self.tenant,
            extractor=self.extractor,
            tokenizer=self.tok,
        )
        return h

    def _loaded(self, h: FactHistory) -> None:
        self.history, self.version, self.pending = h, int(getattr(h, "version", 0)), []
        self._measure()

    def _measure(self) -> None:
        h = self.history
        self.tokens = 0
        if h is not None and len(h):
            text = h.render(max(0, self.cap - 8))
            self.tokens = min(self.cap, self.tok.count(text) + 8) if text else 0

    def extract(self, messages: list[Message]) -> Gen[None]:
        """Extract the facts of messages not read before (each id once)."""
        yield from self.load()
        h = self.history
        assert h is not None
        new = h.unseen(messages)
        if new:
            changed = yield call(
                h.add_messages, new, session_id=self.session_id, afn=h.aadd_messages
            )
            self.extracted += len(new)
            self.pending += [m.id for m in new]
            if changed:
                self._measure()

    def save(self) -> Gen[None]:
        """Save what was extracted since the last save (compare-and-set on the version)."""
        if self.index is None or not self.pending or self.history is None:
            return

        def attempt() -> Gen[None]:
            try:
                self.version = yield call(
                    self.index.save_facts,
                    self.user_id,
                    self.history,
                    tenant=self.tenant,
                    expected_version=self.version,
                )
            except ConcurrentUpdate:
                self.conflicts += 1
                fresh = yield from self._read()
                self.history = self._merged(fresh)
                self.version = int(getattr(fresh, "version", 0))
                self._measure()
                raise
            self.pending, self.saves = [], self.saves + 1

        with contextlib.suppress(ConcurrentUpdate):  # lost every race: pending for the next
            yield from SAVES.retried(attempt)

    def _merged(self, fresh: FactHistory) -> FactHistory:
        """``fresh`` (another session's save) plus what this one extracted since its
        last save: the same messages are not extracted again."""
        mine = self.history
        assert mine is not None
        ids = set(self.pending)
        state = fresh.state()
        state["seen"] = [*state["seen"], *(i for i in self.pending if i not in fresh)]
        out = type(fresh).from_state(state, extractor=self.extractor, tokenizer=self.tok)
        rows = mine.state()["facts"]
        out.add(KeyedFact.from_dict(r, "facts") for r in rows if r.get("message_id") in ids)
        return out
