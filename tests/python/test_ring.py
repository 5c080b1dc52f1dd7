"""The shared-memory ring (issue #28) from the Python package: the same
results over the ring and the socket, the switches that keep the socket,
big frames streaming through it, a region's memfd passed beside it, and
what happens when gkcd goes away or scribbles on it."""
import os

import numpy as np
import pytest
import scipy.sparse as sp

import gkc
from gkc import _ring

from conftest import EPS32, Daemon, f32


@pytest.fixture(scope="module")
def gkcd():
    """A gkcd with rings on, whatever --spin-us this machine's CPU count
    gives it (auto offers them only when gkcd polls)."""
    d = Daemon("--rings", "on")
    yield d
    assert d.stop() == 0


def _pair(gkcd):
    return gkcd.connect(timeout=60), gkcd.connect(timeout=60, ring=False)


def test_same_results_over_ring_and_socket(gkcd, rng):
    cr, cs = _pair(gkcd)
    with cr, cs:
        cr.ping()
        cs.ping()
        assert cr.ring_active and not cs.ring_active
        x = rng.standard_normal(1000).astype(np.float32)
        y = rng.standard_normal(1000).astype(np.float32)
        A = rng.standard_normal((33, 47)).astype(np.float32)
        B = rng.standard_normal((47, 21)).astype(np.float32)
        S = sp.random(120, 1000, density=0.02, format="csr", dtype=np.float32, random_state=1)
        out = []
        for c in (cr, cs):
            out.append((c.reduce(x), c.dot(x, y), c.nrm2(x), c.axpby(x, y, alpha=2.0, beta=-0.5),
                        c.sgemm(A, B), c.spmv(S, x)))
        r, s = out
        xs = f32(x)
        assert abs(r[0] - xs.sum()) <= 1e-5 * np.abs(xs).sum()
        assert abs(r[1] - (xs * f32(y)).sum()) <= 1e-5 * np.abs(xs * f32(y)).sum()
        assert abs(r[2] - np.sqrt((xs * xs).sum())) <= 1e-5 * np.sqrt((xs * xs).sum())
        np.testing.assert_allclose(r[3], 2 * xs - 0.5 * f32(y), rtol=0, atol=4 * EPS32 * 3)
        ref = f32(A) @ f32(B)
        assert np.all(np.abs(r[4] - ref) <= 1e-5 * (np.abs(f32(A)) @ np.abs(f32(B))) + 1e-30)
        refs = S.astype(np.float64) @ xs
        assert np.all(np.abs(r[5] - refs) <= 1e-5 * (abs(S.astype(np.float64)) @ np.abs(xs)) + 1e-30)
        if cr.ping()["backend"] == "cpu":  # deterministic kernels: bit for bit
            for a, b in zip(r, s):
                assert np.array_equal(np.asarray(a), np.asarray(b))
        assert cr.ring_active


def test_resident_and_region_through_the_ring(gkcd, rng):
    with gkcd.connect(timeout=60) as c:
        x = rng.standard_normal(4096).astype(np.float32)
        h = c.upload(x)
        assert c.ring_active
        assert np.array_equal(c.download(h), x)
        assert abs(c.reduce(h) - f32(x).sum()) <= 1e-5 * np.abs(x).sum()
        c.release(h)
        # shm_register: its memfd on the socket, its request in the sq
        reg = c.region(x.nbytes)
        reg.array(x.size)[:] = x
        assert abs(c.reduce(reg.array(x.size)) - f32(x).sum()) <= 1e-5 * np.abs(x).sum()
        c.release(reg)


def test_big_frames_stream_through(gkcd, rng):
    # the arena off and the ring asked for: 3 MiB inline, more than ten
    # times the rings' size
    with gkcd.connect(timeout=60, shm=False, ring=True) as c:
        x = rng.standard_normal(3 << 18).astype(np.float32)
        h = c.upload(x)
        assert c.ring_active
        assert np.array_equal(c.download(h), x)
        c.release(h)


def test_ring_goes_with_the_arena(gkcd, rng, monkeypatch):
    # Without the arena big arrays go in the frames, faster on the socket:
    # no ring unless asked for.
    x = rng.standard_normal(1000).astype(np.float32)
    with gkcd.connect(timeout=60, shm=False) as c:
        assert abs(c.reduce(x) - f32(x).sum()) <= 1e-5 * np.abs(f32(x)).sum()
        assert c.shm_state == "disabled" and not c.ring_active
    monkeypatch.setenv("GKC_NO_SHM", "1")
    with gkcd.connect(timeout=60) as c:
        c.ping()
        assert c.shm_state == "disabled" and not c.ring_active
    monkeypatch.delenv("GKC_NO_SHM")
    with gkcd.connect(timeout=60) as c:
        c.ping()
        assert c.shm_state in ("unused", "active") and c.ring_active


def test_switched_off(gkcd, monkeypatch):
    with gkcd.connect(ring=False) as c:
        c.ping()
        assert not c.ring_active
    monkeypatch.setenv("GKC_NO_RING", "1")
    with gkcd.connect() as c:
        c.ping()
        assert not c.ring_active
    with gkcd.connect(ring=True) as c:  # the keyword wins
        c.ping()
        assert c.ring_active


def test_not_offered(daemon_factory):
    d = daemon_factory("--rings", "off")
    with d.connect() as c:
        assert c.status()["limits"]["rings"] == 0
        x = np.arange(16, dtype=np.float32)
        assert c.reduce(x) == 120.0
        assert not c.ring_active


def test_gkcd_gone(daemon_factory):
    d = daemon_factory("--rings", "on")
    c = d.connect(timeout=30)
    c.ping()
    assert c.ring_active
    d.may_hang = True  # killed here, not stopped by SIGTERM
    d.proc.kill()
    d.proc.wait()
    with pytest.raises(gkc.ConnectionFailed):
        c.ping()
    c.close()


def test_corrupt_completion_ring_is_refused(gkcd):
    """A cq tail past the ring (gkcd's side, as a client sees it) is refused
    before any byte is copied, not trusted."""
    with gkcd.connect(timeout=30) as c:
        c.ping()
        r = c._ring
        r._head = (r._w[_ring._CQ_TAIL] - r.cq - 1) & 0xFFFFFFFF
        with pytest.raises(gkc.ProtocolError):
            c.ping()


def test_many_calls_and_pipelined_threads(gkcd, rng):
    import threading
    with gkcd.connect(timeout=60) as c:
        xs = [rng.standard_normal(16).astype(np.float32) for _ in range(200)]
        bad = []

        def run(k):
            for i in range(k, len(xs), 4):
                v = c.reduce(xs[i])
                if abs(v - f32(xs[i]).sum()) > 1e-5 * np.abs(xs[i]).sum() + 1e-30:
                    bad.append(i)
        ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not bad
        assert c.ring_active
