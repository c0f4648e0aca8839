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
    "Erased",
    "FactIn",
    "FactOut",
    "FactPatch",
    "FactsOut",
    "HitOut",
    "Id",
    "MessagePage",
    "ProfileOut",
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
        description="recall hits for the query: message_id, session_id, kind, score, text, shown"
    )
    recall_status: str = Field(description="ok, failed, timeout, open (breaker) or off")
    facts: dict[str, Any] | None = Field(description="the long-term facts tier (None: off)")
    split: dict[str, int] = Field(description="tokens per tier: system, facts, recall, ...")
    why: dict[str, str]


class ContextResponse(BaseModel):
    format: Literal["openai", "anthropic"]
    context: Any = Field(description="OpenAI messages (a list) or Anthropic's {system, messages}")
    accounting: Accounting


class HitOut(BaseModel):
    """A recall hit: an item of one of the user's sessions (a message, a summary, a fact
    set by hand), its score and what it scored on."""

    message_id: str
    session_id: str
    score: float
    text: str
    kind: str
    seq: int | None
    created_at: float
    lexical: float | None
    similarity: float | None


class Erased(BaseModel):
    """What erasing a user removed."""

    user_id: str
    sessions: int
    items: int


_TEXT = r"^[^\x00-\x1f\x7f]+$"
_SUBJECT = r"^[^\x00-\x1f\x7f]{1,256}$"


class FactIn(Body):
    """A fact to set by hand: ``attribute`` of ``subject`` is ``value`` (``pref:<thing>``
    and ``allergy:<thing>`` attributes are keyed by their object, like extracted ones)."""

    attribute: str = Field(min_length=1, max_length=200, pattern=_TEXT, examples=["city"])
    value: str = Field(min_length=1, max_length=2000, pattern=_TEXT, examples=["Porto"])
    subject: str = Field(default="user", pattern=_SUBJECT, description="whom it is about")


class FactPatch(Body):
    """A correction: the new value (and/or attribute, subject); what is not given stays."""

    value: str | None = Field(default=None, min_length=1, max_length=2000, pattern=_TEXT)
    attribute: str | None = Field(default=None, min_length=1, max_length=200, pattern=_TEXT)
    subject: str | None = Field(default=None, pattern=_SUBJECT)


class FactOut(BaseModel):
    """One version of a fact. ``id`` addresses it (``PATCH`` / ``DELETE``); ``current``
    is false once a newer value superseded it (``valid_to`` says when)."""

    id: str
    subject: str
    attribute: str
    value: str
    statement: str
    current: bool
    source_role: str | None
    session_id: str | None
    message_id: str | None = Field(description="the message it was read in, or manual:<key id>")
    seq: int | None
    valid_from: float | None
    valid_to: float | None
    manual: bool = Field(description="set by hand through the API, not read in a message")
    set_by: str | None = Field(description="the id of the API key that set it by hand")


class FactsOut(BaseModel):
    """A user's facts: the current value of each, and with ``?history=true`` every version
    (superseded ones included, with their valid times). ``version`` is the ``ETag``."""

    user_id: str
    version: int
    current: list[FactOut]
    history: list[FactOut] | None = Field(
        default=None, description="every version, oldest first per attribute (?history=true)"
    )


class ProfileOut(BaseModel):
    """A user's profile: the current facts (with their ids, to correct them) and the text
    every context of the user renders from them."""

    user_id: str
    version: int
    facts: list[FactOut]
    text: str = Field(description="the facts as a context shows them, best ranked first")


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
