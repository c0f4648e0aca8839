"""Test-wide settings: hypothesis never fails on wall-clock time (CI machines are noisy).

Tests live in folders that mirror ``src/convomem``; shared helpers (``_packing_support``)
sit here, so this folder is put on ``sys.path`` for them.
"""

import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

settings.register_profile("convomem", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("convomem")
