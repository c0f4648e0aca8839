"""The seeds' chat service, as their own sketch builds it, minus the LLM: the reference of
``bench/bench_service.py``.

The seed (``FastAPI`` + ``redis.asyncio``) keeps a session as one Redis list of JSON
messages under ``session:{user_id}:{session_id}`` with a 24-hour TTL, and on every request
reloads the whole list (``LRANGE key 0 -1``), decodes every message and hands the history
to its memory manager (a sliding window of ``max_turns=20`` turns with a summary slot
past ``summary_threshold=15``). Its sketch does all of that in one ``/chat`` request; here
it is split in the two calls the benchmark times on both services, each doing only what
the seed does for it:

- ``POST /v1/sessions/{id}/messages`` ``{"messages": [...]}``: ``RPUSH`` + ``EXPIRE``
  (O(1): the seed's write, without the reload that precedes it in its ``/chat``);
- ``GET /v1/sessions/{id}/context?budget=``: the reload and the window (O(history)).

The summary the seed would ask an LLM for is left out (its cost would only add to the
reference); the window also stops at ``budget`` tokens (words + 4 per message), as the
seed's token window does, so both services return a context of the same size. This file
imports nothing from convomem: it is the design being compared, not a convomem client.

    SEED_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn bench.seed_reference.app:app
"""

from __future__ import annotations

import json
import os
from typing import Any

import redis.asyncio as redis
from fastapi import FastAPI, Header
from pydantic import BaseModel

app = FastAPI(title="Seed reference: Redis list, whole history per request")
redis_client = redis.from_url(
    os.environ.get("SEED_REDIS_URL", "redis://127.0.0.1:6379/0"), decode_responses=True
)

MAX_TURNS = 20
SUMMARY_THRESHOLD = 15
TTL_SECONDS = 86400


class AppendBody(BaseModel):
    messages: list[dict[str, Any]]


def _key(user_id: str, session_id: str) -> str:
    return f"session:{user_id}:{session_id}"


def _tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content or "")
    calls = message.get("tool_calls")
    if calls:
        text += json.dumps(calls)
    return len(text.split()) + 4


def prepare_context(history: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """The seed's ``SessionMemoryManager(max_turns=20, summary_threshold=15)`` without its
    LLM: system messages first, then the newest turns (a turn starts at a user message),
    at most ``MAX_TURNS`` of them and within ``budget`` tokens."""
    system = [m for m in history if m.get("role") == "system"]
    used = sum(_tokens(m) for m in system)
    kept: list[dict[str, Any]] = []
    turns = 0
    for message in reversed(history):
        if message.get("role") == "system":
            continue
        cost = _tokens(message)
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
        if message.get("role") == "user":
            turns += 1
            if turns >= MAX_TURNS:
                break
    kept.reverse()
    older = len(history) - len(system) - len(kept)
    return {
        "messages": system + kept,
        "tokens": used,
        "summarized": older if turns >= SUMMARY_THRESHOLD else 0,
        "turn_count": len(history) // 2 + 1,
    }


@app.post("/v1/sessions/{session_id}/messages")
async def append(
    session_id: str, body: AppendBody, x_user_id: str = Header("user")
) -> dict[str, Any]:
    key = _key(x_user_id, session_id)
    length = await redis_client.rpush(key, *(json.dumps(m) for m in body.messages))
    await redis_client.expire(key, TTL_SECONDS)
    return {"session_id": session_id, "length": length}


@app.get("/v1/sessions/{session_id}/context")
async def context(
    session_id: str, budget: int = 8000, x_user_id: str = Header("user")
) -> dict[str, Any]:
    history_raw = await redis_client.lrange(_key(x_user_id, session_id), 0, -1)
    history = [json.loads(h) for h in history_raw]
    return prepare_context(history, budget)


@app.get("/readyz")
async def readyz() -> dict[str, str]:
    await redis_client.ping()
    return {"status": "ready"}
