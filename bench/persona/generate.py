"""Long chats with facts about the user planted in eight styles (``dev_styles`` or
``heldout_styles``), and the check that a context holds them.

A user gets 40 facts (five per style when the templates allow; each profile slot once)
planted at random turns of a chat of ``exchanges`` exchanges over about seven weeks,
built from the LongMem filler (``longmem/filler.py``: topic turns, follow-ups, tool calls
with numbers in their results) and the set's distractors (other people's names, places,
dates). A change's old value is said earlier; a correction's wrong value is said in the
user turn just before it. Everything follows from the set, the user's index and the seed.

``held(lines, hold)``: whether one line holds every group of a fact's ``hold`` (see the
set modules' docstring). Nothing here imports more of convomem than ``Message`` and the
blocks, so the same code measures the baseline checkout.
"""

from __future__ import annotations

import datetime as dt
import importlib
import random
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convomem.model import Message, ToolResultBlock, ToolUseBlock
from longmem.filler import FILLER_TOOLS, FOLLOW_REPLIES, FOLLOW_UPS, TOPICS

SETS = {"dev": "persona.dev_styles", "heldout": "persona.heldout_styles"}
STYLE_ORDER = (
    "direct",
    "clause",
    "negation",
    "change",
    "possessive",
    "date",
    "correction",
    "indirect",
)
PER_STYLE = 5
MONTHS = "January February March April May June July August September October November December"
_MONTHS = MONTHS.split()
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "a": 1}
START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


def styles(set_name: str) -> Any:
    return importlib.import_module(SETS[set_name])


# -- relative dates -------------------------------------------------------------------


def readings(phrase: str, day: dt.date) -> list[dt.date]:
    """Every date ``phrase`` can mean when said on ``day`` ("next Tuesday": the first
    Tuesday after it, or the one a week later)."""
    p = phrase.casefold().split()
    d = dt.timedelta
    if p == ["today"]:
        return [day]
    if p == ["tomorrow"]:
        return [day + d(1)]
    if p == ["yesterday"]:
        return [day - d(1)]
    if len(p) == 2 and p[1] in _WEEKDAYS:
        w = _WEEKDAYS.index(p[1])
        ahead = (w - day.weekday()) % 7
        if p[0] == "this":
            return sorted({day + d(ahead), day + d(ahead or 7)})
        if p[0] == "next":
            first = day + d(ahead or 7)
            return [first, first + d(7)]
        if p[0] == "last":
            back = (day.weekday() - w) % 7 or 7
            return [day - d(back), day - d(back + 7)]
    if len(p) == 3 and p[0] == "in":
        n = _NUMBERS[p[1]] * (7 if p[2].startswith("week") else 1)
        return [day + d(n)]
    if len(p) == 3 and p[2] == "ago":
        n = _NUMBERS[p[0]] * (7 if p[1].startswith("week") else 1)
        return [day - d(n)]
    raise ValueError(f"phrase={phrase!r}: not a relative date this generator writes")


def date_forms(days: list[dt.date]) -> list[str]:
    """How a context may write those dates: ISO, "March 3", "Mar 3", "3 March"."""
    out: list[str] = []
    for x in days:
        month = _MONTHS[x.month - 1]
        out += [x.isoformat(), f"{month} {x.day}", f"{month[:3]} {x.day}", f"{x.day} {month}"]
    return out


# -- the check ------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _needle(s: str) -> re.Pattern[str]:
    body = re.escape(s.rstrip("*").casefold())
    return re.compile(rf"(?<!\w){body}" + ("" if s.endswith("*") else r"(?!\w)"))


def held(lines: list[str], hold: list[list[str]]) -> bool:
    """Whether one of ``lines`` (case-folded) holds one string of every group."""
    return any(all(any(_needle(s).search(line) for s in group) for group in hold) for line in lines)


def context_lines(messages: list[Message]) -> list[str]:
    return [line.casefold() for m in messages for line in m.text().splitlines() if line.strip()]


# -- one user -------------------------------------------------------------------------


class _Chat:
    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.messages: list[Message] = []
        self.at = START

    def add(self, role: str, content: Any) -> str:
        mid = f"{self.uid}-m{len(self.messages):04d}"
        self.messages.append(Message(mid, role, content=content, created_at=self.at.timestamp()))
        self.at += dt.timedelta(seconds=40)
        return mid


def _fields(rng: random.Random, sm: Any) -> dict[str, str]:
    """One value per field; an old or wrong value never equals the true one."""
    f = {k: rng.choice(v) for k, v in sm.POOLS.items()}
    for k, v in sm.POOLS.items():
        true = k.removeprefix("old_").removeprefix("wrong_")
        if k != true and true in f:
            f[k] = rng.choice([x for x in v if x.casefold() != f[true].casefold()])
    f["full"] = f"{f['first']} {f['last']}"
    f["email"] = f"{f['first'].casefold()}.{f['last'].casefold()}@example.org"
    return f


def _fill(text: str, f: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: f[m.group(1)], text)


def _choose(rng: random.Random, sm: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(style, template)`` pairs: ``PER_STYLE`` facts per style where the templates
    allow, then more from any style up to ``8 * PER_STYLE``; no slot twice."""
    used: set[str] = set()
    chosen: list[tuple[str, dict[str, Any]]] = []
    pools = {s: rng.sample(sm.STYLES[s], len(sm.STYLES[s])) for s in STYLE_ORDER}
    count = dict.fromkeys(STYLE_ORDER, 0)
    order = list(STYLE_ORDER)
    rng.shuffle(order)
    for cap in (PER_STYLE, 2 * PER_STYLE):
        progress = True
        while progress:  # one template per style per round: conflicts spread evenly
            progress = False
            for style in order:
                for t in pools[style]:
                    slots = {s for s, _ in t["facts"]}
                    full = count[style] >= cap or sum(count.values()) >= 8 * PER_STYLE
                    if full or slots & used:
                        continue
                    pools[style].remove(t)
                    used |= slots
                    count[style] += len(slots)
                    chosen.append((style, t))
                    progress = True
                    break
    return chosen


def _user_turn(rng: random.Random, aside: str | None) -> tuple[str, str]:
    topic = rng.choice(list(TOPICS))
    pool = TOPICS[topic]
    i = rng.randrange(len(pool["ask"]))
    parts = [rng.choice(pool["open"]), *([aside] if aside else []), pool["ask"][i]]
    return " ".join(parts), pool["reply"][i]


def _filler(rng: random.Random, chat: _Chat, distractors: list[str]) -> None:
    roll = rng.random()
    if roll < 0.25:
        i = rng.randrange(len(FOLLOW_UPS))
        chat.add("user", FOLLOW_UPS[i])
        chat.add("assistant", FOLLOW_REPLIES[i])
    elif roll < 0.35:
        tool = rng.choice(FILLER_TOOLS)
        chat.add("user", tool["user"])
        call = f"call_{chat.uid}_{len(chat.messages)}"
        chat.add("assistant", [ToolUseBlock(call, tool["tool"], tool["args"])])
        nums = {k: rng.randint(2, 9) if k == "b" else rng.randint(10, 99) for k in "abc"}
        chat.add("tool", [ToolResultBlock(call, tool["result"].format(**nums))])
        chat.add("assistant", tool["reply"])
    else:
        topic_aside = rng.random() < 0.5
        aside = None
        if rng.random() < 0.15 and distractors:
            aside = rng.choice(distractors)
        elif topic_aside:
            aside = rng.choice(TOPICS[rng.choice(list(TOPICS))]["aside"])
        text, reply = _user_turn(rng, aside)
        chat.add("user", text)
        chat.add("assistant", reply)


def _planted(rng: random.Random, chat: _Chat, say: str) -> str:
    if rng.random() < 0.4:
        mid = chat.add("user", say)
        chat.add("assistant", "Noted, thanks for letting me know.")
        return mid
    text, reply = _user_turn(rng, say)
    mid = chat.add("user", text)
    chat.add("assistant", reply)
    return mid


def build_user(set_name: str, index: int, exchanges: int = 400, seed: int = 1) -> dict[str, Any]:
    """One user's chat and facts: ``{"user_id", "messages", "facts"}``; a fact is
    ``{"style", "slot", "hold", "stale", "message_id", "text"}``."""
    sm = styles(set_name)
    rng = random.Random(f"profile:{seed}:{set_name}:{index}")
    uid = f"{set_name}-p{index:02d}"
    f = _fields(rng, sm)
    chosen = _choose(rng, sm)
    values = {v.casefold() for v in f.values()}
    distractors = [d for d in sm.DISTRACTORS if not any(v in d.casefold() for v in values)]
    # Where each template is said (exchange index); its "before" goes earlier.
    # Plants go to even exchanges; a correction's wrong value to the odd one just
    # before it, a change's old value to an earlier odd one.
    slots = rng.sample(range(30, exchanges - 10, 2), len(chosen))
    plan: dict[int, tuple[str, Any]] = {}
    for (style, t), at in zip(chosen, slots, strict=True):
        plan[at] = ("say", (style, t))
        if "before" in t:
            if style == "correction":
                plan[at - 1] = ("before", t)
            else:
                free = [i for i in range(5, at - 10, 2) if i not in plan and i + 2 not in plan]
                plan[rng.choice(free)] = ("before", t)
    facts: list[dict[str, Any]] = []
    chat = _Chat(uid)
    for e in range(exchanges):
        chat.at += dt.timedelta(hours=rng.uniform(1.0, 5.0))
        what = plan.get(e)
        if what is None:
            _filler(rng, chat, distractors)
            continue
        kind, payload = what
        if kind == "before":
            _planted(rng, chat, _fill(payload["before"], f))
            continue
        style, t = payload
        g = dict(f)
        when_days: list[dt.date] = []
        m = re.search(r"\{when:(\w+)\}", t["say"])
        if m:
            g["when"] = rng.choice(sm.WHEN[m.group(1)])
            when_days = readings(g["when"], chat.at.date())
        say = _fill(t["say"], g)
        mid = _planted(rng, chat, say)
        for slot, hold in t["facts"]:
            groups = [
                date_forms(when_days) if group == ["{when}"] else [_fill(s, g) for s in group]
                for group in hold
            ]
            facts.append(
                {
                    "style": style,
                    "slot": slot,
                    "hold": groups,
                    "stale": _fill(t["stale"], g) if "stale" in t else None,
                    "message_id": mid,
                    "text": say,
                }
            )
    return {"user_id": uid, "messages": chat.messages, "facts": facts}
