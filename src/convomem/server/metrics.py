"""``Metrics``: the service's counters and latency histogram in Prometheus' text format.

Written by hand (the format is a few lines of text), so the extra needs no client
library. Each replica counts its own requests; Prometheus adds replicas up. Names:

- ``convomem_requests_total{route, method, status}`` and
  ``convomem_request_seconds{route}`` (a histogram) per route *template*
  (``/v1/sessions/{session_id}``; a path no route matched is ``unmatched``), so ids
  never explode the label space; a method outside ``METHODS`` is ``other`` (a client
  inventing methods adds no series);
- ``convomem_compactions_total``, ``convomem_summarizer_calls_total``,
  ``convomem_recall_hits_total``, ``convomem_store_errors_total``,
  ``convomem_rate_limited_total`` and ``convomem_recall_ingest_failures_total``.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Final

__all__ = ["BUCKETS", "METHODS", "Metrics"]

BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The methods counted by name; any other is counted as ``other``."""

_COUNTERS: Final = {
    "compactions": "Compactions of session views (summaries folded)",
    "summarizer_calls": "Summarizer calls (retries, fallbacks and merges included)",
    "recall_hits": "Items recall returned",
    "store_errors": "Requests that failed on a store error",
    "rate_limited": "Requests refused by the rate limit",
    "recall_ingest_failures": "Messages recall could not index when appended (they wait)",
}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters of one process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self._hist: dict[str, list[float]] = {}
        self._counters: dict[str, int] = dict.fromkeys(_COUNTERS, 0)

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        method = method if method in METHODS else "other"
        with self._lock:
            self._requests[(route, method, status)] += 1
            h = self._hist.get(route)
            if h is None:  # per bucket counts, then the sum and the count
                h = self._hist[route] = [0.0] * (len(BUCKETS) + 2)
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``convomem_<name>_total`` (a name not listed in
        ``_COUNTERS`` is a new counter: parts added later count their own work)."""
        if n:
            with self._lock:
                self._counters[name] = self._counters.get(name, 0) + n

    def value(self, name: str) -> int:
        with self._lock:
            return self._counters.get(name, 0)

    def requests(self, route: str, status: int | None = None) -> int:
        """Requests answered on ``route`` (with ``status`` when given)."""
        with self._lock:
            return sum(
                n
                for (r, _m, s), n in self._requests.items()
                if r == route and (status is None or s == status)
            )

    def render(self) -> str:
        """The Prometheus text exposition (version 0.0.4)."""
        with self._lock:
            lines = [
                "# HELP convomem_requests_total Requests answered, by route template and status",
                "# TYPE convomem_requests_total counter",
            ]
            for (route, method, status), n in sorted(self._requests.items()):
                lines.append(
                    f'convomem_requests_total{{route="{_label(route)}",method="{method}",'
                    f'status="{status}"}} {n}'
                )
            lines += [
                "# HELP convomem_request_seconds Request latency, by route template",
                "# TYPE convomem_request_seconds histogram",
            ]
            for route, h in sorted(self._hist.items()):
                r = _label(route)
                for bound, c in zip(BUCKETS, h, strict=False):
                    lines.append(
                        f'convomem_request_seconds_bucket{{route="{r}",le="{bound}"}} {c:g}'
                    )
                lines.append(f'convomem_request_seconds_bucket{{route="{r}",le="+Inf"}} {h[-1]:g}')
                lines.append(f'convomem_request_seconds_sum{{route="{r}"}} {h[-2]!r}')
                lines.append(f'convomem_request_seconds_count{{route="{r}"}} {h[-1]:g}')
            for name in self._counters:
                help = _COUNTERS.get(name, name.replace("_", " ").capitalize())
                full = f"convomem_{name}_total"
                lines += [f"# HELP {full} {help}", f"# TYPE {full} counter"]
                lines.append(f"{full} {self._counters[name]}")
        return "\n".join(lines) + "\n"
