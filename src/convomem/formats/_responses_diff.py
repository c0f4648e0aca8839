"""What an input item has beyond its canonical rendering: a small JSON patch.

``convomem.formats.openai_responses`` turns an item into a message, renders that message
back into a *canonical* item, and keeps only the difference between the two (ids,
``status``, ``annotations``, keys it does not know) in the message's metadata. Applying
the patch to the canonical rendering gives the item back exactly, so the round trip is
exact by construction, for keys no schema lists as well as for the known ones.

A patch is an object with some of: ``"value"`` (the whole value, replacing the base),
``"set"`` (keys the item has and the base has not), ``"del"`` (keys of the base the item
has not), ``"sub"`` (a patch per shared key whose values differ), ``"items"`` (a patch per
position of two arrays of the same length, keyed by the position as a string).
Comparison is strict JSON equality: ``1``, ``1.0`` and ``True`` differ; key order does not
matter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def same(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same JSON value (types compared, not coerced)."""
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        return all(k in b and same(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):  # bool vs int vs float; str subclasses are plain by now
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)  # 0.0 and -0.0 are written differently
    return bool(a == b)


def diff(item: Any, base: Any) -> dict[str, Any] | None:
    """The patch turning ``base`` into ``item``; None when they are the same."""
    if same(item, base):
        return None
    if isinstance(item, Mapping) and isinstance(base, Mapping):
        patch: dict[str, Any] = {}
        added = {k: v for k, v in item.items() if k not in base}
        removed = [k for k in base if k not in item]
        changed = {
            k: p for k, v in item.items() if k in base and (p := diff(v, base[k])) is not None
        }
        if added:
            patch["set"] = added
        if removed:
            patch["del"] = removed
        if changed:
            patch["sub"] = changed
        return patch
    if isinstance(item, list | tuple) and isinstance(base, list | tuple) and len(item) == len(base):
        return {
            "items": {
                str(i): p
                for i, (x, y) in enumerate(zip(item, base, strict=True))
                if (p := diff(x, y)) is not None
            }
        }
    return {"value": item}


def apply(base: Any, patch: Any) -> Any:
    """``base`` with ``patch`` applied (a new value; ``base`` is not changed).

    Parts of a patch that do not fit ``base`` (a key or position it lacks, a part of the
    wrong shape) are skipped: a patch made for one message never breaks the rendering of
    another, and metadata written by hand never raises here.
    """
    if not isinstance(patch, Mapping) or not patch:
        return base
    if "value" in patch:
        return patch["value"]
    if isinstance(base, Mapping):
        out = dict(base)
        removed = patch.get("del")
        for key in removed if isinstance(removed, list | tuple) else ():
            if isinstance(key, str):
                out.pop(key, None)
        changed = patch.get("sub")
        for key, sub in changed.items() if isinstance(changed, Mapping) else ():
            if key in out:
                out[key] = apply(out[key], sub)
        added = patch.get("set")
        if isinstance(added, Mapping):
            out.update(added)
        return out
    changed = patch.get("items")
    if isinstance(base, list | tuple) and isinstance(changed, Mapping):
        items = list(base)
        for pos, sub in changed.items():
            i = int(pos) if isinstance(pos, str) and pos.isdigit() else -1
            if 0 <= i < len(items):
                items[i] = apply(items[i], sub)
        return items
    return base
