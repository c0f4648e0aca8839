"""The client's sans-I/O layer: requests as values, responses decoded, problems raised.

``Client`` and ``AsyncClient`` differ only in how they perform a ``Request`` (httpx's
sync or async client) and a ``Sleep`` (``_io.Sleep``, the one pause of every room);
everything else (paths, bodies, headers, the decoding of answers, the mapping of problem
details to typed errors, the retries) is written once here and in ``_ops``.

A ``Request`` stays data, not an ``_io.Call`` on the transport: the operations then
know nothing of httpx (a test scripts a server by answering requests, and the
TypeScript client mirrors the same values), and each twin performs it with its own
client in ``_perform``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from .._io import Sleep
from ..errors import (
    ConfigError,
    MessageIdConflict,
    NotFound,
    RateLimited,
    RequestInvalid,
    ServiceError,
    ServiceUnavailable,
    SessionMoved,
    Unauthorized,
)

__all__ = [
    "PROBLEM_BASE",
    "Request",
    "Response",
    "Sleep",
    "as_dict",
    "bad_answer",
    "check_ok",
    "decode",
    "error_for",
    "new_key",
    "path",
    "retry_after",
]

PROBLEM_BASE: Final = "https://convomem.dev/problems/"
"""The prefix of the service's problem ``type`` URIs; the rest is a stable slug."""


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request to the service, relative to its base URL."""

    method: str
    path: str
    params: Mapping[str, str | int] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    stream: bool = False


@dataclass(frozen=True, slots=True)
class Response:
    """What came back: the status, the headers (lower-case names) and the body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def path(*parts: str) -> str:
    """``/v1/...`` with each part percent-encoded (a session id may hold ``/`` or ``?``)."""
    for part in parts:
        if not isinstance(part, str) or not part:
            raise ConfigError(f"id={part!r}: must be a non-empty string")
    return "/v1/" + "/".join(quote(p, safe="") for p in parts)


def new_key() -> str:
    """A fresh ``Idempotency-Key``: retrying a request with it never writes twice."""
    return uuid.uuid4().hex


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The ``Retry-After`` header in seconds (the delta form; a date is not honoured)."""
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _problem(response: Response) -> dict[str, Any]:
    try:
        doc = json.loads(response.body) if response.body else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    if "detail" not in doc and not doc:
        text = response.body[:200].decode("utf-8", "replace")
        doc = {"title": f"HTTP {response.status}", "detail": text}
    return doc


def slug(problem: Mapping[str, Any]) -> str:
    """The last part of a problem ``type`` URI (``".../not-found"`` -> ``"not-found"``)."""
    kind = str(problem.get("type") or "")
    return kind.rstrip("/").rsplit("/", 1)[-1]


def error_for(response: Response) -> ServiceError:
    """The typed error of a non-2xx response (problem details or not).

    The status decides the family. Within 409, the problem's ``type`` tells a message
    id reused with other content from a session that moved past ``If-Match`` (whose
    seq the ``ETag`` header carries) from other conflicts; an ``Idempotency-Key`` reused
    with another body (a 422) is a ``MessageIdConflict`` too.
    """
    problem = _problem(response)
    status = response.status
    kind = slug(problem)
    if kind == "idempotency-conflict" and status in (409, 422):  # 422 since issue 20
        return MessageIdConflict(status, problem)
    if status == 409:
        if kind == "message-conflict":
            return MessageIdConflict(status, problem)
        if kind == "precondition-failed" or problem.get("field") in _SEQ_FIELDS:
            moved = SessionMoved(status, problem)
            if moved.actual < 0:
                seq = _etag_seq(response.headers.get("etag"))
                if seq is None and moved.field in ("seq", "state_version"):
                    seq = moved.value if isinstance(moved.value, int) else None
                moved.actual = -1 if seq is None else seq
            return moved
        return ServiceError(status, problem)
    if status in (401, 403):
        return Unauthorized(status, problem)
    if status == 404:
        return NotFound(status, problem)
    if status == 429:
        return RateLimited(status, problem, retry_after(response.headers))
    if status in (502, 503, 504):
        return ServiceUnavailable(status, problem, retry_after(response.headers))
    if 400 <= status < 500:
        return RequestInvalid(status, problem)
    return ServiceError(status, problem)


_SEQ_FIELDS: Final = ("If-Match", "seq", "state_version")


def _etag_seq(etag: str | None) -> int | None:
    """The seq of an ``ETag: "12"`` header (weak or strong)."""
    if etag is None:
        return None
    text = etag.strip().removeprefix("W/").strip('"')
    return int(text) if text.isdigit() else None


def bad_answer(what: str, problem: str) -> ServiceError:
    """An answer that is not what the API documents (a proxy's page, another service)."""
    return ServiceError(502, {"title": "unexpected answer", "detail": f"{what}: {problem}"})


def as_dict(value: Any, what: str) -> dict[str, Any]:
    """An answer that must be a JSON object."""
    if not isinstance(value, dict):
        raise bad_answer(what, f"answered {type(value).__name__}, not an object")
    return value


def check_ok(response: Response) -> Response:
    """``response`` when it is a success, else its typed error raised."""
    if 200 <= response.status < 300:
        return response
    raise error_for(response)


def decode(response: Response) -> Any:
    """The JSON body of a successful response (``None`` for an empty one)."""
    check_ok(response)
    if not response.body:
        return None
    try:
        return json.loads(response.body)
    except ValueError as e:
        raise ServiceError(
            response.status,
            {"title": "not JSON", "detail": f"the service answered a body that is not JSON: {e}"},
        ) from None
