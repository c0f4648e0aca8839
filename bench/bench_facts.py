"""Facts that generalize: extraction precision/recall, supersession, retention, on two sets.

Two fact sets, each a list of short conversations with the facts expected from each
message (``bench/data/facts_dev.json``: the development set the offline extractor was
tuned on; ``bench/data/facts_heldout.json``: written before any result on it was seen and
never tuned on: other phrasings, languages, updates, tool-only facts, relative dates).
For each set, in one run:

1. Extraction: precision and recall of ``OfflineExtractor`` over (attribute, value)
   pairs, message by message (a pair counts when its canonical attribute and its value,
   case-folded, both match). Misses and extras are listed.
2. Supersession: for the conversations where a value changes, the fraction where
   ``FactHistory`` answers the new value as current and keeps the old one in the history.
3. Retention: the set's conversations are split into users (no user gets two cases that
   state the same key) and each user's facts are planted at random turns of a
   2,000-turn support chat whose filler is in the same style, with a tool result full of
   prices every few turns; the budget is 10% of the chat's tokens. Counted: facts whose
   current value is in the final context. Rows: ``ConversationMemory`` with its
   verbatim ledger (today's default), and the same memory with 10% of the budget given
   to a ``FactHistory`` block (what the session's ``[current facts]`` block will carry).
   A value counts when it appears in the context; a like/dislike or an allergy counts
   when its statement (``dislikes: olives``) or the sentence that stated it does.

    .venv/bin/python bench/bench_facts.py            # about a minute
    .venv/bin/python bench/bench_facts.py --quick    # 500-turn chats
    .venv/bin/python bench/bench_facts.py --baseline base:main   # beside the baseline
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import time
from pathlib import Path
from typing import Any

import _baseline
from convomem.model import Message
from convomem.session import ConversationMemory
from convomem.summaries.extractor import OfflineExtractor
from convomem.summaries.keyed import KeyedFact, norm_attribute, norm_value
from convomem.summaries.supersession import FactHistory
from convomem.tokens import get_tokenizer

TOK = get_tokenizer("approx")
DATA = Path(__file__).parent / "data"
SETS = (("development", DATA / "facts_dev.json"), ("held-out", DATA / "facts_heldout.json"))


def _epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def load(path: Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


def case_messages(case: dict[str, Any], at: float | None = None) -> list[Message]:
    """The case's messages (their own times, or all shifted to start at ``at``)."""
    out = []
    first = _epoch(case["messages"][0]["at"])
    for i, m in enumerate(case["messages"]):
        t = _epoch(m["at"])
        out.append(
            Message(
                f"{case['id']}-{i}",
                m["role"],
                content=m["text"],
                created_at=t if at is None else at + (t - first),
            )
        )
    return out


def _pairs(facts: list[KeyedFact]) -> set[tuple[str, str]]:
    return {(f.key[1], norm_value(f.value)) for f in facts}


def _expected(m: dict[str, Any]) -> set[tuple[str, str]]:
    return {(norm_attribute(a), norm_value(v)) for a, v in m["expect"]}


# -- 1. extraction ----------------------------------------------------------------------


def bench_extraction(cases: list[dict[str, Any]]) -> tuple[int, int, int, list[str]]:
    ex = OfflineExtractor()
    tp = fp = fn = 0
    notes: list[str] = []
    for case in cases:
        for spec, msg in zip(case["messages"], case_messages(case), strict=True):
            got, want = _pairs(ex.extract([msg])), _expected(spec)
            tp, fp, fn = tp + len(got & want), fp + len(got - want), fn + len(want - got)
            if got != want:
                notes.append(
                    f"{case['id']} {spec['text'][:48]!r}: missed {sorted(want - got)}"
                    f" extra {sorted(got - want)}"
                )
    return tp, fp, fn, notes


# -- 2. supersession --------------------------------------------------------------------


def bench_supersession(cases: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    ok = total = 0
    notes: list[str] = []
    for case in cases:
        if "current" not in case:
            continue
        total += 1
        h = FactHistory()
        h.add_messages(case_messages(case))
        good = True
        for attr, value in case["current"]:
            cur = h.get(attr)
            good = good and cur is not None and norm_value(cur.value) == norm_value(value)
        for attr, value in case.get("superseded", []):
            old = [norm_value(f.value) for f in h.history(attr) if not f.current]
            good = good and norm_value(value) in old
        ok += good
        if not good:
            now = {a: (h.get(a).value if h.get(a) else None) for a, _ in case["current"]}
            notes.append(f"{case['id']}: current {now}")
    return ok, total, notes


# -- 3. retention -----------------------------------------------------------------------

_VOCAB_TEXT = (
    "the parcel delivery team checked warehouse status again today and the carrier said "
    "it would take a little longer we looked at options for shipping returns and labels "
    "support confirmed the account settings page shows the latest update about the case"
)
_VOCAB = _VOCAB_TEXT.split()
_NOISE_USER = (
    "I like that idea, thanks.",
    "My colleague will follow up on this.",
    "Can you check it again tomorrow?",
    "What is my balance?",
)


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(rng.randint(8, 18))).capitalize() + "."


def _tool_noise(rng: random.Random) -> str:
    fields = {
        f"item_{rng.randrange(300)}_price": f"${rng.randint(5, 900)}.{rng.randint(10, 99)}"
        for _ in range(4)
    }
    fields["order_total"] = f"${rng.randint(100, 5000)}.{rng.randint(10, 99)}"
    return json.dumps(fields)


def users(cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Cases split into users: greedily, no user gets two cases stating one key."""
    out: list[tuple[set[str], list[dict[str, Any]]]] = []
    for case in cases:
        keys = {norm_attribute(a) for m in case["messages"] for a, _ in m["expect"]}
        if not keys:
            continue
        for used, group in out:
            if not used & keys:
                used |= keys
                group.append(case)
                break
        else:
            out.append((set(keys), [case]))
    return [group for _, group in out]


def _planted(group: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(key, current value, the text that stated it) of every key the group states."""
    final: dict[str, tuple[str, str, str]] = {}
    for case in group:
        for m in case["messages"]:
            for a, v in m["expect"]:
                key = norm_attribute(a)
                final[key] = (key, v, m["text"])
    return list(final.values())


def _kept(context: str, key: str, value: str, source: str) -> bool:
    ctx = context.casefold()
    if key.startswith(("pref:", "allergy:")):
        statement = KeyedFact(key, value).statement().casefold()
        return statement in ctx or norm_value(source) in ctx
    return value.casefold() in ctx


def conversation(group: list[dict[str, Any]], turns: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    start = _epoch("2026-01-05T09:00:00Z")
    step = 3600.0 * 4
    plants = [(case, m) for case in group for m in case_messages(case)]
    slots = sorted(rng.sample(range(1, turns - 5), len(plants)))
    at = {t: p for t, p in zip(slots, plants, strict=True)}
    out: list[Message] = [Message("sys", "system", content="You are a helpful support agent.")]
    for t in range(turns):
        when = start + t * step
        if t in at:
            # A planted message keeps its own time: its relative dates resolve against it.
            out.append(at[t][1])
        else:
            text = rng.choice(_NOISE_USER) if rng.random() < 0.05 else _sentence(rng)
            out.append(Message(f"u{t}", "user", content=text, created_at=when))
        if t % 4 == 2:
            out.append(Message(f"t{t}", "tool", content=_tool_noise(rng), created_at=when + 1))
        reply = " ".join(_sentence(rng) for _ in range(rng.choice((1, 2, 3))))
        out.append(Message(f"a{t}", "assistant", content=reply, created_at=when + 2))
    return out


def bench_retention(
    cases: list[dict[str, Any]], turns: int, notes: list[str] | None = None
) -> dict[str, tuple[int, int]]:
    rows = {"ConversationMemory + ledger": [0, 0], "+ FactHistory block (10%)": [0, 0]}
    for n, group in enumerate(users(cases)):
        conv = conversation(group, turns, seed=100 + n)
        planted = _planted(group)
        budget = TOK.count_messages(conv) // 10
        share = budget // 10
        for label, facts_share in zip(rows, (0, share), strict=True):
            mem = ConversationMemory(budget - facts_share)
            history = FactHistory()
            for m in conv:
                mem.add_message(m)
                if facts_share:
                    history.add_messages([m])
            text = "\n".join(m.text() for m in mem.context("messages"))
            if facts_share:
                block = history.render(facts_share)
                assert TOK.count(block) <= facts_share
                text = block + "\n" + text
            kept_each = [_kept(text, k, v, s) for k, v, s in planted]
            kept = sum(kept_each)
            if facts_share and notes is not None:
                lost = [f"{k}={v}" for (k, v, _), ok in zip(planted, kept_each, strict=True)]
                notes.extend(
                    f"retention lost {x}" for x, ok in zip(lost, kept_each, strict=True) if not ok
                )
            rows[label][0] += kept
            rows[label][1] += len(planted)
    return {k: (v[0], v[1]) for k, v in rows.items()}


def collect(turns: int, with_misses: bool) -> dict[str, Any]:
    """Every figure of both sets, as JSON-ready values."""
    out: dict[str, Any] = {}
    for name, path in SETS:
        cases = load(path)
        t0 = time.perf_counter()
        tp, fp, fn, notes = bench_extraction(cases)
        ok, total, snotes = bench_supersession(cases)
        rnotes: list[str] = []
        retention = bench_retention(cases, turns, rnotes)
        out[name] = {
            "cases": len(cases),
            "extraction": [tp, fp, fn],
            "supersession": [ok, total],
            "retention": {k: list(v) for k, v in retention.items()},
            "users": len(users(cases)),
            "misses": notes + snotes + rnotes if with_misses else len(notes) + len(snotes),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    return out


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} = {a / max(b, 1):.1%}"


def report(cols: list[tuple[str, dict[str, Any]]], turns: int) -> None:
    for name, _ in SETS:
        print(f"== {name} set ({cols[-1][1][name]['cases']} cases) ==")
        print(f"{'':<36}" + "".join(f"{label:<26}" for label, _ in cols))

        def row(label: str, get: Any, name: str = name) -> None:
            print(f"{label:<36}" + "".join(f"{get(r[name]):<26}" for _, r in cols))

        row("1. extraction precision", lambda r: _pct(r["extraction"][0], sum(r["extraction"][:2])))
        row(
            "   extraction recall",
            lambda r: _pct(r["extraction"][0], r["extraction"][0] + r["extraction"][2]),
        )
        row("2. supersession", lambda r: _pct(*r["supersession"]))
        print(f"3. retention, {turns}-turn chats at a 10% budget")
        for key in cols[-1][1][name]["retention"]:
            row(f"   {key}", lambda r, key=key: _pct(*r["retention"][key]))
        misses = cols[-1][1][name]["misses"]
        if isinstance(misses, list):
            for note in misses:
                print(f"   miss: {note}")
        else:
            print(f"   ({misses} extraction and supersession misses: --misses)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500-turn chats")
    parser.add_argument("--misses", action="store_true", help="list every miss")
    parser.add_argument("--baseline", default="none", help="git ref or base:REF to compare")
    parser.add_argument("--json", action="store_true", help="print this checkout's JSON only")
    args = parser.parse_args()
    turns = 500 if args.quick else 2000
    if args.json:
        print(json.dumps(collect(turns, args.misses)))
        return
    cols = []
    if args.baseline != "none":
        commit, src = _baseline.checkout(args.baseline)
        argv = ["--json", *(["--quick"] if args.quick else [])]
        cols.append((f"baseline {commit[:9]}", _baseline.run(Path(__file__), argv, src)))
    cols.append(("this checkout", collect(turns, args.misses)))
    report(cols, turns)


if __name__ == "__main__":
    main()
