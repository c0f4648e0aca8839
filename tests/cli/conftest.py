"""The durable store backends for the ``convomem sessions`` tests.

The in-memory SQLite backend is left out: each command opens its own database, and
``sqlite://`` is a fresh, empty one each time (test_sessions.py checks the commands
still work on it).
"""

from __future__ import annotations

import pytest

from _store_backends import BACKENDS, Backend

DURABLE = [b for b in BACKENDS if b != "sqlite_memory"]


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.getfixturevalue(request.param)
    return b


@pytest.fixture
def url(durable: Backend) -> str:
    return durable.fresh_url()
