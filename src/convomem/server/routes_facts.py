"""``/v1/users/{user_id}/facts``: a user's long-term facts, read and corrected by hand.

- ``GET`` the current facts (``?history=true``: every version, superseded ones with
  their valid times); ``GET .../{fact_id}`` one version.
- ``POST`` ``{attribute, value, subject?}`` sets a fact (201; the same value again: 200,
  nothing written); ``PATCH .../{fact_id}`` ``{value?, attribute?, subject?}`` corrects
  the current fact (the old value is superseded, not lost); ``DELETE .../{fact_id}``
  removes a version and its recall item (204).

Every answer carries the facts version as ``ETag``; a write sent with ``If-Match:
<version>`` is refused (409, the current version as ``ETag``) when the facts moved,
instead of being applied on the newer facts. The operations are ``server.facts``'s
(the MCP tools call the same). A user of another tenant, or one who owns no session, and
a fact id the user does not have are the same 404 as anything that does not exist.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Path, Response

from .deps import ApiKey, Services, get_services, require_key
from .facts import add_fact, delete_fact, get_facts, parse_if_match, update_fact
from .models import FactIn, FactOut, FactPatch, FactsOut
from .problems import not_found

router = APIRouter(prefix="/v1/users/{user_id}/facts", tags=["facts"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]
FactId = Annotated[str, Path(min_length=1, max_length=64, description="a fact id (f_...)")]
IfMatch = Annotated[
    str | None, Header(max_length=64, description="the facts version this write is based on")
]


def _etag(response: Response, version: int) -> None:
    response.headers["ETag"] = f'"{version}"'


@router.get("", response_model=FactsOut)
async def list_facts(
    user_id: str, key: Key, svc: Svc, response: Response, history: bool = False
) -> FactsOut:
    """The user's long-term facts: the current value of each attribute; with
    ``history=true`` also every version, superseded ones with their valid time."""
    out = await get_facts(svc, key, user_id, history=history)
    _etag(response, out.version)
    return out


@router.get("/{fact_id}", response_model=FactOut)
async def get_fact(
    user_id: str, fact_id: FactId, key: Key, svc: Svc, response: Response
) -> FactOut:
    """One version of a fact, current or superseded."""
    out = await get_facts(svc, key, user_id, history=True)
    _etag(response, out.version)
    for f in out.history or ():
        if f.id == fact_id:
            return f
    raise not_found("fact", fact_id)


@router.post("", status_code=201, response_model=FactOut)
async def post_fact(
    user_id: str,
    body: FactIn,
    key: Key,
    svc: Svc,
    response: Response,
    if_match: IfMatch = None,
) -> FactOut:
    """Set a fact by hand: it supersedes the attribute's current value. Its evidence
    says so (``manual``, ``set_by``: the API key's id). The same value as the current
    one changes nothing (200)."""
    fact, created, version = await add_fact(
        svc, key, user_id, body, expected=parse_if_match(if_match)
    )
    response.status_code = 201 if created else 200
    response.headers["Location"] = (
        f"/v1/users/{quote(user_id, safe='')}/facts/{quote(fact.id, safe='')}"
    )
    _etag(response, version)
    return fact


@router.patch("/{fact_id}", response_model=FactOut)
async def patch_fact(
    user_id: str,
    fact_id: FactId,
    body: FactPatch,
    key: Key,
    svc: Svc,
    response: Response,
    if_match: IfMatch = None,
) -> FactOut:
    """Correct a current fact: the new version (set by hand) is returned; the old one
    is superseded (``?history=true`` lists it with its valid time). Correcting a
    superseded version is a 409 naming the current one."""
    fact, _, version = await update_fact(
        svc, key, user_id, fact_id, body, expected=parse_if_match(if_match)
    )
    _etag(response, version)
    return fact


@router.delete("/{fact_id}", status_code=204)
async def remove_fact(
    user_id: str, fact_id: FactId, key: Key, svc: Svc, if_match: IfMatch = None
) -> Response:
    """Delete a version of a fact (current or superseded) and its recall item. It is
    gone from the facts, the profile every context renders, and recall search."""
    version = await delete_fact(svc, key, user_id, fact_id, expected=parse_if_match(if_match))
    return Response(status_code=204, headers={"ETag": f'"{version}"'})
