"""float64 end to end (issue 27): float64 NumPy arrays stay float64 through
every method that takes them, against float64 references; float32 stays
float32; mixed or unsupported dtypes are refused naming the argument and
both dtypes; a converged float64 solve's x meets rtol by its true residual,
recomputed here in float64."""
import asyncio

import numpy as np
import pytest
import scipy.sparse as sp

import gkc
import gkc.aio

EPS64 = 2.0 ** -53


def laplacian_2d(k):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    e = sp.identity(k)
    return (sp.kron(e, t) + sp.kron(t, e)).tocsr()


def random_spd(rng, n):
    """A dense-ish random SPD matrix with condition number ~1e4."""
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    d = np.logspace(0, 4, n)
    return sp.csr_matrix((q * d) @ q.T)


def true_residual(A, b, x):
    return np.linalg.norm(b - A @ x) / np.linalg.norm(b)


def test_vector_methods_in_float64(conn, rng):
    n = int(rng.integers(1, 200000))
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    got = conn.dot(x, y)
    ref = float(x @ y)
    assert abs(got - ref) <= (n + 2) * EPS64 * float(np.abs(x) @ np.abs(y))
    assert conn.nrm2(x) == pytest.approx(float(np.linalg.norm(x)), rel=1e-13)
    alpha, beta = 0.1, -1.0 / 3.0  # not float32 numbers: kept in float64
    z = conn.axpby(x, y, alpha=alpha, beta=beta)
    assert z.dtype == np.float64 and z.shape == (n,)
    assert np.max(np.abs(z - (alpha * x + beta * y))) <= 4 * EPS64 * np.max(np.abs(x) + np.abs(y))


def test_nrm2_float64_past_float32_range(conn):
    big = np.array([3e200, 4e200])
    assert conn.nrm2(big) == pytest.approx(5e200, rel=1e-15)
    tiny = np.array([3e-200, 4e-200])
    assert conn.nrm2(tiny) == pytest.approx(5e-200, rel=1e-15)


def test_upload_download_byte_exact(conn, rng):
    x = rng.standard_normal((30, 70))
    x[0, :4] = [np.pi, 1e-300, -0.0, 1e300]  # nothing float32 could hold
    with conn.upload(x) as h:
        assert h.wire_dtype == "f64" and h.nbytes == x.size * 8
        back = h.download()
        assert back.dtype == np.float64 and back.shape == x.shape
        assert back.tobytes() == x.tobytes()
        assert conn.call("download", {"handle": h.id})["dtype"] == "f64"
    with conn.upload(x[1:].astype(np.float32)) as h32:  # float32 stays float32
        assert h32.wire_dtype == "f32" and h32.download().dtype == np.float32


def test_spmv_float64(conn, rng):
    A = sp.random(300, 200, density=0.05, format="csr", random_state=np.random.RandomState(rng.integers(2**31)))
    x, y = rng.standard_normal(200), rng.standard_normal(300)
    mag = abs(A) @ np.abs(x) + np.abs(y)
    got = conn.spmv(A, x, alpha=0.7, beta=-0.3, y=y)  # by value: values, x, y all float64
    assert got.dtype == np.float64
    assert np.all(np.abs(got - (0.7 * (A @ x) - 0.3 * y)) <= 64 * EPS64 * mag)
    with conn.csr_upload(A) as M:
        assert M.wire_dtype == "f64"
        hy = conn.spmv(M, x, out="handle")
        assert hy.wire_dtype == "f64"
        assert np.all(np.abs(hy.download() - A @ x) <= 64 * EPS64 * mag)
        hy.release()
        # A float64 matrix with float32 vectors: y float32, summed in float64.
        x32 = x.astype(np.float32)
        y32 = conn.spmv(M, x32)
        assert y32.dtype == np.float32
        assert np.all(np.abs(y32 - (A @ x32.astype(np.float64))) <= 2 * 2.0 ** -24 * mag)


@pytest.mark.parametrize("method", ["cg", "pcg", "bicgstab"])
def test_solve_laplacian_to_rtol_1e10(conn, method):
    A = laplacian_2d(64)
    b = np.ones(A.shape[0])
    r = conn.solve(A, b, method=method, rtol=1e-10)
    assert r.converged and r.x.dtype == np.float64
    here = true_residual(A, b, r.x)
    assert here <= 1e-10, here
    assert r.residual == pytest.approx(here, rel=1e-6)


def test_solve_random_spd_to_rtol_1e10(conn, rng):
    A = random_spd(rng, 300)
    b = rng.standard_normal(300)
    with conn.csr_upload(A) as M, conn.upload(b) as hb:
        for method in ("cg", "pcg"):
            r = conn.solve(M, hb, method=method, rtol=1e-10, out="handle")
            with r.x as hx:
                x = hx.download()
                assert r.converged and x.dtype == np.float64
                assert true_residual(A, b, x) <= 1e-10


def test_solve_float32_b_stays_float32(conn):
    A = laplacian_2d(32)
    b = np.ones(A.shape[0], np.float32)
    r = conn.solve(A, b, rtol=1e-6)
    assert r.converged and r.x.dtype == np.float32


def test_mixed_and_unsupported_dtypes_are_refused(conn, rng):
    x64, x32 = rng.standard_normal(10), rng.standard_normal(10).astype(np.float32)
    with pytest.raises(gkc.InvalidArgument, match=r"'y' is float32 \(f32\) but 'x' is float64 \(f64\)"):
        conn.dot(x64, x32)
    assert conn.dot(x64, x32, dtype="float64") == pytest.approx(float(x64 @ x32.astype(np.float64)))
    with pytest.raises(gkc.InvalidArgument, match=r"'A' is float64 \(f64\), but sgemm takes float32"):
        conn.sgemm(np.ones((2, 2)), np.ones((2, 2), np.float32))
    got = conn.sgemm(np.ones((2, 3)), np.ones((3, 2)), dtype="float32")  # explicit: converted
    assert got.dtype == np.float32 and np.all(got == 3)
    with pytest.raises(gkc.InvalidArgument, match="reduce takes float32"):
        conn.reduce(x64)
    with conn.upload(x64) as h64, conn.upload(x32) as h32:
        with pytest.raises(gkc.InvalidArgument, match=r"'x' resident array \d+ holds float64"):
            conn.reduce(h64)
        # gkcd itself names the argument and both dtypes.
        with pytest.raises(gkc.InvalidArgument,
                           match=r"argument 'y': handle \d+ holds float32 \(f32\), but argument 'x'"
                                 r" makes this request's float arrays float64 \(f64\)"):
            conn.call("dot", {"x": {"handle": h64.id}, "y": {"handle": h32.id}})
        with pytest.raises(gkc.InvalidArgument,
                           match=r"argument 'a': handle \d+ holds float64 \(f64\), but sgemm takes"
                                 r" float32 \(f32\) only"):
            conn.call("sgemm", {"m": 1, "n": 1, "k": 10, "a": {"handle": h64.id},
                                "b": {"handle": h32.id}})
        with pytest.raises(gkc.InvalidArgument, match="'dtype'"):
            conn.call("dot", {"x": x32.tobytes(), "y": x32.tobytes(), "dtype": "f16"})


def test_region_reference_with_dtype(conn, rng):
    n = 1000
    r = conn.region(3 * n * 8)
    try:
        x, y, z = (r.array(n, np.float64, offset=i * n * 8) for i in range(3))
        x[:], y[:] = rng.standard_normal(n), rng.standard_normal(n)
        out = conn.axpby(x, y, alpha=2.0, beta=0.5, out=z)
        assert out is z and np.allclose(z, 2 * x + 0.5 * y, rtol=0, atol=1e-14)
        # A region reference says its dtype; one that disagrees is refused.
        with pytest.raises(gkc.InvalidArgument, match=r"region \d+ holds float32 \(f32\)"):
            conn.call("dot", {"x": {"region": r.id, "offset": 0, "bytes": n * 8, "dtype": "f32"},
                              "y": y.tobytes(), "dtype": "f64"})
        with pytest.raises(gkc.InvalidArgument, match="multiple of 8"):
            conn.call("nrm2", {"x": {"region": r.id, "offset": 4, "bytes": 8, "dtype": "f64"}})
    finally:
        r.release()


def test_batch_float64_steps(conn, rng):
    n = 500
    xv, yv = rng.standard_normal(n), rng.standard_normal(n)
    with conn.upload(xv) as x, conn.upload(yv) as y, conn.upload(np.zeros(n)) as z:
        B = gkc.Batch()
        d = B.dot(x, y)
        B.axpby(x, y, alpha=0.1, beta=1 / d, out=z)
        res = conn.batch(B)
        want = float(xv @ yv)
        assert abs(res[d] - want) <= (n + 2) * EPS64 * float(np.abs(xv) @ np.abs(yv))
        assert np.allclose(z.download(), 0.1 * xv + yv / res[d], rtol=1e-14, atol=1e-14)
        bad = gkc.Batch()
        bad.reduce(x)
        with pytest.raises(gkc.InvalidArgument, match=r"steps\[0\] \(reduce\).*float64.*float32"):
            conn.batch(bad)


def test_asyncio_float64(gkcd, rng):
    x = rng.standard_normal(5000)

    async def main():
        async with gkc.aio.connect(gkcd.sock) as c:
            return await asyncio.gather(c.dot(x, x), c.nrm2(x), c.axpby(x, x, alpha=1.0, beta=1.0))
    d, n, z = asyncio.run(main())
    assert d == pytest.approx(float(x @ x), rel=1e-13) and n == pytest.approx(np.linalg.norm(x), rel=1e-13)
    assert z.dtype == np.float64 and np.array_equal(z, 2 * x)


@pytest.mark.parametrize("cond", [1e3, 1e5])
def test_converged_means_the_true_residual_meets_rtol(conn, rng, cond):
    """Where the recurrence's residual drifts from b - A x (ill-conditioned A,
    tight rtol), gkcd restarts from the true residual rather than report a
    converged x that is not: converged implies ||b - A x|| <= rtol ||b||."""
    n = 200
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = sp.csr_matrix((q * np.logspace(0, np.log10(cond), n)) @ q.T)
    b = rng.standard_normal(n)
    with conn.csr_upload(A) as M:
        for method in ("cg", "pcg", "bicgstab"):
            for rtol in (1e-8, 1e-10, 3e-11):
                r = conn.solve(M, b, method=method, rtol=rtol, max_iter=2000)
                here = true_residual(A, b, r.x)
                assert r.residual == pytest.approx(here, rel=1e-6)
                assert not r.converged or here <= rtol, (method, rtol, r.iterations, here)
