"""A LongMemEval-shaped synthetic set: users, dated sessions, planted facts, questions.

    python bench/longmem/generate.py --seed 1 --users 8 --out dev.json
    python bench/longmem/generate.py --seed 1 --users 8 --set heldout --out heldout.json

Each user gets ``--sessions`` (20) dated sessions of ~12 exchanges (a user turn and the
reply; sometimes a tool call and its result in between), built from the topic pools of
``filler.py``. Planted among them, from the set's templates (``dev_templates`` or
``heldout_templates``): user facts, preferences, assistant facts, tool-only facts,
knowledge updates (the value changes in a later session), dated events and multi-session
aggregates; then one question per planted item, plus abstention questions (things never
said). Everything follows from ``--seed``: the same arguments write the same bytes.

A question: ``id``, ``user_id``, ``type`` (LongMemEval's names), ``question``,
``answer`` (a string; a list joined by ", " for aggregates), ``must_contain`` (the
strings a context must hold to answer it: the value, every aggregated value, or the
event's sentence), ``evidence`` (message ids; empty for abstention), ``superseded``
(knowledge updates: the old statement's id), ``as_of`` (ISO time the question is asked:
after the user's last session) and, for events, ``resolved`` (the event's date).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convomem.model import Message, ToolResultBlock, ToolUseBlock
from longmem.filler import FILLER_TOOLS, FOLLOW_REPLIES, FOLLOW_UPS, TOPICS

SETS = {"dev": "longmem.dev_templates", "heldout": "longmem.heldout_templates"}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
RELATIVE = {0: "this morning", 1: "yesterday", 2: "two days ago", 3: "three days ago"}

# How many of each planted kind a user gets.
PLAN = {
    "user_facts": 4,
    "preferences": 3,
    "assistant_facts": 2,
    "tool_facts": 1,
    "updates": 2,
    "events": 2,
    "aggregates": 1,
    "abstain": 2,
}
TYPES = {
    "user_facts": "single-session-user",
    "preferences": "single-session-preference",
    "assistant_facts": "single-session-assistant",
    "tool_facts": "single-session-assistant",
    "updates": "knowledge-update",
    "events": "temporal-reasoning",
    "aggregates": "multi-session",
}


def templates(name: str) -> ModuleType:
    return importlib.import_module(SETS[name])


class _Session:
    """One session being written: its messages and the clock of its turns."""

    def __init__(self, uid: str, index: int, start: dt.datetime) -> None:
        self.sid = f"{uid}-s{index:02d}"
        self.start = start
        self.messages: list[Message] = []

    def add(self, role: str, content: Any) -> str:
        mid = f"{self.sid}-m{len(self.messages):03d}"
        at = self.start + dt.timedelta(seconds=45 * len(self.messages))
        self.messages.append(Message(mid, role, content=content, created_at=at.timestamp()))
        return mid


def _when(style: str, day: dt.date, rng: random.Random) -> tuple[str, dt.date]:
    """How the user says an event's date: the phrase and the date it means."""
    back = rng.randint(0, 6)
    date = day - dt.timedelta(days=back)
    if style == "absolute":
        return f"on {MONTHS[date.month - 1]} {date.day}", date
    if back in RELATIVE:
        return RELATIVE[back], date
    return f"last {WEEKDAYS[date.weekday()]}", date


def _user_turn(rng: random.Random, topic: str, aside: str | None) -> tuple[str, int]:
    pool = TOPICS[topic]
    i = rng.randrange(len(pool["ask"]))
    parts = [rng.choice(pool["open"])]
    if aside:
        parts.append(aside)
    parts.append(pool["ask"][i])
    return " ".join(parts), i


def _plant_items(rng: random.Random, tm: ModuleType) -> list[dict[str, Any]]:
    """The items one user gets, each with its kind and its chosen slot."""
    items: list[dict[str, Any]] = []
    facts = list(tm.USER_FACTS)
    rng.shuffle(facts)
    chosen, unsaid = facts[: PLAN["user_facts"]], facts[PLAN["user_facts"] :]
    items += [{"kind": "user_facts", "slot": s} for s in chosen]
    for kind, pool in (
        ("preferences", tm.PREFERENCES),
        ("assistant_facts", tm.ASSISTANT_FACTS),
        ("tool_facts", tm.TOOL_FACTS),
        ("updates", tm.UPDATES),
        ("events", tm.EVENTS),
        ("aggregates", tm.AGGREGATES),
    ):
        items += [{"kind": kind, "slot": s} for s in rng.sample(pool, PLAN[kind])]
    abstain = [a["ask"] for a in rng.sample(tm.ABSTAIN, PLAN["abstain"])]
    abstain.append(rng.choice(unsaid)["ask"])
    items += [{"kind": "abstain", "asks": a} for a in abstain]
    return items


def _schedule(rng: random.Random, items: list[dict[str, Any]], sessions: int) -> None:
    """Which session(s) each item is said in."""
    for it in items:
        kind = it["kind"]
        if kind == "updates":
            first = rng.randrange(0, sessions // 2)
            it["at"] = [first, rng.randrange(first + 4, sessions)]
        elif kind == "aggregates":
            it["at"] = sorted(rng.sample(range(sessions), it["slot"]["n"]))
        elif kind != "abstain":
            it["at"] = [rng.randrange(sessions)]


def generate_user(
    seed: int, set_name: str, index: int, sessions: int = 20, exchanges: int = 12
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One user's sessions and questions (deterministic in its arguments)."""
    tm = templates(set_name)
    rng = random.Random(f"longmem:{seed}:{set_name}:{index}")
    uid = f"{set_name}-u{index:02d}"
    items = _plant_items(rng, tm)
    _schedule(rng, items, sessions)
    # planted turns per session: (item, occurrence)
    per: dict[int, list[tuple[dict[str, Any], int]]] = {}
    for it in items:
        for occ, s in enumerate(it.get("at", [])):
            per.setdefault(s, []).append((it, occ))
    values: dict[int, list[str]] = {}
    for n, it in enumerate(items):
        slot = it.get("slot", {})
        if "values" in slot:
            k = slot.get("n", 2 if it["kind"] == "updates" else 1)
            values[n] = rng.sample(slot["values"], k)
    day = dt.date(2025, 1, 6) + dt.timedelta(days=rng.randrange(120))
    out_sessions = []
    evidence: dict[int, list[str]] = {}
    said: dict[int, list[str]] = {}
    resolved: dict[int, str] = {}
    for s in range(sessions):
        day += dt.timedelta(days=rng.randint(2, 9))
        start = dt.datetime.combine(day, dt.time(rng.randint(7, 21), rng.randrange(60)), dt.UTC)
        sess = _Session(uid, s, start)
        topic = rng.choice(list(TOPICS))
        n_ex = rng.randint(exchanges - 2, exchanges + 2)
        planted = per.get(s, [])
        n_ex = max(n_ex, len(planted) + 2)  # every planted item gets its exchange
        slots = set(rng.sample(range(n_ex), min(len(planted), n_ex)))
        queue = list(planted)
        rng.shuffle(queue)
        for e in range(n_ex):
            if e in slots and queue:
                it, occ = queue.pop()
                n = items.index(it)
                mid, text = _planted(rng, sess, it, occ, values.get(n, []), tm, day, resolved, n)
                evidence.setdefault(n, []).append(mid)
                said.setdefault(n, []).append(text)
                continue
            _filler(rng, sess, topic, e)
        out_sessions.append(
            {
                "session_id": sess.sid,
                "date": start.isoformat(),
                "messages": [m.to_dict() for m in sess.messages],
            }
        )
    as_of = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(12), dt.UTC)
    questions = []
    for n, it in enumerate(items):
        kind = it["kind"]
        asks = it["asks"] if kind == "abstain" else it["slot"]["ask"]
        q: dict[str, Any] = {
            "id": f"{uid}-q{n:02d}",
            "user_id": uid,
            "type": "abstention" if kind == "abstain" else TYPES[kind],
            "question": rng.choice(asks),
            "as_of": as_of.isoformat(),
        }
        vals = values.get(n, [])
        if kind == "abstain":
            q.update(answer="", must_contain=[], evidence=[])
        elif kind == "updates":
            q.update(answer=vals[1], must_contain=[vals[1]], evidence=[evidence[n][1]])
            q["superseded"] = [evidence[n][0]]
        elif kind == "events":
            phrase = said[n][0]
            q.update(answer=phrase[1], must_contain=[phrase[0]], evidence=evidence[n])
            q["resolved"] = resolved[n]
        elif kind == "aggregates":
            q.update(answer=", ".join(vals), must_contain=vals, evidence=evidence[n])
        else:
            q.update(answer=vals[0], must_contain=[vals[0]], evidence=evidence[n])
        questions.append(q)
    return {"user_id": uid, "sessions": out_sessions}, questions


def _planted(
    rng: random.Random,
    sess: _Session,
    it: dict[str, Any],
    occ: int,
    vals: list[str],
    tm: ModuleType,
    day: dt.date,
    resolved: dict[int, str],
    n: int,
) -> tuple[str, Any]:
    """Write one planted exchange; the evidence message's id and what was said."""
    kind, slot = it["kind"], it["slot"]
    topic = slot["topic"]
    pool = TOPICS[topic]
    if kind in ("assistant_facts", "tool_facts"):
        text = f"{rng.choice(pool['open'])} {rng.choice(slot['user'])}"
        sess.add("user", text)
        if kind == "assistant_facts":
            said = rng.choice(slot["say"]).format(v=vals[0])
            return sess.add("assistant", said), said
        call = f"call_{sess.sid}_{len(sess.messages)}"
        use = ToolUseBlock(call, slot["tool"], slot["args"])
        sess.add("assistant", [use])
        result = slot["result"].format(v=vals[0])
        mid = sess.add("tool", [ToolResultBlock(call, result)])
        sess.add("assistant", rng.choice(slot["reply"]))
        return mid, result
    if kind == "updates":
        template = rng.choice(slot["say"] if occ == 0 else slot["update"])
        aside = template.format(v=vals[occ], old=vals[0])
        said: Any = aside
    elif kind == "events":
        phrase, date = _when(tm.DATE_STYLE, day, rng)
        aside = rng.choice(slot["say"]).format(when=phrase)
        resolved[n] = date.isoformat()
        said = (aside, phrase)
    elif kind == "aggregates":
        aside = rng.choice(slot["say"]).format(v=vals[occ])
        said = aside
    else:
        aside = rng.choice(slot["say"]).format(v=vals[0])
        said = aside
    text, i = _user_turn(rng, topic, aside)
    mid = sess.add("user", text)
    sess.add("assistant", pool["reply"][i])
    return mid, said


def _filler(rng: random.Random, sess: _Session, topic: str, e: int) -> None:
    """One exchange about nothing anybody asks about later."""
    roll = rng.random()
    if e > 0 and roll < 0.3:
        i = rng.randrange(len(FOLLOW_UPS))
        sess.add("user", FOLLOW_UPS[i])
        sess.add("assistant", FOLLOW_REPLIES[i])
        return
    if roll < 0.4:
        tool = rng.choice(FILLER_TOOLS)
        sess.add("user", tool["user"])
        call = f"call_{sess.sid}_{len(sess.messages)}"
        sess.add("assistant", [ToolUseBlock(call, tool["tool"], tool["args"])])
        nums = {k: rng.randint(2, 9) if k == "b" else rng.randint(10, 99) for k in "abc"}
        sess.add("tool", [ToolResultBlock(call, tool["result"].format(**nums))])
        sess.add("assistant", tool["reply"])
        return
    t = topic if rng.random() < 0.6 else rng.choice(list(TOPICS))
    aside = rng.choice(TOPICS[t]["aside"]) if rng.random() < 0.6 else None
    text, i = _user_turn(rng, t, aside)
    sess.add("user", text)
    sess.add("assistant", TOPICS[t]["reply"][i])


def generate(
    seed: int, users: int, set_name: str = "dev", sessions: int = 20, exchanges: int = 12
) -> dict[str, Any]:
    """The whole set: ``{"set", "seed", "users": [...], "questions": [...]}``."""
    if set_name not in SETS:
        raise ValueError(f"set_name={set_name!r}: one of {sorted(SETS)}")
    if sessions < 8 or exchanges < 4:
        raise ValueError(f"sessions={sessions}, exchanges={exchanges}: at least 8 and 4")
    out_users, questions = [], []
    for i in range(users):
        user, qs = generate_user(seed, set_name, i, sessions, exchanges)
        out_users.append(user)
        questions += qs
    return {"set": set_name, "seed": seed, "users": out_users, "questions": questions}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--exchanges", type=int, default=12, help="per session, +-2")
    p.add_argument("--set", choices=sorted(SETS), default="dev")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    data = generate(a.seed, a.users, a.set, a.sessions, a.exchanges)
    a.out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n_msg = sum(len(s["messages"]) for u in data["users"] for s in u["sessions"])
    n_q = len(data["questions"])
    print(f"{a.out}: {len(data['users'])} users, {n_msg} messages, {n_q} questions")


if __name__ == "__main__":
    main()
