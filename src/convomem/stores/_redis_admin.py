"""The Redis operations over many sessions (listing, deleting, erasing a user, sweeping),
without I/O; see ``_redis_ops`` for how operations run.

A tenant's index keys live in their own slot, so on a cluster they cannot change in the
same script as a session. The index is therefore written *before* a session is created
and cleaned *after* one is deleted: an index entry may outlive its session (a crash
between the two steps, a session Redis expired natively), never the other way round.
Listings skip such entries; ``sweep`` removes them (only those already there at the
previous sweep, so a creation in flight is never unlisted) and deletes the sessions
that expired by the caller's clock but are still stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..errors import SessionOwnerMismatch, StoreError
from . import _redis_lua_index as index_lua
from ._redis_ops import (
    Ctx,
    Gen,
    index_keys,
    info_of,
    session_keys,
    tenant_counters,
    tenant_of,
)
from ._sqlite_ops import Key
from .database import SessionInfo
from .records import encode_cursor
from .statements import Command, Eval, Pipeline

LAYOUT: Final = 1
"""The key layout this version writes (recorded per prefix in ``<prefix>:layout``)."""
_META: Final = ("u", "ca", "ua", "ea", "md", "ls", "n", "sv", "o")
_CHUNK: Final = 500


def _text(raw: Any) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)


def _pairs(raw: Any) -> list[tuple[str, int]]:
    """``(member, score)`` of a ``WITHSCORES`` reply, flat or paired by the client."""
    if raw and isinstance(raw[0], list | tuple):
        return [(_text(m), int(float(s))) for m, s in raw]
    return [(_text(raw[i]), int(float(raw[i + 1]))) for i in range(0, len(raw), 2)]


def _alive(ctx: Ctx, fields: Sequence[Any]) -> bool:
    ea = fields[3]
    return fields[5] is not None and (not ea or float(ea) > ctx.now)


def _metas(ctx: Ctx, tenant: str, sids: list[str]) -> Gen[list[list[Any]]]:
    if not sids:
        return []
    commands = tuple(("HMGET", session_keys(ctx.prefix, tenant, sid)[0], *_META) for sid in sids)
    replies: list[list[Any]] = yield Pipeline(commands)
    ctx.work.add(rows=sum(r[5] is not None for r in replies))
    return replies


def list_sessions(
    ctx: Ctx, tenant: str, user_id: str | None, before: int | None, limit: int
) -> Gen[tuple[list[SessionInfo], str | None]]:
    """Newest created first: entries of the index whose session is there, alive and
    (for a user's listing) still owned by the user."""
    index = index_keys(ctx.prefix, tenant, user_id)[1]
    found: list[tuple[int, SessionInfo]] = []
    bound = before
    skipped = 0
    while len(found) <= limit:
        # Skipped entries (sessions gone, not swept yet) widen the next read, so a page
        # behind many of them takes a few round trips, not one per entry.
        want = min(limit + 1 - len(found) + skipped, 10 * (limit + 1))
        hi = "+inf" if bound is None else f"({bound}"
        raw = yield Command(("ZREVRANGEBYSCORE", index, hi, "-inf", "WITHSCORES", "LIMIT", 0, want))
        pairs = _pairs(raw)
        metas = yield from _metas(ctx, tenant, [sid for sid, _ in pairs])
        for (sid, order), fields in zip(pairs, metas, strict=True):
            if not _alive(ctx, fields) or (user_id is not None and _text(fields[0]) != user_id):
                skipped += 1
                continue
            found.append((order, info_of(sid, tenant, fields)))
        if len(pairs) < want:
            break
        bound = pairs[-1][1]
    more = len(found) > limit
    del found[limit:]
    cursor = encode_cursor("s", found[-1][0]) if more else None
    return [i for _, i in found], cursor


def tenant_counts(ctx: Ctx, user_id: str | None) -> Gen[dict[str | None, int]]:
    """Live sessions per tenant (None: no tenant), of ``user_id`` when given: the
    entries of each tenant's index (the owner's, with ``user_id``) whose session is there
    and alive, read a chunk at a time."""
    out: dict[str | None, int] = {}
    parts = yield Command(("SMEMBERS", f"{ctx.prefix}:tenants"))
    for part in sorted(_text(p) for p in parts):
        tenant = tenant_of(part)
        index = index_keys(ctx.prefix, tenant, user_id)[1]
        n = start = 0
        while True:
            raw = yield Command(("ZRANGE", index, start, start + _CHUNK - 1, "WITHSCORES"))
            pairs = _pairs(raw)
            metas = yield from _metas(ctx, tenant, [sid for sid, _ in pairs])
            n += sum(_alive(ctx, f) and (user_id is None or _text(f[0]) == user_id) for f in metas)
            if len(pairs) < _CHUNK:
                break
            start += _CHUNK
        if n:
            out[tenant or None] = n
    return out


def _unindex(ctx: Ctx, tenant: str, session_id: str, owner: str, order: str) -> Gen[None]:
    everyone, mine, _ = index_keys(ctx.prefix, tenant, owner or None)
    keys = (everyone, mine) if owner else (everyone,)
    yield Eval(index_lua.UNINDEX, keys, (session_id, order))


def _delete(ctx: Ctx, key: Key, mode: str) -> Gen[list[Any]]:
    keys = session_keys(ctx.prefix, key.tenant, key.session_id)[:4]
    reply: list[Any] = yield Eval(index_lua.DELETE, keys, (repr(ctx.now), key.user_id or "", mode))
    if reply[0] == b"deleted":
        ctx.work.add(transactions=1)
        yield from _unindex(ctx, key.tenant, key.session_id, _text(reply[2]), _text(reply[3]))
    return reply


def delete_session(ctx: Ctx, key: Key) -> Gen[bool]:
    reply = yield from _delete(ctx, key, "check")
    if reply[0] == b"owner":
        raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
    return bool(reply[0] == b"deleted" and reply[1] == 1)


def erase_user(ctx: Ctx, tenant: str, user_id: str) -> Gen[int]:
    """Every session ``user_id`` owns in ``tenant``, then the user's index."""
    _, mine, users = index_keys(ctx.prefix, tenant, user_id)
    sids = yield Command(("ZRANGE", mine, 0, -1))
    erased = 0
    for sid in sids:
        reply = yield from _delete(ctx, Key(tenant, _text(sid), user_id), "erase")
        erased += reply[0] == b"deleted"
    yield Command(("DEL", mine))
    yield Command(("SREM", users, user_id))
    return erased


def sweep(ctx: Ctx) -> Gen[int]:
    """Delete the sessions expired by ``ctx.now`` and drop the index entries of sessions
    that are gone; how many of both (each session once)."""
    swept = 0
    parts = yield Command(("SMEMBERS", f"{ctx.prefix}:tenants"))
    for part in sorted(_text(p) for p in parts):
        tenant = tenant_of(part)
        serial, mark = tenant_counters(ctx.prefix, tenant)
        previous, current = yield Pipeline((("GET", mark), ("GET", serial)))
        settled = int(previous or 0)  # entries registered before the last sweep
        everyone, _, users = index_keys(ctx.prefix, tenant, None)
        owners = yield Command(("SMEMBERS", users))
        indexes = [everyone] + [index_keys(ctx.prefix, tenant, _text(u))[1] for u in owners]
        for index in indexes:
            start = 0
            while True:
                raw = yield Command(("ZRANGE", index, start, start + _CHUNK - 1, "WITHSCORES"))
                pairs = _pairs(raw)
                metas = yield from _metas(ctx, tenant, [sid for sid, _ in pairs])
                removed = 0
                for (sid, order), fields in zip(pairs, metas, strict=True):
                    if fields[5] is None:  # gone (expired natively, or never created)
                        if order <= settled:
                            yield Eval(index_lua.UNINDEX, (index,), (sid, str(order)))
                            removed += 1
                            swept += index == everyone
                    elif not _alive(ctx, fields):
                        reply = yield from _delete(ctx, Key(tenant, sid, None), "expired")
                        if reply[0] == b"deleted":
                            removed += 1
                            swept += 1
                if len(pairs) < _CHUNK:
                    break
                start += _CHUNK - removed
        yield Command(("SET", mark, int(current or 0)))
    return swept


def check_layout(ctx: Ctx) -> Gen[None]:
    """On open: record the layout of a new prefix, refuse one written by a newer
    version (its keys would be misread); also the first round trip to the server."""
    found = yield Eval(index_lua.LAYOUT, (f"{ctx.prefix}:layout",), (LAYOUT,))
    if found is None or int(found) > LAYOUT:
        raise StoreError(
            f"prefix {ctx.prefix!r}: its keys have layout {found!r}, this version reads "
            f"layout {LAYOUT}: upgrade convomem (or use another prefix)"
        )
