"""The suite's tiers, as markers put on the collected tests (a plugin of ``conftest.py``).

``make check`` runs ``-m "not slow and not server and not browser"`` (the edit loop);
``make test`` runs everything. The rules:

- ``server``: the test needs a real server process (Redis, PostgreSQL, pgbouncer, a
  ``convomem serve``): it uses, directly or through other fixtures, a fixture named in
  ``SERVER_FIXTURES``, or is parametrized with such a name, alone or in a tuple
  (``backend``, ``durable``, ``open_db``: those take the fixture by name at run time),
  or its node id starts with an entry of ``SERVER`` (tests that start their servers
  themselves), or it is marked by hand (``pytest.mark.server`` on a parameter).
- ``browser``: it uses the ``browser`` fixture (chromium, driven by Playwright).
- ``slow``: its node id starts with an entry of ``SLOW``: tests that took 2 s or more
  (setup, call and teardown) and are not already ``server`` or ``browser``.

An entry of ``SERVER`` or ``SLOW`` that no longer names a test fails a whole-suite run,
so a renamed test cannot leave its tier silently.
"""

from __future__ import annotations

import pytest

SERVER_FIXTURES = frozenset(
    {
        "redis_server",
        "redis_cluster_nodes",
        "postgres_server",
        "pgbouncer",
        "redis",
        "redis_cluster",
        "postgresql",
        "serve_app",
        "served",
    }
)

SERVER = (
    "tests/cli/test_serve.py::test_serve_answers_with_a_key_from_keys_create",
    "tests/server/test_api_docs.py::test_swagger_ui_renders_every_operation",
    "tests/stores/test_redis.py::test_tls_with_the_servers_ca",
    "tests/stores/test_redis.py::test_acknowledged_appends_survive_kill_9_with_appendonly",
    "tests/stores/test_redis_cluster.py::test_a_lost_cluster_master_is_transient",
    "tests/test_dist.py::",
)

SLOW: tuple[str, ...] = ()

MARKERS = {
    "server": "needs a real server process (Redis, PostgreSQL, pgbouncer, convomem serve)",
    "browser": "drives chromium through Playwright",
    "slow": "took 2 s or more on its own (tests/_tiers.py lists them)",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, what in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")


def _needs_a_server(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            values = value if isinstance(value, tuple) else (value,)
            names.update(v for v in values if isinstance(v, str))
    return bool(names & SERVER_FIXTURES) or item.nodeid.startswith(SERVER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _needs_a_server(item):
            item.add_marker(pytest.mark.server)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
    if _whole_suite(config):
        ids = [item.nodeid for item in items]
        stale = [e for e in SERVER + SLOW if not any(i.startswith(e) for i in ids)]
        if stale:
            raise pytest.UsageError(f"tests/_tiers.py names no collected test: {stale}")


def _whole_suite(config: pytest.Config) -> bool:
    """Whether the run collected every test (no path, node id or ``--ignore`` given)."""
    if config.getoption("ignore", None) or config.getoption("ignore_glob", None):
        return False
    here = config.invocation_params.dir
    return [(here / arg).resolve() for arg in config.args] == [config.rootpath / "tests"]
