"""The Redis operations without I/O, shared by the sync and async databases.

An operation is a generator: it yields the commands it needs (``Eval`` a script,
``Command`` one command, ``Pipeline`` several at once) and receives each reply, so the
sync driver (``redis_store``) and the async one (``redis_async``) run the very same
logic and differ only in how they send a command. Every argument is checked before the
generator is made, so bad input raises before any I/O.

Keys: a session's keys are ``<prefix>:{<tenant>:<session>}:<part>`` (one hash tag, one
cluster slot); a tenant's index keys ``<prefix>:{<tenant>}:all`` (every session, scored
by creation order), ``...:u:<user>`` (the sessions a user owns) and ``...:users``; plus
``...:serial`` (the tenant's creation order) and ``...:swept``; plus ``<prefix>:tenants``
(which ``sweep`` walks). Names are
percent-encoded, so braces and colons in a name never break the tag.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeVar
from urllib.parse import quote, unquote

from ..errors import (
    ConcurrentUpdate,
    ConfigError,
    MessageConflict,
    SessionOwnerMismatch,
    StoreError,
    TransientError,
)
from ..model import Message
from . import _redis_lua as lua
from . import _redis_lua_index as index_lua
from . import _redis_lua_reads as reads
from ._sqlite_ops import Key
from .database import LogEntry, SessionInfo, TTLPolicy
from .records import EncodedMessage, decode_counts, decode_rows, encode_cursor
from .statements import Command, Eval, Request

T = TypeVar("T")


Gen: TypeAlias = Generator[Request, Any, T]


class Work:
    """What ``StoreStats`` reports: commands sent, writes done, rows read."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self._lock = threading.Lock()

    def add(self, statements: int = 0, transactions: int = 0, rows: int = 0) -> None:
        with self._lock:
            self.counts[0] += statements
            self.counts[1] += transactions
            self.counts[2] += rows


@dataclass(frozen=True, slots=True)
class Ctx:
    """What an operation runs with: the attempt's time, the TTL policy, the key prefix."""

    now: float
    ttl: TTLPolicy
    prefix: str
    work: Work = field(repr=False)
    registered: set[str] = field(default_factory=set, repr=False)
    """Tenants this process has recorded in ``<prefix>:tenants`` (the database's set)."""


Op: TypeAlias = Callable[[Ctx], Gen[T]]


def _q(name: str) -> str:
    return quote(name, safe="")


def tenant_part(tenant: str) -> str:
    """The tenant's part of a hash tag (``tenant`` ``''``: none)."""
    return "=" + _q(tenant) if tenant else "_"


def tenant_of(part: str) -> str:
    return unquote(part[1:]) if part.startswith("=") else ""


@functools.lru_cache(maxsize=4096)
def session_keys(prefix: str, tenant: str, session_id: str) -> tuple[str, ...]:
    """meta, log, data, counts, lock."""
    tag = f"{prefix}:{{{tenant_part(tenant)}:{_q(session_id)}}}"
    return tuple(f"{tag}:{part}" for part in ("m", "z", "d", "c", "lock"))


def index_keys(prefix: str, tenant: str, user_id: str | None) -> tuple[str, str, str]:
    """The tenant's index, the owner's index (the tenant's when no owner), its owners."""
    base = f"{prefix}:{{{tenant_part(tenant)}}}"
    return f"{base}:all", f"{base}:u:{_q(user_id)}" if user_id else f"{base}:all", f"{base}:users"


def tenant_counters(prefix: str, tenant: str) -> tuple[str, str]:
    """The tenant's creation counter and the counter's value at the last sweep."""
    base = f"{prefix}:{{{tenant_part(tenant)}}}"
    return f"{base}:serial", f"{base}:swept"


def _text(raw: Any) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)


def _head(ctx: Ctx, key: Key, order: str) -> str:
    """The common head of a session script's arguments, one value per line (no value
    holds a newline: names have no control characters)."""
    ea = ctx.ttl.expires_at(ctx.now)
    return "\n".join(
        (
            repr(float(ctx.now)),
            key.user_id or "",
            "" if ea is None else repr(float(ea)),
            "1" if ctx.ttl.on_write else "0",
            "1" if ctx.ttl.on_read else "0",
            order,
        )
    )


def session_eval(ctx: Ctx, key: Key, script: lua.Script, args: Sequence[Any]) -> Gen[Any]:
    """Run a session script; when it would create the session, register the session in
    its tenant's index first (so a listed entry may lack its session, never the other
    way round) and run it again with the creation order."""
    keys = session_keys(ctx.prefix, key.tenant, key.session_id)
    order = ""
    while True:
        reply: Any = yield Eval(script, keys[:1], (_head(ctx, key, order), *args))
        if isinstance(reply, int):  # an append's seq
            ctx.work.add(transactions=1)
            return reply
        status = reply[0]
        if status == b"create":
            index = index_keys(ctx.prefix, key.tenant, key.user_id)
            serial = tenant_counters(ctx.prefix, key.tenant)[0]
            owner = key.user_id or ""
            n = yield Eval(index_lua.REGISTER, (*index, serial), (key.session_id, owner))
            part = tenant_part(key.tenant)
            if part not in ctx.registered:
                yield Command(("SADD", f"{ctx.prefix}:tenants", part))
                ctx.registered.add(part)
            order = str(n)
            continue
        if status == b"locked":
            raise TransientError(
                f"session {key.session_id!r}: locked by another writer (its lock key "
                f"{keys[4]!r} is held for {reply[1]} ms more)"
            )
        if status == b"owner":
            raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
        if script.writes and status != b"check":
            ctx.work.add(transactions=1)
        return reply


# -- reads --------------------------------------------------------------------------


def _rows(reply: list[Any]) -> list[tuple[int, Any, Any, Any]]:
    return [(reply[i], reply[i + 1], reply[i + 2], reply[i + 3]) for i in range(1, len(reply), 4)]


def get_items(ctx: Ctx, key: Key, limit: int | None) -> Gen[list[Message]]:
    arg = "" if limit is None else str(limit)
    reply = yield from session_eval(ctx, key, reads.READ_ITEMS, (arg,))
    if reply[0] == b"none":
        return []
    rows = _rows(reply)
    ctx.work.add(rows=1 + len(rows))
    return [e.message for e in decode_rows(key.session_id, rows)]


def entries(
    ctx: Ctx, key: Key, position: int | None, limit: int, back: bool
) -> Gen[tuple[list[LogEntry], str | None]]:
    args = ("" if position is None else str(position), str(limit), "1" if back else "0")
    reply = yield from session_eval(ctx, key, reads.READ_ENTRIES, args)
    if reply[0] == b"none":
        return [], None
    rows = _rows(reply)
    ctx.work.add(rows=1 + len(rows))
    more = len(rows) > limit
    del rows[limit:]
    cursor = encode_cursor("b" if back else "f", rows[-1][0]) if more else None
    return decode_rows(key.session_id, rows, cursor=cursor), cursor


def info_of(session_id: str, tenant: str, f: Sequence[Any]) -> SessionInfo:
    """A ``SessionInfo`` from ``u, ca, ua, ea, md, ls, n, sv``."""
    try:
        metadata = json.loads(f[4])
    except ValueError as exc:
        raise StoreError(f"session {session_id!r}: its metadata is not JSON: {exc}") from None
    owner, ea = _text(f[0]), _text(f[3])
    return SessionInfo(
        session_id,
        owner or None,
        tenant or None,
        float(f[1]),
        float(f[2]),
        float(ea) if ea else None,
        metadata,
        int(f[6]),
        int(f[5]),
        int(f[7]),
    )


def read_meta(ctx: Ctx, key: Key, with_state: bool) -> Gen[list[Any] | None]:
    reply = yield from session_eval(ctx, key, reads.READ_META, ("1" if with_state else "0",))
    if reply[0] == b"none":
        return None
    ctx.work.add(rows=1)
    fields: list[Any] = reply[1:]
    return fields


def info(ctx: Ctx, key: Key) -> Gen[SessionInfo | None]:
    f = yield from read_meta(ctx, key, False)
    return None if f is None else info_of(key.session_id, key.tenant, f)


def last_seq(ctx: Ctx, key: Key) -> Gen[int]:
    f = yield from read_meta(ctx, key, False)
    return 0 if f is None else int(f[5])


def load_state(ctx: Ctx, key: Key) -> Gen[tuple[dict[str, Any] | None, int]]:
    f = yield from read_meta(ctx, key, True)
    if f is None:
        return None, 0
    version = int(f[7])
    if not f[8]:
        return None, version
    try:
        return json.loads(f[8]), version
    except ValueError as exc:
        raise StoreError(
            f"session {key.session_id!r}: the derived state (version {version}) "
            f"cannot be read: {exc}"
        ) from None


def get_counts(ctx: Ctx, key: Key, ids: list[str] | None) -> Gen[dict[str, dict[str, int]]]:
    args = ("all",) if ids is None else ("some", *ids)
    reply = yield from session_eval(ctx, key, reads.GET_COUNTS, args)
    if reply[0] == b"none":
        return {}
    ctx.work.add(rows=1 + (len(reply) - 1) // 2)
    return {_text(reply[i]): decode_counts(reply[i + 1]) for i in range(1, len(reply), 2)}


# -- writes -------------------------------------------------------------------------


def _same(stored: bytes, new: EncodedMessage) -> bool:
    try:
        # The same message may be written with its metadata's keys in another order.
        return bool(Message.from_dict(json.loads(stored.decode("utf-8"))) == new.message)
    except Exception:  # unreadable: not the same
        return False


_AFTER: Final = "is already stored, after {!r} of this batch which is not: " + (
    "a re-sent batch must be sent again whole, in its order"
)


def _frame(m: EncodedMessage) -> bytes:
    """One argument per message, as cheap to send as the data alone."""
    mid = m.id.encode("utf-8")
    return b"%d:%s%s" % (len(mid), mid, m.data.encode("utf-8"))


def append(
    ctx: Ctx,
    key: Key,
    batch: list[EncodedMessage],
    expected_seq: int | None,
    state: str | None,
    expected_version: int | None,
    counts: dict[str, str],
) -> Gen[int]:
    alts: dict[int, bytes] = {}
    framed = [_frame(m) for m in batch]
    fixed = (
        "" if expected_seq is None else str(expected_seq),
        "" if expected_version is None else str(expected_version),
        "0" if state is None else "1",
        str(len(batch)),
    )
    while True:
        extras: list[Any] = []
        if counts or alts:
            for i, m in enumerate(batch):
                if m.id in counts or i in alts:
                    extras += (i, counts.get(m.id, ""), alts.get(i, ""))
        head = "\n".join((*fixed, str(len(extras) // 3)))
        args = (head, state or "", *framed, *extras)
        reply = yield from session_eval(ctx, key, lua.APPEND, args)
        if isinstance(reply, int):
            return reply
        status = reply[0]
        if status == b"cas":
            field_name = _text(reply[1])
            raise ConcurrentUpdate(key.session_id, field_name, int(reply[2]), int(reply[3]))
        if status == b"conflict":
            mid, seq, kind = _text(reply[1]), int(reply[2]), reply[3]
            problem = (
                "is stored with other content"
                if kind == b"other"
                else _AFTER.format(_text(reply[4]))
            )
            raise MessageConflict(key.session_id, mid, seq, problem)
        if status != b"check":
            raise StoreError(f"session {key.session_id!r}: unexpected reply {status!r}")
        for i in range(1, len(reply), 3):
            at, seq, have = int(reply[i]), int(reply[i + 1]), reply[i + 2]
            if not _same(have, batch[at]):
                raise MessageConflict(
                    key.session_id, batch[at].id, seq, "is stored with other content"
                )
            alts[at] = have


def pop_item(ctx: Ctx, key: Key, memo: dict[str, Any]) -> Gen[Message | None]:
    """Peek at the newest message, decode it (a corrupt one is reported, not removed),
    then remove it if it is still the newest. ``memo`` outlives a retried attempt: with
    the call's token it tells a retry that its pop was applied, and what it popped."""
    token: str = memo["token"]
    confirm: tuple[Any, ...] = memo.get("confirm", ("", ""))
    while True:
        reply = yield from session_eval(ctx, key, lua.POP, (*confirm, token))
        if reply[0] == b"none":
            return None
        if reply[0] == b"ok":
            popped: Message = memo["message"]
            return popped
        seq, mid, data = int(reply[1]), reply[2], reply[3]
        ctx.work.add(rows=1)
        memo["message"] = decode_rows(key.session_id, [(seq, mid, data, None)])[0].message
        memo["confirm"] = confirm = (mid, str(seq))


def simple(script: lua.Script, key: Key, *args: Any) -> Op[None]:
    """A write whose reply is only ``ok``."""

    def run(ctx: Ctx) -> Gen[None]:
        yield from session_eval(ctx, key, script, args)

    return run


def save_state(
    ctx: Ctx, key: Key, state: str | None, expected_version: int, token: str
) -> Gen[int]:
    args = ("0" if state is None else "1", state or "", str(expected_version), token)
    reply = yield from session_eval(ctx, key, lua.SAVE_STATE, args)
    if reply[0] == b"cas":
        raise ConcurrentUpdate(key.session_id, "state_version", int(reply[2]), int(reply[3]))
    return int(reply[1])


def set_counts(ctx: Ctx, key: Key, counts: dict[str, str]) -> Gen[None]:
    args = [x for mid, text in counts.items() for x in (mid, text)]
    reply = yield from session_eval(ctx, key, lua.SET_COUNTS, args)
    if reply[0] == b"missing":
        mid = _text(reply[1])
        raise ConfigError(f"counts[{mid!r}]: session {key.session_id!r} has no such message")
