"""Test-wide settings: hypothesis never fails on wall-clock time (CI machines are noisy)."""

from hypothesis import HealthCheck, settings

settings.register_profile("convomem", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("convomem")
