#!/usr/bin/python3
"""e2e_f64.py: dtype "f64" on the wire (PROTOCOL.md, "Element types"),
spoken as raw msgpack-rpc from the protocol alone.

On the CPU backend: float64 bins (with "dtype": "f64"), float64 handles and
region-less references through upload/download (byte-exact), dot, nrm2,
axpby and spmv against float64 NumPy; a float64 solve of the 2-D Laplacian
64x64 and of a random SPD matrix to rtol 1e-10 whose true residual,
recomputed here, meets it; batch steps on float64 handles; every refusal
naming the argument and both dtypes (mixed dtypes, float64 to sgemm and
reduce, a bad dtype string); float32 requests unchanged.

On the CUDA backend (GKC_TEST_BACKEND=cuda, ctest -L gpu): upload and
download of float64 arrays byte for byte; solve with float64 b, x0 and x
(a float32 matrix) to rtol 1e-10 by the true residual of the x returned,
recomputed here in float64, by value and from handles; every other float64
request refused before it runs, naming the argument and the methods the
backend serves f64 to, while the same request in float32 still works.
Exits 0 when all pass, 77 when msgpack or numpy is missing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import msgpack  # noqa: F401
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

from e2e_common import check, expect_error, f32b, ok  # noqa: E402
import e2e_common as ec  # noqa: E402

EPS64 = 2.0 ** -53


def f64b(a):
    return np.ascontiguousarray(a, dtype="<f8").tobytes()


def H(h):
    return {"handle": h}


def laplacian(k):
    """The 5-point Laplacian on a k x k grid, CSR (row_ptr, col_idx, values)."""
    rp, ci, v = [0], [], []
    for i in range(k):
        for j in range(k):
            r = i * k + j
            for c, w in ((r - k, -1.0), (r - 1, -1.0), (r, 4.0), (r + 1, -1.0), (r + k, -1.0)):
                if (c == r - 1 and j == 0) or (c == r + 1 and j == k - 1) or c < 0 or c >= k * k:
                    continue
                ci.append(c), v.append(w)
            rp.append(len(ci))
    return np.array(rp), np.array(ci), np.array(v)


def dense_csr(a):
    rp, ci, v = [0], [], []
    for row in a:
        nz = np.nonzero(row)[0]
        ci.extend(nz), v.extend(row[nz])
        rp.append(len(ci))
    return np.array(rp), np.array(ci), np.array(v)


def matvec(rp, ci, v, x):
    y = np.zeros(len(rp) - 1)
    for i in range(len(rp) - 1):
        y[i] = v[rp[i]:rp[i + 1]] @ x[ci[rp[i]:rp[i + 1]]]
    return y


def csr64(c, rp, ci, v, n):
    return ok(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                                "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f64b(v),
                                "dtype": "f64"})["matrix"]


def test_vectors(c, rng):
    n = 3000
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    r = ok(c, "dot", {"x": f64b(x), "y": f64b(y), "dtype": "f64"})
    check(abs(r["value"] - x @ y) <= (n + 2) * EPS64 * (abs(x) @ abs(y)), f"dot {r['value']} vs {x @ y}")
    r = ok(c, "nrm2", {"x": f64b(x), "dtype": "f64"})
    check(abs(r["value"] - np.linalg.norm(x)) <= 1e-14 * np.linalg.norm(x), "nrm2")
    r = ok(c, "axpby", {"x": f64b(x), "y": f64b(y), "alpha": 0.1, "beta": -1 / 3, "dtype": "f64"})
    z = np.frombuffer(r["y"], "<f8")
    check(len(z) == n and np.max(np.abs(z - (0.1 * x - y / 3))) <= 4 * EPS64 * np.max(abs(x) + abs(y)),
          "axpby float64 with float64 scalars")
    h = ok(c, "upload", {"data": f64b(x), "dtype": "f64"})["handle"]
    d = ok(c, "download", {"handle": h})
    check(d["dtype"] == "f64" and d["data"] == f64b(x), "upload/download f64 byte-exact")
    # A handle settles the request's dtype: the bin beside it is float64 too.
    r = ok(c, "dot", {"x": H(h), "y": f64b(y)})
    check(abs(r["value"] - x @ y) <= (n + 2) * EPS64 * (abs(x) @ abs(y)), "dot on a float64 handle")
    r = ok(c, "axpby", {"x": H(h), "y": f64b(y), "out": {"y": "handle"}})
    hz = r["y"]["handle"]
    check(np.frombuffer(ok(c, "download", {"handle": hz})["data"], "<f8").tolist() == (x + y).tolist(),
          "axpby into a new float64 handle")
    # float32 unchanged
    x32 = x.astype(np.float32)
    r = ok(c, "dot", {"x": f32b(x32), "y": f32b(x32)})
    check(r["value"] == float(x32.astype(np.float64) @ x32.astype(np.float64)) or
          abs(r["value"] - x32.astype(np.float64) @ x32) <= 1e-12 * r["value"], "float32 dot unchanged")
    for hh in (h, hz):
        ok(c, "release", {"handle": hh})


def test_spmv(c, rng):
    n = 80
    a = np.where(rng.random((n, n)) < 0.1, rng.standard_normal((n, n)), 0.0)
    rp, ci, v = dense_csr(a)
    x = rng.standard_normal(n)
    r = ok(c, "spmv", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                       "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f64b(v),
                       "x": f64b(x), "alpha": 0.7, "dtype": "f64"})
    y = np.frombuffer(r["y"], "<f8")
    check(np.max(np.abs(y - 0.7 * (a @ x))) <= 1e-14 * (1 + np.max(np.abs(a) @ np.abs(x))), "spmv by value f64")
    m = csr64(c, rp, ci, v, n)
    r = ok(c, "spmv", {"matrix": m, "x": f64b(x), "dtype": "f64"})
    check(np.max(np.abs(np.frombuffer(r["y"], "<f8") - a @ x)) <= 1e-14 * (1 + np.max(np.abs(a) @ np.abs(x))),
          "spmv on a float64 matrix")
    ok(c, "release", {"matrix": m})


def test_solve(c, rng):
    rp, ci, v = laplacian(64)
    n = 64 * 64
    b = np.ones(n)
    m = csr64(c, rp, ci, v, n)
    for method in ("cg", "pcg", "bicgstab"):
        r = ok(c, "solve", {"matrix": m, "b": f64b(b), "dtype": "f64", "rtol": 1e-10, "method": method})
        x = np.frombuffer(r["x"], "<f8")
        res = np.linalg.norm(b - matvec(rp, ci, v, x)) / np.linalg.norm(b)
        check(r["converged"] and len(x) == n and res <= 1e-10, f"laplacian {method}: {res:.3g}")
        check(abs(res - r["residual"]) <= 1e-6 * res, f"laplacian {method}: residual reported")
    ok(c, "release", {"matrix": m})
    k = 150
    q, _ = np.linalg.qr(rng.standard_normal((k, k)))
    s = (q * np.logspace(0, 4, k)) @ q.T
    rp, ci, v = dense_csr(s)
    m = csr64(c, rp, ci, v, k)
    b = rng.standard_normal(k)
    hb = ok(c, "upload", {"data": f64b(b), "dtype": "f64"})["handle"]
    for method in ("cg", "pcg"):
        r = ok(c, "solve", {"matrix": m, "b": H(hb), "rtol": 1e-10, "method": method})
        x = np.frombuffer(r["x"], "<f8")
        res = np.linalg.norm(b - s @ x) / np.linalg.norm(b)
        check(r["converged"] and res <= 1e-10, f"random SPD {method}: {res:.3g}")
    ok(c, "release", {"matrix": m}), ok(c, "release", {"handle": hb})


def test_batch(c, rng):
    n = 400
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    hx = ok(c, "upload", {"data": f64b(x), "dtype": "f64"})["handle"]
    hy = ok(c, "upload", {"data": f64b(y), "dtype": "f64"})["handle"]
    r = ok(c, "batch", {"steps": [{"op": "dot", "x": H(hx), "y": H(hy)},
                                  {"op": "axpby", "x": H(hx), "y": H(hy), "alpha": 0.1,
                                   "beta": {"over": 0}}]})
    d = r["results"][0]["value"]
    check(abs(d - x @ y) <= (n + 2) * EPS64 * (abs(x) @ abs(y)), "batch dot f64")
    got = np.frombuffer(ok(c, "download", {"handle": hy})["data"], "<f8")
    check(np.allclose(got, 0.1 * x + y / d, rtol=1e-14, atol=1e-14), "batch axpby f64")
    expect_error(c, "batch", {"steps": [{"op": "reduce", "x": H(hx)}]},
                 ["steps[0] (reduce)", "'x'", "float64 (f64)", "float32 (f32)"])
    ok(c, "release", {"handle": hx}), ok(c, "release", {"handle": hy})


def test_refusals(c, rng):
    x = rng.standard_normal(8)
    h64 = ok(c, "upload", {"data": f64b(x), "dtype": "f64"})["handle"]
    h32 = ok(c, "upload", {"data": f32b(x), "dtype": "f32"})["handle"]
    expect_error(c, "dot", {"x": H(h64), "y": H(h32)}, ["'y'", "float32 (f32)", "float64 (f64)", "'x'"])
    expect_error(c, "dot", {"x": H(h64), "y": f64b(x), "dtype": "f32"},
                 ["'x'", "float64 (f64)", "float32 (f32)", "'dtype'"])
    expect_error(c, "sgemm", {"m": 1, "n": 1, "k": 8, "a": H(h64), "b": H(h32)},
                 ["'a'", "float64 (f64)", "sgemm takes float32 (f32) only"])
    expect_error(c, "reduce", {"x": f64b(x), "dtype": "f64"}, ["'dtype'", "float64 (f64)", "reduce"])
    expect_error(c, "dot", {"x": f64b(x), "y": f64b(x), "dtype": "f16"}, ["'dtype'", "f16"])
    expect_error(c, "upload", {"data": f64b(x), "dtype": "float64"}, ["'dtype'"])
    expect_error(c, "dot", {"x": f64b(x)[:-4], "y": f64b(x), "dtype": "f64"}, ["'x'", "8 bytes each"])
    ok(c, "release", {"handle": h64}), ok(c, "release", {"handle": h32})


def test_cuda(c, rng):
    """The CUDA backend: f64 for solve and the arrays it reads and writes."""
    x = rng.standard_normal(64)
    h = ok(c, "upload", {"data": f64b(x), "dtype": "f64"})["handle"]
    got = ok(c, "download", {"handle": h})["data"]
    check(got == f64b(x), "cuda float64 upload/download byte for byte")
    ok(c, "release", {"handle": h})
    want = ["float64 (f64)", "cuda backend serves f64 only to", "solve"]
    expect_error(c, "dot", {"x": f64b(x), "y": f64b(x), "dtype": "f64"}, ["'x'"] + want)
    expect_error(c, "axpby", {"x": f64b(x), "y": f64b(x), "dtype": "f64"}, ["'x'"] + want)
    expect_error(c, "nrm2", {"x": f64b(x), "dtype": "f64"}, ["'x'"] + want)
    k = 48
    rp, ci, v = laplacian(k)
    n = k * k
    expect_error(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                                   "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f64b(v),
                                   "dtype": "f64"}, ["'values'"] + want)
    m = ok(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                             "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f32b(v)})["matrix"]
    expect_error(c, "spmv", {"matrix": m, "x": f64b(rng.standard_normal(n)), "dtype": "f64"},
                 ["'x'"] + want)
    b = rng.standard_normal(n)
    x0 = rng.standard_normal(n)
    hb = ok(c, "upload", {"data": f64b(b), "dtype": "f64"})["handle"]
    for method in ("cg", "pcg", "bicgstab"):
        for args in ({"b": f64b(b), "dtype": "f64"}, {"b": H(hb)},
                     {"b": f64b(b), "x0": f64b(x0), "dtype": "f64"}):
            r = ok(c, "solve", dict(args, matrix=m, rtol=1e-10, method=method))
            xs = np.frombuffer(r["x"], "<f8")
            res = np.linalg.norm(b - matvec(rp, ci, v, xs)) / np.linalg.norm(b)
            check(r["converged"] and len(xs) == n and res <= 1e-10,
                  f"cuda f64 {method} {sorted(args)}: true residual {res:.3g}")
            # what float64 b - A x can resolve: each row within (terms + 1) u
            # of |b_i| + sum |a_ij x_j| (6 terms at most here)
            mag = np.abs(b) + matvec(rp, ci, np.abs(v), np.abs(xs))
            slack = 6 * EPS64 * np.linalg.norm(mag) / np.linalg.norm(b)
            check(abs(res - r["residual"]) <= 1e-6 * res + slack,
                  f"cuda f64 {method}: residual reported {r['residual']:.6g} against {res:.6g}")
    # x into a new float64 handle, downloaded
    r = ok(c, "solve", {"matrix": m, "b": H(hb), "rtol": 1e-10, "out": {"x": "handle"}})
    hx = r["x"]["handle"]
    xs = np.frombuffer(ok(c, "download", {"handle": hx})["data"], "<f8")
    res = np.linalg.norm(b - matvec(rp, ci, v, xs)) / np.linalg.norm(b)
    check(r["converged"] and res <= 1e-10, f"cuda f64 solve into a handle: {res:.3g}")
    ok(c, "release", {"handle": hx}), ok(c, "release", {"handle": hb})
    # float32 as before: x rounded to float32, its residual reported as it is
    r = ok(c, "solve", {"matrix": m, "b": f32b(np.ones(n)), "rtol": 1e-6})
    check(r["converged"] and len(r["x"]) == 4 * n, "cuda float32 solve still served")
    ok(c, "release", {"matrix": m})


def main():
    if ec.test_backend() == "cuda":
        return ec.run("e2e_f64", (test_cuda,))
    return ec.run("e2e_f64", (test_vectors, test_spmv, test_solve, test_batch, test_refusals))


if __name__ == "__main__":
    sys.exit(main())
