"""RunningSummary state as plain JSON data, and back, without calling a summarizer.

The state holds the configuration that shapes the rendering (reserve, header, facts,
facts_share, max_segments, max_facts), the segments (text, coverage, summarizer name,
degraded, creation time), the facts ledger (each fact with its first-seen order,
mentions and source tier) and the covered ids (``snapshot.encode_ids``: runs of
numbered ids). A segment still awaiting its background summary is saved as it stands
(made by the fallback, degraded).

This module reads and makes ``SummarySnapshot`` values (``RunningSummary.snapshot()`` /
``restore()``), never a summary's attributes. Loading validates everything first and
raises ``ConfigError`` naming the field (as ``state['segments'][2]['count']``); nothing
changes on error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, get_args

from ..errors import ConfigError
from ._fact import SOURCE_TIER, Fact, FactKind
from .ledger import FactLedger
from .snapshot import Coverage, SummarySnapshot, decode_ids, encode_ids
from .summary import Summary

__all__ = [
    "CONFIG_KEYS",
    "FORMAT",
    "VERSION",
    "config_of",
    "decode_ids",
    "dump",
    "encode_ids",
    "load",
]

FORMAT: Final = "convomem.running_summary"
VERSION: Final = 1
CONFIG_KEYS: Final = ("reserve", "header", "facts", "facts_share", "max_segments", "max_facts")
"""The options that shape the rendering, saved with the state and checked on load."""
_KINDS: Final = frozenset(get_args(FactKind))
_TIERS: Final = frozenset(SOURCE_TIER.values())


def _count_ids(data: object, where: str) -> int:
    """How many ids ``encode_ids`` output stands for (its form checked, nothing expanded)."""
    if not isinstance(data, list):
        raise ConfigError(f"{where}={_short(data)}: must be a list")
    total = 0
    for i, item in enumerate(data):
        if isinstance(item, str):
            total += 1
            continue
        ok = (
            isinstance(item, list)
            and (len(item) == 3 or (len(item) == 4 and item[3] == 16))
            and isinstance(item[0], str)
            and all(_is_int(x) and x >= 0 for x in item[1:3])
            and item[1] < item[2]
        )
        if not ok:
            raise ConfigError(
                f"{where}[{i}]={_short(item)}: must be an id or a run [prefix, first, last]"
                " (or [prefix, first, last, 16])"
            )
        total += item[2] - item[1] + 1
    return total


# -- dump --------------------------------------------------------------------------------


def dump(snapshot: SummarySnapshot, config: Mapping[str, Any]) -> dict[str, Any]:
    """The state of a summary configured with ``config`` (``CONFIG_KEYS``), holding
    ``snapshot``."""
    ledger = snapshot.ledger
    rows = [
        [f.kind, f.value, f.source_id, f.source_role, seq, mentions, tier]
        for f, seq, mentions, tier in ledger.entries()
    ]
    selected: list[Any] | None = None
    if config["facts"] and ledger.budget is not None:
        # The rendered selection, so a load renders without filing every fact.
        facts, omitted = ledger.select(ledger.budget)
        at = {(r[0], r[1]): i for i, r in enumerate(rows)}
        selected = [[at[(f.kind, f.value)] for f in facts], omitted]
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": {k: config[k] for k in CONFIG_KEYS},
        "segments": [
            {
                "text": s.text,
                "first_id": s.first_id,
                "last_id": s.last_id,
                "count": s.count,
                "summarizer": s.summarizer,
                "degraded": s.degraded,
                "created_at": s.created_at,
                "seq": seq,
            }
            for s, seq in snapshot.segments
        ],
        "seq": snapshot.seq,
        "covered": snapshot.coverage.encode(),
        "ledger": {
            "seq": ledger.next_seq,
            "dropped": ledger.dropped,
            "facts": rows,
            "selected": selected,
        },
    }


# -- load --------------------------------------------------------------------------------


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(data: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}[{key!r}]: missing")
    return data[key]


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}={_short(value)}: must be a mapping")
    return value


def config_of(data: object) -> dict[str, Any]:
    """The configuration a state was saved with (checked for form, not for values)."""
    state = _mapping(data, "state")
    if state.get("format") != FORMAT:
        raise ConfigError(f"state['format']={_short(state.get('format'))}: must be {FORMAT!r}")
    if state.get("version") != VERSION:
        raise ConfigError(f"state['version']={_short(state.get('version'))}: must be {VERSION}")
    config = _mapping(_field(state, "config", "state"), "state['config']")
    return {k: _field(config, k, "state['config']") for k in CONFIG_KEYS}


def _check(cond: bool, where: str, value: object, what: str) -> None:
    if not cond:
        raise ConfigError(f"{where}={_short(value)}: {what}")


def _optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _segments(data: object) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        raise ConfigError(f"state['segments']={_short(data)}: must be a list")
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(data):
        where = f"state['segments'][{i}]"
        seg = _mapping(raw, where)
        got = {
            k: _field(seg, k, where)
            for k in ("text", "first_id", "last_id", "count", "summarizer", "degraded")
        }
        created = seg.get("created_at", 0.0)
        seq = _field(seg, "seq", where)
        _check(_is_int(seq) and seq >= 1, f"{where}['seq']", seq, "must be an int >= 1")
        got["seq"] = seq
        _check(isinstance(got["text"], str), f"{where}['text']", got["text"], "must be a string")
        for k in ("first_id", "last_id"):
            _check(_optional_str(got[k]), f"{where}[{k!r}]", got[k], "must be a string or None")
        count = got["count"]
        _check(_is_int(count) and count >= 0, f"{where}['count']", count, "must be an int >= 0")
        _check(
            isinstance(got["summarizer"], str),
            f"{where}['summarizer']",
            got["summarizer"],
            "must be a string",
        )
        _check(isinstance(got["degraded"], bool), f"{where}['degraded']", got["degraded"], "a bool")
        _check(
            isinstance(created, int | float)
            and not isinstance(created, bool)
            and math.isfinite(created),
            f"{where}['created_at']",
            created,
            "must be a finite number",
        )
        got["created_at"] = float(created)
        out.append(got)
    return out


def _facts(data: object) -> tuple[list[list[Any]], int, int]:
    """The ledger's rows, checked (``[kind, value, source_id, role, seq, mentions,
    tier]``: the ``Fact`` objects are made when the ledger files them)."""
    ledger = _mapping(data, "state['ledger']")
    seq, dropped = _field(ledger, "seq", "state['ledger']"), ledger.get("dropped", 0)
    _check(_is_int(seq) and seq >= 0, "state['ledger']['seq']", seq, "must be an int >= 0")
    _check(_is_int(dropped) and dropped >= 0, "state['ledger']['dropped']", dropped, "an int")
    rows = _field(ledger, "facts", "state['ledger']")
    _check(isinstance(rows, list), "state['ledger']['facts']", rows, "must be a list")
    out: list[list[Any]] = []
    kinds, tiers = _KINDS, _TIERS
    for i, row in enumerate(rows):
        # The common case in one test; a row that fails it is checked part by part below,
        # which names the bad part (building those messages per row would cost more than
        # the whole restore).
        if (
            type(row) is list
            and len(row) == 7
            and row[0] in kinds
            and type(row[1]) is str
            and row[1] != ""
            and (row[2] is None or type(row[2]) is str)
            and (row[3] is None or type(row[3]) is str)
            and type(row[4]) is int
            and 0 < row[4] <= seq
            and type(row[5]) is int
            and row[5] >= 1
            and type(row[6]) is int
            and row[6] in tiers
        ):
            out.append(row)
            continue
        where = f"state['ledger']['facts'][{i}]"
        ok = isinstance(row, list) and len(row) == 7
        _check(ok, where, row, "must be [kind, value, source_id, source_role, seq, mentions, tier]")
        kind, value, source_id, role, fseq, mentions, tier = row
        _check(kind in _KINDS, f"{where}[0]", kind, f"must be one of {sorted(_KINDS)}")
        _check(isinstance(value, str) and value != "", f"{where}[1]", value, "a non-empty string")
        _check(_optional_str(source_id), f"{where}[2]", source_id, "must be a string or None")
        _check(_optional_str(role), f"{where}[3]", role, "must be a string or None")
        _check(_is_int(fseq) and 0 < fseq <= seq, f"{where}[4]", fseq, f"must be in [1, {seq}]")
        _check(_is_int(mentions) and mentions >= 1, f"{where}[5]", mentions, "an int >= 1")
        _check(tier in _TIERS and _is_int(tier), f"{where}[6]", tier, f"one of {sorted(_TIERS)}")
        out.append(row)
    # Repeats found now, cheaply (a fact repeated under another spelling of its key is
    # found when the ledger files the rows).
    seen: dict[Any, int] = {}
    for i, row in enumerate(out):
        for mark in (row[4], (row[0], row[1])):
            if mark in seen:
                where = f"state['ledger']['facts'][{i}]"
                raise ConfigError(f"{where}={_short(row)}: appears twice (as row {seen[mark]})")
            seen[mark] = i
    return out, seq, dropped


def _selected(data: object, entries: list[list[Any]]) -> tuple[tuple[Fact, ...], int] | None:
    """The saved selection (``[[row indices], omitted]``) as facts, or None."""
    if data is None:
        return None
    where = "state['ledger']['selected']"
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], list)):
        raise ConfigError(f"{where}={_short(data)}: must be [[indices], omitted]")
    picked, omitted = data
    _check(_is_int(omitted) and omitted >= 0, where, data, "must be [[indices], omitted]")
    n = len(entries)
    _check(
        all(_is_int(i) and 0 <= i < n for i in picked) and len(set(picked)) == len(picked),
        where,
        data,
        f"indices must be distinct rows of the ledger (0 to {n - 1})",
    )
    return tuple(Fact(*entries[i][:4]) for i in picked), omitted


def load(
    data: object, *, config: Mapping[str, Any], ledger: FactLedger, lazy: bool = False
) -> SummarySnapshot:
    """The snapshot ``data`` holds, for a summary configured with ``config`` (the state's
    must be the same); ``ledger`` is an empty ledger of that summary's, filled here.

    ``lazy``: the covered ids are counted now and decoded on first use (a resumed
    session may never need them); a repeated id is then not reported."""
    saved = config_of(data)
    for key in CONFIG_KEYS:
        mine = config[key]
        if saved[key] != mine or type(saved[key]) is not type(mine):
            raise ConfigError(
                f"state['config'][{key!r}]={_short(saved[key])}: this summary has {key}={mine!r}"
            )
    state = _mapping(data, "state")
    segments = _segments(_field(state, "segments", "state"))
    covered_raw = _field(state, "covered", "state")
    expected = sum(s["count"] for s in segments)
    total = _count_ids(covered_raw, "state['covered']")
    _check(total == expected, "state['covered']", f"<{total} ids>", f"must hold {expected} ids")
    coverage = Coverage.loaded(covered_raw, lazy=lazy)
    if not lazy:
        _check(len(coverage) == expected, "state['covered']", "<ids>", "has repeated ids")
    entries, seq, dropped = _facts(_field(state, "ledger", "state"))
    selected = _selected(_mapping(state["ledger"], "state['ledger']").get("selected"), entries)
    # raises ConfigError on repeats
    facts = ((Fact(r[0], r[1], r[2], r[3]), r[4], r[5], r[6]) for r in entries)
    ledger.restore(facts, next_seq=seq, dropped=dropped, selected=selected)
    next_seq = _field(state, "seq", "state")
    seqs = [s["seq"] for s in segments]
    _check(len(set(seqs)) == len(seqs), "state['segments']", seqs, "repeat a seq")
    _check(
        _is_int(next_seq) and next_seq >= max(seqs, default=0),
        "state['seq']",
        next_seq,
        f"must be an int >= {max(seqs, default=0)}",
    )
    segs = tuple(
        (
            Summary(
                s["text"],
                s["first_id"],
                s["last_id"],
                s["count"],
                s["summarizer"],
                None,  # measured by the summary that restores it
                s["created_at"],
                s["degraded"],
                header=config["header"],
            ),
            s["seq"],
        )
        for s in segments
    )
    return SummarySnapshot(segs, next_seq, ledger, coverage)
