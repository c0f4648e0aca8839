"""Errors as RFC 9457 problem details (``application/problem+json``).

Every error the service returns is ``{"type", "title", "status", "detail"}`` plus
``field`` and ``value`` when one input is to blame. ``type`` is a stable URI
(``https://convomem.dev/problems/<slug>``) that clients may switch on. Each
``ConvomemError`` maps to a 4xx, 409 or 503 (``status_of``): the service never answers
500 for an error convomem raised on purpose.
"""

from __future__ import annotations

import math
from typing import Any, Final

from ..errors import (
    ConcurrentUpdate,
    ConfigError,
    ConvomemError,
    CorruptRecord,
    InvalidMessage,
    InvalidPage,
    MessageConflict,
    MissingDependency,
    ServiceProblem,
    SessionOwnerMismatch,
    StoreError,
    TokenizerError,
    TransientError,
    bounded_repr,
)

__all__ = ["BASE", "MEDIA_TYPE", "Problem", "body_of", "from_error", "not_found", "problem_body"]

BASE: Final = "https://convomem.dev/problems/"
MEDIA_TYPE: Final = "application/problem+json"

_TITLES: Final = {
    "bad-request": "The request is not valid",
    "invalid-message": "A message is not valid",
    "unauthorized": "A valid API key is required",
    "forbidden": "The key may not do this",
    "not-found": "No such resource",
    "conflict": "The resource changed",
    "precondition-failed": "The session moved",
    "idempotency-conflict": "The idempotency key was used with another request",
    "message-conflict": "A message id is stored with other content",
    "too-large": "The request is too large",
    "rate-limited": "Too many requests",
    "unavailable": "A store is unavailable; retry later",
    "corrupt-record": "A stored record cannot be read",
    "not-implemented": "The service is not configured for this",
    "recall-off": "The service has no recall index (or it keeps no facts)",
    "internal": "Internal error",
}


Problem = ServiceProblem
"""The service's error (``errors.ServiceProblem``); raise it from a route."""


def body_of(p: ServiceProblem) -> dict[str, Any]:
    """The JSON of a raised problem."""
    return problem_body(p.status, p.slug, p.detail, p.field, p.value)


def problem_body(
    status: int, slug: str, detail: str, field: str | None = None, value: Any = None
) -> dict[str, Any]:
    """The JSON of a problem; ``value`` is shown bounded (a 50 MB input is not echoed)."""
    out: dict[str, Any] = {
        "type": BASE + slug,
        "title": _TITLES.get(slug, slug.replace("-", " ").capitalize()),
        "status": status,
        "detail": _utf8(detail),
    }
    if field is not None:
        out["field"] = _utf8(field)
        out["value"] = _shown(value)
    return out


def _utf8(text: str) -> str:
    """``text`` with any lone surrogate written as its escape: a body is UTF-8, and a
    problem about a bad input must not fail to encode it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _shown(value: Any) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str) and len(value) <= 200:
        return _utf8(value)
    return bounded_repr(value)


def not_found(what: str, name: str) -> Problem:
    """The one 404 of a missing (or another tenant's) resource: identical either way."""
    return Problem(404, "not-found", f"no {what} {bounded_repr(name)}", field=what, value=name)


def from_error(exc: ConvomemError) -> Problem:
    """The problem answering a ``ConvomemError`` (see the module docstring)."""
    if isinstance(exc, ServiceProblem):
        return exc
    detail = str(exc)
    if isinstance(exc, InvalidMessage):
        return Problem(422, "invalid-message", detail, field=exc.field, value=exc.value)
    if isinstance(exc, InvalidPage):
        return Problem(422, "bad-request", detail, field="cursor", value=exc.cursor)
    if isinstance(exc, ConcurrentUpdate):
        return Problem(409, "conflict", detail, field=exc.field, value=exc.actual)
    if isinstance(exc, MessageConflict):
        return Problem(409, "message-conflict", detail, field="id", value=exc.message_id)
    if isinstance(exc, SessionOwnerMismatch):
        return Problem(409, "conflict", "the session belongs to another user", field="user_id")
    if isinstance(exc, CorruptRecord):
        return Problem(503, "corrupt-record", detail)
    if isinstance(exc, MissingDependency):
        return Problem(501, "not-implemented", detail)
    if isinstance(exc, TransientError | StoreError):
        return Problem(503, "unavailable", detail, headers={"Retry-After": "1"})
    if isinstance(exc, ConfigError | TokenizerError | ValueError | TypeError):
        return Problem(422, "bad-request", detail)
    return Problem(400, "bad-request", detail)
