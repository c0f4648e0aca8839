"""A user's facts as the service reads and edits them: each operation once, called by
the HTTP routes (``routes_facts``) and the MCP tools (``convomem.mcp``).

The facts are the user's ``FactHistory`` in the recall index's facts table, one row per
(tenant, user) with a version. An edit is a compare-and-set: read the row, change the
history, save it over the version read; a save that lost a race (a session of the user
saving its extractions, another edit) is retried on a fresh read, up to ``SAVE_RACES``
times, like a session's own facts save. With ``expected`` (``If-Match``) there is no
retry: a version other than the caller's is a 409 carrying the current one as ``ETag``.

- Ids: ``summaries.fact_edits.fact_id`` (a hash of the version's identity, stable across
  restarts and replicas). A correction supersedes: the old version is closed and stays
  in the history under its id; only ``delete`` removes a version.
- Evidence: a value set by hand says so: ``message_id`` is ``"manual:<key id>"`` (the
  API key that set it; ``manual`` and ``set_by`` in ``FactOut``) and ``valid_from`` is
  when it was set; it ranks as the user's own word.
- Recall: a value set by hand is also indexed as a recall item of kind ``"fact"``
  (``search`` finds it like what the user said), id ``"fact:<fact id>"``, under the
  user's newest session (so it is erased with that session, the user, or the user's
  last session). Deleting a fact deletes that item first. A fact read from a message
  has no item of its own: the message is the record, and stays in its session's log
  (delete the session, or erase the user, to remove what was said).
- Every open memory of the user is dropped from this process's cache after an edit, so
  the next context renders the edited facts; another replica drops its own on its next
  request (the cache checks the facts version, ``deps.use_memory``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from ..errors import ConcurrentUpdate
from ..model import Message
from ..stores.database import SessionInfo
from ..summaries.fact_edits import fact_id
from ..summaries.keyed import SUBJECT_USER, KeyedFact, norm_attribute, norm_value
from .deps import ApiKey, Services
from .models import FactIn, FactOut, FactPatch, FactsOut, ProfileOut
from .operations import recall_index
from .problems import Problem, not_found

__all__ = [
    "add_fact",
    "delete_fact",
    "fact_out",
    "get_facts",
    "get_profile",
    "parse_if_match",
    "update_fact",
]

SAVE_RACES: Final = 8
MANUAL: Final = "manual:"
"""The ``message_id`` prefix of a value set by hand (then the key id)."""
RECALL_PREFIX: Final = "fact:"
T = TypeVar("T")


def fact_out(f: KeyedFact) -> FactOut:
    by = f.message_id[len(MANUAL) :] if f.message_id and f.message_id.startswith(MANUAL) else None
    return FactOut(
        id=fact_id(f),
        subject=f.subject,
        attribute=f.attribute,
        value=f.value,
        statement=f.statement(),
        current=f.current,
        source_role=f.source_role,
        session_id=f.session_id,
        message_id=f.message_id,
        seq=f.seq,
        valid_from=f.valid_from,
        valid_to=f.valid_to,
        manual=by is not None,
        set_by=by,
    )


def parse_if_match(value: str | None) -> int | None:
    """The facts version of an ``If-Match`` header (``"3"``, ``W/"3"``); None: absent."""
    if value is None:
        return None
    text = value.strip().removeprefix("W/").strip('"')
    if not text.isdigit():
        raise Problem(
            422,
            "bad-request",
            'If-Match: the facts version (the ETag), e.g. "3"',
            field="If-Match",
            value=value,
        )
    return int(text)


def _index(svc: Services) -> Any:
    index = recall_index(svc)
    if not hasattr(index, "facts"):
        raise Problem(400, "recall-off", "this version's recall index keeps no facts")
    return index


async def _newest_session(svc: Services, key: ApiKey, user_id: str) -> SessionInfo:
    """The user's newest session; the one 404 of a user with none in the key's tenant."""
    found, _ = await svc.db.sessions(user_id=user_id, tenant=key.tenant, limit=1)
    if not found:
        raise not_found("user", user_id)
    return found[0]


def _check_attribute(attribute: str) -> str:
    canonical = norm_attribute(attribute)
    bad = canonical.startswith("verbatim:") or canonical.endswith(":") or not canonical
    if bad or not attribute.strip():
        raise Problem(
            422,
            "bad-request",
            "attribute: a name such as city or email (pref:<thing>, allergy:<thing>; "
            "verbatim: is reserved)",
            field="attribute",
            value=attribute,
        )
    return attribute.strip()


def _check_value(value: str) -> str:
    if not value.strip():
        raise Problem(422, "bad-request", "value: must not be blank", field="value", value=value)
    return value.strip()


async def get_facts(svc: Services, key: ApiKey, user_id: str, *, history: bool) -> FactsOut:
    """The user's current facts (and every version with ``history``)."""
    index = _index(svc)
    await _newest_session(svc, key, user_id)
    h = await index.facts(user_id, tenant=key.tenant)
    return FactsOut(
        user_id=user_id,
        version=h.version,
        current=[fact_out(f) for f in h.current(None)],
        history=[fact_out(f) for f in h.versions()] if history else None,
    )


async def get_profile(svc: Services, key: ApiKey, user_id: str) -> ProfileOut:
    """The user's current facts and their rendering (no token cap: every fact)."""
    index = _index(svc)
    await _newest_session(svc, key, user_id)
    h = await index.facts(user_id, tenant=key.tenant)
    current = h.current(None)
    return ProfileOut(
        user_id=user_id,
        version=h.version,
        facts=[fact_out(f) for f in current],
        text=h.render(),
    )


async def _edit(
    svc: Services,
    key: ApiKey,
    user_id: str,
    expected: int | None,
    change: Callable[[Any], tuple[T, bool]],
) -> tuple[T, int]:
    """Apply ``change`` to the user's facts and save them compare-and-set; ``change``
    returns its result and whether it changed anything (nothing: no save). Returns the
    result and the version now stored."""
    index = _index(svc)
    for _ in range(SAVE_RACES):
        h = await index.facts(user_id, tenant=key.tenant)
        if expected is not None and h.version != expected:
            raise _moved(expected, h.version)
        result, changed = change(h)
        if not changed:
            return result, int(h.version)
        try:
            version = await index.save_facts(
                user_id, h, tenant=key.tenant, expected_version=h.version
            )
        except ConcurrentUpdate as exc:
            if expected is not None:
                raise _moved(expected, int(exc.actual)) from None
            continue
        if svc.memories is not None:
            svc.memories.evict(key.tenant, user_id=user_id)
        return result, int(version)
    raise Problem(
        409,
        "conflict",
        f"the facts of user {user_id!r} changed {SAVE_RACES} times while saving; retry",
        field="user_id",
        value=user_id,
    )


def _moved(expected: int, actual: int) -> Problem:
    return Problem(
        409,
        "precondition-failed",
        f"the facts are at version {actual}, not {expected}",
        field="If-Match",
        value=expected,
        headers={"ETag": f'"{actual}"'},
    )


def _manual(key: ApiKey, attribute: str, value: str, subject: str) -> KeyedFact:
    return KeyedFact(
        attribute,
        value,
        subject=subject,
        source_role="user",
        message_id=MANUAL + key.key_id,
        valid_from=time.time(),
    )


async def _index_fact(svc: Services, key: ApiKey, user_id: str, f: KeyedFact) -> None:
    """The recall item of a value set by hand (idempotent: the id is its content's)."""
    newest = await _newest_session(svc, key, user_id)
    text = f.statement() if f.subject == SUBJECT_USER else f"{f.subject}: {f.statement()}"
    item = Message(
        id=RECALL_PREFIX + fact_id(f), role="user", content=text, created_at=f.valid_from
    )
    await svc.recall.add(
        [item], user_id=user_id, session_id=newest.session_id, tenant=key.tenant, kind="fact"
    )


async def add_fact(
    svc: Services, key: ApiKey, user_id: str, body: FactIn, *, expected: int | None = None
) -> tuple[FactOut, bool, int]:
    """Set a fact by hand: it becomes the current value of its key (the one before is
    superseded). Returns the fact, whether it is new (the same value again changes
    nothing) and the facts version."""
    _index(svc)
    await _newest_session(svc, key, user_id)
    new = _manual(key, _check_attribute(body.attribute), _check_value(body.value), body.subject)

    def change(h: Any) -> tuple[tuple[KeyedFact, bool], bool]:
        before = h.get(new.attribute, subject=new.subject)
        filed: KeyedFact = h.put(new)
        return (filed, filed is not before), filed is not before

    (filed, created), version = await _edit(svc, key, user_id, expected, change)
    if filed.message_id is not None and filed.message_id.startswith(MANUAL):
        await _index_fact(svc, key, user_id, filed)  # again on a retry: idempotent
    return fact_out(filed), created, version


async def update_fact(
    svc: Services,
    key: ApiKey,
    user_id: str,
    id_: str,
    body: FactPatch,
    *,
    expected: int | None = None,
) -> tuple[FactOut, bool, int]:
    """Correct the current fact ``id_``: its value (and/or attribute, subject) becomes
    a new version set by hand, and the old one is superseded, not lost. A superseded
    version cannot be corrected (409 naming the current one), except by the very
    correction that superseded it, sent again (answered with its result: a retry is
    safe). Returns the version now current, whether anything changed, the facts
    version."""
    if body.value is None and body.attribute is None and body.subject is None:
        raise Problem(
            422, "bad-request", "give value, attribute or subject", field="value", value=None
        )
    _index(svc)
    await _newest_session(svc, key, user_id)
    value = None if body.value is None else _check_value(body.value)
    attribute = None if body.attribute is None else _check_attribute(body.attribute)

    def change(h: Any) -> tuple[tuple[KeyedFact, bool], bool]:
        old = h.find(id_)
        if old is None:
            raise not_found("fact", id_)
        new = _manual(
            key,
            attribute if attribute is not None else old.attribute,
            value if value is not None else old.value,
            body.subject if body.subject is not None else old.subject,
        )
        if not old.current:
            now = h.get(new.attribute, subject=new.subject)
            if _corrected(old, now, new):  # this correction, sent again: nothing to do
                return (now, False), False
            now = h.get(old.attribute, subject=old.subject)
            hint = f"; the current one is {fact_id(now)}" if now is not None else ""
            raise Problem(
                409, "conflict", f"fact {id_} was superseded{hint}", field="fact_id", value=id_
            )
        filed: KeyedFact = h.put(new, replaces=old)
        return (filed, filed is not old), filed is not old

    (filed, changed), version = await _edit(svc, key, user_id, expected, change)
    if filed.message_id is not None and filed.message_id.startswith(MANUAL):
        await _index_fact(svc, key, user_id, filed)
    return fact_out(filed), changed, version


def _corrected(old: KeyedFact, now: KeyedFact | None, new: KeyedFact) -> bool:
    """Whether ``now`` is ``new`` as a correction of ``old`` already filed it (a PATCH
    retried after its answer was lost is answered, not refused)."""
    return (
        now is not None
        and now.message_id is not None
        and now.message_id.startswith(MANUAL)
        and now.valid_from == old.valid_to
        and norm_value(now.value) == norm_value(new.value)
    )


async def delete_fact(
    svc: Services, key: ApiKey, user_id: str, id_: str, *, expected: int | None = None
) -> int:
    """Delete the version ``id_`` (current or superseded) and its recall item; the facts
    version after it."""
    index = _index(svc)
    await _newest_session(svc, key, user_id)
    h = await index.facts(user_id, tenant=key.tenant)
    if h.find(id_) is None:
        raise not_found("fact", id_)
    if expected is not None and h.version != expected:
        raise _moved(expected, h.version)
    # The recall item first: a failure after it leaves the fact, never a stray copy.
    await index.delete(user_id=user_id, message_ids=[RECALL_PREFIX + id_], tenant=key.tenant)

    def change(h: Any) -> tuple[None, bool]:
        if h.remove(id_) is None:
            raise not_found("fact", id_)
        return None, True

    _, version = await _edit(svc, key, user_id, expected, change)
    return version
