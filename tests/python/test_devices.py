"""Several devices from Python: upload(device=, replicate=), the device a
request ran on, and the arguments refused (on --cpu-devices 3)."""
import numpy as np
import pytest

import gkc
from conftest import EPS32


@pytest.fixture
def three(daemon_factory):
    d = daemon_factory("--cpu-devices", "3")
    with d.connect(timeout=120) as c:
        yield c


def test_upload_pinned_and_requests_follow(three, rng):
    x = rng.standard_normal(5000).astype(np.float32)
    want = float(np.sum(x.astype(np.float64)))
    tol = x.size * EPS32 * float(np.sum(np.abs(x.astype(np.float64))))
    for d in range(3):
        with three.upload(x, device=d) as h:
            assert h.device == d
            info = {}
            got = three.reduce(h, info=info)
            assert info["device"] == d
            assert abs(got - want) <= tol
            assert np.array_equal(h.download(), x)


def test_replicate_is_everywhere_and_read_only(three, rng):
    x = rng.standard_normal(3000).astype(np.float32)
    y = rng.standard_normal(3000).astype(np.float32)
    with three.upload(x, replicate=True) as h:
        assert h.device == (0, 1, 2)
        want = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
        mag = float(np.sum(np.abs(x.astype(np.float64) * y)))
        info = {}
        assert abs(three.dot(h, y, info=info) - want) <= x.size * EPS32 * mag
        assert "peer_bytes" not in info
        with pytest.raises(gkc.InvalidArgument, match="replicated"):
            three.axpby(y, h, out=h)


def test_pinned_compute_and_bad_devices(three, rng):
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    info = {}
    c = three.sgemm(a, b, device=2, info=info)
    assert info["device"] == 2
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(c - ref) <= 30 * EPS32 * mag + 1e-30)
    with pytest.raises(gkc.InvalidArgument, match="'device'"):
        three.reduce(a, device=3)
    with pytest.raises(gkc.InvalidArgument, match="'device'"):
        three.upload(a, device=-1)
    with pytest.raises(gkc.InvalidArgument, match="replicate"):
        three.upload(a, device=1, replicate=True)
    devs = three.status()["devices"]
    assert [d["index"] for d in devs] == [0, 1, 2]
    assert all(d["kind"] == "cpu" and d["lost"] is False for d in devs)
