"""``convomem sessions import``: sessions read from a ``convomem.sessions/1`` file written
into a store, exactly and idempotently (the rules are in ``convomem.cli.transfer``'s
docstring). The whole file is read and checked once before anything is written, then
again to write it (stdin is spooled to a temporary file for that)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from typing import IO, Final, Literal, TextIO

from ..errors import ConvomemError, InputError, MessageConflict, StoreError
from ..stores.database import LogEntry, SessionInfo, StoreDatabase
from .render import SafeText, plural
from .store_option import opened
from .transfer import SessionRecord, all_entries, read_records

__all__ = ["ImportOutcome", "cmd_import", "import_session", "renumbered"]

_SORTED: Final = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)

ImportOutcome = Literal["created", "extended", "unchanged", "updated"]


def renumbered(rec: SessionRecord) -> SessionRecord:
    """``rec`` at seqs 1..n, without its state when that changed a seq."""
    if rec.gapless():
        return rec
    entries = [replace(e, seq=i) for i, e in enumerate(rec.entries, 1)]
    return replace(rec, entries=entries, state=None)


def _same(a: object, b: object) -> bool:
    """Equal as JSON text (``==`` would take ``1``, ``1.0`` and ``True`` for one value)."""
    return bool(_SORTED.encode(a) == _SORTED.encode(b))


def _conflict(rec: SessionRecord, problem: str) -> InputError:
    return InputError(
        f"session {rec.session_id!r} (tenant {rec.tenant!r}, line {rec.line}): {problem}; "
        "nothing of it was written"
    )


def _compare(
    rec: SessionRecord, stored: Iterator[LogEntry]
) -> tuple[int, dict[str, dict[str, int]]]:
    """How many of ``rec``'s messages are stored (a prefix), and the stored messages'
    counts the import adds; a conflict for anything else."""
    n = 0
    more: dict[str, dict[str, int]] = {}
    for have in stored:
        if n >= len(rec.entries):
            raise MessageConflict(
                rec.session_id,
                have.message.id,
                have.seq,
                f"is stored but not in the import, which ends at seq {rec.entries[-1].seq}"
                if rec.entries
                else "is stored but the import has no messages",
            )
        want = rec.entries[n]
        if have.message.id != want.message.id or have.seq != want.seq:
            raise MessageConflict(
                rec.session_id,
                have.message.id,
                have.seq,
                f"is stored where the import has {want.message.id!r} at seq {want.seq}",
            )
        if have.message != want.message:
            raise MessageConflict(
                rec.session_id, want.message.id, have.seq, "is stored with other content"
            )
        for name, count in want.counts.items():
            if name not in have.counts:
                more.setdefault(want.message.id, {})[name] = count
            elif have.counts[name] != count:
                raise MessageConflict(
                    rec.session_id,
                    want.message.id,
                    have.seq,
                    f"is stored with {count!r} tokens for {name!r} in the import but "
                    f"{have.counts[name]!r} in the store",
                )
        n += 1
    return n, more


def import_session(db: StoreDatabase, rec: SessionRecord) -> tuple[ImportOutcome, int]:
    """Write one session read from a file (see the module docstring): every check
    first, then one ``append`` with the messages, their counts and the state. Returns
    what happened and how many messages were written."""
    if not rec.gapless():
        first = next(e.seq for i, e in enumerate(rec.entries, 1) if e.seq != i)
        raise _conflict(
            rec,
            f"its seqs have gaps (seq {first} where {first - 1} or less was expected): the "
            "store cannot give them back; import with --renumber to store them at 1..n "
            "without the derived state",
        )
    store = db.session(rec.session_id, user_id=rec.user_id, tenant=rec.tenant)
    info: SessionInfo | None = store.info()
    more_counts: dict[str, dict[str, int]] = {}
    if info is None:
        stored_n, state, version = 0, None, 0
    else:
        if info.user_id != rec.user_id:
            raise _conflict(
                rec, f"stored for user_id={info.user_id!r}, the import's is {rec.user_id!r}"
            )
        stored_n, more_counts = _compare(rec, all_entries(store))
        state, version = store.load_state()
    new = rec.entries[stored_n:]
    if info is not None and not new:
        if state is not None and not _same(state, rec.state):
            raise _conflict(rec, "the stored derived state differs from the import's")
        if info.metadata and not _same(info.metadata, rec.metadata):
            raise _conflict(rec, "the stored metadata differs from the import's")
    wrote = False
    if new:
        counts = {e.message.id: e.counts for e in new if e.counts}
        last = store.append(
            [e.message for e in new],
            expected_seq=0 if info is None else info.last_seq,
            state=rec.state,
            expected_version=version if rec.state is not None else None,
            counts=counts or None,
        )
        wrote = True
        if last != new[-1].seq:
            raise StoreError(
                f"session {rec.session_id!r}: the store put the imported messages at seqs "
                f"up to {last}, not {new[-1].seq} (it had removed messages from its tail "
                "before); the messages are stored, their seqs differ from the file's"
            )
    if not _same(rec.state, state) and not (new and rec.state is not None):
        store.save_state(rec.state, expected_version=version)
        wrote = True
    if more_counts:
        store.set_counts(more_counts)
        wrote = True
    if info is None:
        if rec.metadata or not wrote:
            store.set_metadata(rec.metadata)  # also creates a session with nothing else
        return "created", len(new)
    if not _same(info.metadata, rec.metadata):
        store.set_metadata(rec.metadata)
        wrote = True
    return ("extended" if new else "updated" if wrote else "unchanged"), len(new)


# -- the import command -----------------------------------------------------------------


@contextlib.contextmanager
def _lines(path: str) -> Iterator[IO[str]]:
    """The file (or stdin, spooled so it can be read twice) as UTF-8 text."""
    if path != "-":
        try:
            f = open(path, encoding="utf-8-sig")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        with f:
            yield f
        return
    with tempfile.TemporaryFile("w+b") as spool:
        source = getattr(sys.stdin, "buffer", None)
        if source is not None:
            spool.write(source.read())
        else:
            spool.write(sys.stdin.read().encode("utf-8", "surrogatepass"))
        spool.seek(0)
        with open(spool.fileno(), encoding="utf-8-sig", closefd=False) as text:
            yield text


def _check_file(f: IO[str], label: str) -> int:
    """Read the whole file once; how many sessions it holds (nothing is written)."""
    try:
        return sum(1 for _ in read_records(f, label))
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte {exc.start})") from None


def cmd_import(args: argparse.Namespace, out: TextIO | SafeText) -> int:
    """Check the whole file, then write it session by session."""
    label = "<stdin>" if args.file == "-" else args.file
    tally = dict.fromkeys(("created", "extended", "updated", "unchanged"), 0)
    written = 0
    err = SafeText(sys.stderr)
    with _lines(args.file) as f, opened(args, create=True) as db:
        _check_file(f, label)
        f.seek(0)
        for rec in read_records(f, label):
            if args.tenant is not None:
                rec = replace(rec, tenant=args.tenant)
            if args.renumber and not rec.gapless():
                rec = renumbered(rec)
                err.write(
                    f"note: session {rec.session_id!r}: seqs renumbered 1..n; its derived "
                    "state was left out (it named the old seqs)\n"
                )
            try:
                outcome, n = import_session(db, rec)
            except ConvomemError as exc:
                done = sum(tally.values())
                if not done:
                    raise
                before = plural(done, "session")
                raise InputError(
                    f"{exc} ({before} before it imported; a re-run keeps them)"
                ) from None
            tally[outcome] += 1
            written += n
    parts = ", ".join(f"{v} {k}" for k, v in tally.items())
    total = plural(sum(tally.values()), "session")
    out.write(f"imported {total} ({parts}), {plural(written, 'message')} written\n")
    return 0
