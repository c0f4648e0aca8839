"""``Client``: the memory service over HTTP, synchronously (httpx)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from .._io import drive
from .._sse import EventParser
from ..model import Message
from . import _ops
from ._chat import ChatReply, stream_error
from ._common import ClientConfig, import_httpx, transport_error
from ._wire import Request, Response, Sleep, path

__all__ = ["ChatStream", "Client"]

T = TypeVar("T")


class Client:
    """The memory service's API, one method per route, everything scoped to the key's
    tenant. Answers are the service's JSON (dicts); failures are typed errors
    (``convomem.errors.ServiceError`` and its subclasses, which also derive from the
    error a local call would raise: ``NotFound`` is a ``LookupError``, ``SessionMoved``
    a ``ConcurrentUpdate``, ``RateLimited`` a ``TransientError``...).

    ``retries`` repeats a request that is safe to repeat after a transport failure,
    429, 502, 503 or 504 (honouring ``Retry-After``); every write carries an
    ``Idempotency-Key``, so a repeat never writes twice. ``transport`` is an httpx
    transport (``httpx.ASGITransport(app)`` talks to an app in-process); ``http`` an
    httpx client of your own (then ``base_url``, ``timeout`` and ``transport`` are its).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        transport: Any = None,
        http: Any = None,
    ) -> None:
        httpx = self._httpx = import_httpx()
        self._config = ClientConfig.make(base_url, api_key, timeout, retries)
        self._own = http is None
        self._http = http or httpx.Client(
            base_url=self._config.base_url, timeout=timeout, transport=transport
        )

    # -- I/O: the only part the async twin writes differently ------------------------

    def _perform(self, step: Request | Sleep) -> Response | None:
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        try:
            r = self._http.request(
                step.method,
                step.path,
                params=dict(step.params),
                json=step.json,
                headers=self._config.headers(step.headers),
            )
        except self._httpx.TransportError as e:
            raise transport_error(e, step) from e
        return Response(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)

    def _run(self, op: _ops.Op[T]) -> T:
        return drive(op, self._perform)

    # -- sessions ----------------------------------------------------------------------

    def create_session(
        self,
        user_id: str,
        *,
        id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: float | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/sessions``: the new (or, for a known ``id``, existing) session."""
        r = self._config.retries
        return self._run(_ops.create_session(user_id, id, metadata, ttl_seconds, r))

    def session(self, session_id: str) -> dict[str, Any]:
        """``GET /v1/sessions/{id}`` (``NotFound`` when this tenant has no such session)."""
        return self._run(_ops.get(path("sessions", session_id), self._config.retries))

    def list_sessions(
        self, user_id: str | None = None, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of ``GET /v1/sessions``: the sessions and the next cursor (or None)."""
        return self._run(_ops.sessions_page(user_id, cursor, limit, self._config.retries))

    def iter_sessions(
        self, user_id: str | None = None, *, page_size: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every session (of ``user_id``), page after page, as they are needed."""
        cursor: str | None = None
        while True:
            items, cursor = self.list_sessions(user_id, cursor=cursor, limit=page_size)
            yield from items
            if cursor is None:
                return

    def delete_session(self, session_id: str) -> Any:
        """``DELETE /v1/sessions/{id}``."""
        return self._run(_ops.delete(path("sessions", session_id), self._config.retries))

    # -- messages ----------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        messages: Iterable[Mapping[str, Any] | Message],
        *,
        format: str | None = None,
        if_match: int | None = None,
        idempotency_key: str | None = None,
        retry_conflicts: int = 0,
    ) -> dict[str, Any]:
        """``POST /v1/sessions/{id}/messages`` with OpenAI dicts (``format="anthropic"``:
        Anthropic's), or ``Message`` objects. ``if_match`` is the seq this writer saw: a
        session that moved gives ``SessionMoved`` (409), or, with ``retry_conflicts=n``,
        is re-read and the append sent again up to n times."""
        dicts, fmt = _ops.message_dicts(messages, format)
        op = _ops.append(
            session_id,
            dicts,
            format=fmt,
            if_match=if_match,
            idempotency_key=idempotency_key,
            retry_conflicts=self._config.count("retry_conflicts", retry_conflicts),
            retries=self._config.retries,
        )
        return self._run(op)

    def messages(
        self, session_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of ``GET /v1/sessions/{id}/messages``: messages and the next cursor."""
        return self._run(_ops.messages_page(session_id, cursor, limit, self._config.retries))

    def iter_messages(
        self, session_id: str, *, page_size: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The session's whole log, oldest first, one page in memory at a time."""
        cursor: str | None = None
        while True:
            items, cursor = self.messages(session_id, cursor=cursor, limit=page_size)
            yield from items
            if cursor is None:
                return

    def context(
        self,
        session_id: str,
        *,
        budget: int | None = None,
        format: str = "openai",
        query: str | None = None,
    ) -> dict[str, Any]:
        """``GET /v1/sessions/{id}/context``: the assembled context and its accounting."""
        op = _ops.context(session_id, budget, format, query, self._config.retries)
        return self._run(op)

    # -- users and recall --------------------------------------------------------------

    def search(
        self, user_id: str, query: str, k: int = 10, *, kinds: list[str] | None = None
    ) -> dict[str, Any]:
        """``POST /v1/recall/search``: ``{"hits": [...]}`` of the user's sessions
        (``kinds``: ``"message"``, ``"summary"``, ``"fact"``...)."""
        op = _ops.search(user_id, query, k, kinds, self._config.retries)
        return self._run(op)

    def facts(self, user_id: str, *, history: bool = False) -> dict[str, Any]:
        """``GET /v1/users/{id}/facts``: the user's current facts (``current``: each with
        its ``id``), and with ``history=True`` every version (``history``: superseded
        ones with their valid times); ``version`` is what ``if_match=`` takes."""
        return self._run(_ops.facts(user_id, history, self._config.retries))

    def fact(self, user_id: str, fact_id: str) -> dict[str, Any]:
        """``GET /v1/users/{id}/facts/{fact_id}``: one version of a fact."""
        url = path("users", user_id, "facts", fact_id)
        return self._run(_ops.get(url, self._config.retries))

    def add_fact(
        self,
        user_id: str,
        attribute: str,
        value: str,
        *,
        subject: str | None = None,
        if_match: int | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/users/{id}/facts``: set a fact by hand (it supersedes the
        attribute's current value; the same value again changes nothing). ``if_match``:
        the facts ``version`` this is based on (``SessionMoved``, a ``ConcurrentUpdate``
        whose ``actual`` is the current version, when the facts moved)."""
        body = _ops.fact_body(attribute=attribute, value=value, subject=subject)
        op = _ops.fact_write("POST", user_id, None, body, if_match, self._config.retries)
        return self._run(op)

    def update_fact(
        self,
        user_id: str,
        fact_id: str,
        *,
        value: str | None = None,
        attribute: str | None = None,
        subject: str | None = None,
        if_match: int | None = None,
    ) -> dict[str, Any]:
        """``PATCH /v1/users/{id}/facts/{fact_id}``: correct a current fact; returns the
        new version (the old one is superseded, still in ``facts(history=True)``)."""
        body = _ops.fact_body(value=value, attribute=attribute, subject=subject)
        op = _ops.fact_write("PATCH", user_id, fact_id, body, if_match, self._config.retries)
        return self._run(op)

    def delete_fact(self, user_id: str, fact_id: str, *, if_match: int | None = None) -> None:
        """``DELETE /v1/users/{id}/facts/{fact_id}``: remove a version of a fact and
        its recall item."""
        self._run(_ops.fact_write("DELETE", user_id, fact_id, None, if_match, self._config.retries))

    def erase_user(self, user_id: str) -> Any:
        """``DELETE /v1/users/{id}``: the user's sessions, summaries, facts and vectors."""
        return self._run(_ops.delete(path("users", user_id), self._config.retries))

    # -- chat --------------------------------------------------------------------------

    def chat(
        self,
        session_id: str,
        content: str | None = None,
        *,
        message: Mapping[str, Any] | Message | None = None,
        budget: int | None = None,
        query: str | None = None,
    ) -> ChatStream:
        """``POST /v1/sessions/{id}/chat``: iterate the result for the reply's deltas
        (text pieces) as the model writes them; then ``.text``, ``.message_id`` and
        ``.usage`` describe the stored reply. An upstream failure raises
        ``ServiceUnavailable`` (nothing of the reply was stored)."""
        return ChatStream(self, _ops.chat_request(session_id, content, message, budget, query))

    # -- operations --------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        return self._run(_ops.get("/healthz", self._config.retries))

    def ready(self) -> dict[str, Any]:
        """``GET /readyz`` (``ServiceUnavailable`` when a store is unreachable)."""
        return self._run(_ops.get("/readyz", 0))

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text."""
        return self._run(_ops.get_text("/metrics", self._config.retries))

    def close(self) -> None:
        """Close the connection pool (not an ``http`` client that was passed in)."""
        if self._own:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class ChatStream:
    """One chat turn's reply: iterate it (once) for the deltas."""

    def __init__(self, client: Client, request: Request) -> None:
        self._client = client
        self._request = request
        self.reply = ChatReply()

    @property
    def text(self) -> str:
        """The reply's text (whole once iterated)."""
        return self.reply.text

    @property
    def message_id(self) -> str | None:
        """The stored assistant message's id."""
        return self.reply.message_id

    @property
    def usage(self) -> dict[str, Any]:
        """The turn's token usage."""
        return self.reply.usage

    def __iter__(self) -> Iterator[str]:
        c = self._client
        step = self._request
        try:
            cm = c._http.stream(
                step.method, step.path, json=step.json, headers=c._config.headers(step.headers)
            )
            response = cm.__enter__()
        except c._httpx.TransportError as e:
            raise transport_error(e, step) from e
        try:
            if response.status_code >= 300:
                response.read()
                headers = {k.lower(): v for k, v in response.headers.items()}
                raise stream_error(response.status_code, headers, response.content)
            parser = EventParser()
            try:
                for chunk in response.iter_text():
                    for event in parser.feed(chunk):
                        delta = self.reply.on_event(event)
                        if delta is not None:
                            yield delta
            except c._httpx.TransportError as e:
                raise transport_error(e, step) from e
            self.reply.finish()
        finally:
            cm.__exit__(None, None, None)
