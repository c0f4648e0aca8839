"""What a context holds about the user with no query: the profile and the summary (issue 19).

Four measures, each for this checkout and for a baseline checkout (``--baseline REF``,
default the point this branch left ``main``) in the same run:

1. Generated users (``persona/generate.py``): 40 facts each, phrased in eight styles
   (direct, a clause of a longer sentence, negation, a change, a possessive or
   apposition, a relative date, a correction, third-person or indirect), planted in a
   ~870-message chat with filler, tool results and distractors. Counted: facts the
   final ``context()`` (no query) of ``ConversationMemory(4000,
   extractor=OfflineExtractor())`` holds (one line holding the value, and for a
   negation a negative word, for a date the date it means). Two sets: ``dev`` (the
   rules were tuned on it) and ``heldout`` (written before any tuning, never tuned on).
   Control: the same count for another user's facts in this user's context (what a
   check finds by chance).
2. LoCoMo dev (real conversations, ``persona/locomo.py``: read from
   ``shared/data/locomo-dev``, never copied): facts about each speaker, derived from
   single-hop questions whose short answer the speaker wrote in one turn. Each
   conversation is run twice, each speaker as the user; counted: the speaker's facts in
   the context at 4,000 tokens, no query (all of them, and those whose turn left the
   view).
3. LoCoMo folded at 2,000 tokens: of those facts whose turn left the view, the share
   whose value is in the summary + profile (the context's messages that are not log
   messages).
4. The demo (``examples/demo.py``): its five checks on the context at 1,000, 2,500 and
   4,000 tokens.

    PYTHONPATH=src .venv/bin/python bench/bench_profile.py              # ~2 minutes
    PYTHONPATH=src .venv/bin/python bench/bench_profile.py --misses     # dev, LoCoMo misses
    PYTHONPATH=src .venv/bin/python bench/bench_profile.py --baseline none
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import _baseline
from convomem import ConversationMemory, from_openai, get_tokenizer
from convomem.model import Message
from convomem.summaries.extractor import OfflineExtractor
from persona import locomo
from persona.generate import STYLE_ORDER, build_user, context_lines, held

ROOT = Path(__file__).resolve().parent.parent
TOK = get_tokenizer("approx")


def _memory(budget: int) -> ConversationMemory:
    return ConversationMemory(budget, extractor=OfflineExtractor())


def _run(messages: list[Message], budget: int) -> tuple[list[Message], set[str]]:
    """The context (no query) after feeding ``messages``, and the log ids in it."""
    mem = _memory(budget)
    for m in messages:
        mem.add_message(m)
    ctx = mem.context("messages")
    log = {m.id for m in messages}
    return ctx, {m.id for m in ctx if m.id in log}


# -- 1. generated users ---------------------------------------------------------------


def generated(set_name: str, users: int, exchanges: int, misses: list[str]) -> dict[str, Any]:
    by_style: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    contexts = []
    all_facts = []
    for i in range(users):
        u = build_user(set_name, i, exchanges)
        ctx, _ = _run(u["messages"], 4000)
        lines = context_lines(ctx)
        contexts.append(lines)
        all_facts.append(u["facts"])
        for f in u["facts"]:
            ok = held(lines, f["hold"])
            by_style[f["style"]][0] += ok
            by_style[f["style"]][1] += 1
            if not ok:
                misses.append(f"{set_name}: {u['user_id']} {f['style']}: {f['text']!r}")
    chance = [0, 0]
    for i, lines in enumerate(contexts):
        other = all_facts[(i + 1) % len(all_facts)]
        own = {json.dumps(f["hold"]) for f in all_facts[i]}
        for f in other:
            if json.dumps(f["hold"]) not in own:
                chance[0] += held(lines, f["hold"])
                chance[1] += 1
    kept = sum(v[0] for v in by_style.values())
    total = sum(v[1] for v in by_style.values())
    return {"held": [kept, total], "styles": dict(by_style), "chance": chance}


# -- 2, 3. LoCoMo ---------------------------------------------------------------------


def locomo_measures(misses: list[str]) -> dict[str, Any]:
    profile = [0, 0]
    profile_out = [0, 0]
    folded = [0, 0]
    for n, conv in enumerate(locomo.conversations()):
        facts = locomo.speaker_facts(conv)
        for speaker in (conv["speaker_a"], conv["speaker_b"]):
            mine = [f for f in facts if f["speaker"] == speaker]
            if not mine:
                continue
            tag = f"c{n}"
            msgs = locomo.chat(conv, speaker, tag)
            ctx, in_view = _run(msgs, 4000)
            text = "\n".join(m.text() for m in ctx)
            for f in mine:
                ok = locomo.words_in(f["answer"], text)
                profile[0] += ok
                profile[1] += 1
                if f"{tag}:{f['dia_id']}" not in in_view:
                    profile_out[0] += ok
                    profile_out[1] += 1
            ctx, in_view = _run(msgs, 2000)
            derived = "\n".join(m.text() for m in ctx if m.id not in {x.id for x in msgs})
            for f in mine:
                if f"{tag}:{f['dia_id']}" in in_view:
                    continue
                ok = locomo.words_in(f["answer"], derived)
                folded[0] += ok
                folded[1] += 1
                if not ok:
                    misses.append(f"locomo@2000 {speaker}: {f['question']!r} -> {f['answer']!r}")
    return {"profile_4000": profile, "profile_4000_evicted": profile_out, "folded_2000": folded}


# -- 4. the demo ----------------------------------------------------------------------


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo", ROOT / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_checks() -> dict[str, list[int]]:
    demo = _demo()
    thread = from_openai(json.loads((ROOT / "examples" / "support_conversation.json").read_text()))
    out = {}
    for budget in (1000, 2500, 4000):
        mem = ConversationMemory(max_tokens=budget, tokenizer=TOK)
        for m in thread:
            mem.add_message(demo.prioritized(m, TOK))
        found = demo.recall(mem.context(format="messages"))
        out[str(budget)] = [sum(found.values()), len(found)]
    return out


def measure(users: int, exchanges: int, with_misses: bool) -> dict[str, Any]:
    misses: list[str] = []
    t0 = time.process_time()
    out: dict[str, Any] = {
        "dev": generated("dev", users, exchanges, misses),
        "heldout": generated("heldout", users, exchanges, misses),
        "locomo": locomo_measures(misses),
        "demo": demo_checks(),
    }
    out["cpu_s"] = round(time.process_time() - t0, 1)
    if with_misses:
        out["misses"] = misses
    return out


# -- the report -----------------------------------------------------------------------


def _pct(pair: list[int]) -> str:
    kept, total = pair
    return f"{kept}/{total} = {kept / max(total, 1):.1%}"


def report(cols: list[tuple[str, dict[str, Any]]]) -> None:
    w = 24
    print(f"{'':<44}" + "".join(f"{name:<{w}}" for name, _ in cols))

    def row(label: str, get: Any) -> None:
        print(f"{label:<44}" + "".join(f"{get(r):<{w}}" for _, r in cols))

    for s in ("dev", "heldout"):
        row(f"generated {s}: held at 4,000, no query", lambda r, s=s: _pct(r[s]["held"]))
        for style in STYLE_ORDER:
            row(f"  {style}", lambda r, s=s, st=style: _pct(r[s]["styles"].get(st, [0, 0])))
        row("  control: another user's facts", lambda r, s=s: _pct(r[s]["chance"]))
    row("LoCoMo dev: facts held at 4,000", lambda r: _pct(r["locomo"]["profile_4000"]))
    row("  of those whose turn left the view", lambda r: _pct(r["locomo"]["profile_4000_evicted"]))
    row("LoCoMo dev @2,000: in summary + profile", lambda r: _pct(r["locomo"]["folded_2000"]))
    for b in ("1000", "2500", "4000"):
        row(f"demo checks at {int(b):,}", lambda r, b=b: _pct(r["demo"][b]))
    row("cpu seconds", lambda r: str(r["cpu_s"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--users", type=int, default=6, help="generated users per set")
    p.add_argument("--exchanges", type=int, default=400)
    p.add_argument("--baseline", default="base:main", help="git ref, base:REF, or none")
    p.add_argument("--misses", action="store_true", help="list dev and LoCoMo misses")
    p.add_argument(
        "--heldout-misses", action="store_true", help="list held-out misses too (not for tuning)"
    )
    p.add_argument("--json", action="store_true", help="print this checkout's JSON only")
    a = p.parse_args()
    if a.json:
        print(json.dumps(measure(a.users, a.exchanges, a.misses)))
        return
    cols = []
    if a.baseline != "none":
        commit, src = _baseline.checkout(a.baseline)
        args = ["--json", "--users", str(a.users), "--exchanges", str(a.exchanges)]
        cols.append((f"baseline {commit[:9]}", _baseline.run(Path(__file__), args, src)))
    mine = measure(a.users, a.exchanges, a.misses or a.heldout_misses)
    cols.append(("this checkout", mine))
    report(cols)
    for m in mine.get("misses", []):
        if a.heldout_misses or not m.startswith("heldout:"):
            print(f"  miss: {m}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
