"""The MCP tools and resources of convomem, on the official SDK's ``MCPServer``.

Every tool calls the HTTP service's own operation (``server.operations``,
``server.facts``) for the ``Caller`` of the request: the same checks, the same tenant
scope, the same answers (the API's response models are the tools' output schemas).
``caller`` is a function giving the current ``Caller``: over HTTP the request's key
(``http``), over stdio one fixed tenant (``stdio``).

Errors: a refused call is a tool error (``isError``) whose ``structuredContent`` is
``{"error": <problem>}``, the API's problem document (``type``, ``title``, ``status``,
``detail``, ``field``, ``value``): an unknown id and another tenant's id give the same
one. Arguments that break a tool's input schema are refused by the SDK before the tool
runs, also as a tool error naming the argument. Either way nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from .. import __version__
from ..errors import ConvomemError
from ..model import Message
from ..server import facts, operations
from ..server.deps import ApiKey, Services
from ..server.models import (
    Appended,
    AppendResponse,
    ContextResponse,
    Erased,
    FactIn,
    FactOut,
    FactPatch,
    HitOut,
    ProfileOut,
    SessionPage,
)
from ..server.problems import Problem, body_of, from_error

__all__ = ["Caller", "build_server"]

T = TypeVar("T")
_ID = r"^[^\x00-\x1f\x7f]{1,256}$"

SessionId = Annotated[
    str,
    Field(
        pattern=_ID,
        description="The conversation's session id: any string you choose; the same id "
        "continues the same conversation.",
    ),
]
UserId = Annotated[
    str,
    Field(
        pattern=_ID,
        description="The end user the memory is about (owns the sessions and the facts).",
    ),
]
FactId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="A fact's id (f_...), as get_profile, add_fact or update_fact return it.",
    ),
]
Attribute = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="What the fact is about: city, email, job, name, diet... "
        "(pref:<thing> with value likes/dislikes, allergy:<thing> with value yes).",
    ),
]
Value = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00-\x1f\x7f]+$")]
Subject = Annotated[
    str,
    Field(
        pattern=_ID,
        description="Whom the fact is about: 'user' (the default) or a person or thing "
        "the user mentions ('sister', 'dog').",
    ),
]

INSTRUCTIONS = """\
convomem is the long-term memory of your conversations with a user. Record every turn
with add_messages (the user's message, your reply, tool calls and their results, as
OpenAI chat message dicts), and call get_context before answering: it returns the
conversation to send the model within its token budget (older turns summarized, the
user's facts and recalled snippets of past sessions included). search_memory looks up
what the user said in earlier sessions; get_profile shows the user's facts, which
add_fact, update_fact and delete_fact correct when the user tells you one is wrong."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a tool acts for: the process's services and the caller's key (its tenant)."""

    services: Services
    key: ApiKey


class Hits(BaseModel):
    """What search_memory found, best first."""

    hits: list[HitOut]


class FactChange(BaseModel):
    """A fact written: the version now current, whether anything changed, the facts
    version after it."""

    fact: FactOut
    changed: bool
    version: int


class Deleted(BaseModel):
    """What was deleted."""

    deleted: str
    version: int | None = Field(default=None, description="the facts version after it")


def _refused(exc: ConvomemError) -> CallToolResult:
    p = from_error(exc)
    problem = body_of(p)
    blame = f" ({p.field})" if p.field else ""
    text = f"{p.slug}{blame}: {p.detail}"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"error": problem},
        is_error=True,
    )


async def _run(caller: Callable[[], Caller], work: Callable[[Caller], Awaitable[T]]) -> T:
    """``work`` for the current caller; a ``ConvomemError`` becomes the tool's error
    result (the SDK passes a ``CallToolResult`` through whatever the tool declares)."""
    try:
        return await work(caller())
    except ConvomemError as exc:
        return cast(T, _refused(exc))
    except ValidationError as exc:  # a body model's check the input schema did not make
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        problem = Problem(
            422, "bad-request", f"{field}: {first['msg']}", field=field, value=first.get("input")
        )
        return cast(T, _refused(problem))


def build_server(caller: Callable[[], Caller], *, allow_erase: bool = False) -> MCPServer:
    """The server: the tools below (``erase_user`` only with ``allow_erase``) and the
    resources ``convomem://sessions/{session_id}/transcript`` and
    ``convomem://users/{user_id}/profile``."""
    server: MCPServer = MCPServer(
        "convomem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    write = ToolAnnotations(read_only_hint=False, idempotent_hint=True, open_world_hint=False)
    gone = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    )

    @server.tool(annotations=write)
    async def add_messages(
        session_id: SessionId,
        user_id: UserId,
        messages: Annotated[
            list[dict[str, Any]],
            Field(
                min_length=1,
                description="OpenAI chat messages, oldest first: {role: user|assistant|"
                "system|tool, content, tool_calls?, tool_call_id?, id?}. A message with an "
                "id already stored is not stored twice.",
            ),
        ],
    ) -> AppendResponse:
        """Append messages to a conversation's log (creating the session for user_id
        the first time), and keep its memory current: the context window, the summary
        of older turns, the user's facts read from what was said. Call it after every
        turn with the new messages. A session of another user is refused (conflict)."""

        async def work(c: Caller) -> AppendResponse:
            svc, key = c.services, c.key
            operations.check_sizes(svc, messages)
            converted = operations.convert(messages, "openai")
            info = await operations.open_or_create(svc, key, session_id, user_id)
            added, last = await operations.append(svc, key, info, converted)
            return AppendResponse(
                session_id=session_id,
                last_seq=last,
                messages=[Appended(id=m.id, role=m.role) for m in added],
            )

        return await _run(caller, work)

    @server.tool(annotations=read)
    async def get_context(
        session_id: SessionId,
        budget: Annotated[
            int | None,
            Field(ge=1, description="At most this many tokens (default: the session's own)."),
        ] = None,
        query: Annotated[
            str | None,
            Field(
                max_length=4000,
                description="What to recall from past sessions (default: the newest user message).",
            ),
        ] = None,
        format: Annotated[
            Literal["openai", "anthropic"],
            Field(description="openai: a list of chat messages; anthropic: {system, messages}."),
        ] = "openai",
    ) -> ContextResponse:
        """The conversation to send to the model now, within the token budget: the
        system prompt, the user's facts and recalled snippets of earlier sessions, a
        summary of older turns and the newest messages (tool calls with their results).
        `accounting` says what was kept, summarized or recalled, and the tokens used."""

        async def work(c: Caller) -> ContextResponse:
            answer, _ = await operations.context(
                c.services, c.key, session_id, format=format, budget=budget, query=query
            )
            return answer

        return await _run(caller, work)

    @server.tool(annotations=read)
    async def search_memory(
        user_id: UserId,
        query: Annotated[str, Field(min_length=1, max_length=4000)],
        k: Annotated[int, Field(ge=1, le=100, description="How many hits at most.")] = 10,
        kinds: Annotated[
            list[str] | None,
            Field(description="Only these kinds: user, assistant, tool, summary, fact."),
        ] = None,
    ) -> Hits:
        """Search everything the user's past sessions hold (their messages, summaries of
        older turns, facts set by hand) for `query`, by words and by meaning; best
        first, each with its session and when it was said."""

        async def work(c: Caller) -> Hits:
            found = await operations.search(c.services, c.key, user_id, query, k=k, kinds=kinds)
            return Hits(hits=found)

        return await _run(caller, work)

    @server.tool(annotations=read)
    async def get_profile(user_id: UserId) -> ProfileOut:
        """The user's current facts (name, city, email, preferences, allergies, job...),
        each with the id that update_fact and delete_fact take, and the text every
        context renders from them."""
        return await _run(caller, lambda c: facts.get_profile(c.services, c.key, user_id))

    @server.tool(annotations=write)
    async def add_fact(
        user_id: UserId, attribute: Attribute, value: Value, subject: Subject = "user"
    ) -> FactChange:
        """Record a fact about the user that they told you (or corrected): it becomes the
        current value of `attribute`, and the value before it is kept as history. The
        same value again changes nothing."""

        async def work(c: Caller) -> FactChange:
            body = FactIn(attribute=attribute, value=value, subject=subject)
            fact, created, version = await facts.add_fact(c.services, c.key, user_id, body)
            return FactChange(fact=fact, changed=created, version=version)

        return await _run(caller, work)

    @server.tool(annotations=write)
    async def update_fact(
        user_id: UserId,
        fact_id: FactId,
        value: Value | None = None,
        attribute: Attribute | None = None,
        subject: Subject | None = None,
    ) -> FactChange:
        """Correct one of the user's current facts (give at least one of value,
        attribute, subject): the corrected version becomes current and the old one is
        kept as history. Returns the new version and its id."""

        async def work(c: Caller) -> FactChange:
            patch = FactPatch(value=value, attribute=attribute, subject=subject)
            fact, changed, version = await facts.update_fact(
                c.services, c.key, user_id, fact_id, patch
            )
            return FactChange(fact=fact, changed=changed, version=version)

        return await _run(caller, work)

    @server.tool(annotations=gone)
    async def delete_fact(user_id: UserId, fact_id: FactId) -> Deleted:
        """Forget one of the user's facts (when the user asks you to, or it is wrong and
        has no correct value): it leaves the profile, every context and search."""

        async def work(c: Caller) -> Deleted:
            version = await facts.delete_fact(c.services, c.key, user_id, fact_id)
            return Deleted(deleted=fact_id, version=version)

        return await _run(caller, work)

    @server.tool(annotations=read)
    async def list_sessions(
        user_id: UserId,
        cursor: Annotated[
            str | None, Field(max_length=1024, description="next_cursor of the previous page")
        ] = None,
    ) -> SessionPage:
        """The user's sessions, newest first (100 a page; next_cursor continues)."""

        async def work(c: Caller) -> SessionPage:
            found, nxt = await operations.list_sessions(
                c.services, c.key, user_id=user_id, cursor=cursor, limit=100
            )
            return SessionPage(sessions=found, next_cursor=nxt)

        return await _run(caller, work)

    @server.tool(annotations=gone)
    async def delete_session(session_id: SessionId) -> Deleted:
        """Delete a session: its messages, summary and recall entries. The user's facts
        stay (delete_fact removes one)."""

        async def work(c: Caller) -> Deleted:
            await operations.delete_session(c.services, c.key, session_id)
            return Deleted(deleted=session_id)

        return await _run(caller, work)

    if allow_erase:

        @server.tool(annotations=gone)
        async def erase_user(user_id: UserId) -> Erased:
            """Erase everything stored about the user: every session, summary, recall
            entry and fact. Only when the user asks for it; it cannot be undone."""
            return await _run(caller, lambda c: operations.erase_user(c.services, c.key, user_id))

    @server.resource(
        "convomem://sessions/{session_id}/transcript",
        name="transcript",
        description="A session's messages, oldest first (the newest 500 when longer).",
        mime_type="text/plain",
    )
    async def transcript(session_id: str) -> str:
        return await _resource(caller, lambda c: _transcript(c, session_id))

    @server.resource(
        "convomem://users/{user_id}/profile",
        name="profile",
        description="A user's current facts, with their ids, and their rendering (JSON).",
        mime_type="application/json",
    )
    async def profile(user_id: str) -> str:
        async def work(c: Caller) -> str:
            return (await facts.get_profile(c.services, c.key, user_id)).model_dump_json()

        return await _resource(caller, work)

    return server


async def _resource(caller: Callable[[], Caller], work: Callable[[Caller], Awaitable[str]]) -> str:
    """A resource's text; an unknown (or another tenant's) name is the SDK's not-found
    error (-32602), another refusal a resource error carrying the problem's detail."""
    try:
        return await work(caller())
    except ConvomemError as exc:
        p = from_error(exc)
        if p.status == 404:
            raise ResourceNotFoundError(p.detail) from None
        raise ResourceError(f"{p.slug}: {p.detail}") from None


async def _transcript(c: Caller, session_id: str) -> str:
    limit = c.services.settings.max_page
    page, more = await operations.messages_page(
        c.services, c.key, session_id, limit=limit, newest_first=True
    )
    lines = [f"(earlier messages not shown: the newest {len(page)} follow)"] if more else []
    for d in reversed(page):
        m = Message.from_dict({k: v for k, v in d.items() if k != "seq"})
        text = m.text() or m.calls_text()
        lines.append(f"[{d['seq']}] {m.role}: {text}")
    return "\n".join(lines)
