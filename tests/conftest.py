"""Test-wide settings: hypothesis never fails on wall-clock time (CI machines are noisy).

Tests live in folders that mirror ``src/convomem``; shared helpers (``_packing_support``)
sit here, so this folder is put on ``sys.path`` for them.
"""

import gc
import sys
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

sys.path.insert(0, str(Path(__file__).parent))

# Collection allocates millions of short-lived objects (assertion rewriting's syntax trees,
# strategies, parameters) beside a large heap of imported modules, which the cyclic GC
# would rescan again and again (a third of collection's time). It is off until collection
# ends; then what collection made is frozen (the tests' collections never rescan it).
gc.disable()


def pytest_collection_finish() -> None:
    gc.freeze()
    gc.enable()


# No "explain" phase: its line tracer makes shrinking a failure many times slower on a
# loaded machine, and the minimal failing example is what a reader needs.
settings.register_profile(
    "convomem",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
settings.load_profile("convomem")

# The store backends as fixtures for every room (sessions, stores, CLI, integrations).
from _servers_postgres import pgbouncer, postgres_server  # noqa: E402, F401
from _store_backends import (  # noqa: E402, F401
    backend,
    postgresql,
    redis,
    redis_cluster,
    redis_cluster_nodes,
    redis_server,
    sqlite_file,
    sqlite_memory,
)

# The tiers (markers server, browser, slow): see _tiers.py.
from _tiers import pytest_collection_modifyitems, pytest_configure  # noqa: E402, F401
