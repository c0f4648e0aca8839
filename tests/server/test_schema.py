"""schemathesis against the live app's OpenAPI document: for every operation, generated
requests (bounded: ``CONVOMEM_SCHEMA_EXAMPLES`` each, 15 by default) sent with a valid
API key never get a 5xx and every response matches the schema.

schemathesis needs the operations at collection: it reads them from the document of an
app built at import (no store opened, no server started: ``create_app`` opens its store
on the first request). The requests go to a real uvicorn server (in a thread of the test
process, on a free port) that a module fixture starts and stops (its lifespan closes the
store); the fixture checks the live server serves that same document. It serves a SQLite
store in a temporary folder holding one tenant's key and a seeded session, with the rate
limit off (a 429 is conformant but would starve the run) and the chat route on the local
fake upstream, so the streaming route is exercised too.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from _fake_upstream import FakeUpstream, start
from convomem import Message
from convomem.server import Settings, create_app
from convomem.server.keys import KeyStore
from convomem.stores import aopen_store

EXAMPLES = int(os.environ.get("CONVOMEM_SCHEMA_EXAMPLES", "15"))
COVERAGE = os.environ.get("CONVOMEM_SCHEMA_COVERAGE") == "1"

DOCUMENT = create_app(Settings(store="sqlite://")).openapi()
schema = schemathesis.openapi.from_dict(DOCUMENT)


class Live(NamedTuple):
    url: str
    key: str


async def _seed(store: str) -> str:
    db = await aopen_store(store)
    try:
        key = (await KeyStore(db).create("acme")).key
        session = db.session("s1", user_id="u1", tenant="acme")
        await session.append([Message(role="user", content="Where is my parcel?")])
        return key
    finally:
        await db.aclose()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The service on a real uvicorn server, serving the document the cases came from."""
    store = f"sqlite:///{tmp_path_factory.mktemp('schema') / 'service.db'}"
    key = asyncio.run(_seed(store))
    upstream = start(FakeUpstream(reply="A short reply.", pieces=2))
    fake = next(upstream)
    app = create_app(
        Settings(store=store, rate_per_second=0, upstream_url=fake.url, upstream_model="m")
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(1500):  # a hang guard (30 s): nothing is asserted on time
            if server.started or not thread.is_alive():
                break
            time.sleep(0.02)
        assert server.started, "the service did not start"
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/openapi.json").json() == DOCUMENT
        yield Live(url, key)
    finally:
        server.should_exit = True
        thread.join(30)
        upstream.close()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    # Random generation only by default: the explicit phase adds schemathesis's coverage
    # cases, a few hundred per operation computed at collection (minutes on a loaded
    # machine); CONVOMEM_SCHEMA_COVERAGE=1 runs them too.
    phases=[Phase.explicit, Phase.generate] if COVERAGE else [Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
def test_no_server_error_and_every_response_matches_the_schema(
    case: schemathesis.Case, live: Live
) -> None:
    case.call_and_validate(
        base_url=live.url,
        headers={"Authorization": f"Bearer {live.key}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
