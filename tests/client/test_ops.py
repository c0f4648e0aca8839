"""The client's operations, sans-I/O: driven by a scripted server, they send what the
API documents, retry what is safe to retry, and raise the typed errors."""

import json
from collections.abc import Callable
from typing import Any

import pytest

from convomem._io import drive
from convomem.client import _ops
from convomem.client._wire import Request, Response, Sleep
from convomem.errors import (
    ConcurrentUpdate,
    ConfigError,
    MessageConflict,
    MessageIdConflict,
    RateLimited,
    SessionMoved,
    TransientError,
)
from convomem.model import Message


def answer(status: int, body: Any = None, **headers: str) -> Response:
    raw = b"" if body is None else json.dumps(body).encode()
    return Response(status, {k.replace("_", "-"): v for k, v in headers.items()}, raw)


def problem(status: int, slug: str, **extra: Any) -> Response:
    body = {"type": f"https://convomem.dev/problems/{slug}", "title": slug, "status": status}
    return answer(status, {**body, **extra})


class Script:
    """Answers each request with the next scripted response (or raises it)."""

    def __init__(self, *answers: Response | Exception | Callable[[Request], Response]):
        self.answers = list(answers)
        self.requests: list[Request] = []
        self.sleeps: list[float] = []

    def __call__(self, step: Request | Sleep) -> Response | None:
        if isinstance(step, Sleep):
            self.sleeps.append(step.seconds)
            return None
        self.requests.append(step)
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a(step) if callable(a) else a


def test_a_read_is_retried_on_503_honouring_retry_after() -> None:
    script = Script(answer(503, {}, retry_after="0.25"), answer(200, {"id": "s1"}))
    assert drive(_ops.get("/v1/sessions/s1", 2), script) == {"id": "s1"}
    assert len(script.requests) == 2 and script.sleeps == [0.25]


def test_retries_stop_at_the_limit_and_raise_the_typed_error() -> None:
    script = Script(*[problem(429, "rate-limited")] * 3)
    with pytest.raises(RateLimited) as info:
        drive(_ops.get("/v1/sessions/s1", 2), script)
    assert isinstance(info.value, TransientError) and info.value.status == 429
    assert len(script.requests) == 3 and len(script.sleeps) == 2


def test_a_transport_failure_is_retried_then_raised() -> None:
    script = Script(TransientError("reset"), TransientError("reset"))
    with pytest.raises(TransientError, match="reset"):
        drive(_ops.get("/healthz", 1), script)
    assert len(script.requests) == 2


def test_an_append_carries_its_key_and_if_match() -> None:
    script = Script(answer(200, {"last_seq": 3}))
    op = _ops.append(
        "s/1",
        [{"role": "user", "content": "hi"}],
        if_match=2,
        idempotency_key="k1",
        retry_conflicts=0,
        retries=0,
    )
    assert drive(op, script) == {"last_seq": 3}
    (req,) = script.requests
    assert req.method == "POST" and req.path == "/v1/sessions/s%2F1/messages"
    assert req.headers == {"Idempotency-Key": "k1", "If-Match": "2"}
    assert req.json == {"messages": [{"role": "user", "content": "hi"}]}


def test_a_moved_session_raises_a_concurrent_update_unless_retries_are_asked() -> None:
    moved = problem(409, "precondition-failed", expected=2, actual=5, session_id="s1")
    op = _ops.append("s1", [], if_match=2, idempotency_key=None, retry_conflicts=0, retries=3)
    with pytest.raises(SessionMoved) as info:
        drive(op, Script(moved))
    assert isinstance(info.value, ConcurrentUpdate)
    assert (info.value.expected, info.value.actual, info.value.session_id) == (2, 5, "s1")


def test_a_moved_session_is_retried_at_the_seq_the_problem_names() -> None:
    moved = problem(409, "precondition-failed", expected=2, actual=5)
    script = Script(moved, answer(200, {"last_seq": 6}))
    op = _ops.append(
        "s1",
        [{"role": "user", "content": "x", "id": "m"}],
        if_match=2,
        idempotency_key="k",
        retry_conflicts=1,
        retries=0,
    )
    assert drive(op, script) == {"last_seq": 6}
    first, second = script.requests
    assert first.headers["If-Match"] == "2" and second.headers["If-Match"] == "5"
    # the refused attempt wrote nothing: the retry may not reuse a key a server remembered
    assert first.headers["Idempotency-Key"] == "k" and second.headers["Idempotency-Key"] == "k-1"
    assert len(script.sleeps) == 1


def test_without_the_seq_in_the_problem_the_session_is_re_read() -> None:
    script = Script(
        problem(409, "precondition-failed"),
        answer(200, {"last_seq": 9}),
        problem(409, "precondition-failed"),
        answer(200, {"last_seq": 11}),
        answer(201, {"last_seq": 12}),
    )
    op = _ops.append("s1", [], if_match=1, idempotency_key=None, retry_conflicts=5, retries=0)
    assert drive(op, script) == {"last_seq": 12}
    methods = [(r.method, r.headers.get("If-Match")) for r in script.requests]
    assert methods == [("POST", "1"), ("GET", None), ("POST", "9"), ("GET", None), ("POST", "11")]


def test_the_etag_of_a_refused_append_gives_the_seq_to_retry_at() -> None:
    moved = problem(409, "precondition-failed", field="If-Match", value="1")
    script = Script(Response(409, {"etag": '"7"'}, moved.body), answer(201, {"last_seq": 8}))
    op = _ops.append("s1", [], if_match=1, idempotency_key=None, retry_conflicts=1, retries=0)
    assert drive(op, script) == {"last_seq": 8}
    assert [r.headers.get("If-Match") for r in script.requests] == ["1", "7"]


def test_message_objects_travel_whole_in_convomem_format() -> None:
    m = Message("m1", "user", 5, content="hi", metadata={"k": 1})
    dicts, fmt = _ops.message_dicts([m])
    assert fmt == "convomem" and Message.from_dict(dicts[0]) == m
    assert _ops.message_dicts([{"role": "user", "content": "x"}], "anthropic")[1] == "anthropic"
    with pytest.raises(ConfigError, match="mix"):
        _ops.message_dicts([m, {"role": "user", "content": "x"}])


def test_conflict_retries_are_bounded() -> None:
    script = Script(*[problem(409, "precondition-failed", actual=4)] * 3)
    op = _ops.append("s1", [], if_match=1, idempotency_key=None, retry_conflicts=2, retries=0)
    with pytest.raises(SessionMoved):
        drive(op, script)
    assert len(script.requests) == 3


def test_a_message_id_conflict_is_never_retried() -> None:
    clash = problem(409, "message-conflict", field="messages[0].id", value="m1", seq=3)
    op = _ops.append("s1", [], if_match=1, idempotency_key=None, retry_conflicts=5, retries=0)
    with pytest.raises(MessageIdConflict) as info:
        drive(op, Script(clash))
    assert isinstance(info.value, MessageConflict)
    assert (info.value.message_id, info.value.seq, info.value.field) == ("m1", 3, "messages[0].id")


def test_pages_follow_the_cursor() -> None:
    script = Script(
        answer(200, {"messages": [1, 2], "next_cursor": "c2"}),
        answer(200, {"messages": [3], "next_cursor": None}),
    )
    assert drive(_ops.messages_page("s1", None, 2, 0), script) == ([1, 2], "c2")
    assert drive(_ops.messages_page("s1", "c2", 2, 0), script) == ([3], None)
    assert [r.params for r in script.requests] == [{"limit": 2}, {"cursor": "c2", "limit": 2}]


def test_bad_arguments_raise_before_any_request() -> None:
    with pytest.raises(ConfigError, match="id="):
        _ops.path("sessions", "")
    with pytest.raises(ConfigError, match="not one"):
        _ops.message_dicts({"role": "user", "content": "x"})
    with pytest.raises(ConfigError, match="content="):
        _ops.chat_request("s1", "hi", {"role": "user", "content": "hi"}, None, None)


def test_fact_writes_carry_if_match_and_are_retried() -> None:
    fact = {"id": "f_1", "value": "Porto"}
    script = Script(answer(503, {}), answer(201, fact))
    body = _ops.fact_body(attribute="city", value="Porto", subject=None)
    assert drive(_ops.fact_write("POST", "u/1", None, body, 4, 2), script) == fact
    first, second = script.requests
    assert first == second and first.headers == {"If-Match": '"4"'}
    assert first.path == "/v1/users/u%2F1/facts" and first.json == {
        "attribute": "city",
        "value": "Porto",
    }
    script = Script(answer(204))
    assert drive(_ops.fact_write("DELETE", "u", "f_1", None, None, 0), script) == {}
    assert script.requests[0].path == "/v1/users/u/facts/f_1" and script.requests[0].headers == {}
    script = Script(problem(409, "precondition-failed", field="If-Match", value=4))
    script.answers[0] = Response(409, {"etag": '"7"'}, script.answers[0].body)
    with pytest.raises(SessionMoved) as moved:
        drive(_ops.fact_write("PATCH", "u", "f_1", {"value": "x"}, 4, 2), script)
    assert moved.value.actual == 7 and len(script.requests) == 1


@pytest.mark.parametrize(
    ("if_match", "fields"),
    [(-1, {}), (True, {}), ("3", {}), (None, {"value": 3})],
)
def test_bad_fact_arguments_raise_before_any_request(if_match: Any, fields: Any) -> None:
    script = Script()
    with pytest.raises(ConfigError):
        body = _ops.fact_body(**fields)
        drive(_ops.fact_write("POST", "u", None, body, if_match, 0), script)
    assert script.requests == []
