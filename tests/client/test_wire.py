"""Problem details become typed errors that are also the errors a local call raises."""

import json

from hypothesis import given
from hypothesis import strategies as st

from convomem.client._wire import Response, error_for, retry_after
from convomem.errors import (
    ConcurrentUpdate,
    InvalidMessage,
    MessageConflict,
    NotFound,
    RequestInvalid,
    ServiceError,
    TransientError,
    Unauthorized,
)

slugs = st.sampled_from(
    ["not-found", "precondition-failed", "message-conflict", "idempotency-conflict", "conflict"]
)
statuses = st.one_of(
    st.sampled_from([401, 403, 404, 409, 422, 429, 500, 503]), st.integers(400, 599)
)
values = st.one_of(st.none(), st.integers(), st.text(max_size=5))


@given(statuses, slugs, st.text(max_size=20), st.one_of(values, st.just("If-Match")), values)
def test_every_error_status_maps_to_its_family(
    status: int, slug: str, detail: str, field: object, value: object
) -> None:
    body = {
        "type": f"https://convomem.dev/problems/{slug}",
        "detail": detail,
        "field": field,
        "value": value,
        "status": status,
    }
    err = error_for(Response(status, {}, json.dumps(body).encode()))
    assert isinstance(err, ServiceError) and err.status == status
    assert err.detail == detail and err.details == body
    assert isinstance(err.field, str) and err.value == value
    assert str(err)  # renders whatever the problem holds
    if status in (401, 403):
        assert isinstance(err, Unauthorized | PermissionError)
    elif status == 404:
        assert isinstance(err, NotFound | LookupError)
    elif (slug == "idempotency-conflict" and status == 422) or (
        status == 409 and slug.endswith("-conflict") and slug != "conflict"
    ):
        assert isinstance(err, MessageConflict)  # (a reused Idempotency-Key: 422 since issue 20)
    elif status == 409 and (slug == "precondition-failed" or field == "If-Match"):
        assert isinstance(err, ConcurrentUpdate)
    elif status == 409:
        assert type(err) is ServiceError
    elif status in (429, 502, 503, 504):
        assert isinstance(err, TransientError)
    elif status < 500:
        assert isinstance(err, RequestInvalid) and isinstance(err, InvalidMessage)


def test_a_body_that_is_not_a_problem_still_gives_a_typed_error() -> None:
    err = error_for(Response(500, {}, b"<html>proxy error</html>"))
    assert type(err) is ServiceError and "proxy error" in str(err)


def test_retry_after_reads_seconds_and_ignores_dates() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None
    assert retry_after({}) is None
