"""A Python client of the memory service (``convomem serve``): ``Client`` and its async
twin ``AsyncClient``, on httpx (``pip install 'convomem[client]'``).

    from convomem.client import Client

    with Client("http://127.0.0.1:8080", api_key) as c:
        c.create_session("u1", id="s1")
        c.append("s1", [{"role": "user", "content": "Hello"}])
        for delta in c.chat("s1", "What did I just say?"):
            print(delta, end="")
        print(c.context("s1", budget=2000)["context"])

Failures are ``convomem.errors.ServiceError`` subclasses built from the service's
problem details; each also derives from the error a local call raises (``NotFound`` is a
``LookupError``, ``SessionMoved`` a ``ConcurrentUpdate``, ``MessageIdConflict`` a
``MessageConflict``, ``RequestInvalid`` an ``InvalidMessage``, ``RateLimited`` and
``ServiceUnavailable`` are ``TransientError``\\ s).
"""

from __future__ import annotations

from ..errors import (
    MessageIdConflict,
    NotFound,
    RateLimited,
    RequestInvalid,
    ServiceError,
    ServiceUnavailable,
    SessionMoved,
    Unauthorized,
)
from .aio import AsyncChatStream, AsyncClient
from .sync import ChatStream, Client

__all__ = [
    "AsyncChatStream",
    "AsyncClient",
    "ChatStream",
    "Client",
    "MessageIdConflict",
    "NotFound",
    "RateLimited",
    "RequestInvalid",
    "ServiceError",
    "ServiceUnavailable",
    "SessionMoved",
    "Unauthorized",
]
