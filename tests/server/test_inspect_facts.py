"""The inspector's facts page and its correction forms over HTTP (the browser test
drives the same forms in chromium): what it shows is the API's, a correction supersedes,
a deletion removes, a bad form is shown again with the problem and writes nothing, and
tenants, other sites and missing keys are refused."""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

from fastapi.testclient import TestClient

Headers = dict[str, str]
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs.append(dict(attrs))


def _having(html: str, attr: str) -> list[dict[str, str | None]]:
    p = _Tags()
    p.feed(html)
    return [a for a in p.attrs if attr in a]


def _seed(client: TestClient, h: Headers) -> None:
    assert client.post("/v1/sessions", json={"id": "s1", "user_id": "ana"}, headers=h).is_success
    msgs = [{"role": "user", "content": t} for t in ("I live in Lisbon.", "I moved to Porto.")]
    r = client.post("/v1/sessions/s1/messages", json={"messages": msgs}, headers=h)
    assert r.status_code == 201


def _api(client: TestClient, h: Headers) -> dict[str, Any]:
    out: dict[str, Any] = client.get("/v1/users/ana/facts?history=true", headers=h).json()
    return out


def _post(client: TestClient, h: Headers, path: str, form: str, **extra: str) -> Any:
    return client.post(
        f"/inspect/users/ana/facts{path}",
        content=form,
        headers={**h, **FORM, **extra},
        follow_redirects=False,
    )


def test_the_page_shows_every_version_with_its_forms(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    h = make_key("acme")
    _seed(client, h)
    page = client.get("/inspect/users/ana/facts", headers=h)
    assert page.status_code == 200 and "script" not in page.text
    rows = _having(page.text, "data-fact-id")
    api = _api(client, h)
    assert [r["data-fact-id"] for r in rows] == [f["id"] for f in api["history"]]
    assert [r["data-current"] for r in rows] == ["false", "true"]
    assert page.text.count('value="correct"') == 1 and page.text.count('value="delete"') == 2
    session = client.get("/inspect/s1", headers=h).text
    assert 'href="/inspect/users/ana/facts"' in session
    listing = client.get("/inspect?user_id=ana", headers=h).text
    assert 'href="/inspect/users/ana/facts"' in listing


def test_the_forms_correct_delete_and_add(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    h = make_key("acme")
    _seed(client, h)
    porto = _api(client, h)["current"][0]
    r = _post(client, h, f"/{porto['id']}", "action=correct&value=Faro")
    assert r.status_code == 303 and r.headers["location"].startswith("/inspect/users/ana/facts?")
    shown = client.get(r.headers["location"], headers=h)
    assert "corrected: city: Faro" in shown.text
    api = _api(client, h)
    assert [(f["value"], f["current"]) for f in api["history"]] == [
        ("Lisbon", False),
        ("Porto", False),
        ("Faro", True),
    ]
    assert api["current"][0]["manual"] and api["current"][0]["set_by"]
    lisbon = api["history"][0]
    assert _post(client, h, f"/{lisbon['id']}", "action=delete").status_code == 303
    assert [f["value"] for f in _api(client, h)["history"]] == ["Porto", "Faro"]
    added = _post(client, h, "", "attribute=job&value=nurse&subject=user")
    assert added.status_code == 303
    assert {f["attribute"]: f["value"] for f in _api(client, h)["current"]} == {
        "city": "Faro",
        "job": "nurse",
    }


def test_a_bad_form_is_shown_with_its_problem_and_writes_nothing(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    h = make_key("acme")
    _seed(client, h)
    before = _api(client, h)
    porto, lisbon = before["current"][0], before["history"][0]
    cases = [
        (f"/{porto['id']}", "action=correct&value=", 422, "value"),
        (f"/{porto['id']}", "action=shout", 422, "action"),
        (f"/{lisbon['id']}", "action=correct&value=Braga", 409, "superseded"),
        ("/f_nope", "action=delete", 404, "f_nope"),
        ("", "attribute=verbatim%3Ax&value=1", 422, "attribute"),
        ("", "value=1", 422, "attribute"),
    ]
    for path, form, status, words in cases:
        r = _post(client, h, path, form)
        assert r.status_code == status, (form, r.text)
        assert "data-error" in r.text and words in r.text
    assert _api(client, h) == before


def test_other_sites_tenants_and_missing_keys_are_refused(
    client: TestClient, make_key: Callable[[str], Headers]
) -> None:
    h, other = make_key("acme"), make_key("globex")
    _seed(client, h)
    before = _api(client, h)
    porto = before["current"][0]
    evil = _post(client, h, f"/{porto['id']}", "action=delete", Origin="https://evil.example")
    assert evil.status_code == 403
    site = _post(client, h, f"/{porto['id']}", "action=delete", **{"Sec-Fetch-Site": "cross-site"})
    assert site.status_code == 403
    theirs = _post(client, other, f"/{porto['id']}", "action=delete")
    assert theirs.status_code == 404
    assert client.get("/inspect/users/ana/facts", headers=other).status_code == 404
    anonymous = client.post(
        f"/inspect/users/ana/facts/{porto['id']}", content="action=delete", headers=FORM
    )
    assert anonymous.status_code == 401 and "<form" in anonymous.text
    assert _api(client, h) == before
