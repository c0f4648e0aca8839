"""What a recall backend stores and hands back, shared by the SQLite and PostgreSQL ones,
and what a search hands back (``Hit``, ``Turn``).

A backend is synchronous (the async index runs it in a worker thread); every method takes
the ``Scope`` it acts for and every statement it sends names that scope's tenant and
user, so no method can reach another user's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ..errors import ConfigError
from ..stores.statements import Q


def model_of(embedder: object) -> str | None:
    """The name an embedder gives its vectors' model (``name``), if it gives one."""
    name = getattr(embedder, "name", None)
    return name if isinstance(name, str) and name else None


def same_embedder(
    given: int | None, dim: int | None, model: str | None, built_with: str | None
) -> None:
    """ConfigError unless vectors of ``given`` numbers from ``model`` belong with an index
    holding vectors of ``dim`` from ``built_with``: two models' vectors do not compare,
    even of one dimension (MiniLM and E5 both give 384). A name not known on either side
    (an embedder without ``name``, an index from before names were kept) is not checked."""
    if given is not None and dim is not None and dim != given:
        raise ConfigError(
            f"embedder: gives vectors of {given} numbers, but this recall index holds "
            f"vectors of {dim}; use the embedder it was built with"
        )
    if dim is not None and model is not None and built_with is not None and model != built_with:
        raise ConfigError(
            f"embedder: is {model!r}, but this recall index was built with {built_with!r}; "
            "use the embedder it was built with"
        )


def embedding_meta(b: Any, given: int | None, select: str, insert: str) -> Any:
    """A backend's dimension and model name (``b.dim``, ``b.built_with``), read from its
    meta table once, or recorded by the first vectors of ``given`` numbers from
    ``b.model``; then checked (``same_embedder``). ``select`` reads the ``dim`` and
    ``model`` keys, ``insert`` adds one key and value unless present (another process
    may record them first: what is read back is what counts). A generator of ``Q``
    statements; returns whether it recorded them."""
    recorded = False
    if b.dim is None:
        held = dict((yield Q.all(select)))
        if "dim" not in held and given is not None:
            yield Q.run(insert, ("dim", str(given)))
            if b.model is not None:
                yield Q.run(insert, ("model", b.model))
            held = dict((yield Q.all(select)))
            recorded = True
        if "dim" in held:
            b.dim, b.built_with = int(held["dim"]), held.get("model")
    same_embedder(given, b.dim, b.model, b.built_with)
    return recorded


class Scope(NamedTuple):
    """Whose items: a tenant (``''``: none) and a user."""

    tenant: str
    user_id: str


@dataclass(frozen=True, slots=True)
class Item:
    """One item to index: its text, its unit key vectors and where it is from.

    ``vec``: the float32 bytes of one or more unit vectors of one dimension, concatenated;
    the first is the whole text's, the others its other keys (``recall.keys``). A
    backend's ``vector`` search scores an item by its best key."""

    session_id: str
    message_id: str
    seq: int | None
    kind: str
    created_at: float
    text: str
    vec: bytes


class Row(NamedTuple):
    """One stored item, as a search returns it."""

    rid: int
    session_id: str
    message_id: str
    seq: int | None
    kind: str
    created_at: float
    text: str


@dataclass(frozen=True, slots=True)
class Turn:
    """An indexed item next to a hit in its session (``search(neighbours=...)``)."""

    message_id: str
    seq: int
    kind: str
    created_at: float
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the item, where it is from and why it ranked.

    ``score`` is the fused (reciprocal rank) score; ``lexical`` the item's BM25 score
    (None: no query word matched) and ``similarity`` its cosine to the query (None: not
    among the vector candidates). ``created_at`` is the message's time (epoch seconds:
    what "when did I..." questions need). ``context``: with ``search(neighbours=w)``,
    the session's indexed items within ``w`` seqs of this one, in seq order (empty when
    the hit has no seq).
    """

    message_id: str
    session_id: str
    score: float
    text: str
    kind: str
    seq: int | None
    created_at: float
    lexical: float | None
    similarity: float | None
    context: tuple[Turn, ...] = ()


class Backend(Protocol):
    """The storage a ``RecallIndex`` drives (see the module docstring)."""

    name: str

    def known(self, scope: Scope, session_id: str, ids: Sequence[str]) -> dict[str, str]:
        """``{message_id: text}`` of these ids already indexed in the session."""
        ...

    def insert(self, scope: Scope, items: Sequence[Item], dim: int) -> int:
        """Store new items, all or nothing; how many."""
        ...

    def lexical(
        self, scope: Scope, terms: Sequence[str], n: int, kinds: Any, as_of: float | None
    ) -> list[tuple[int, float]]:
        """The ``n`` best ``(rid, score)`` by lexical relevance (higher is better)."""
        ...

    def vector(
        self, scope: Scope, query: Any, n: int, kinds: Any, as_of: float | None
    ) -> list[tuple[int, float]]:
        """The ``n`` best ``(rid, cosine)`` for a unit float32 query vector (an item's
        cosine: its best key's)."""
        ...

    def rows(self, scope: Scope, rids: Sequence[int]) -> dict[int, Row]:
        """The stored items ``rids`` of the scope."""
        ...

    def near(self, scope: Scope, around: Sequence[tuple[str, int]], width: int) -> list[Row]:
        """The scope's items within ``width`` seqs of each ``(session_id, seq)``."""
        ...

    def delete(
        self, scope: Scope, session_id: str | None, message_ids: Sequence[str] | None
    ) -> int:
        """Delete a session's items (some of them with ``message_ids``), or all the
        user's with ``session_id=None``; how many."""
        ...

    def close(self) -> None: ...
