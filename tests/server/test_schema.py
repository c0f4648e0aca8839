"""schemathesis against the live app's OpenAPI document: for every operation, generated
requests (bounded: ``CONVOMEM_SCHEMA_EXAMPLES`` each, 15 by default) sent with a valid
API key never get a 5xx and every response matches the schema.

The app runs on a real uvicorn server (in a thread of the test process, on a free
port), started at import because schemathesis reads the schema at collection, and
stopped by a module fixture (its lifespan closes the store). It serves a SQLite store
in a temporary folder holding one tenant's key and a seeded session, with the rate
limit off (a 429 is conformant but would starve the run) and the chat route on the
local fake upstream, so the streaming route is exercised too.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from _fake_upstream import FakeUpstream, start
from convomem.server import Settings, create_app
from convomem.server.keys import KeyStore
from convomem.stores import aopen_store

EXAMPLES = int(os.environ.get("CONVOMEM_SCHEMA_EXAMPLES", "15"))
COVERAGE = os.environ.get("CONVOMEM_SCHEMA_COVERAGE") == "1"

_folder = Path(tempfile.mkdtemp(prefix="convomem-schema-"))
_store = f"sqlite:///{_folder / 'service.db'}"
_upstream = start(FakeUpstream(reply="A short reply.", pieces=2))
_fake = next(_upstream)  # stopped with the server below


async def _seed() -> str:
    db = await aopen_store(_store)
    try:
        key = (await KeyStore(db).create("acme")).key
        session = db.session("s1", user_id="u1", tenant="acme")
        from convomem import Message

        await session.append([Message(role="user", content="Where is my parcel?")])
        return key
    finally:
        await db.aclose()


def _serve() -> tuple[uvicorn.Server, threading.Thread, str]:
    app = create_app(
        Settings(store=_store, rate_per_second=0, upstream_url=_fake.url, upstream_model="m")
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the service did not start")  # fails collection: never a skip
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


_key = asyncio.run(_seed())
_server, _thread, _url = _serve()
schema = schemathesis.openapi.from_url(f"{_url}/openapi.json")


@pytest.fixture(scope="module", autouse=True)
def _stop_server() -> Iterator[None]:
    yield
    _server.should_exit = True
    _thread.join(30)
    _upstream.close()


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
def test_no_server_error_and_every_response_matches_the_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {_key}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
