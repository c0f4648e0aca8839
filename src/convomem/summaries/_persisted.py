"""RunningSummary's persistence: its content as a ``SummarySnapshot`` (read for
``state()``, installed by ``restore`` and ``load_state``), the options a state is saved
with, and pickling."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from .._io import LoopLock
from ..errors import ConfigError
from ._drivers import _Driven
from ._engine import _Seg
from .ledger import FactLedger
from .snapshot import Coverage, SummarySnapshot


class _Persisted(_Driven):
    """The persistence helpers of ``RunningSummary`` (its public methods call them)."""

    facts_share: float
    max_facts: int

    def _empty(self) -> None:
        """No segments, no coverage, nothing rendered (the ledger is emptied apart; the
        segment numbers go on: a background task never finds a new segment as its)."""
        self._segments = ()
        self._coverage = Coverage()
        self._pending_seqs = set()
        self._current = None
        self._message = None

    def __repr__(self) -> str:
        tokens = self._current.tokens if self._current else 0
        return (
            f"<RunningSummary {len(self._coverage)} messages, {len(self._segments)} segments, "
            f"{tokens}/{self.reserve} tokens>"
        )

    def __getstate__(self) -> dict[str, Any]:
        """Pickling: everything but the locks (made anew); background summaries must
        have finished (``await wait()``), since a task cannot travel."""
        if self._pending:
            raise ConfigError(
                f"{self!r}: {len(self._pending)} background summaries are running; "
                "await wait() before pickling"
            )
        with self._tlock:
            state = self.__dict__.copy()
        for key in ("_tlock", "_alock", "_pending"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tlock = threading.RLock()
        self._alock = LoopLock()
        self._pending = set()

    def _content(self) -> SummarySnapshot:
        """The content as a snapshot sharing this summary's ledger and coverage (read
        it under the lock and at once: ``state()``)."""
        segments = tuple((s.summary, s.seq) for s in self._segments)
        return SummarySnapshot(segments, self._seq, self._ledger, self._coverage)

    def _restore(self, snapshot: SummarySnapshot) -> None:
        """Install ``snapshot`` (see ``RunningSummary.restore``; call under the lock)."""
        if not isinstance(snapshot, SummarySnapshot):
            raise ConfigError(f"snapshot={snapshot!r}: must be a SummarySnapshot")
        seqs = [n for _, n in snapshot.segments]
        if len(set(seqs)) != len(seqs) or snapshot.seq < max(seqs, default=0):
            raise ConfigError(f"snapshot: segments {seqs} after seq={snapshot.seq}")
        segs = tuple(
            _Seg(replace(s, header=self.header, tokens=self._measure_text(s.text, "")), n)
            for s, n in snapshot.segments
        )
        self._segments = segs
        self._seq = snapshot.seq
        self._ledger = snapshot.ledger
        self._coverage = snapshot.coverage
        self._pending_seqs = set()
        self._version += 1
        self._rebuild()

    def _config(self) -> dict[str, Any]:
        """The options a state is saved with (``state.CONFIG_KEYS``)."""
        return {
            "reserve": self.reserve,
            "header": self.header,
            "facts": self.facts,
            "facts_share": self.facts_share,
            "max_segments": self.max_segments,
            "max_facts": self.max_facts,
        }

    def _empty_ledger(self) -> FactLedger:
        """A ledger configured as this summary's, empty (``state.load`` fills it)."""
        ledger = self._ledger
        return FactLedger(
            tokenizer=ledger.tokenizer,
            max_facts=ledger.max_facts,
            max_stored_tokens=ledger.max_stored_tokens,
            budget=ledger.budget,
        )
