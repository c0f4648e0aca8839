"""What every framework adapter does with a ``ConversationMemory``, written once.

An adapter's turn is: find what in the framework's history the memory does not hold yet
(the messages after the newest one it holds), append those, and read the view. That logic
is a generator yielding requests (``Newest``, ``Append``, ``View``, ``Log``, ``Clear``), run by
``run`` over the memory's sync methods or by ``arun`` over its async twins: the adapters'
sync and async paths differ only there.

``Append`` is the one place a batch is written (``append_batch``), so the memory's atomic
batch append replaces the per-message loop in one line when it lands.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import _io
from ..errors import ConfigError
from ..model import Message
from ..session import ConversationMemory

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Newest:
    """Request: the memory's newest logged message (None when the log is empty)."""


@dataclass(frozen=True, slots=True)
class Append:
    """Request: append ``messages`` to the memory, in order."""

    messages: Sequence[Message]


@dataclass(frozen=True, slots=True)
class View:
    """Request: the memory's view (``context("messages", query=query)``)."""

    query: str | None = None


@dataclass(frozen=True, slots=True)
class Log:
    """Request: the memory's log (the newest ``limit`` messages when given)."""

    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Clear:
    """Request: empty the memory (log, summary and view)."""


Request = Newest | Append | View | Log | Clear
Steps = Generator[Request, Any, T]


def append_batch(memory: ConversationMemory, messages: Sequence[Message]) -> None:
    """Append ``messages`` (the one place adapters write a batch)."""
    for m in messages:
        memory.add_message(m)


async def aappend_batch(memory: ConversationMemory, messages: Sequence[Message]) -> None:
    """Async twin of ``append_batch``."""
    for m in messages:
        await memory.aadd_message(m)


def run(memory: ConversationMemory, steps: Steps[T]) -> T:
    """Run ``steps`` over the memory's sync methods."""

    def perform(req: Request) -> Any:
        if isinstance(req, Newest):
            newest = memory.messages(1)
            return newest[0] if newest else None
        if isinstance(req, Append):
            return append_batch(memory, req.messages)
        if isinstance(req, View):
            return memory.context("messages", query=req.query)
        if isinstance(req, Clear):
            return memory.clear(keep_system=False)
        return memory.messages(req.limit)

    return _io.drive(steps, perform)


async def arun(memory: ConversationMemory, steps: Steps[T]) -> T:
    """Run ``steps`` over the memory's async methods."""

    async def perform(req: Request) -> Any:
        if isinstance(req, Newest):
            newest = await memory.amessages(1)
            return newest[0] if newest else None
        if isinstance(req, Append):
            return await aappend_batch(memory, req.messages)
        if isinstance(req, View):
            return await memory.acontext("messages", query=req.query)
        if isinstance(req, Clear):
            return await memory.aclear(keep_system=False)
        return await memory.amessages(req.limit)

    return await _io.adrive(steps, perform)


def unseen(items: Sequence[T], newest: str | None, key: Callable[[T], str]) -> Sequence[T]:
    """The items after the last one whose ``key`` is ``newest``: what a memory whose
    newest message has that key does not hold yet. All of them when none has it (a new
    session, or a framework that passes only the new messages). Walks back from the end:
    the cost is what is new, not the history."""
    if newest is not None:
        for i in range(len(items) - 1, -1, -1):
            if key(items[i]) == newest:
                return items[i + 1 :]
    return items


def record(
    items: Sequence[T],
    key: Callable[[T], str],
    own_key: Callable[[Message], str],
    convert: Callable[[Sequence[T]], list[Message]],
) -> Steps[None]:
    """Append the framework ``items`` the memory does not hold yet (see ``unseen``)."""
    newest: Message | None = yield Newest()
    new = unseen(items, None if newest is None else own_key(newest), key)
    if new:
        yield Append(convert(new))


def record_and_view(
    items: Sequence[T],
    key: Callable[[T], str],
    own_key: Callable[[Message], str],
    convert: Callable[[Sequence[T]], list[Message]],
    query: str | None = None,
) -> Steps[list[Message]]:
    """``record`` the new items, then read the view."""
    yield from record(items, key, own_key, convert)
    view: list[Message] = yield View(query)
    return view


def view_and_open_exchange(query: str | None = None) -> Steps[list[Message]]:
    """The view, then the logged messages after the newest one it shows: an exchange
    still open (a tool call whose results have not arrived), which a view leaves out
    until it is complete. A framework that reads the history before adding the results
    (LangChain's ``RunnableWithMessageHistory``) needs the call to send them after."""
    view: list[Message] = yield View(query)
    shown = {m.id for m in view}
    limit = 8
    while True:
        tail: list[Message] = yield Log(limit)
        for i in range(len(tail) - 1, -1, -1):
            if tail[i].id in shown:
                return view + tail[i + 1 :]
        if len(tail) < limit:
            return view + tail
        limit *= 4


Call = Callable[[], Any]
"""A store call, bound and ready: run as it is (sync), awaited (async database), or in a
worker thread (a sync database reached from async code)."""


def call(steps: Generator[Call, Any, T]) -> T:
    """Run ``steps`` whose requests are store calls, synchronously."""
    return _io.drive(steps, lambda c: c())


async def acall(steps: Generator[Call, Any, T], is_async: bool) -> T:
    """Run ``steps`` whose requests are store calls, from async code."""

    async def perform(c: Call) -> Any:
        return await c() if is_async else await asyncio.to_thread(c)

    return await _io.adrive(steps, perform)


def message_id(m: Message) -> str:
    return m.id


class Memories:
    """One ``ConversationMemory`` per session of a store database, the most recently used
    ``size`` kept open (an evicted one resumes from the store when it is needed again).

    ``db`` is what ``open_store`` / ``aopen_store`` returns; ``options`` are the memories'
    keywords (``budget``, ``tokenizer``, ``recall``, ``summarizer``...). A memory resumes a
    durable session from its derived state, and a write another process made meanwhile is
    caught by the store's compare-and-set (the memory rebuilds and retries).
    """

    def __init__(self, db: Any, options: Mapping[str, Any], size: int = 128) -> None:
        if not callable(getattr(db, "session", None)):
            raise ConfigError(f"db={db!r}: must be a store database (open_store / aopen_store)")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"cache_size={size!r}: must be a positive integer")
        self.db = db
        self.options = dict(options)
        self.size = size
        self._open: OrderedDict[tuple[str | None, str | None, str], ConversationMemory] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> ConversationMemory:
        """The memory of ``session_id`` (owned by ``user_id`` in ``tenant``)."""
        if not isinstance(session_id, str) or not session_id:
            raise ConfigError(f"session id {session_id!r}: must be a non-empty string")
        k = (tenant, user_id, session_id)
        with self._lock:
            memory = self._open.get(k)
            if memory is None:
                store = self.db.session(session_id, user_id=user_id, tenant=tenant)
                memory = ConversationMemory(store=store, **self.options)
                self._open[k] = memory
                while len(self._open) > self.size:
                    self._open.popitem(last=False)
            else:
                self._open.move_to_end(k)
            return memory
