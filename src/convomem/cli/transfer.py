"""Sessions to and from JSONL: the ``convomem.sessions/1`` format of ``convomem sessions
export`` and ``import``.

A file is UTF-8 JSONL, one record per line; blank lines are ignored. Each session is a
header, its messages oldest first, and an end record, so files concatenate
(``cat a.jsonl b.jsonl``) and a file cut short is detected, never half imported::

    {"format":"convomem.sessions/1","type":"session","session_id":"s1","user_id":"u1",
     "tenant":null,"metadata":{},"created_at":1764600000.0,"updated_at":1764600012.5,
     "expires_at":null,"state":{...}}
    {"type":"message","seq":1,"message":{"id":"m1","role":"user","content":"hi"},
     "counts":{"approx":3}}
    {"type":"end","session_id":"s1","messages":1}

- ``session``: ``format`` names this version (a reader refuses another); ``user_id`` is
  the owner and ``tenant`` the scope (null: none); ``metadata`` the session's JSON
  object; ``created_at``, ``updated_at`` and ``expires_at`` (epoch seconds; null: never
  expires) are what the source store said; ``state`` is the derived state
  (``load_state()``: summary segments, facts, the view's cut; null: none), which names
  messages by their ``seq``.
- ``message``: ``seq`` as stored (increasing; gapless from 1 unless the session lost
  its tail to ``pop_item``/``truncate``/``clear_session``), ``message`` the full-fidelity
  ``Message.to_dict()``, ``counts`` its token counts per tokenizer name.
- ``end``: the session's id again and how many message records it had.

Objects keep their keys in the order the store gives them (a message's key order is
part of it). U+0085, U+2028 and U+2029 are written as ``\\u`` escapes, so a tool that
splits lines on them (``str.splitlines``) still reads one record per line. Export
reads the header and the state before the messages, so a session written to meanwhile
exports a state that names only exported messages (an export is not a snapshot).

Import is exact: seqs, messages, counts, state, metadata, owner and tenant read back as
they were, and ``export`` of the imported store writes the same bytes but for the three
times, which the target store stamps itself (the store protocol has no way to set
them); the target's TTL policy applies. A whole file is checked before anything is
written; each session is then written with one ``append`` (messages, counts and state
in one transaction), its metadata just after. Importing a session the store already
holds is a no-op when equal; when the stored log is a prefix of the imported one
(same seqs and messages) the rest is appended and the imported state and metadata win;
anything else raises a conflict naming the session (and the message id and seq) before
anything of that session is written. A session whose seqs have gaps cannot be written
at the same seqs through the store protocol: it is refused, or with ``renumber`` given
seqs 1..n and imported without its state (which named the old seqs; a
``ConversationMemory`` rebuilds it once).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from ..errors import ConfigError, ConvomemError, InputError, StoreError
from ..model import Message
from ..stores.database import LogEntry, SessionStore, StoreDatabase
from ..stores.expiry import expired
from ..stores.records import check_counts, check_json_object, check_name, dumps
from .render import SafeText, plural
from .store_option import opened

__all__ = ["FORMAT", "SessionRecord", "all_entries", "cmd_export", "export_lines", "read_records"]

FORMAT: Final = "convomem.sessions/1"
PAGE: Final = 500
"""Messages read per page while exporting or comparing."""

_HEADER_KEYS: Final = (
    "format",
    "type",
    "session_id",
    "user_id",
    "tenant",
    "metadata",
    "created_at",
    "updated_at",
    "expires_at",
    "state",
)
_MESSAGE_KEYS: Final = ("type", "seq", "message", "counts")
_END_KEYS: Final = ("type", "session_id", "messages")


_SEPARATORS: Final = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""Characters other tools take for line breaks (``str.splitlines``): escaped, which JSON
allows anywhere they can occur (inside strings), so a record stays on its line."""


def _line(record: Mapping[str, Any]) -> str:
    """One record as compact JSON, keys in the order given (a message's key order is
    part of it: two messages are equal when their JSON text is)."""
    return dumps(record).translate(_SEPARATORS)


# -- export ---------------------------------------------------------------------------


def export_lines(store: SessionStore) -> Iterator[str]:
    """The records of one session, a line each (without the newline).

    ``StoreError`` naming the session when it does not exist; the store's errors
    (``CorruptRecord`` naming the seq) as they are.
    """
    info = store.info()
    if info is None or expired(info):  # (past its own TTL: gone, as for every reader)
        raise StoreError(f"session {store.session_id!r} (tenant {store.tenant!r}): not found")
    state, _ = store.load_state()
    yield _line(
        {
            "format": FORMAT,
            "type": "session",
            "session_id": info.session_id,
            "user_id": info.user_id,
            "tenant": info.tenant,
            "metadata": info.metadata,
            "created_at": info.created_at,
            "updated_at": info.updated_at,
            "expires_at": info.expires_at,
            "state": state,
        }
    )
    n = 0
    for entry in all_entries(store):
        n += 1
        yield _line(
            {
                "type": "message",
                "seq": entry.seq,
                "message": entry.message.to_dict(),
                "counts": entry.counts,
            }
        )
    yield _line({"type": "end", "session_id": info.session_id, "messages": n})


def all_entries(store: SessionStore) -> Iterator[LogEntry]:
    """Every stored entry, oldest first, a page at a time."""
    cursor: str | None = None
    while True:
        page, cursor = store.entries(cursor, PAGE)
        yield from page
        if cursor is None:
            return


# -- reading a file --------------------------------------------------------------------


@dataclass
class SessionRecord:
    """One session read from a file, checked."""

    session_id: str
    user_id: str | None
    tenant: str | None
    metadata: dict[str, Any]
    state: dict[str, Any] | None
    line: int
    """The line of its header."""
    entries: list[LogEntry] = field(default_factory=list)

    def gapless(self) -> bool:
        """Whether the seqs are 1..n, so the store gives them back the same."""
        return all(e.seq == i for i, e in enumerate(self.entries, 1))


class _Reader:
    """Checks records one line at a time; ``InputError`` naming the line for anything
    that is not this format."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.open: SessionRecord | None = None
        self.ids: set[str] = set()
        self.lineno = 0

    def fail(self, problem: str) -> InputError:
        return InputError(f"{self.label}: line {self.lineno}: {problem}")

    def keys(self, rec: dict[str, Any], expected: tuple[str, ...]) -> None:
        for key in rec:
            if key not in expected:
                raise self.fail(f"unknown field {key!r} in a {rec['type']!r} record")
        for key in expected:
            if key not in rec:
                raise self.fail(f"a {rec['type']!r} record without {key!r}")

    def feed(self, text: str) -> SessionRecord | None:
        """Read one line; the session it completes, if any."""
        self.lineno += 1
        if not text.strip():
            return None
        try:
            rec = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise self.fail(f"not JSON ({str(exc)[:80]})") from None
        if not isinstance(rec, dict) or rec.get("type") not in ("session", "message", "end"):
            kind = rec.get("type") if isinstance(rec, dict) else type(rec).__name__
            raise self.fail(
                f"not a {FORMAT} record (type {kind!r}; expected a JSON object "
                "of type 'session', 'message' or 'end')"
            )
        try:
            if rec["type"] == "session":
                self.header(rec)
            elif rec["type"] == "message":
                self.message(rec)
            else:
                return self.end(rec)
        except ConvomemError as exc:
            if isinstance(exc, InputError):
                raise
            raise self.fail(str(exc)) from None
        return None

    def header(self, rec: dict[str, Any]) -> None:
        if rec.get("format") != FORMAT:
            raise self.fail(f"format={rec.get('format')!r}: this version reads {FORMAT!r}")
        self.keys(rec, _HEADER_KEYS)
        if self.open is not None:
            raise self.fail(
                f"session {rec['session_id']!r} starts before session "
                f"{self.open.session_id!r} (line {self.open.line}) ended"
            )
        sid = check_name("session_id", rec["session_id"])
        assert sid is not None
        check_json_object("metadata", rec["metadata"])
        if rec["state"] is not None:
            check_json_object("state", rec["state"])
        for name in ("created_at", "updated_at", "expires_at"):
            value = rec[name]
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok and not (name == "expires_at" and value is None):
                raise self.fail(f"{name}={value!r}: must be epoch seconds")
        self.open = SessionRecord(
            sid,
            check_name("user_id", rec["user_id"], optional=True),
            check_name("tenant", rec["tenant"], optional=True),
            rec["metadata"],
            rec["state"],
            self.lineno,
        )
        self.ids = set()

    def message(self, rec: dict[str, Any]) -> None:
        self.keys(rec, _MESSAGE_KEYS)
        s = self.open
        if s is None:
            raise self.fail("a message record outside a session (no 'session' record before)")
        seq = rec["seq"]
        last = s.entries[-1].seq if s.entries else 0
        if type(seq) is not int or seq <= last:
            raise self.fail(f"seq={seq!r}: must be an integer above the previous seq ({last})")
        m = Message.from_dict(rec["message"]) if isinstance(rec["message"], dict) else None
        if m is None:
            raise self.fail(f"message={rec['message']!r}: must be a message object")
        if m.id in self.ids:
            raise self.fail(f"message id {m.id!r} appears twice in session {s.session_id!r}")
        self.ids.add(m.id)
        counts = check_counts({m.id: rec["counts"]})[m.id]
        s.entries.append(LogEntry(seq, m, counts))

    def end(self, rec: dict[str, Any]) -> SessionRecord:
        self.keys(rec, _END_KEYS)
        s = self.open
        if s is None or rec["session_id"] != s.session_id:
            raise self.fail(f"end of session {rec['session_id']!r}, which did not start")
        if rec["messages"] != len(s.entries):
            raise self.fail(
                f"session {s.session_id!r} ends after {len(s.entries)} messages, "
                f"its end record says {rec['messages']!r}"
            )
        self.open = None
        return s

    def finish(self) -> None:
        if self.open is not None:
            raise InputError(
                f"{self.label}: ends inside session {self.open.session_id!r} (begun at line "
                f"{self.open.line}, no 'end' record): the file was cut short"
            )


def read_records(lines: Iterable[str], label: str) -> Iterator[SessionRecord]:
    """The sessions of a file, each checked whole before it is yielded."""
    reader = _Reader(label)
    for text in lines:
        done = reader.feed(text)
        if done is not None:
            yield done
    reader.finish()


# -- the export command -----------------------------------------------------------------


def _targets(db: StoreDatabase, args: argparse.Namespace) -> list[str]:
    """The session ids to export: given, or every one of the user or tenant, oldest
    first (so an import creates them in the same order)."""
    chosen = sum([bool(args.session), args.user is not None, args.all])
    if chosen != 1:
        raise ConfigError("export: give session ids, or --user USER, or --all (one of them)")
    if args.session:
        for sid in args.session:  # before anything is written
            info = db.session(sid, user_id=args.user, tenant=args.tenant).info()
            if info is None or expired(info):
                raise StoreError(f"session {sid!r} (tenant {args.tenant!r}): not found")
        return list(args.session)
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = db.sessions(user_id=args.user, tenant=args.tenant, cursor=cursor, limit=500)
        ids += [s.session_id for s in page if not expired(s)]
        if cursor is None:
            return ids[::-1]


def _ascii_if_needed(line: str, encoding: str) -> str:
    """``line``, or the same JSON with ASCII escapes when the output cannot encode it
    (a backslash replacement would not be JSON)."""
    try:
        line.encode(encoding)
        return line
    except (UnicodeEncodeError, LookupError):
        return json.dumps(json.loads(line), ensure_ascii=True, separators=(",", ":"))


def cmd_export(args: argparse.Namespace, out: TextIO | SafeText) -> int:
    """JSONL on stdout or in ``--output``: written whole or not at all (a temporary file
    renamed at the end), with mode 0600 since it holds conversations."""
    with opened(args) as db:
        ids = _targets(db, args)
        handle: str | None = args.user
        if args.output:
            return _export_to_file(db, ids, handle, args)
        encoding = getattr(out, "encoding", None) or "utf-8"
        n = m = 0
        for sid in ids:
            store = db.session(sid, user_id=handle, tenant=args.tenant)
            for line in export_lines(store):
                m += line.startswith('{"type":"message"')
                out.write(_ascii_if_needed(line, encoding) + "\n")
            n += 1
    SafeText(sys.stderr).write(f"exported {plural(n, 'session')}, {plural(m, 'message')}\n")
    return 0


def _export_to_file(
    db: StoreDatabase, ids: list[str], user: str | None, args: argparse.Namespace
) -> int:
    path: str = args.output
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".convomem-export-", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"--output {path!r}: cannot write there: {exc.strerror}") from None
    n = m = 0
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for sid in ids:
                store = db.session(sid, user_id=user, tenant=args.tenant)
                for line in export_lines(store):
                    m += line.startswith('{"type":"message"')
                    f.write(line + "\n")
                n += 1
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ConfigError(f"--output {path!r}: cannot write: {exc.strerror}") from None
        raise
    done = f"{plural(n, 'session')}, {plural(m, 'message')}"
    SafeText(sys.stderr).write(f"exported {done} to {path}\n")
    return 0
