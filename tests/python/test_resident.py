"""Resident arrays and matrices: results, lifetimes, use after release."""
import time

import numpy as np
import pytest
import scipy.sparse as sp

import gkc
from conftest import EPS32, f32


def resident(c):
    return c.status()["resident"]


def wait_for(pred, what):
    for _ in range(200):
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(what)


def test_upload_download_round_trip(conn, rng):
    x = rng.standard_normal((31, 7)).astype(np.float32)
    i = rng.integers(-2**31, 2**31, size=100, dtype=np.int64).astype(np.int32)
    with conn.upload(x) as hx, conn.upload(i) as hi:
        assert hx.shape == (31, 7) and hx.wire_dtype == "f32" and hi.wire_dtype == "i32"
        assert np.array_equal(conn.download(hx), x)
        assert np.array_equal(hi.download(), i)


def test_context_manager_and_release(conn, gkcd):
    with gkcd.connect() as watcher:
        base = resident(watcher)["arrays"]
        with conn.upload(np.ones(10, np.float32)) as h:
            assert resident(watcher)["arrays"] == base + 1
        assert h.released
        assert resident(watcher)["arrays"] == base
        h2 = conn.upload(np.ones(10, np.float32))
        assert resident(watcher)["arrays"] == base + 1
        h2.release()
        assert resident(watcher)["arrays"] == base


def test_use_after_release(conn):
    h = conn.upload(np.arange(8, dtype=np.float32))
    m = conn.csr_upload(sp.identity(8, format="csr"))
    h.release()
    m.release()
    for call in (lambda: conn.reduce(h), lambda: conn.download(h), lambda: h.release(),
                 lambda: conn.spmv(m, np.ones(8, np.float32)), lambda: m.release(),
                 lambda: conn.axpby(np.ones(8, np.float32), np.ones(8, np.float32), out=h)):
        with pytest.raises(gkc.InvalidArgument, match="released"):
            call()
    # gkcd itself refuses the stale ids with the same class.
    with pytest.raises(gkc.InvalidArgument):
        conn.call("reduce", {"x": {"handle": h.id}})
    with pytest.raises(gkc.InvalidArgument):
        conn.call("spmv", {"matrix": m.id, "x": np.ones(8, np.float32).tobytes()})
    with pytest.raises(gkc.InvalidArgument):
        conn.call("release", {"handle": h.id})


def test_handles_as_arguments_everywhere(conn, rng):
    m, k, n = 20, 30, 10
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    with conn.upload(A) as hA, conn.upload(B) as hB, conn.upload(C) as hC:
        got = conn.sgemm(hA, hB, C=hC, beta=0.5)
        ref = f32(A) @ f32(B) + 0.5 * f32(C)
        mag = np.abs(f32(A)) @ np.abs(f32(B)) + 0.5 * np.abs(f32(C))
        assert np.all(np.abs(got - ref) <= (k + 4) * 2 * EPS32 * mag)
        assert conn.reduce(hC, op="max") == float(f32(C).max())
        assert abs(conn.dot(hC, hC) - (f32(C) ** 2).sum()) <= 2 * (m * n + 2) * EPS32 * (f32(C) ** 2).sum()


def test_results_as_new_and_existing_handles(conn, rng):
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    with conn.upload(x) as hx, conn.upload(y) as hy:
        hz = conn.axpby(hx, hy, alpha=2.0, beta=3.0, out="handle")
        assert isinstance(hz, gkc.Array) and hz.shape == (n,)
        z = 2 * f32(x) + 3 * f32(y)
        assert np.all(np.abs(hz.download() - z) <= 4 * EPS32 * (2 * np.abs(f32(x)) + 3 * np.abs(f32(y))))
        # In place: y <- x - y, the same handle comes back.
        assert conn.axpby(hx, hy, alpha=1.0, beta=-1.0, out=hy) is hy
        assert np.all(np.abs(hy.download() - (f32(x) - f32(y))) <= 4 * EPS32 * (np.abs(f32(x)) + np.abs(f32(y))))
        # Overwrite an existing array with an sgemm result.
        A = rng.standard_normal((n, 1)).astype(np.float32)
        conn.sgemm(A, np.ones((1, 1), np.float32), out=hz)
        assert np.array_equal(hz.download(), f32(A).ravel().astype(np.float32))
        hz.release()
        # A result of the wrong size is refused before sending.
        with pytest.raises(gkc.InvalidArgument, match="'out'"):
            conn.axpby(np.ones(3, np.float32), np.ones(3, np.float32), out=hx)


def test_resident_matrix_spmv(conn, rng):
    rows, cols = 500, 400
    A = sp.random(rows, cols, density=0.02, format="csr", random_state=np.random.RandomState(rng.integers(2**31)))
    A = A.astype(np.float32)
    x = rng.standard_normal(cols).astype(np.float32)
    with conn.csr_upload(A) as M, conn.upload(x) as hx:
        assert (M.rows, M.cols, M.nnz) == (rows, cols, A.nnz) and isinstance(M.algo, str)
        hy = conn.spmv(M, hx, out="handle")
        Af = sp.csr_matrix((f32(A.data), A.indices, A.indptr), shape=A.shape)
        ref = Af @ f32(x)
        tol = 2 * (np.diff(A.indptr).max() + 2) * EPS32 * (abs(Af) @ np.abs(f32(x)))
        assert np.all(np.abs(hy.download() - ref) <= tol)
        assert np.all(np.abs(conn.spmv(M, x) - ref) <= tol)
        hy.release()


def test_objects_of_another_connection(conn, gkcd):
    with gkcd.connect() as other:
        h = other.upload(np.ones(4, np.float32))
        with pytest.raises(gkc.InvalidArgument, match="another connection"):
            conn.reduce(h)
        # An unshared handle is invisible to other connections on gkcd too.
        with pytest.raises(gkc.InvalidArgument):
            conn.call("reduce", {"x": {"handle": h.id}})
        s = other.upload(np.full(4, 2.0, np.float32), shared=True)
        assert conn.call("reduce", {"x": {"handle": s.id}})["value"] == 8.0
        s.release()


def test_closing_the_connection_frees_its_objects(gkcd):
    with gkcd.connect() as watcher:
        base = resident(watcher)
        c = gkcd.connect()
        h = c.upload(np.ones(100, np.float32))
        m = c.csr_upload(sp.identity(10, format="csr"))
        assert resident(watcher)["arrays"] == base["arrays"] + 1
        assert resident(watcher)["matrices"] == base["matrices"] + 1
        c.close()
        assert h.released and m.released
        wait_for(lambda: resident(watcher)["arrays"] == base["arrays"]
                 and resident(watcher)["matrices"] == base["matrices"], "objects not freed on close")
        with pytest.raises(gkc.InvalidArgument, match="released"):
            c.reduce(h)
        with pytest.raises(gkc.ConnectionFailed, match="closed"):
            c.ping()
