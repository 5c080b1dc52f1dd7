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


# --- co-location (issue 26): a connection's objects land together ---------

def _tridiag(n):
    sp = pytest.importorskip("scipy.sparse")
    return sp.diags([-np.ones(n - 1), 4 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1],
                    format="csr", dtype=np.float32)


@pytest.mark.parametrize("ndev", [2, 3])
def test_csr_upload_then_upload_land_together(daemon_factory, ndev):
    """The issue's scenario: neither names `device`; spmv and solve move nothing."""
    A = _tridiag(400)
    b = (np.sin(0.1 * np.arange(400)) + 1).astype(np.float32)
    d = daemon_factory("--cpu-devices", str(ndev))
    with d.connect(timeout=120) as c:
        used0 = [dev["memory_used"] for dev in c.status()["devices"]]
        with c.csr_upload(A) as hA, c.upload(b) as hb:
            assert hb.device == hA.device
            used = [dev["memory_used"] for dev in c.status()["devices"]]
            for i in range(ndev):  # status shows where they went
                assert (used[i] > used0[i]) == (i == hA.device)
            info = {}
            y = c.spmv(hA, hb, info=info)
            assert info["device"] == hA.device and "peer_bytes" not in info
            ref = A.astype(np.float64) @ b.astype(np.float64)
            assert np.allclose(y, ref, rtol=1e-5, atol=1e-5)
            r = c.solve(hA, hb, rtol=1e-6)
            assert r.converged and r.info["device"] == hA.device
            assert "peer_bytes" not in r.info


@pytest.mark.parametrize("ndev", [2, 3])
def test_connections_spread_and_names_are_obeyed(daemon_factory, rng, ndev):
    A = _tridiag(300)
    x = rng.standard_normal(300).astype(np.float32)
    d = daemon_factory("--cpu-devices", str(ndev))
    conns = [d.connect(timeout=120) for _ in range(ndev)]
    try:
        homes = []
        for c in conns:
            hA, hx = c.csr_upload(A), c.upload(x)
            assert hx.device == hA.device
            homes.append(hA.device)
        assert sorted(homes) == list(range(ndev))  # one connection per device
        # `device` is obeyed, and the connection's next unnamed object follows it.
        c = conns[0]
        other = (homes[0] + 1) % ndev
        hy = c.upload(x, device=other)
        hz = c.upload(x)
        assert hy.device == other and hz.device == other
        # A request on objects apart still runs, moving one and saying so.
        info = {}
        hx0 = c.upload(x, device=homes[0])
        want = float(np.dot(x.astype(np.float64), x.astype(np.float64)))
        assert abs(c.dot(hx0, hz, info=info) - want) <= 300 * EPS32 * want
        assert info["peer_bytes"] == x.nbytes
    finally:
        for c in conns:
            c.close()
