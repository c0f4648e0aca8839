"""``Metrics``: the Prometheus text it writes (cumulative buckets, escaped labels)."""

from __future__ import annotations

from convomem.server.metrics import BUCKETS, Metrics


def test_histogram_buckets_are_cumulative_and_labels_escaped() -> None:
    m = Metrics()
    for seconds in (0.0005, 0.003, 0.003, 0.2, 30.0):
        m.request('/a"b\\c', "GET", 200, seconds)
    m.add("chat_turns", 2)
    text = m.render()
    route = 'route="/a\\"b\\\\c"'
    counts = []
    for bound in BUCKETS:
        line = next(
            x
            for x in text.splitlines()
            if x.startswith(f'convomem_request_seconds_bucket{{{route},le="{bound}"}}')
        )
        counts.append(float(line.rsplit(" ", 1)[1]))
    assert counts == sorted(counts)  # cumulative
    assert counts[0] == 1 and counts[BUCKETS.index(0.005)] == 3 and counts[-1] == 4
    assert f"convomem_request_seconds_count{{{route}}} 5" in text
    assert f'convomem_requests_total{{{route},method="GET",status="200"}} 5' in text
    assert (
        "convomem_chat_turns_total 2" in text and "# TYPE convomem_chat_turns_total counter" in text
    )
    assert m.requests('/a"b\\c', 200) == 5 and m.value("chat_turns") == 2 and m.value("nope") == 0


def test_labels_are_bounded_whatever_the_methods_clients_invent() -> None:
    m = Metrics()
    for i in range(3000):
        m.request("unmatched", f"M{i}", 405, 0.001)
    m.request("/v1/sessions", "GET", 200, 0.001)
    series = [x for x in m.render().splitlines() if x.startswith("convomem_requests_total{")]
    assert series == [
        'convomem_requests_total{route="/v1/sessions",method="GET",status="200"} 1',
        'convomem_requests_total{route="unmatched",method="other",status="405"} 3000',
    ]
