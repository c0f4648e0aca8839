"""PostgreSQL recall's ``terms`` column: what its ``tsv`` is made from, and the upgrade
of a store from before it (``tsv`` made from the text itself)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ..stores.statements import Q
from .analyze import terms as analyzed

Op = Generator[Q, Any, Any]


def index_terms(text: str) -> str:
    """What ``tsv`` is made from: the text's terms (``analyze.terms``), space-joined."""
    return " ".join(analyzed(text))


def terms_column(items: str) -> Op:
    """A store from before ``terms`` (its ``tsv`` made from the text itself): each
    row's terms computed here (``analyze.terms``, in pages), then ``tsv`` remade from
    them, so both backends match the same words. ``items`` is the table's qualified
    name (its schema quoted), resolved by the server (``regclass``): an up-to-date
    table is left as it is."""
    yield Q.run(f"ALTER TABLE {items} ADD COLUMN IF NOT EXISTS terms TEXT NOT NULL DEFAULT ''")
    row = yield Q.one(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a JOIN pg_attrdef d "
        "ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = %s::regclass AND a.attname = 'tsv' AND NOT a.attisdropped",
        (items,),
    )
    if row is not None and "terms" in str(row[0]):
        return
    last = 0
    while True:
        rows = yield Q.all(
            f"SELECT rid, text FROM {items} WHERE rid > %s ORDER BY rid LIMIT 2000", (last,)
        )
        if not rows:
            break
        yield Q.run(
            f"UPDATE {items} i SET terms = u.t FROM unnest(%s::bigint[], %s::text[]) "
            "AS u(r, t) WHERE i.rid = u.r",
            ([int(r[0]) for r in rows], [index_terms(r[1]) for r in rows]),
        )
        last = int(rows[-1][0])
    yield Q.run(f"ALTER TABLE {items} DROP COLUMN IF EXISTS tsv")
    yield Q.run(
        f"ALTER TABLE {items} ADD COLUMN tsv TSVECTOR "
        "GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED"
    )
    yield Q.run(f"CREATE INDEX IF NOT EXISTS convomem_recall_tsv ON {items} USING gin (tsv)")
