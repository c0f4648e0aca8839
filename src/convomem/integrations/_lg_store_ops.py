"""The logic of ``ConvomemStore`` (LangGraph's ``BaseStore``), as sans-I/O generators.

Each LangGraph item is one convomem session of the store database: its id is a digest of
the namespace and key, its owner the user the namespace names, its metadata the item
(``META``: namespace, key, value, times, TTL, and the revision its recall entries carry).
A write is one ``set_metadata`` (atomic); a read one ``info``; deleting the item deletes
the session, and the recall index's entries go with it (its trigger). The generators yield
the requests below; ``langgraph_store`` performs them over a sync or an async database.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ..errors import ConfigError
from ..model import Message
from ..stores.database import SessionInfo

META: Final = "langgraph_store"
"""The session metadata key holding a LangGraph item."""
KIND: Final = "langgraph"
"""The recall kind of an item's indexed texts."""
PAGE: Final = 500


@dataclass(frozen=True, slots=True)
class Read:
    sid: str
    user: str | None


@dataclass(frozen=True, slots=True)
class Write:
    sid: str
    user: str | None
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Drop:
    sid: str
    user: str | None


@dataclass(frozen=True, slots=True)
class List:
    user: str | None
    cursor: str | None


@dataclass(frozen=True, slots=True)
class Index:
    """Replace the item's recall entries by ``messages`` (none: just remove them)."""

    sid: str
    user: str
    messages: Sequence[Message]


@dataclass(frozen=True, slots=True)
class Search:
    query: str
    user: str
    k: int


Request = Read | Write | Drop | List | Index | Search
Steps = Generator[Request, Any, Any]


def session_id(namespace: Sequence[str], key: str) -> str:
    text = json.dumps([list(namespace), key], ensure_ascii=False)
    return "lgstore_" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Layout:
    """What the store was configured with: the user's place in a namespace, the fields
    indexed for recall, whether recall is on, and the clock."""

    user_at: int | None
    fields: Sequence[str]
    recall: bool
    clock: Any

    def user(self, namespace: Sequence[str], what: str = "namespace") -> str | None:
        if self.user_at is None:
            return None
        if len(namespace) <= self.user_at:
            raise ConfigError(
                f"{what}={tuple(namespace)!r}: needs the user id at position {self.user_at} "
                "(user_at=)"
            )
        return namespace[self.user_at]


def item_of(info: SessionInfo | None, now: float) -> dict[str, Any] | None:
    """The item a session holds, or None (not an item, or expired)."""
    meta = None if info is None else info.metadata.get(META)
    if not isinstance(meta, Mapping):
        return None
    expires = meta.get("expires_at")
    if isinstance(expires, int | float) and expires <= now:
        return None
    return dict(meta)


def as_item(meta: Mapping[str, Any], score: float | None = None, search: bool = False) -> Any:
    from langgraph.store.base import Item, SearchItem

    fields = {
        "namespace": tuple(meta["namespace"]),
        "key": meta["key"],
        "value": meta["value"],
        "created_at": datetime.fromtimestamp(meta["created_at"], UTC),
        "updated_at": datetime.fromtimestamp(meta["updated_at"], UTC),
    }
    return SearchItem(**fields, score=score) if search else Item(**fields)


def texts(value: Mapping[str, Any], paths: Sequence[str]) -> list[str]:
    from langgraph.store.base import get_text_at_path, tokenize_path

    out: list[str] = []
    for path in paths:
        out += get_text_at_path(value, path if path == "$" else tokenize_path(path))
    return [t for t in out if t.strip()]


def put(layout: Layout, op: Any) -> Steps:
    """A ``PutOp``: write (or delete) the item, then its recall entries."""
    ns, key = tuple(op.namespace), op.key
    user = layout.user(ns)
    sid = session_id(ns, key)
    if op.value is None:
        yield Drop(sid, user)  # the recall entries go with the session
        return None
    try:
        value = json.loads(json.dumps(op.value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"value of {ns!r}/{key!r}: must be a JSON object ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"value of {ns!r}/{key!r}: must be a JSON object, not {value!r}")
    now = layout.clock()
    old = item_of((yield Read(sid, user)), now)
    ttl = op.ttl
    meta = {
        "namespace": list(ns),
        "key": key,
        "value": value,
        "created_at": now if old is None else old["created_at"],
        "updated_at": now,
        "ttl": ttl,
        "expires_at": None if ttl is None else now + 60.0 * ttl,
        "rev": uuid.uuid4().hex[:12],
    }
    yield Write(sid, user, {META: meta})
    if layout.recall and user is not None:
        paths = layout.fields if op.index is None else (op.index or [])
        found = texts(value, paths)
        messages = [
            Message(f"{meta['rev']}:{j}", "user", content=t, created_at=now)
            for j, t in enumerate(found)
        ]
        yield Index(sid, user, messages)
    return None


def _refresh(layout: Layout, metas: Sequence[dict[str, Any]], on: bool) -> Steps:
    """Push back the expiry of the items read (``refresh_ttl``)."""
    now = layout.clock()
    for meta in metas if on else ():
        if meta.get("ttl") is not None:
            meta["expires_at"] = now + 60.0 * meta["ttl"]
            ns = meta["namespace"]
            yield Write(session_id(ns, meta["key"]), layout.user(ns), {META: meta})


def get(layout: Layout, op: Any) -> Steps:
    ns = tuple(op.namespace)
    user = layout.user(ns)
    meta = item_of((yield Read(session_id(ns, op.key), user)), layout.clock())
    if meta is None:
        return None
    yield from _refresh(layout, [meta], op.refresh_ttl)
    return as_item(meta)


def listing(layout: Layout, user: str | None) -> Steps:
    """Every live item of ``user`` (of the tenant when None): one paged pass."""
    cursor: str | None = None
    out: list[dict[str, Any]] = []
    now = layout.clock()
    while True:
        infos, cursor = yield List(user, cursor)
        out += [m for m in (item_of(i, now) for i in infos) if m is not None]
        if cursor is None:
            return out


def _prefixed(meta: Mapping[str, Any], prefix: Sequence[str]) -> bool:
    return tuple(meta["namespace"][: len(prefix)]) == tuple(prefix)


def search(layout: Layout, op: Any, matches: Any) -> Steps:
    """A ``SearchOp``: recall ranks when there is a query and an index, else the newest
    updated first. ``matches(value, filter)`` is LangGraph's filter semantics."""
    prefix = tuple(op.namespace_prefix)
    want = max(op.offset, 0) + op.limit
    if op.limit <= 0:
        return []
    ranked = bool(op.query) and layout.recall
    user = None
    if layout.user_at is not None and (len(prefix) > layout.user_at or ranked):
        user = layout.user(prefix, "namespace_prefix")  # recall is per user: it must be named
    if not ranked:
        items = yield from listing(layout, user)
        items = [m for m in items if _prefixed(m, prefix) and matches(m["value"], op.filter)]
        items.sort(key=lambda m: (-m["updated_at"], m["key"]))
        page = items[max(op.offset, 0) : want]
        yield from _refresh(layout, page, op.refresh_ttl)
        return [as_item(m, search=True) for m in page]
    assert user is not None
    k = 2 * want + 8
    while True:
        hits = yield Search(op.query, user, k)
        found: list[tuple[dict[str, Any], float]] = []
        seen: set[str] = set()
        now = layout.clock()
        for hit in hits:  # best first: an item scores its best text
            if hit.session_id in seen:
                continue
            seen.add(hit.session_id)
            meta = item_of((yield Read(hit.session_id, user)), now)
            if meta is None or not hit.message_id.startswith(meta["rev"] + ":"):
                continue  # expired, deleted, or an entry of an older value
            if _prefixed(meta, prefix) and matches(meta["value"], op.filter):
                found.append((meta, hit.score))
        if len(found) >= want or len(hits) < k:
            page = found[max(op.offset, 0) : want]
            yield from _refresh(layout, [m for m, _ in page], op.refresh_ttl)
            return [as_item(m, score, search=True) for m, score in page]
        k *= 4


def _matches(ns: Sequence[str], cond: Any) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    pairs = zip(ns[: len(path)], path, strict=True)
    if cond.match_type == "suffix":
        pairs = zip(ns[len(ns) - len(path) :], path, strict=True)
    return all(p in ("*", n) for n, p in pairs)


def namespaces(layout: Layout, op: Any) -> Steps:
    """A ``ListNamespacesOp``: the namespaces holding live items, sorted."""
    user = None
    for cond in op.match_conditions or ():
        at = layout.user_at
        if cond.match_type == "prefix" and at is not None and len(cond.path) > at:
            user = None if cond.path[at] == "*" else cond.path[at]
    items = yield from listing(layout, user)
    found = {tuple(m["namespace"]) for m in items}
    found = {ns for ns in found if all(_matches(ns, c) for c in op.match_conditions or ())}
    if op.max_depth is not None:
        found = {ns[: op.max_depth] for ns in found}
    return sorted(found)[op.offset : op.offset + op.limit]


def sweep(layout: Layout) -> Steps:
    """Delete the expired items of the tenant; how many."""
    cursor: str | None = None
    expired: list[tuple[str, str | None]] = []
    now = layout.clock()
    while True:
        infos, cursor = yield List(None, cursor)
        for info in infos:
            meta = info.metadata.get(META)
            if isinstance(meta, Mapping) and item_of(info, now) is None:
                expired.append((info.session_id, info.user_id))
        if cursor is None:
            break
    n = 0
    for sid, user in expired:
        n += bool((yield Drop(sid, user)))
    return n
