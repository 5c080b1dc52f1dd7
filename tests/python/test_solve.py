"""c.solve and c.batch against SciPy and NumPy in float64.

gkcd's CPU backend iterates in float64, so on the same float32 numbers its
CG and PCG take SciPy's iterations within max(1, 2%) and their residual
histories agree to 1e-6 relative while above 1e-6 (bicgstab: its residual
is checked, not its iterations; tests/e2e/protocol/e2e_solve.py compares those).  Every
x is checked by its residual recomputed here in float64.
"""
import asyncio

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import gkc
import gkc.aio
from conftest import EPS32, f32

TOL = "rtol" if "rtol" in spla.cg.__code__.co_varnames else "tol"


def random_matrix(rng, n, kind):
    """kind 'spd': diagonally dominant symmetric; 'scaled': that with rows and
    columns scaled by 10^[0, 2) (badly scaled SPD); 'nonsym': nonsymmetric."""
    R = sp.random(n, n, density=4 / n, format="csr", random_state=np.random.RandomState(rng.integers(2**31)))
    R.data = rng.uniform(-1, 1, R.nnz)
    if kind != "nonsym":
        R = (R + R.T) / 2
    d = np.asarray(abs(R).sum(axis=1)).ravel() + np.asarray(abs(R).sum(axis=0)).ravel() / 2 + 1
    A = (R + sp.diags(d)).tocsr()
    if kind == "scaled":
        s = sp.diags(10 ** rng.uniform(0, 2, n))
        A = (s @ A @ s).tocsr()
    A.data = f32(A.data)  # what gkcd sees, promoted back
    return A


def scipy_cg(A, b, rtol, jacobi):
    trace = []
    kw = {TOL: rtol, "atol": 0.0, "maxiter": 10 * A.shape[0],
          "callback": lambda xk: trace.append(np.linalg.norm(b - A @ xk) / np.linalg.norm(b))}
    if jacobi:
        kw["M"] = sp.diags(1.0 / A.diagonal())
    x, info = spla.cg(A, b, **kw)
    assert info == 0
    return x, trace


def rel_residual(A, b, x):
    b = f32(b)
    return np.linalg.norm(b - A @ np.asarray(x, np.float64)) / np.linalg.norm(b)


def floor(A, b, x):
    """What rounding x to float32 alone may cost of the relative residual."""
    return np.linalg.norm(abs(A) @ abs(np.asarray(x, np.float64))) * EPS32 / np.linalg.norm(f32(b))


@pytest.mark.parametrize("method,kind", [("cg", "spd"), ("pcg", "scaled"), ("bicgstab", "nonsym")])
def test_methods_against_scipy(conn, rng, method, kind):
    n = 400
    A = random_matrix(rng, n, kind)
    b = rng.standard_normal(n).astype(np.float32)
    r = conn.solve(A, b, method=method, rtol=1e-8, history=True)
    assert isinstance(r, gkc.SolveResult) and r.method == method
    assert r.converged and r.reason == "converged"
    assert isinstance(r.x, np.ndarray) and r.x.dtype == np.float32 and r.x.shape == (n,)
    here = rel_residual(A, b, r.x)
    assert r.residual == pytest.approx(here, rel=1e-9)
    assert here <= 1e-8 + 4 * floor(A, b, r.x)
    assert len(r.history) == r.iterations and r.history[-1] <= 1e-8
    assert r.info["algo"] and r.info["kernel_us"] >= 0
    if method != "bicgstab":
        xs, trace = scipy_cg(A, f32(b), 1e-8, method == "pcg")
        assert abs(r.iterations - len(trace)) <= max(1, len(trace) // 50), (r.iterations, len(trace))
        for k in range(min(len(trace), r.iterations)):
            if trace[k] > 1e-6:
                assert r.history[k] == pytest.approx(trace[k], rel=1e-6), k
        assert np.linalg.norm(r.x - xs) <= 1e-5 * np.linalg.norm(xs)


def test_precision_fp32(conn, rng):
    """precision="fp32": float32 vectors. It converges, its residual holds
    when recomputed here, and its history departs from SciPy's float64 CG
    by more than float64 rounding could; a bad value is refused."""
    n = 400
    A = random_matrix(rng, n, "spd")
    b = rng.standard_normal(n).astype(np.float32)
    r = conn.solve(A, b, rtol=1e-5, history=True, precision="fp32")
    assert r.converged and r.reason == "converged"
    here = rel_residual(A, b, r.x)
    assert r.residual == pytest.approx(here, rel=1e-9)
    assert here <= 1e-5 + 4 * floor(A, b, r.x)
    _, trace = scipy_cg(A, f32(b), 1e-5, False)
    dev = max(abs(r.history[k] - trace[k]) / trace[k] for k in range(min(len(trace), r.iterations)))
    assert dev > 1e-9, dev
    with pytest.raises(gkc.InvalidArgument, match="precision"):
        conn.solve(A, b, precision="fp16")


def test_resident_matrix_outs_and_x0(conn, rng):
    n = 300
    A = random_matrix(rng, n, "spd")
    b = rng.standard_normal(n).astype(np.float32)
    with conn.csr_upload(A) as M, conn.upload(b) as hb:
        r = conn.solve(M, hb, rtol=1e-7, out="handle")
        assert isinstance(r.x, gkc.Array) and r.x.shape == (n,)
        with r.x as hx:
            x = hx.download()
            assert rel_residual(A, b, x) <= 1e-7 + 4 * floor(A, b, x)
            # x0 = the answer, updated in place: (almost) nothing to do.
            r2 = conn.solve(M, hb, x0=hx, out=hx, rtol=1e-6)
            assert r2.x is hx and r2.converged and r2.iterations <= max(1, r.iterations // 4)
        # b and x in a region: read and written in place.
        reg = conn.region(2 * n * 4)
        vb, vx = reg.array(n), reg.array(n, offset=n * 4)
        vb[:] = b
        r3 = conn.solve(M, vb, out=vx, method="bicgstab", rtol=1e-7)
        assert r3.x is vx and rel_residual(A, b, vx) == pytest.approx(r3.residual, rel=1e-9)
        reg.release()


def test_not_converged_is_a_result(conn, rng):
    A = random_matrix(rng, 200, "spd")
    b = rng.standard_normal(200).astype(np.float32)
    r = conn.solve(A, b, rtol=1e-14, max_iter=4, history=True)
    assert not r.converged and r.reason == "max_iter" and r.iterations == 4
    assert len(r.history) == 4
    assert r.residual == pytest.approx(rel_residual(A, b, r.x), rel=1e-9)


def test_errors_name_the_argument_and_leave_nothing(conn, rng):
    A = random_matrix(rng, 50, "spd")
    b = rng.standard_normal(50).astype(np.float32)
    before = conn.status()["resident"]
    with pytest.raises(gkc.InvalidArgument, match="square"):
        conn.solve(sp.random(5, 6, density=0.5, format="csr"), np.ones(5))
    with pytest.raises(gkc.InvalidArgument, match="'b'"):
        conn.solve(A, b[:49])
    with pytest.raises(gkc.InvalidArgument, match="'rtol'"):
        conn.solve(A, b, rtol=-1e-3)
    with pytest.raises(gkc.InvalidArgument, match="'method'"):
        conn.solve(A, b, method="gmres")
    with pytest.raises(gkc.InvalidArgument, match="'max_iter'"):
        conn.solve(A, b, max_iter=0)
    Z = sp.csr_matrix(np.array([[0.0, 1], [1, 2]]))
    with pytest.raises(gkc.InvalidArgument, match="row 0"):
        conn.solve(Z, np.ones(2), method="pcg")
    # The matrices uploaded for those calls were released again.
    assert conn.status()["resident"] == before


def batch_cg(c, A, b, iters):
    """CG with one batch per iteration, the scalars resolved on gkcd."""
    n = A.shape[0]
    with c.csr_upload(A) as M, c.upload(np.zeros(n, np.float32)) as x, c.upload(b) as r, \
            c.upload(b) as p, c.upload(np.zeros(n, np.float32)) as q:
        rho = rho0 = float(f32(b) @ f32(b))
        for _ in range(iters):
            B = gkc.Batch()
            B.spmv(M, p, out=q)
            pq = B.dot(p, q)
            B.axpby(p, x, alpha=rho / pq)
            B.axpby(q, r, alpha=-rho / pq)
            rr = B.dot(r, r)
            B.axpby(r, p, alpha=1.0, beta=rr / rho)
            res = c.batch(B)
            assert res[4] == res[rr] and res[0] is q
            rho = res[rr]
            if rho <= 1e-12 * rho0:  # the recurrence's ||r|| / ||b|| <= 1e-6
                break
        return x.download(), rho


def test_batch_cg_against_numpy(conn, rng):
    n = 300
    A = random_matrix(rng, n, "spd")
    b = rng.standard_normal(n).astype(np.float32)
    x, rho = batch_cg(conn, A, b, 200)
    # float32 vectors: the residual stalls near 1e-6 of ||b||.
    assert rel_residual(A, b, x) < 1e-4
    xs = np.linalg.solve(A.toarray(), f32(b))
    assert np.linalg.norm(x - xs) <= 1e-3 * np.linalg.norm(xs)


def test_batch_values_and_errors(conn, rng):
    n = 1000
    xv, yv = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    with conn.upload(xv) as x, conn.upload(yv) as y, conn.upload(np.zeros(n, np.float32)) as z, \
            conn.upload(rng.standard_normal(6).astype(np.float32)) as a, conn.upload(rng.standard_normal(6).astype(np.float32)) as bb, \
            conn.upload(np.zeros(4, np.float32)) as cc:
        B = gkc.Batch()
        d = B.dot(x, y)
        B.axpby(x, y, alpha=0.5, beta=2 / d, out=z)        # z = 0.5 x + (2 / x.y) y
        mx = B.reduce(z, "max")
        B.sgemm(a, bb, 2, 2, 3, out=cc)
        info = {}
        res = conn.batch(B, info=info)
        want_d = f32(xv) @ f32(yv)
        assert res[d] == pytest.approx(want_d, rel=1e-5, abs=1e-5 * (abs(f32(xv)) @ abs(f32(yv))))
        zw = 0.5 * f32(xv) + 2 / res[d] * f32(yv)
        assert np.allclose(z.download(), zw, rtol=1e-5, atol=1e-6)
        assert res[mx] == pytest.approx(float(zw.max()), rel=1e-5)
        assert np.allclose(cc.download(), (a.download().reshape(2, 3) @ bb.download().reshape(3, 2)).ravel(),
                           rtol=1e-5, atol=1e-6)
        assert res[1] is z and info["algo"]
        # Scalars are s * v[i] / v[j] at most.
        with pytest.raises(TypeError):
            d * d
        # Checked before any runs: the step and the argument are named.
        bad = gkc.Batch()
        bad.dot(x, y)
        bad.axpby(x, cc)  # lengths differ
        with pytest.raises(gkc.InvalidArgument, match=r"steps\[1\] \(axpby\)"):
            conn.batch(bad)
        # Fails while running: 1 / (0 . 0); step 0 stays written.
        with conn.upload(np.zeros(n, np.float32)) as zero:
            run = gkc.Batch()
            run.axpby(x, y, alpha=1.0, beta=0.0, out=z)
            zz = run.dot(zero, zero)
            run.axpby(x, y, alpha=1 / zz, out=y)
            with pytest.raises(gkc.InvalidArgument, match=r"step 2 \(axpby\)"):
                conn.batch(run)
            assert np.array_equal(z.download(), f32(xv).astype(np.float32))
            assert np.array_equal(y.download(), yv.astype(np.float32))
    released = gkc.Batch()
    released.dot(x, y)
    with pytest.raises(gkc.InvalidArgument, match=r"steps\[0\] \(dot\).*released"):
        conn.batch(released)


def test_asyncio_solves_and_batch_in_flight(gkcd, rng):
    n = 300
    A = random_matrix(rng, n, "scaled")
    bs = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]

    async def main():
        async with gkc.aio.connect(gkcd.sock) as c:
            M = await c.csr_upload(A)
            v = await c.upload(bs[0])
            B = gkc.Batch()
            d = B.dot(v, v)
            results = await asyncio.gather(
                *(c.solve(M, b, method="pcg", rtol=1e-8) for b in bs),
                c.solve(A, bs[0], method="bicgstab", rtol=1e-7, history=True),
                c.batch(B))
            await M.release()
            return results, d
    (*solves, bres), d = asyncio.run(main())
    for b, r in zip(bs + [bs[0]], solves):
        assert r.converged
        assert r.residual == pytest.approx(rel_residual(A, b, r.x), rel=1e-9)
    assert len(solves[-1].history) == solves[-1].iterations
    assert bres[d] == pytest.approx(float(f32(bs[0]) @ f32(bs[0])), rel=1e-6)


def test_amg_kept_with_the_matrix(conn, rng):
    """precond='amg': the first solve of a resident matrix builds the
    hierarchy, the next reuse it (no setup), each x within rtol by its
    float64 residual; the hierarchy's bytes show in status until release."""
    k = 48
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (k, k))
    A = (sp.kron(sp.identity(k), t) + sp.kron(t, sp.identity(k))).tocsr().astype(np.float32)
    b = rng.standard_normal(k * k)
    M = conn.csr_upload(A)
    before = conn.status()["resident"]["precond_bytes"]
    first = conn.solve(M, b, rtol=1e-9, precond="amg")
    again = conn.solve(M, b, rtol=1e-9, precond="amg")
    A64 = A.astype(np.float64)
    for r in (first, again):
        assert r.converged and r.x.dtype == np.float64
        assert np.linalg.norm(b - A64 @ r.x) / np.linalg.norm(b) <= 1e-9
    assert first.precond == "amg" and first.levels >= 2
    assert not first.amg_reused and first.amg_setup_us > 0
    assert again.amg_reused and again.amg_setup_us == 0 and again.iterations == first.iterations
    assert conn.status()["resident"]["precond_bytes"] > before
    M.release()
    assert conn.status()["resident"]["precond_bytes"] == before
