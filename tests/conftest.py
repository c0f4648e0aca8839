"""Test-wide settings: hypothesis never fails on wall-clock time (CI machines are noisy).

Tests live in folders that mirror ``src/convomem``; shared helpers (``_packing_support``)
sit here, so this folder is put on ``sys.path`` for them.
"""

import sys
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

sys.path.insert(0, str(Path(__file__).parent))

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
