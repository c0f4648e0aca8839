"""The logic of ``RecallIndex``, sans I/O: validation, planning and fusion.

``add_gen`` and ``search_gen`` are generators that yield two kinds of request, ``Embed``
(vectors for some messages, through the index's ``EmbeddingCache``) and ``Db`` (a
backend operation, itself a generator of statements, run in a read or a write call of
the store database: ``run_statements``). The sync index performs them with
``_io.drive``, the async one with ``_io.adrive``: only the I/O differs.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _check
from ..errors import ConfigError, InvalidMessage, MessageConflict
from ..model import Message
from ..stores.records import check_name
from ._backend import Hit, Item, Scope, Turn
from ._rerank import boosts, factors
from .analyze import query_terms as analyzed_terms
from .fusion import MAX_TERMS, fuse, fuse_linear
from .keys import exchanges, message_keys


@dataclass(frozen=True, slots=True)
class Embed:
    """Request: the vectors of ``messages`` (one each, zero for a blank text);
    ``query``: they are search queries (an embedder's ``embed_query``, when it has one)."""

    messages: list[Message]
    query: bool = False


@dataclass(frozen=True, slots=True)
class Db:
    """Request: run ``op()`` (a generator of statements) in a read or write call
    (``db.run_statements(op, write=write)``)."""

    op: Callable[[], Generator[Any, Any, Any]]
    write: bool


Gen = Generator[Embed | Db, Any, Any]


def scope_of(user_id: object, tenant: object) -> Scope:
    uid = check_name("user_id", user_id)
    ten = check_name("tenant", tenant, optional=True)
    assert uid is not None
    return Scope(ten or "", uid)


def check_kinds(kinds: object) -> tuple[str, ...] | None:
    if kinds is None:
        return None
    if isinstance(kinds, str):
        return (check_name("kinds", kinds) or "",)
    if not isinstance(kinds, Sequence | set | frozenset) or not kinds:
        raise ConfigError(f"kinds={kinds!r}: must be None, a kind or a non-empty list of kinds")
    return tuple(check_name("kinds", k) or "" for k in kinds)


def check_as_of(as_of: object) -> float | None:
    if as_of is None:
        return None
    return _check.number("as_of", as_of)


def unit32(np: Any, vec: Any) -> Any:
    """``vec`` as a unit float32 vector (the zero vector stays zero)."""
    arr = np.asarray(vec, dtype=np.float64)
    norm = float(np.sqrt(arr @ arr))
    return (arr / norm if norm > 0.0 else arr).astype(np.float32)


@dataclass(frozen=True, slots=True)
class Planned:
    """A validated ``add``: the messages to consider, in order, and their facts."""

    scope: Scope
    session_id: str
    messages: list[Message]
    seqs: list[int | None]
    kind: str | None


def plan_add(
    messages: object,
    user_id: object,
    session_id: object,
    tenant: object,
    seqs: object,
    kind: object,
) -> Planned:
    """Check an ``add`` call's arguments (raises before anything is written)."""
    scope = scope_of(user_id, tenant)
    sid = check_name("session_id", session_id)
    assert sid is not None
    if isinstance(messages, Message) or not isinstance(messages, Sequence):
        raise ConfigError(f"messages={messages!r}: must be a list of Message")
    msgs = list(messages)
    for i, m in enumerate(msgs):
        if not isinstance(m, Message):
            raise InvalidMessage(f"messages[{i}]", m, "must be a Message")
    if seqs is None:
        seq_list: list[int | None] = [None] * len(msgs)
    else:
        if not isinstance(seqs, Sequence) or len(seqs) != len(msgs):
            raise ConfigError(f"seqs={seqs!r}: must be one seq per message ({len(msgs)})")
        seq_list = [_check.integer("seqs", s, minimum=0) for s in seqs]
    k = None if kind is None else check_name("kind", kind)
    return Planned(scope, sid, msgs, seq_list, k)


def add_gen(
    backend: Any, np: Any, plan: Planned, now: float, keys: tuple[str, ...] = ("message",)
) -> Gen:
    """Index the planned messages not indexed yet; how many were added. A message whose
    id is indexed with another text raises ``MessageConflict``; blank ones are skipped.
    Each is embedded under its ``keys`` (``recall.keys``): its item's ``vec`` holds
    their unit vectors, the whole text's first. A tool call without text is indexed as
    its calls (``Message.calls_text``: the name and arguments)."""
    fresh: dict[str, tuple[Message, int | None, str, str | None]] = {}
    texts = [m.text() or m.calls_text() for m in plan.messages]
    replies_to = exchanges([(m.role, t) for m, t in zip(plan.messages, texts, strict=True)])
    for m, seq, text, prior in zip(plan.messages, plan.seqs, texts, replies_to, strict=True):
        if not text.strip():
            continue
        seen = fresh.get(m.id)
        if seen is not None and seen[2] != text:
            raise MessageConflict(plan.session_id, m.id, seq or 0, "given twice, other text")
        fresh[m.id] = (m, seq, text, prior)
    if not fresh:
        return 0
    scope, sid = plan.scope, plan.session_id
    ids = list(fresh)
    known = yield Db(lambda: backend.known(scope, sid, ids), False)
    for mid, text in known.items():
        m, seq, new_text, _ = fresh.pop(mid)
        if text != new_text:
            raise MessageConflict(sid, mid, seq or 0, "already indexed with another text")
    if not fresh:
        return 0
    todo = list(fresh.values())
    more_keys = [
        message_keys(text, prior, keys, m.role, m.created_at)[1:] for m, _, text, prior in todo
    ]
    extra = [Message(role="user", content=key) for ks in more_keys for key in ks]
    firsts = [m if m.text() else Message(role="user", content=text) for m, _, text, _ in todo]
    vectors = yield Embed(firsts + extra)
    rest = iter(vectors[len(todo) :])
    items = []
    dim = 0
    for (m, seq, text, _), vec, ks in zip(todo, vectors[: len(todo)], more_keys, strict=True):
        unit = unit32(np, vec)
        dim = unit.shape[0]
        more = [unit32(np, next(rest)) for _ in ks]
        blob = unit.tobytes() + b"".join(u.tobytes() for u in more if u.shape == unit.shape)
        created = m.created_at if m.created_at is not None else now
        kind = plan.kind or m.role
        items.append(Item(sid, m.id, seq, kind, created, text, blob))
    n = yield Db(lambda: backend.insert(scope, items, dim), True)
    return int(n)


def search_gen(
    backend: Any,
    np: Any,
    query: object,
    scope: Scope,
    k: int,
    kinds: tuple[str, ...] | None,
    as_of: float | None,
    candidates: int,
    rrf_k: int,
    neighbours: int = 0,
    vector_weight: float = 1.0,
    rerank: bool = False,
    fusion: str = "rrf",
    unique: bool = True,
    now: float | None = None,
) -> Gen:
    """The ``k`` best items of the scope for ``query`` (see ``RecallIndex.search``):
    the lexical and vector candidates fused (``fusion``: ``fuse_linear`` or ``fuse``);
    of the best ``candidates`` (with ``unique``, of items with the same text the best
    only), raised by what the query names (``_rerank.boosts``) and, with ``rerank``,
    reordered for "now" and "when" questions (``_rerank.factors``); the first ``k``.
    Items of sessions expired at ``now`` (``stores.expiry``) are never found: each list's
    candidates are widened by their number and they are left out before fusion, so the
    best of the others are found."""
    if not isinstance(query, str):
        raise ConfigError(f"query={query!r}: must be a string")
    terms = analyzed_terms(query, MAX_TERMS)
    n = max(candidates, k)
    qvec = None
    if query.strip():
        vectors = yield Embed([Message(role="user", content=query)], query=True)
        qvec = unit32(np, vectors[0])
        if not np.any(qvec):
            qvec = None

    def op() -> Generator[Any, Any, Any]:
        gone = set() if now is None else (yield from backend.expired(scope, now))
        hidden = (yield from backend.rids_in(scope, sorted(gone))) if gone else set()
        m = n + len(hidden)
        lexical = yield from backend.lexical(scope, terms, m, kinds, as_of)
        vector = [] if qvec is None else (yield from backend.vector(scope, qvec, m, kinds, as_of))
        if hidden:
            lexical = [c for c in lexical if c[0] not in hidden][:n]
            vector = [c for c in vector if c[0] not in hidden][:n]
        if fusion == "linear":
            fused = fuse_linear(lexical, vector, vector_weight=vector_weight)
        else:
            fused = fuse(lexical, vector, rrf_k=rrf_k, vector_weight=vector_weight)
        top = sorted(fused, key=lambda rid: (-fused[rid][0], -rid))[:n]
        rows = yield from backend.rows(scope, top)
        found = [(rows[rid], fused[rid]) for rid in top if rid in rows]
        found = reorder(query, distinct(found) if unique else found, rerank)[:k]
        near: list[Any] = []
        around = sorted({(r.session_id, r.seq) for r, _ in found if r.seq is not None})
        if neighbours and around:
            near = yield from backend.near(scope, around, neighbours)
        return found, near

    found, near = yield Db(op, False)
    if backend.snapshot_due(scope):  # this search built a large partition: keep it
        yield Db(lambda: backend.save_snapshot(scope), True)
    return [
        Hit(
            r.message_id,
            r.session_id,
            score,
            r.text,
            r.kind,
            r.seq,
            r.created_at,
            lex,
            None if cos is None else _clip(cos),
            context_of(r, near, neighbours),
        )
        for r, (score, lex, cos) in found
    ]


Scored = tuple[Any, tuple[float, float | None, float | None]]


def reorder(query: str, found: list[Scored], rerank: bool) -> list[Scored]:
    """The candidates (best first) with what the query names added to their scores
    (``boosts``) and, with ``rerank``, "now" and "when" factors applied; re-sorted,
    equal scores keeping their order."""
    times = [r.created_at for r, _ in found]
    texts = [r.text for r, _ in found]
    add = boosts(query, times, texts)
    by = rerank and factors(query, times, texts)
    if not add and not by:
        return found
    out = []
    for i, (r, (s, x, c)) in enumerate(found):
        out.append((r, ((s + (add[i] if add else 0.0)) * (by[i] if by else 1.0), x, c)))
    out.sort(key=lambda rf: -rf[1][0])  # stable
    return out


def distinct(found: list[Scored]) -> list[Scored]:
    """The candidates without repeated texts (the first of each text stays)."""
    seen: set[str] = set()
    out = []
    for r, s in found:
        if r.text not in seen:
            seen.add(r.text)
            out.append((r, s))
    return out


def context_of(hit: Any, near: Sequence[Any], width: int) -> tuple[Turn, ...]:
    """The rows of ``near`` within ``width`` seqs of ``hit`` in its session, in order."""
    if hit.seq is None or not near:
        return ()
    rows = sorted(
        (r.seq, r.rid, r)
        for r in near
        if r.session_id == hit.session_id
        and r.seq is not None
        and r.rid != hit.rid
        and abs(r.seq - hit.seq) <= width
    )
    return tuple(Turn(r.message_id, r.seq, r.kind, r.created_at, r.text) for _, _, r in rows)


def _clip(x: float) -> float:
    return min(1.0, max(-1.0, float(x)))


def finite_number(name: str, value: object) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ConfigError(f"{name}={value!r}: must be a number")
    out = float(value)
    if not math.isfinite(out):
        raise ConfigError(f"{name}={value!r}: must be finite")
    return out
