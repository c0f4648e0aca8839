"""The request and response bodies of the API (pydantic models: the OpenAPI document and
the checks of every body come from them)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ..errors import ConfigError
from ..stores.records import ID_RULE, check_id, json_problem

__all__ = [
    "AppendRequest",
    "AppendResponse",
    "Body",
    "ContextResponse",
    "Id",
    "MessagePage",
    "SessionCreate",
    "SessionOut",
    "SessionPage",
]


def _id(value: str) -> str:
    try:
        return check_id("id", value)
    except ConfigError:
        raise ValueError(f"an id must be {ID_RULE}") from None


Id = Annotated[
    str, AfterValidator(_id), Field(min_length=1, max_length=256, description=f"an id: {ID_RULE}")
]
"""A session id, user id (or tenant) the service accepts: ``stores.records.ID_RULE``."""


class Body(BaseModel):
    """A request body: unknown keys are refused, and so is any value that is not plain
    JSON (a lone surrogate, NaN or an infinity: ``json.loads`` takes them, but they
    could not be stored nor sent back)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _plain_json(cls, data: Any) -> Any:
        try:  # one C-level pass; the walk that names the culprit only when it fails
            json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except (ValueError, TypeError):
            raise ValueError(json_problem("body", data) or "body: not plain JSON") from None
        return data


class SessionCreate(Body):
    """A session to create; ``id`` is made when not given."""

    id: Id | None = Field(default=None, description="the session id")
    user_id: Id = Field(description="the user who owns the session")
    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl_seconds: float | None = Field(
        default=None,
        gt=0,
        le=10 * 365 * 86400,
        description="the session expires this long after its last write (and the store's "
        "own TTL, when it has one, still applies)",
    )


class SessionOut(BaseModel):
    """A session: who owns it, what it holds, and its newest seq (the ``ETag``)."""

    id: str
    user_id: str | None
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    expires_at: float | None
    ttl_seconds: float | None = None
    message_count: int
    last_seq: int


class SessionPage(BaseModel):
    sessions: list[SessionOut]
    next_cursor: str | None


class AppendRequest(Body):
    """Messages to append, as OpenAI Chat or Anthropic Messages dicts (or convomem's own
    ``Message.to_dict()``); an ``id`` key is kept as the message id."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    format: Literal["openai", "anthropic", "convomem"] = "openai"
    system: str | list[dict[str, Any]] | None = Field(
        default=None, description="Anthropic's top-level system prompt (format=anthropic)"
    )


class Appended(BaseModel):
    id: str
    role: str


class AppendResponse(BaseModel):
    session_id: str
    last_seq: int
    messages: list[Appended]


class MessagePage(BaseModel):
    """A page of the log, oldest first: each message is ``Message.to_dict()`` plus its
    ``seq``."""

    messages: list[dict[str, Any]]
    next_cursor: str | None


class SummaryOut(BaseModel):
    text: str
    tokens: int
    messages: int
    degraded: bool


class Accounting(BaseModel):
    """Where every message of the log is, and why."""

    budget: int
    tokens: int
    fits: bool
    log_messages: int
    kept: list[str] = Field(description="ids of the log's messages sent, oldest first")
    summarized: int = Field(description="messages the summary stands for")
    omitted: int = Field(description="left out this turn while a compaction waits")
    waiting: int = Field(description="held back: their tool call awaits its result")
    compactions: int
    summary: SummaryOut | None
    recalled: list[dict[str, Any]] = Field(
        description="recall hits for the query: message_id, session_id, kind, score, shown"
    )
    recall_status: str = Field(description="ok, failed, timeout, open (breaker) or off")
    facts: dict[str, Any] | None = Field(description="the long-term facts tier (None: off)")
    split: dict[str, int] = Field(description="tokens per tier: system, facts, recall, ...")
    why: dict[str, str]


class ContextResponse(BaseModel):
    format: Literal["openai", "anthropic"]
    context: Any = Field(description="OpenAI messages (a list) or Anthropic's {system, messages}")
    accounting: Accounting


class ProblemOut(BaseModel):
    """A problem document (RFC 9457), the body of every error."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    value: Any = None


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries documenting problem responses with these status codes."""
    from .problems import MEDIA_TYPE

    schema = {"$ref": "#/components/schemas/ProblemOut"}
    return {
        code: {"description": "a problem document", "content": {MEDIA_TYPE: {"schema": schema}}}
        for code in codes
    }
