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
- ``slow``: ``slow_tests.txt`` names it (a module, a test or one parameter of it): the
  tests that took ``SLOW_SECONDS`` or more (setup, call and teardown, the mean of the
  measured runs) and are not ``server`` or ``browser``. ``python tests/_tiers.py
  JUNIT.xml... > tests/slow_tests.txt`` remakes it from the reports of full runs
  (``pytest -n 2 --junitxml=JUNIT.xml``).

An entry of ``SERVER`` or ``SLOW`` that no longer names a test fails a whole-suite run,
so a renamed test cannot leave its tier silently.
"""

from __future__ import annotations

from pathlib import Path

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
    "tests/server/test_api_docs.py::test_swagger_ui_renders_every_operation_with_no_network_but_localhost",
    "tests/stores/test_redis.py::test_tls_with_the_servers_ca",
    "tests/stores/test_redis.py::test_acknowledged_appends_survive_kill_9_with_appendonly",
    "tests/stores/test_redis_cluster.py::test_a_lost_cluster_master_is_transient",
    "tests/test_dist.py",
)

SLOW_SECONDS = 0.5
# One entry a line, "#" starts a comment: `python tests/_tiers.py JUNIT.xml...` prints it.
SLOW = tuple(
    entry
    for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
    if (entry := line.split("#")[0].strip())
)

MARKERS = {
    "server": "needs a real server process (Redis, PostgreSQL, pgbouncer, convomem serve)",
    "browser": "drives chromium through Playwright",
    "slow": f"took {SLOW_SECONDS:g} s or more in a measured run (tests/slow_tests.txt)",
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
    return bool(names & SERVER_FIXTURES) or _named(item.nodeid, SERVER)


def _names(nodeid: str) -> set[str]:
    """Every entry that names the test: its module, its test (all its parameters), itself."""
    cuts = [k for k in range(len(nodeid)) if nodeid.startswith(("::", "["), k)]
    return {nodeid, *(nodeid[:k] for k in cuts)}


def _named(nodeid: str, entries: tuple[str, ...] | frozenset[str]) -> bool:
    return not _names(nodeid).isdisjoint(entries)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _needs_a_server(item):
            item.add_marker(pytest.mark.server)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if _named(item.nodeid, SLOW):
            item.add_marker(pytest.mark.slow)
    if _whole_suite(config):
        ids = [item.nodeid for item in items]
        named = set().union(*map(_names, ids))
        stale = [e for e in SERVER + SLOW if e not in named]
        if stale:
            raise pytest.UsageError(f"tests/_tiers.py names no collected test: {stale}")


def _whole_suite(config: pytest.Config) -> bool:
    """Whether the run collected every test (no path, node id or ``--ignore`` given)."""
    if config.getoption("ignore", None) or config.getoption("ignore_glob", None):
        return False
    here = config.invocation_params.dir
    return [(here / arg).resolve() for arg in config.args] == [config.rootpath / "tests"]


def _junit_times(paths: list[str]) -> dict[str, float]:
    """Each test's mean duration over the JUnit reports (setup, call and teardown)."""
    import xml.etree.ElementTree as ET
    from collections import defaultdict

    times: dict[str, list[float]] = defaultdict(list)
    for path in paths:
        for case in ET.parse(path).iter("testcase"):
            parts = case.get("classname", "").split(".")
            module = next(i for i, p in enumerate(parts) if p.startswith("test_"))
            node = "/".join(parts[: module + 1]) + ".py"
            nodeid = "::".join([node, *parts[module + 1 :], case.get("name", "")])
            times[nodeid].append(float(case.get("time", "0")))
    return {k: sum(v) / len(v) for k, v in times.items()}


def _collected(*args: str) -> list[str]:
    """The node ids a collection with ``args`` keeps, in order."""
    ids: list[str] = []

    class Keep:
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            ids.extend(item.nodeid for item in session.items)

    pytest.main(["--collect-only", "-q", "-p", "no:xdist", *args], plugins=[Keep()])
    return ids


def main(paths: list[str]) -> None:
    """Print ``SLOW`` from JUnit reports: a module when all its tests are slow, a test when
    all its parameters are, else the slow cases."""
    import contextlib
    import io

    times = _junit_times(paths)
    with contextlib.redirect_stdout(io.StringIO()):
        everything, excluded = _collected(), set(_collected("-m", "server or browser"))
    tests = [i for i in everything if i not in excluded]
    slow = {i for i in tests if times.get(i, 0.0) >= SLOW_SECONDS}
    entries: list[str] = []
    for group in (lambda i: i.split("::")[0], lambda i: i.split("[")[0]):
        members: dict[str, list[str]] = {}
        for i in tests:
            members.setdefault(group(i), []).append(i)
        for name, ids in members.items():
            if len(ids) > 1 and all(i in slow and not _named(i, tuple(entries)) for i in ids):
                entries.append(name)
    entries += [i for i in tests if i in slow and not _named(i, tuple(entries))]
    first = {e: next(n for n, i in enumerate(tests) if _named(i, (e,))) for e in entries}
    entries.sort(key=first.__getitem__)
    print(f"# tests/_tiers.py {' '.join(paths)}: {SLOW_SECONDS:g} s or more (their total)")
    for e in entries:
        print(f"{e}  # {sum(times[i] for i in slow if _named(i, (e,))):.1f} s")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
