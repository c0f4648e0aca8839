"""Each API operation once, as a generator that yields ``Request`` / ``Sleep`` steps.

A step's result is sent back in (a ``Response`` for a request, ``None`` for a sleep); a
transport failure is thrown in as ``TransientError``. ``Client`` and ``AsyncClient``
drive these with ``_io.drive`` / ``_io.adrive``.

Retries: a request that is safe to repeat (reads, deletes, and writes carrying an
``Idempotency-Key``, which every client write does) is retried on a transport failure,
429, 502, 503 and 504, honouring ``Retry-After``; an append sent with ``If-Match`` is
retried on 409 only when asked (``retry_conflicts``), after re-reading where the
session is (nothing was written by the refused attempt).
"""

from __future__ import annotations

import random
from collections.abc import Generator, Iterable, Mapping
from typing import Any, Final, TypeAlias, TypeVar

from ..errors import ConfigError, SessionMoved, TransientError
from ..model import Message
from ._wire import (
    Request,
    Response,
    Sleep,
    as_dict,
    bad_answer,
    check_ok,
    decode,
    error_for,
    new_key,
    path,
    retry_after,
)

T = TypeVar("T")
Step: TypeAlias = Request | Sleep
Op: TypeAlias = Generator[Step, Any, T]

RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
MAX_PAUSE: Final = 5.0
"""The longest pause between two attempts, whatever ``Retry-After`` asks."""
_rng = random.Random()


def backoff(attempt: int, base: float = 0.05, cap: float = 2.0) -> float:
    """Full jitter: uniform in ``[0, min(cap, base * 2**attempt)]``."""
    return _rng.uniform(0.0, min(cap, base * 2 ** min(attempt, 30)))


def call(request: Request, retries: int, *, retryable: bool = True) -> Op[Response]:
    """Send ``request``; repeat it on a transient failure up to ``retries`` times when
    ``retryable``. Returns the last response (an error status included)."""
    attempt = 0
    while True:
        try:
            response: Response = yield request
        except TransientError:
            if not retryable or attempt >= retries:
                raise
            attempt += 1
            yield Sleep(backoff(attempt))
            continue
        if response.status in RETRY_STATUSES and retryable and attempt < retries:
            attempt += 1
            hint = retry_after(response.headers)
            yield Sleep(min(MAX_PAUSE, hint if hint is not None else backoff(attempt)))
            continue
        return response


def fetch(request: Request, retries: int, *, retryable: bool = True) -> Op[Any]:
    """``call`` and decode: the JSON answer, or the typed error raised."""
    response = yield from call(request, retries, retryable=retryable)
    return decode(response)


def fetch_obj(request: Request, retries: int) -> Op[dict[str, Any]]:
    """``fetch`` of an answer that must be a JSON object."""
    body = yield from fetch(request, retries)
    return as_dict(body, f"{request.method} {request.path}")


def _params(**values: Any) -> dict[str, str | int]:
    return {k: v for k, v in values.items() if v is not None}


def message_dicts(
    messages: Iterable[Mapping[str, Any] | Message], format: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The ``messages`` (and ``format``) of an append body: provider dicts as they are
    (``format`` says which provider: ``"openai"``, the default, or ``"anthropic"``);
    ``Message`` objects whole, as convomem's own format (ids, token counts, metadata
    kept, so a retried append stays idempotent). The two are not mixed in one call."""
    if isinstance(messages, (str, bytes, Mapping, Message)):
        raise ConfigError(f"messages={messages!r}: must be a list of messages, not one")
    items = list(messages)
    objects = [isinstance(m, Message) for m in items]
    if any(objects):
        if not all(objects) or format not in (None, "convomem"):
            raise ConfigError(
                "messages: Message objects are sent as format='convomem'; "
                "do not mix them with provider dicts"
            )
        return [m.to_dict() for m in items if isinstance(m, Message)], "convomem"
    out: list[dict[str, Any]] = []
    for i, m in enumerate(items):
        if not isinstance(m, Mapping):
            raise ConfigError(f"messages[{i}]={m!r}: must be a dict or a Message")
        out.append(dict(m))
    return out, format


def create_session(
    user_id: str,
    session_id: str | None,
    metadata: Mapping[str, Any] | None,
    ttl_seconds: float | None,
    retries: int,
) -> Op[dict[str, Any]]:
    body: dict[str, Any] = {"user_id": user_id}
    if session_id is not None:
        body["id"] = session_id
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if ttl_seconds is not None:
        body["ttl_seconds"] = ttl_seconds
    headers = {"Idempotency-Key": new_key()}
    request = Request("POST", "/v1/sessions", json=body, headers=headers)
    return (yield from fetch_obj(request, retries))


def append(
    session_id: str,
    messages: list[dict[str, Any]],
    *,
    format: str | None = None,
    if_match: int | None,
    idempotency_key: str | None,
    retry_conflicts: int,
    retries: int,
) -> Op[dict[str, Any]]:
    """``POST /v1/sessions/{id}/messages``; on a 409 of a moved session, re-read the
    session's seq and try again, up to ``retry_conflicts`` times."""
    url = path("sessions", session_id, "messages")
    body: dict[str, Any] = {"messages": messages}
    if format is not None:
        body["format"] = format
    base = idempotency_key or new_key()
    conflicts = 0
    while True:
        # A refused attempt wrote nothing, so each attempt may use a key of its own
        # (a server that remembers a 409 under a key would otherwise repeat it).
        key = base if conflicts == 0 else f"{base}-{conflicts}"
        headers = {"Idempotency-Key": key}
        if if_match is not None:
            headers["If-Match"] = str(if_match)
        response = yield from call(Request("POST", url, json=body, headers=headers), retries)
        if response.status == 409 and if_match is not None and conflicts < retry_conflicts:
            error = error_for(response)
            if isinstance(error, SessionMoved):
                conflicts += 1
                yield Sleep(backoff(conflicts))
                if error.actual >= 0:
                    if_match = error.actual
                else:
                    if_match = yield from _last_seq(session_id, retries)
                continue
        return as_dict(decode(response), f"POST {url}")


def _last_seq(session_id: str, retries: int) -> Op[int]:
    info = yield from fetch_obj(Request("GET", path("sessions", session_id)), retries)
    seq = info.get("last_seq")
    if not isinstance(seq, int):
        raise bad_answer(f"GET session {session_id!r}", "no integer last_seq")
    return seq


def page(
    url: str, key: str, params: dict[str, str | int], retries: int
) -> Op[tuple[list[Any], str | None]]:
    """One page of a listing: its items (under ``key``) and the next cursor."""
    body = yield from fetch_obj(Request("GET", url, params=params), retries)
    if not isinstance(body.get(key), list):
        raise bad_answer(f"GET {url}", f"no list {key!r}")
    cursor = body.get("next_cursor")
    return list(body[key]), cursor if isinstance(cursor, str) and cursor else None


def sessions_page(
    user_id: str | None, cursor: str | None, limit: int | None, retries: int
) -> Op[tuple[list[Any], str | None]]:
    params = _params(user_id=user_id, cursor=cursor, limit=limit)
    return (yield from page("/v1/sessions", "sessions", params, retries))


def messages_page(
    session_id: str, cursor: str | None, limit: int | None, retries: int
) -> Op[tuple[list[Any], str | None]]:
    url = path("sessions", session_id, "messages")
    return (yield from page(url, "messages", _params(cursor=cursor, limit=limit), retries))


def context(
    session_id: str, budget: int | None, format: str, query: str | None, retries: int
) -> Op[dict[str, Any]]:
    params = _params(budget=budget, format=format, query=query)
    request = Request("GET", path("sessions", session_id, "context"), params=params)
    return (yield from fetch_obj(request, retries))


def search(
    user_id: str, query: str, k: int, kinds: list[str] | None, retries: int
) -> Op[dict[str, Any]]:
    body: dict[str, Any] = {"user_id": user_id, "query": query, "k": k}
    if kinds is not None:
        body["kinds"] = list(kinds)
    return (yield from fetch_obj(Request("POST", "/v1/recall/search", json=body), retries))


def facts(user_id: str, history: bool, retries: int) -> Op[dict[str, Any]]:
    """``GET /v1/users/{id}/facts`` (every version too with ``history``)."""
    params: dict[str, str | int] = {"history": "true"} if history else {}
    request = Request("GET", path("users", user_id, "facts"), params=params)
    return (yield from fetch_obj(request, retries))


def fact_write(
    method: str,
    user_id: str,
    fact_id: str | None,
    body: dict[str, Any] | None,
    if_match: int | None,
    retries: int,
) -> Op[dict[str, Any]]:
    """``POST`` / ``PATCH`` / ``DELETE`` of a fact: the fact written (``{}`` for a
    delete). Each is safe to repeat (the same value set again, or the same correction
    sent again, changes nothing), so each is retried like a read. ``if_match``: the
    facts version the write is based on."""
    url = path("users", user_id, "facts", *(() if fact_id is None else (fact_id,)))
    headers = {} if if_match is None else {"If-Match": f'"{_version(if_match)}"'}
    answer = yield from fetch(Request(method, url, json=body, headers=headers), retries)
    return {} if method == "DELETE" else as_dict(answer, f"{method} {url}")


def fact_body(**fields: str | None) -> dict[str, Any]:
    """The JSON body of a fact write: the fields given (a ``str`` each)."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise ConfigError(f"{name}={value!r}: must be a string")
        out[name] = value
    return out


def _version(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"if_match={value!r}: must be a facts version (an int >= 0)")
    return value


def get(url: str, retries: int) -> Op[dict[str, Any]]:
    return (yield from fetch_obj(Request("GET", url), retries))


def get_text(url: str, retries: int) -> Op[str]:
    response = yield from call(Request("GET", url), retries)
    return check_ok(response).body.decode("utf-8", "replace")


def delete(url: str, retries: int) -> Op[Any]:
    return (yield from fetch(Request("DELETE", url), retries))


def chat_request(
    session_id: str,
    content: str | None,
    message: Mapping[str, Any] | Message | None,
    budget: int | None,
    query: str | None,
) -> Request:
    """The streaming ``POST /v1/sessions/{id}/chat`` (never retried: it is not idempotent
    unless the message carries an id, and a stream cannot be replayed half-way)."""
    if (content is None) == (message is None):
        raise ConfigError("chat: give content= (a string) or message= (a dict), not both")
    body: dict[str, Any] = {}
    if message is not None:
        (body["message"],), fmt = message_dicts([message])
        if fmt is not None:
            body["format"] = fmt
    else:
        body["content"] = content
    if budget is not None:
        body["budget"] = budget
    if query is not None:
        body["query"] = query
    headers = {"Accept": "text/event-stream"}
    return Request(
        "POST", path("sessions", session_id, "chat"), json=body, headers=headers, stream=True
    )
