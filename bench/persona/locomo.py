"""LoCoMo's dev conversations as chats with one speaker as the user, and the facts about
each speaker derived from its single-hop questions.

The data is CC BY-NC 4.0 and lives outside the repository (``../shared/data/locomo-dev``
or ``$CONVOMEM_LOCOMO``); it is read from there and nothing of it is written anywhere.

Facts about a speaker. LoCoMo has no list of facts, so they are derived from its
single-hop questions (category 4) as honestly as the data allows: a question counts
when it has exactly one evidence turn, its answer is short (at most ``MAX_WORDS`` words
once quotes and end punctuation are off) and that answer is written in the evidence
turn's text (case-folded, as whole words). The fact is about the speaker of that turn
("What breed is Maria's dog?" answered by Maria's own turn). Answers that are only in
a shared photo's caption, spread over several turns, or paraphrased are left out: the
share reported is of facts a speaker *stated*.

A chat with speaker S as the user: S's turns are ``user`` messages and the other
speaker's ``assistant`` ones, each turn one message (its text, plus "[shares a photo:
caption]" when it has one), dated by its session's date, one minute apart.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

from convomem.model import Message

_HERE = Path(__file__).resolve()
MAX_WORDS = 6
_SESSION = re.compile(r"session_(\d+)")


def data_dir() -> Path:
    """``$CONVOMEM_LOCOMO``, else ``shared/data/locomo-dev`` beside the checkout (or
    beside one of its parents: a worktree sits deeper than the main checkout)."""
    if "CONVOMEM_LOCOMO" in os.environ:
        return Path(os.environ["CONVOMEM_LOCOMO"])
    for parent in _HERE.parents[2:]:
        candidate = parent / "shared" / "data" / "locomo-dev"
        if candidate.is_dir():
            return candidate
    return _HERE.parents[3] / "shared" / "data" / "locomo-dev"


def conversations() -> list[dict[str, Any]]:
    """Every conversation file of the dev half, parsed (``[]`` when it is not there)."""
    d = data_dir()
    if not d.is_dir():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(d.glob("*.json"))]


def _when(text: str) -> dt.datetime:
    """ "1:56 pm on 8 May, 2023" as a UTC datetime."""
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)


def turns(conv: dict[str, Any]) -> list[tuple[dict[str, Any], dt.datetime]]:
    """Every turn in order with its time."""
    keys = sorted((k for k in conv if _SESSION.fullmatch(k)), key=lambda k: int(k.split("_")[1]))
    out = []
    for k in keys:
        start = _when(conv[f"{k}_date_time"])
        for i, t in enumerate(conv[k]):
            out.append((t, start + dt.timedelta(minutes=i)))
    return out


def chat(conv: dict[str, Any], user: str, tag: str) -> list[Message]:
    """The conversation with speaker ``user`` as the user (ids ``tag:dia_id``)."""
    out = []
    for t, at in turns(conv):
        text = t["text"]
        if t.get("blip_caption"):
            text += f" [shares a photo: {t['blip_caption']}]"
        role = "user" if t["speaker"] == user else "assistant"
        out.append(Message(f"{tag}:{t['dia_id']}", role, content=text, created_at=at.timestamp()))
    return out


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .!?\"'")


def words_in(value: str, text: str) -> bool:
    """``value`` in ``text`` as whole words, case-folded."""
    return re.search(rf"(?<!\w){re.escape(_norm(value))}(?!\w)", text.casefold()) is not None


def speaker_facts(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts derived from single-hop questions (module docstring): ``{"speaker",
    "answer", "dia_id", "question"}``."""
    by_id = {t["dia_id"]: t for t, _ in turns(conv)}
    out = []
    for q in conv["qa"]:
        if q.get("category") != 4 or len(q.get("evidence", [])) != 1:
            continue
        answer = _norm(str(q.get("answer", "")))
        turn = by_id.get(q["evidence"][0])
        if not answer or turn is None or len(answer.split()) > MAX_WORDS:
            continue
        if words_in(answer, turn["text"]):
            out.append(
                {
                    "speaker": turn["speaker"],
                    "answer": answer,
                    "dia_id": turn["dia_id"],
                    "question": q["question"],
                }
            )
    return out
