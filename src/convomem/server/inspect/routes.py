"""The inspector's routes: ``/inspect`` (a user's sessions), ``/inspect/{session}`` (the
page), ``/inspect/{session}/data`` (its sections as JSON, for the live update),
``/inspect/users/{user}/facts`` (a user's facts, with forms that correct, delete and add
them through ``server.facts``, as the API does) and ``/inspect/login``.

Auth is the API's: the same keys, scoped to the key's tenant (another tenant's session is
the same 404 as a missing one). A browser cannot send an ``Authorization`` header when
following a link, so the inspector also takes the key from its cookie
(``convomem_key``: HttpOnly, SameSite=Strict, path ``/inspect``), set by the login form
or by opening any inspector URL once with ``?key=<key>`` (the response stores it and
redirects to the URL without it, so the key does not stay in the address bar or the
history; a key that is not valid is not stored, the login form says so). The key
never reaches the access log: ``redact_access_log`` masks ``key=`` in the logged
paths. Pages answer a missing or wrong key with the login form (401); the data route
with the API's 401 problem.

Each request opens the session's memory from the store as the API does (no state kept
between requests) and explains it with ``session.timeline.atimeline`` over the newest
``limit`` messages; the data route first compares the session's version (its newest
seq, state version and message count) with the page's, and renders nothing when they
are equal.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Final
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ValidationError

from ...session.timeline import Timeline, atimeline
from ...stores.database import SessionInfo
from ...stores.expiry import expired
from ..deps import ApiKey, Services, get_services, open_memory, require_key, session_info
from ..facts import add_fact, delete_fact, get_facts, update_fact
from ..models import FactIn, FactPatch
from ..problems import Problem
from .facts_page import facts_page, facts_url
from .page import login_page, session_page, sessions_page
from .render import sections

__all__ = ["COOKIE", "redact_access_log", "router"]

COOKIE: Final = "convomem_key"
BASE: Final = "/inspect"
DEFAULT_LIMIT: Final = 200
MAX_LIMIT: Final = 2000

router = APIRouter(prefix=BASE, tags=["inspector"], include_in_schema=False)


# -- auth ------------------------------------------------------------------------------


async def inspect_key(request: Request) -> ApiKey:
    """The caller's key: the ``Authorization`` header, else the inspector's cookie; the
    API's checks (known, not revoked, rate limit) apply either way."""
    if "authorization" not in request.headers:
        token = request.cookies.get(COOKIE)
        if token:
            try:
                header = f"Bearer {token}".encode("latin-1")
            except UnicodeEncodeError:
                header = b"Bearer -"
            scope = dict(request.scope)
            scope["headers"] = [*request.scope["headers"], (b"authorization", header)]
            request = Request(scope, request.receive)
    return await require_key(request)


def _html(text: str, status: int = 200, nonce: str | None = None) -> HTMLResponse:
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    csp = (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src {script}; "
        "connect-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    headers = {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    return HTMLResponse(text, status_code=status, headers=headers)


def _login(request: Request, error: str | None, status: int = 401) -> HTMLResponse:
    return _html(login_page(f"{BASE}/login", _local(str(request.url.path)), error), status)


def _local(url: str) -> str:
    """``url`` if it is a path of the inspector, else the inspector's root (no open
    redirect through ``next``)."""
    if url.startswith(BASE) and not url.startswith("//") and "\\" not in url:
        return url
    return BASE


def _set_cookie(response: Response, request: Request, key: str) -> None:
    response.set_cookie(
        COOKIE,
        key,
        path=BASE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


async def _page_key(request: Request) -> ApiKey | Response:
    """For the HTML routes: the key, a redirect storing ``?key=``, or the login form."""
    given = request.query_params.get("key")
    if given is not None:
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "key"]
        target = _local(request.url.path + (f"?{urlencode(rest)}" if rest else ""))
        services = await get_services(request)
        if not given.strip() or await services.keys.verify(given.strip()) is None:
            # Checked before it is stored: a cookie holds only a key that works.
            page = login_page(f"{BASE}/login", target, "This key is not valid.")
            return _html(page, 401)
        response: Response = RedirectResponse(target, status_code=303)
        _set_cookie(response, request, given.strip())
        return response
    try:
        return await inspect_key(request)
    except Problem as exc:
        if exc.status != 401:
            raise
        return _login(request, "A valid API key is required." if _has_key(request) else None)


def _has_key(request: Request) -> bool:
    return "authorization" in request.headers or COOKIE in request.cookies


@router.get("/login")
async def login_form(request: Request, next: str = BASE) -> Response:
    """The login form."""
    return _html(login_page(f"{BASE}/login", _local(next)))


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the key, store it in the cookie and go to ``next``."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    key = (form.get("key") or [""])[0].strip()
    target = _local((form.get("next") or [BASE])[0])
    services = await get_services(request)
    if not key or await services.keys.verify(key) is None:
        return _html(login_page(f"{BASE}/login", target, "This key is not valid."), 401)
    response = RedirectResponse(target, status_code=303)
    _set_cookie(response, request, key)
    return response


_KEY_PARAM: Final = re.compile(r"([?&]key=)[^&#\s]*")


class _Redact(logging.Filter):
    """Masks ``key=<value>`` in the paths uvicorn's access log writes (its record's
    arguments: client, method, path with query, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, str) and "key=" in a for a in record.args
        ):
            record.args = tuple(
                _KEY_PARAM.sub(r"\1[redacted]", a) if isinstance(a, str) else a for a in record.args
            )
        return True


def redact_access_log() -> None:
    """Install the redaction on uvicorn's access logger (once per process)."""
    log = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _Redact) for f in log.filters):
        log.addFilter(_Redact())


# -- pages -----------------------------------------------------------------------------


@router.get("")
async def sessions_of_user(
    request: Request,
    user_id: str | None = Query(None, min_length=1, max_length=256),
    cursor: str | None = Query(None, max_length=1024),
) -> Response:
    """The sessions of ``user_id`` in the key's tenant."""
    key = await _page_key(request)
    if isinstance(key, Response):
        return key
    if user_id is None:
        return _html(sessions_page(None, [], None, BASE))
    services = await get_services(request)
    infos, more = await services.db.sessions(
        user_id=user_id, tenant=key.tenant, cursor=cursor, limit=50
    )
    live = [i for i in infos if not expired(i)]  # past their own TTL: gone
    return _html(sessions_page(user_id, live, more, BASE))


def _version(info: SessionInfo) -> str:
    return f"{info.last_seq}.{info.state_version}.{info.message_count}"


def _price(services: Services) -> Mapping[str, float] | None:
    part = services.settings.extra.get("inspect")
    price = part.get("price") if isinstance(part, Mapping) else None
    return price if isinstance(price, Mapping) else None


async def _explain(services: Services, key: ApiKey, info: SessionInfo, limit: int) -> Timeline:
    """The session's timeline, over the memory the API uses (its tiers included: the
    context it takes is the one ``/context`` would send, recall's answer with it)."""
    memory = open_memory(services, key, info)
    return await atimeline(memory, limit=limit, price=_price(services))


def _data_url(session_id: str, limit: int) -> str:
    q = "" if limit == DEFAULT_LIMIT else f"?limit={limit}"
    return f"{BASE}/{quote(session_id, safe='')}/data{q}"


@router.get("/{session_id}")
async def session_view(
    request: Request,
    session_id: str,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    interval: int = Query(1000, ge=200, le=60_000),
) -> Response:
    """The inspector page of one session."""
    key = await _page_key(request)
    if isinstance(key, Response):
        return key
    services = await get_services(request)
    info = await session_info(services, key, session_id)
    t = await _explain(services, key, info, limit)
    nonce = secrets.token_urlsafe(16)
    back = None
    if info.user_id is not None:
        back = f"{BASE}?{urlencode({'user_id': info.user_id})}"
    html = session_page(
        session_id,
        info,
        sections(t),
        data_url=_data_url(session_id, limit),
        version=_version(info),
        nonce=nonce,
        interval_ms=interval,
        back_url=back,
        facts_url=None if info.user_id is None else facts_url(BASE, info.user_id),
    )
    return _html(html, nonce=nonce)


@router.get("/{session_id}/data")
async def session_data(
    session_id: str,
    key: Annotated[ApiKey, Depends(inspect_key)],
    services: Annotated[Services, Depends(get_services)],
    since: str | None = Query(None, max_length=100),
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
) -> Response:
    """The page's sections and the timeline as JSON; ``{"changed": false}`` when the
    session's version is still ``since``."""
    info = await session_info(services, key, session_id)
    version = _version(info)
    if since == version:
        return JSONResponse({"changed": False, "version": version})
    t = await _explain(services, key, info, limit)
    body = {
        "changed": True,
        "version": version,
        "sections": sections(t),
        "timeline": t.to_dict(),
    }
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


# -- a user's facts: the page and its correction forms ---------------------------------


@router.get("/users/{user_id}/facts")
async def user_facts(request: Request, user_id: str) -> Response:
    """Every version of the user's facts, with forms to correct, delete and add."""
    key = await _page_key(request)
    if isinstance(key, Response):
        return key
    services = await get_services(request)
    facts = await get_facts(services, key, user_id, history=True)
    done = request.query_params.get("done", "")[:300]
    return _html(facts_page(user_id, facts, BASE, notice=done))


@router.post("/users/{user_id}/facts")
async def user_facts_add(request: Request, user_id: str) -> Response:
    """The add form: set a fact by hand (``attribute``, ``value``, ``subject``)."""

    async def add(services: Services, key: ApiKey, form: dict[str, str]) -> str:
        body = _model(FactIn, {"subject": "user", **form})
        fact, created, _ = await add_fact(services, key, user_id, body)
        return f"set {fact.statement}" if created else f"unchanged: {fact.statement}"

    return await _edit_page(request, user_id, add)


@router.post("/users/{user_id}/facts/{fact_id}")
async def user_fact_edit(request: Request, user_id: str, fact_id: str) -> Response:
    """A row's forms: ``action=correct`` with the new ``value``, or ``action=delete``."""

    async def edit(services: Services, key: ApiKey, form: dict[str, str]) -> str:
        action = form.pop("action", "")
        if action == "delete":
            await delete_fact(services, key, user_id, fact_id)
            return "deleted"
        if action != "correct":
            raise Problem(422, "bad-request", "action: correct or delete", field="action")
        fact, _, _ = await update_fact(services, key, user_id, fact_id, _model(FactPatch, form))
        return f"corrected: {fact.statement}"

    return await _edit_page(request, user_id, edit)


def _model(cls: type[BaseModel], data: dict[str, str]) -> Any:
    """A form's fields as ``cls`` (a 422 problem naming the first bad field)."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise Problem(
            422, "bad-request", f"{field}: {first['msg']}", field=field, value=first.get("input")
        ) from None


def _same_site(request: Request) -> bool:
    """Whether a form post comes from the inspector's own pages. The cookie is
    SameSite=Strict (another site's post carries no key); this refuses such a post even
    with a key: by ``Sec-Fetch-Site`` when the browser sends it, else by ``Origin``
    (``null`` under the pages' no-referrer policy)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    return origin in (None, "null") or origin.split("://", 1)[-1] == host


async def _edit_page(
    request: Request,
    user_id: str,
    edit: Callable[[Services, ApiKey, dict[str, str]], Awaitable[str]],
) -> Response:
    """Run a form's edit with the cookie's key, then show the facts page again: after a
    redirect (so a reload does not post twice), or at once with the problem."""
    if not _same_site(request):
        return _html(login_page(f"{BASE}/login", BASE, "A form of another site."), 403)
    key = await _page_key(request)
    if isinstance(key, Response):
        return key
    services = await get_services(request)
    raw = parse_qs((await request.body()).decode("utf-8", "replace"))
    form = {k: v[0] for k, v in raw.items() if v}
    try:
        done = await edit(services, key, form)
    except Problem as exc:
        if exc.status == 404 and exc.field == "user":
            raise
        facts = await get_facts(services, key, user_id, history=True)
        error = (
            exc.detail
            if exc.field is None or exc.detail.startswith(exc.field)
            else (f"{exc.field}: {exc.detail}")
        )
        return _html(facts_page(user_id, facts, BASE, error=error), exc.status)
    target = f"{facts_url(BASE, user_id)}?{urlencode({'done': done})}"
    return RedirectResponse(target, status_code=303)
