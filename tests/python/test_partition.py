"""Partitioned matrices (csr_upload(devices=...), issue #14) on --cpu-devices 3:
the rows cut by nonzeros, the halo plan seen through its sizes, spmv and
cg/pcg against the single-device path and float64 (numpy/scipy), a device
lost under a partitioned solve, and the refusals.

Bounds used:
- spmv: each y_i is a float64 sum of float32 products rounded once to
  float32 on both paths, so |y_part - y_ref| <= 2 EPS32 (|alpha| sum_j
  |a_ij x_j| + |beta y_i|) against float64, and twice that between the two
  paths (the single-device kernel accumulates in float32 over max_row terms,
  so that side gets max_row EPS32).
- solve: both paths iterate in float64 on the same float32 numbers and
  differ only in the order of the dots' additions, so the iteration counts
  agree within 2% (at least 1), each x meets its tolerance (the residual
  recomputed here in float64 <= rtol, with the float32 rounding of x), and
  the two x agree within what that tolerance allows: ||x_p - x_s|| <=
  2 rtol ||b|| / lambda_min(A) (here lambda_min is known or bounded).
"""
import numpy as np
import pytest
import scipy.sparse as sp

import gkc
from conftest import EPS32, fault_injection

NDEV = 3


@pytest.fixture
def three(daemon_factory):
    d = daemon_factory("--cpu-devices", str(NDEV))
    with d.connect(timeout=120) as c:
        yield c


def laplacian_2d(m):
    """The 5-point Laplacian on an m x m grid (n = m^2), rows in grid order."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    e = sp.identity(m)
    return (sp.kron(e, t) + sp.kron(t, e)).tocsr().astype(np.float32)


def random_csr(rng, rows, cols, density):
    """Rows of very different lengths, so balancing by nonzeros matters."""
    lens = rng.integers(0, max(2, int(2 * density * cols)), size=rows)
    lens[rng.integers(0, rows, size=max(1, rows // 20))] *= 8  # a few long rows
    lens = np.minimum(lens, cols)
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    idx = np.concatenate([np.sort(rng.choice(cols, size=l, replace=False)) for l in lens]
                         ).astype(np.int32) if indptr[-1] else np.zeros(0, np.int32)
    vals = rng.standard_normal(indptr[-1]).astype(np.float32)
    return sp.csr_matrix((vals, idx, indptr), shape=(rows, cols))


def random_spd(rng, n, per_row):
    """B^T B + shift I, with lambda_min >= shift."""
    b = random_csr(rng, n, n, per_row / n)
    a = (b.T @ b).tocsr() + sp.identity(n) * 1.0
    return a.astype(np.float32).tocsr(), 1.0


def check_partition(m, a, devices):
    part = m.partition
    assert part is not None and [p["device"] for p in part] == list(devices)
    indptr = a.indptr.astype(np.int64)
    k, nnz = len(part), int(indptr[-1])
    assert part[0]["row0"] == 0
    for j, p in enumerate(part):
        assert p["rows"] >= 1
        assert p["nnz"] == indptr[p["row0"] + p["rows"]] - indptr[p["row0"]]
        if j + 1 < k:
            assert part[j + 1]["row0"] == p["row0"] + p["rows"]
        if j > 0:
            # Within one row of the ideal cut: the ideal lies between the
            # running counts one row either side of the cut.
            ideal, r = nnz * j / k, p["row0"]
            assert indptr[r - 1] <= ideal + 1e-9 or r - 1 <= part[j - 1]["row0"]
            assert ideal <= indptr[min(r + 1, a.shape[0])] + 1e-9
    assert part[-1]["row0"] + part[-1]["rows"] == a.shape[0]
    return part


def test_balance_and_reply(three, rng):
    a = random_csr(rng, 3000, 2500, 0.004)
    with three.csr_upload(a, devices="all") as m:
        assert m.device == (0, 1, 2)
        part = check_partition(m, a, range(NDEV))
        print("rows/nnz per device:", [(p["rows"], p["nnz"]) for p in part])
    with three.csr_upload(a, devices=[2, 0]) as m:  # a list: ascending device order
        check_partition(m, a, [0, 2])
        assert m.device == (0, 2)


def test_halo_of_the_laplacian(three):
    """On the grid Laplacian a block of rows [r0, r1) reads x at exactly
    [r0 - g, r0) and [r1, r1 + g) (clipped): min(g, r0) + min(g, n - r1)."""
    g = 37
    a = laplacian_2d(g)
    n = g * g
    with three.csr_upload(a, devices="all") as m:
        for p in check_partition(m, a, range(NDEV)):
            r0, r1 = p["row0"], p["row0"] + p["rows"]
            assert p["halo"] == min(g, r0) + min(g, n - r1), p
    t = sp.diags([1.0, 4.0, 1.0], [-1, 0, 1], shape=(50, 50)).tocsr().astype(np.float32)
    with three.csr_upload(t, devices="all") as m:
        halos = [p["halo"] for p in m.partition]
        assert halos == [1, 2, 1]


def spmv_bound(a, x, alpha, beta, y):
    mag = abs(alpha) * (abs(a).astype(np.float64) @ np.abs(x.astype(np.float64)))
    if y is not None:
        mag += abs(beta) * np.abs(y.astype(np.float64))
    return mag


@pytest.mark.parametrize("shape", [(2000, 2000), (1500, 2300), (2300, 900)])
def test_spmv_matches_single_device(three, rng, shape):
    a = random_csr(rng, *shape, 0.01)
    a64 = a.astype(np.float64)
    x = rng.standard_normal(shape[1]).astype(np.float32)
    y = rng.standard_normal(shape[0]).astype(np.float32)
    max_row = int(np.max(np.diff(a.indptr)))
    with three.csr_upload(a, devices="all") as mp, three.csr_upload(a, device=0) as ms:
        for alpha, beta in [(1.0, 0.0), (-0.75, 1.5)]:
            yy = y if beta else None
            info = {}
            got = three.spmv(mp, x, alpha=alpha, beta=beta, y=yy, info=info)
            assert info.get("devices") == (0, 1, 2) or info.get("devices") == [0, 1, 2]
            one = three.spmv(ms, x, alpha=alpha, beta=beta, y=yy)
            ref = alpha * (a64 @ x.astype(np.float64)) + (beta * y.astype(np.float64) if beta else 0)
            mag = spmv_bound(a, x, alpha, beta, yy)
            assert np.all(np.abs(got - ref) <= 2 * EPS32 * mag + 1e-30)
            assert np.all(np.abs(got - one) <= (max_row + 4) * EPS32 * mag + 1e-30)


def test_spmv_inputs_of_every_kind(three, rng):
    a = random_csr(rng, 1200, 1200, 0.01)
    x = rng.standard_normal(1200).astype(np.float32)
    y = rng.standard_normal(1200).astype(np.float32)
    ref = 2.0 * (a.astype(np.float64) @ x.astype(np.float64)) - y.astype(np.float64)
    mag = spmv_bound(a, x, 2.0, -1.0, y)
    reg = three.region(8 * 1200)
    rx = reg.array((1200,), np.float32, 0)
    ry = reg.array((1200,), np.float32, 4 * 1200)
    rx[:] = x
    with three.csr_upload(a, devices="all") as m, three.upload(x, device=2) as hx, \
            three.upload(y, device=1) as hy, three.upload(np.zeros(1200, np.float32), device=1) as ho:
        for xa, ya in [(rx, y), (hx, hy), (x, hy)]:
            got = three.spmv(m, xa, alpha=2.0, beta=-1.0, y=ya)
            assert np.all(np.abs(got - ref) <= 2 * EPS32 * mag + 1e-30)
        three.spmv(m, hx, alpha=2.0, beta=-1.0, y=hy, out=ry)  # into a region
        assert np.all(np.abs(ry - ref) <= 2 * EPS32 * mag + 1e-30)
        three.spmv(m, x, alpha=2.0, beta=-1.0, y=y, out=ho)  # into a handle
        assert np.all(np.abs(ho.download() - ref) <= 2 * EPS32 * mag + 1e-30)
        h = three.spmv(m, x, alpha=2.0, beta=-1.0, y=y, out="handle")  # a new handle
        assert np.all(np.abs(h.download() - ref) <= 2 * EPS32 * mag + 1e-30)
        h.release()
    reg.release()


def scipy_cg_iterations(a, b, rtol, jacobi):
    from scipy.sparse.linalg import cg
    count = [0]

    def cb(_):
        count[0] += 1
    kw = {}
    if jacobi:
        kw["M"] = sp.diags(1.0 / a.diagonal())
    try:
        cg(a, b, rtol=rtol, atol=0.0, maxiter=20 * a.shape[0], callback=cb, **kw)
    except TypeError:  # scipy < 1.12 calls it tol
        cg(a, b, tol=rtol, atol=0.0, maxiter=20 * a.shape[0], callback=cb, **kw)
    return count[0]


def close_counts(p, q):
    # The partitioned solve sums each dot in a different order from the
    # single-device one; on the random SPD matrices below that order alone
    # moved PCG's count by 2 (84 against 86 to rtol 1e-6, seen once under
    # ASan), as float64 rounding spreads bcsstk13's count over 3%
    # (bench/RESULTS.md).  So: 2%, and never less than 2 iterations.
    return abs(p - q) <= max(2, int(0.02 * max(p, q)))


@pytest.mark.parametrize("method", ["cg", "pcg"])
@pytest.mark.parametrize("which", ["laplacian", "random_spd"])
def test_solve_matches_single_device(three, rng, method, which):
    if which == "laplacian":
        g = 48
        a = laplacian_2d(g)
        lam_min = 8 * np.sin(np.pi / (2 * (g + 1))) ** 2  # the grid Laplacian's smallest eigenvalue
    else:
        a, lam_min = random_spd(rng, 3000, 6)
    n = a.shape[0]
    b = rng.standard_normal(n).astype(np.float32)
    rtol = 1e-6
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with three.csr_upload(a, devices="all") as mp, three.csr_upload(a, device=1) as ms:
        rp = three.solve(mp, b, rtol=rtol, method=method, history=True)
        rs = three.solve(ms, b, rtol=rtol, method=method)
    assert rp.converged and rs.converged, (rp, rs)
    assert rp.info.get("devices") in ([0, 1, 2], (0, 1, 2))
    assert close_counts(rp.iterations, rs.iterations), (rp.iterations, rs.iterations)
    assert len(rp.history) == rp.iterations and rp.history[-1] <= rtol
    for r in (rp, rs):
        res = np.linalg.norm(b64 - a64 @ r.x.astype(np.float64)) / np.linalg.norm(b64)
        # the iteration's rtol, plus the float32 rounding of x
        xr = np.linalg.norm(abs(a64) @ np.abs(r.x.astype(np.float64))) / np.linalg.norm(b64)
        assert res <= rtol * 1.01 + 2 * EPS32 * xr, res
        assert abs(r.residual - res) <= 1e-3 * res + 1e-12
    dx = np.linalg.norm(rp.x.astype(np.float64) - rs.x.astype(np.float64))
    assert dx <= 2 * rtol * np.linalg.norm(b64) / lam_min + 4 * EPS32 * np.linalg.norm(rs.x)
    try:
        it = scipy_cg_iterations(a64, b64, rtol, method == "pcg")
    except ImportError:
        return
    print(f"{which} {method}: partitioned {rp.iterations}, one device {rs.iterations}, scipy {it}")
    assert close_counts(rp.iterations, it), (rp.iterations, it)


def test_solve_semantics(three, rng):
    """x0, max_iter, deadline and out behave as on one device."""
    a = laplacian_2d(60)
    n = a.shape[0]
    b = rng.standard_normal(n).astype(np.float32)
    with three.csr_upload(a, devices="all") as mp, three.csr_upload(a, device=0) as ms:
        x0 = rng.standard_normal(n).astype(np.float32)
        rp = three.solve(mp, b, x0, rtol=1e-5, max_iter=7)
        rs = three.solve(ms, b, x0, rtol=1e-5, max_iter=7)
        assert rp.reason == rs.reason == "max_iter" and rp.iterations == rs.iterations == 7
        assert abs(rp.residual - rs.residual) <= 1e-6 * rs.residual
        # rtol 0 runs until the recurrence underflows: thousands of iterations here
        big = laplacian_2d(200)
        with three.csr_upload(big, devices="all") as mb:
            rd = three.solve(mb, np.ones(big.shape[0], np.float32), rtol=0.0, max_iter=10**8,
                             deadline_ms=200)
        assert rd.reason == "deadline" and rd.iterations > 0
        zero = three.solve(mp, np.zeros(n, np.float32))
        assert zero.converged and zero.iterations == 0 and not np.any(zero.x)
        with three.upload(x0, device=2) as hx:
            r = three.solve(mp, b, hx, rtol=1e-6, out=hx)  # x0 updated in place
            assert r.converged
            assert np.array_equal(hx.download(), r.x.download() if hasattr(r.x, "download") else r.x)


def test_refusals(three, rng):
    a = laplacian_2d(10)
    b = np.ones(100, np.float32)
    with three.csr_upload(a, devices="all") as m:
        with pytest.raises(gkc.InvalidArgument, match="bicgstab"):
            three.solve(m, b, method="bicgstab")
        with pytest.raises(gkc.InvalidArgument, match="'device'.*partitioned"):
            three._invoke("spmv", {"matrix": m.id, "x": b.tobytes(), "device": 1}, lambda r: r)
        bt = gkc.Batch()
        with three.upload(b) as hb, three.upload(b) as ho:
            bt.spmv(m, hb, out=ho)
            with pytest.raises(gkc.InvalidArgument, match="partitioned"):
                three.batch(bt)
        with pytest.raises(gkc.InvalidArgument, match="pcg divides by the diagonal"):
            z = sp.csr_matrix(([1.0, 1.0], [1, 0], [0, 1, 2, 2, 2]), shape=(4, 4), dtype=np.float32)
            with three.csr_upload(z + sp.diags([0, 0, 1, 1]).astype(np.float32),
                                  devices="all") as mz:
                three.solve(mz, np.ones(4, np.float32), method="pcg")
    with pytest.raises(gkc.InvalidArgument, match="'devices': 5 is not a device"):
        three.csr_upload(a, devices=[0, 5])
    with pytest.raises(gkc.InvalidArgument, match="'devices': device 1 is listed twice"):
        three.csr_upload(a, devices=[1, 1])
    with pytest.raises(gkc.InvalidArgument, match="'devices'.*'replicate'"):
        three.csr_upload(a, devices="all", replicate=True)
    with pytest.raises(gkc.InvalidArgument, match="2 rows cannot be cut into 3"):
        three.csr_upload(sp.identity(2, dtype=np.float32, format="csr"), devices="all")
    with pytest.raises(gkc.InvalidArgument, match="'devices'"):
        three._invoke("csr_upload", {"rows": 1, "cols": 1, "row_ptr": np.array([0, 1], np.int32).tobytes(),
                                     "col_idx": np.zeros(1, np.int32).tobytes(),
                                     "values": np.ones(1, np.float32).tobytes(), "devices": "some"},
                      lambda r: r)


@pytest.mark.skipif(not fault_injection(), reason="needs a build with GKC_FAULT_INJECTION")
def test_device_lost_during_partitioned_solve(daemon_factory, rng):
    # Device 1's first job is the upload (its block); its second, the solve, loses it.
    d = daemon_factory("--cpu-devices", str(NDEV), env={"GKCD_FAULT": "device_lost:dev=1:after=1"})
    a = laplacian_2d(40)
    n = a.shape[0]
    b = rng.standard_normal(n).astype(np.float32)
    with d.connect(timeout=120) as c:
        m = c.csr_upload(a, devices="all")
        with pytest.raises(gkc.DeviceLost, match=r"device 1 .*was lost: injected fault"):
            c.solve(m, b)
        with pytest.raises(gkc.DeviceLost, match=r"matrix %d .*device 1.*lost" % m.id):
            c.spmv(m, b)
        with pytest.raises(gkc.DeviceLost, match=r"matrix %d .*device 1.*lost" % m.id):
            c.solve(m, b)
        with pytest.raises(gkc.DeviceLost, match=r"'devices': device 1 .*was lost"):
            c.csr_upload(a, devices=[0, 1])
        # The others serve on: a new partition over the live devices, and plain requests.
        with c.csr_upload(a, devices="all") as m2:
            assert m2.device == (0, 2)
            r = c.solve(m2, b, rtol=1e-6)
            assert r.converged
            res = np.linalg.norm(b - a.astype(np.float64) @ r.x) / np.linalg.norm(b)
            assert res <= 1.01e-6 + 1e-6
        x = rng.standard_normal(500).astype(np.float32)
        assert abs(c.reduce(x) - float(np.sum(x.astype(np.float64)))) <= 500 * EPS32 * np.sum(np.abs(x))
        m.release()
        devs = c.status()["devices"]
        assert [v["lost"] for v in devs] == [False, True, False]


def test_gang_jobs_beside_other_work(daemon_factory, rng):
    """Several clients at once: partitioned solves (gang jobs holding a slot
    on every device) beside single-device solves and spmvs pinned to each
    device.  Every request finishes (no gang job waits on another), with the
    right answer."""
    import threading
    d = daemon_factory("--cpu-devices", str(NDEV))
    a = laplacian_2d(40)
    n = a.shape[0]
    a64 = a.astype(np.float64)
    bs = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    errors = []

    def solver(i, partitioned):
        try:
            with d.connect(timeout=120) as c:
                kw = {"devices": "all"} if partitioned else {"device": i % NDEV}
                with c.csr_upload(a, **kw) as m:
                    for rep in range(4):
                        b = bs[(i + rep) % len(bs)]
                        r = c.solve(m, b, rtol=1e-6, method="pcg" if rep % 2 else "cg")
                        res = np.linalg.norm(b - a64 @ r.x) / np.linalg.norm(b)
                        if not (r.converged and res <= 2e-6):
                            errors.append(f"client {i}: {r.reason}, residual {res}")
                        y = c.spmv(m, b)
                        ref = a64 @ b.astype(np.float64)
                        if not np.all(np.abs(y - ref) <= 8 * EPS32 * (abs(a64) @ np.abs(b))):
                            errors.append(f"client {i}: spmv off")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"client {i}: {e!r}")

    threads = [threading.Thread(target=solver, args=(i, i % 2 == 0)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a client never finished"
    assert not errors, errors
    with d.connect(timeout=60) as c:
        st = c.status()
        assert all(v["running"] == 0 and v["queued"] == 0 for v in st["devices"]), st["devices"]


def test_a_gang_job_holds_every_device(daemon_factory, rng):
    """While a partitioned solve runs, status shows it on every device of
    the matrix; it stops at its deadline like a single-device solve, and
    gives every slot back.  (A client that closes its socket is taken by
    gkcd for a half-close, whose replies it still owes: a running solve of
    either kind then runs on to its end or deadline.)"""
    import time
    d = daemon_factory("--cpu-devices", str(NDEV))
    big = laplacian_2d(200)
    n = big.shape[0]
    with d.connect(timeout=60) as c, d.connect(timeout=60) as watcher:
        with c.csr_upload(big, devices="all") as m:
            import threading
            box = {}
            t = threading.Thread(target=lambda: box.setdefault(
                "r", c.solve(m, np.ones(n, np.float32), rtol=0.0, max_iter=10**8,
                             deadline_ms=1500)))
            t.start()
            seen = False
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.2 and not seen:
                seen = all(v["running"] >= 1 for v in watcher.status()["devices"])
                time.sleep(0.01)
            assert seen, "the gang job did not show on every device"
            t.join(timeout=60)
            r = box["r"]
            assert r.reason == "deadline" and r.iterations > 0
            assert not any(v["running"] for v in watcher.status()["devices"])
