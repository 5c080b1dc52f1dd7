"""The metrics method through the Python package: the text parses, and its
counters move by exactly the requests sent."""
import re

import numpy as np


def sample(text, name, **labels):
    """Sum of the samples of metric `name` whose labels include `labels`."""
    total, seen = 0.0, False
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
            seen = True
    return total if seen else None


def test_metrics_counts_requests(conn, rng):
    before = conn.metrics()
    assert isinstance(before, str) and "# TYPE gkcd_requests_total counter" in before
    n = int(rng.integers(2, 6))
    for _ in range(n):
        x = rng.standard_normal(int(rng.integers(10, 1000))).astype(np.float32)
        assert abs(conn.reduce(x) - x.astype(np.float64).sum()) < 1e-3 * len(x)
    after = conn.metrics()
    ok0 = sample(before, "gkcd_requests_total", method="reduce", code="ok")
    ok1 = sample(after, "gkcd_requests_total", method="reduce", code="ok")
    assert ok1 - ok0 == n
    c0 = sample(before, "gkcd_request_duration_seconds_count", method="reduce") or 0
    assert sample(after, "gkcd_request_duration_seconds_count", method="reduce") - c0 == n
    assert sample(after, "gkcd_requests_total", method="metrics", code="ok") >= 1
