"""Shared-memory regions: the same bytes on both sides, nothing copied."""
import time

import numpy as np
import pytest
import scipy.sparse as sp

import gkc
from conftest import EPS32, f32


class Spy:
    """Records the size of every request the connection packs."""

    def __init__(self, conn):
        self.sizes = []
        real = conn._rpc.request

        def request(method, params):
            msgid, data = real(method, params)
            self.sizes.append((method, len(data)))
            return msgid, data
        conn._rpc.request = request


def test_region_view_is_read_in_place(conn, rng):
    n = 1 << 20
    with conn.region(4 * n) as r:
        v = r.array(n)
        v[:] = rng.standard_normal(n)
        spy = Spy(conn)
        assert conn.reduce(v, op="max") == float(v.max())
        # 4 MiB of floats went as a region reference: the request is tiny.
        assert spy.sizes[-1][1] < 200, spy.sizes
        # Written through the view, seen by gkcd on the next request.
        v[12345] = 1e6
        assert conn.reduce(v, op="max") == 1e6


def test_result_lands_in_the_region(conn, rng):
    m, n, k = 37, 23, 41
    with conn.region(4 * (m * k + k * n + m * n)) as r:
        A = r.array((m, k))
        B = r.array((k, n), offset=A.nbytes)
        out = r.array((m, n), offset=A.nbytes + B.nbytes)
        A[:] = rng.standard_normal((m, k))
        B[:] = rng.standard_normal((k, n))
        out[:] = np.nan
        spy = Spy(conn)
        got = conn.sgemm(A, B, out=out)
        assert got is out
        assert spy.sizes[-1][1] < 300, spy.sizes
        ref = f32(A) @ f32(B)
        assert np.all(np.abs(out - ref) <= (k + 2) * 2 * EPS32 * (np.abs(f32(A)) @ np.abs(f32(B))))
        # A second, independent view of the same bytes sees what gkcd wrote.
        again = np.frombuffer(r._mm, dtype=np.float32, count=m * n, offset=A.nbytes + B.nbytes)
        assert np.array_equal(again.reshape(m, n), out)
        # And gkcd reads its own result back from the region.
        assert conn.reduce(out, op="min") == float(out.min())


def test_slices_of_a_region_are_spans(conn, rng):
    with conn.region(4 * 1000) as r:
        v = r.array(1000)
        v[:] = rng.standard_normal(1000)
        spy = Spy(conn)
        got = conn.dot(v[100:400], v[500:800])
        assert spy.sizes[-1][1] < 200
        ref = f32(v[100:400]) @ f32(v[500:800])
        assert abs(got - ref) <= 302 * 2 * EPS32 * (np.abs(f32(v[100:400])) @ np.abs(f32(v[500:800])))
        # A strided view is not one span: it is sent as bytes, and still right.
        assert conn.reduce(v[::2], op="max") == float(v[::2].max())


def test_spmv_and_axpby_through_a_region(conn, rng):
    rows = cols = 300
    A = sp.random(rows, cols, density=0.03, format="csr", random_state=np.random.RandomState(rng.integers(2**31)))
    nnz = A.nnz
    with conn.region(4 * (rows + 1 + 2 * nnz + 3 * cols)) as r:
        rp = r.array(rows + 1, np.int32)
        ci = r.array(nnz, np.int32, offset=rp.nbytes)
        vals = r.array(nnz, np.float32, offset=rp.nbytes + ci.nbytes)
        x = r.array(cols, offset=rp.nbytes + ci.nbytes + vals.nbytes)
        y = r.array(rows, offset=x.__array_interface__["data"][0] - r.address + x.nbytes)
        z = r.array(rows, offset=y.__array_interface__["data"][0] - r.address + y.nbytes)
        rp[:], ci[:], vals[:] = A.indptr, A.indices, A.data
        x[:] = rng.standard_normal(cols)
        spy = Spy(conn)
        conn.spmv((rp, ci, vals), x, out=y)
        assert spy.sizes[-1][1] < 400
        Af = sp.csr_matrix((f32(A.data), A.indices, A.indptr), shape=A.shape)
        ref = Af @ f32(x)
        assert np.all(np.abs(y - ref) <= 2 * (np.diff(A.indptr).max() + 2) * EPS32 * (abs(Af) @ np.abs(f32(x))))
        conn.axpby(x, y, alpha=2.0, beta=-1.0, out=z)
        assert np.all(np.abs(z - (2 * f32(x) - f32(y))) <= 4 * EPS32 * (2 * np.abs(f32(x)) + np.abs(f32(y))))


def test_download_into_a_region(conn, rng):
    x = rng.standard_normal((10, 20)).astype(np.float32)
    with conn.upload(x) as h, conn.region(x.nbytes) as r:
        out = r.array(x.shape)
        assert conn.download(h, out=out) is out
        assert np.array_equal(out, x)


def test_region_bounds_and_release(conn, gkcd):
    r = conn.region(4096)
    with pytest.raises(gkc.InvalidArgument, match="does not fit"):
        r.array(1025)
    with pytest.raises(gkc.InvalidArgument, match="multiple"):
        r.array(4, offset=2)
    # gkcd checks spans itself: one past the end is its invalid_argument.
    with pytest.raises(gkc.InvalidArgument) as e:
        conn.call("reduce", {"x": {"region": r.id, "offset": 0, "bytes": 4100}})
    assert "region" in str(e.value)
    v = r.array(1024)
    v[:] = 3.0
    with gkcd.connect() as other:
        before = other.status()["resident"]["regions"]
        r.release()
        assert other.status()["resident"]["regions"] == before - 1
    assert r.released
    with pytest.raises(gkc.InvalidArgument, match="released"):
        r.array(4)
    with pytest.raises(gkc.InvalidArgument, match="released"):
        r.release()
    # The view outlives the region: its bytes are still ours, now sent as a copy.
    assert v[0] == 3.0
    assert conn.reduce(v) == 3072.0
    with pytest.raises(gkc.InvalidArgument, match="outside"):
        conn.axpby(np.ones(1024, np.float32), np.ones(1024, np.float32), out=v)
    # gkcd no longer knows the region id.
    with pytest.raises(gkc.InvalidArgument):
        conn.call("reduce", {"x": {"region": r.id, "offset": 0, "bytes": 4}})


def test_out_must_be_a_region_view(conn):
    with pytest.raises(gkc.InvalidArgument, match="outside"):
        conn.axpby(np.ones(4, np.float32), np.ones(4, np.float32), out=np.zeros(4, np.float32))
    with pytest.raises(gkc.InvalidArgument, match="'out'"):
        conn.axpby(np.ones(4, np.float32), np.ones(4, np.float32), out="somewhere")


def test_closing_the_connection_releases_regions(gkcd):
    with gkcd.connect() as watcher:
        base = watcher.status()["resident"]["regions"]
        c = gkcd.connect()
        rs = [c.region(4096) for _ in range(3)]
        assert watcher.status()["resident"]["regions"] == base + 3
        c.close()
        assert all(r.released for r in rs)
        for _ in range(100):
            if watcher.status()["resident"]["regions"] == base:
                break
            time.sleep(0.01)
        assert watcher.status()["resident"]["regions"] == base
