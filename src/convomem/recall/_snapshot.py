"""A user's partition as one blob, so a new process loads it in one read.

Building a partition from the item rows costs about 10 us a row (read the row, split and
stem its text, count, link): a second at 10^5 items, the first search of every process.
A snapshot holds the built state (``dump``: the rows' ids, times, kinds, lengths and
links, the key vectors, the postings, the sessions' last rows) as an uncompressed
``.npz``; ``load`` rebuilds the partition from it with array copies only, and the rows
added since are then read as usual.

``_sqlite_recall`` keeps one snapshot per user with the user's item counters at the time;
a removal of any of the user's items deletes it (a trigger): a snapshot never holds an
item that is gone, and one from before a removal is never used.
"""

from __future__ import annotations

import io
from array import array
from typing import Any, Final

from ._keyvecs import Slot
from ._partition import Partition

MIN_ROWS: Final = 10_000
"""A partition is saved once it holds this many rows (smaller ones load fast enough)."""
GROWTH: Final = 1.5
"""... and again when it has grown by this factor since its snapshot."""
_SEP: Final = "\x1f"


def _text(items: list[str]) -> Any:
    import numpy as np

    return np.frombuffer(_SEP.join(items).encode("utf-8", "surrogatepass"), dtype=np.uint8)


def _items(arr: Any) -> list[str]:
    raw = bytes(arr).decode("utf-8", "surrogatepass")
    return raw.split(_SEP) if raw else []


def dump(np: Any, part: Partition) -> bytes:
    """The partition's state (rows ``[0, n)``) as bytes; call under ``part.lock``."""
    n = part.n
    words = list(part.postings)
    rows = [part.postings[w][0] for w in words]
    counts = np.array([len(r) for r in rows], dtype=np.int64)
    arrays: dict[str, Any] = {
        "head": np.array([n, part.top, part.dim, part.added, part.removed], dtype=np.int64),
        "rids": part.rids[:n],
        "created": part.created[:n],
        "kinds": part.kinds[:n],
        "lengths": part.lengths[:n],
        "prev": part.prev[:n],
        "nxt": part.nxt[:n],
        "kind_names": _text(list(part.kind_codes)),
        "words": _text(words),
        "counts": counts,
        # stored as int32 (rows and counts fit): half the blob to read back
        "rows": np.frombuffer(b"".join(r.tobytes() for r in rows), dtype=np.int64).astype(np.int32),
        "tfs": np.frombuffer(
            b"".join(part.postings[w][1].tobytes() for w in words), dtype=np.int64
        ).astype(np.int32),
        "sessions": _text(list(part.last)),
        "last": np.array([r for r, _ in part.last.values()], dtype=np.int64),
        "seqs": np.array([-1 if s is None else s for _, s in part.last.values()], dtype=np.int64),
    }
    for j, slot in enumerate(part.vecs.slots):
        arrays[f"cols{j}"] = slot.cols[:, : slot.count]
        arrays[f"items{j}"] = slot.items[: slot.count]
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def load(np: Any, blob: bytes) -> Partition:
    """The partition ``dump`` saved."""
    with np.load(io.BytesIO(blob)) as data:
        n, top, dim, added, removed = (int(x) for x in data["head"])
        part = Partition(np, dim)
        part.grow(n)
        for name in ("rids", "created", "kinds", "lengths", "prev", "nxt"):
            getattr(part, name)[:n] = data[name]
        part.n, part.top, part.added, part.removed = n, top, added, removed
        part.kind_codes = {k: i for i, k in enumerate(_items(data["kind_names"]))}
        ends = np.cumsum(data["counts"])
        rows, tfs = data["rows"].astype(np.int64), data["tfs"].astype(np.int64)
        start = 0
        for word, end in zip(_items(data["words"]), ends.tolist(), strict=True):
            part.postings[word] = (
                array("q", rows[start:end].tobytes()),
                array("q", tfs[start:end].tobytes()),
            )
            start = end
        part.postings_count = len(rows)
        seqs = data["seqs"].tolist()
        sessions = _items(data["sessions"])
        part.last = {
            s: (r, None if q < 0 else q)
            for s, r, q in zip(sessions, data["last"].tolist(), seqs, strict=True)
        }
        slots = []
        j = 0
        while f"cols{j}" in data:
            slot = Slot(np, dim)
            slot.cols = np.array(data[f"cols{j}"], dtype=np.float32, order="C")
            slot.items = np.array(data[f"items{j}"], dtype=np.int64)
            slot.count = len(slot.items)
            slots.append(slot)
            j += 1
        part.vecs.slots = slots or part.vecs.slots
    return part
