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

On the CUDA backend (GKC_TEST_BACKEND=cuda, ctest -L gpu): the same
vectors, spmv, batch and refusal tests, and beyond them: dot, nrm2 and
axpby on 100003 elements (scalars beyond float32's range; nrm2 of entries
near 2^600 and 2^-600, whose squares over- and underflow, of NaN and of
Inf); spmv with every pair of float32/float64 matrix values and vectors,
by value and resident, on a matrix with a long row, each algo named (what
ran: scalar or vector); csr_upload of float64 values whose offset needs
padding; solve with float64 b, x0 and x (a float32 matrix) to rtol 1e-10
by the true residual of the x returned, recomputed here in float64, by
value and from handles; on CUDA, solve on a float64 matrix (cg, jacobi,
bicgstab, amg, auto) to 1e-10 of the float64 system, whose values are off
float32 (read as float32 it would miss).  On both: a float64 CG iteration per batch (spmv, dot,
axpby on float64 handles, a float64 matrix) following NumPy's float64 CG
to 1e-9, and a batch scalar that divides by zero.
Exits 0 when all pass, 77 when msgpack or numpy is missing.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import msgpack  # noqa: F401
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

from e2e_common import H, check, expect_error, f32b, ok  # noqa: E402
import e2e_common as ec  # noqa: E402

EPS64 = 2.0 ** -53


def f64b(a):
    return np.ascontiguousarray(a, dtype="<f8").tobytes()



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


def perturbed(rp, ci, v):
    """v off float32 by a relative 1e-6, the same for a_ij and a_ji (still
    symmetric, still SPD for the Laplacian): read as float32, a solve would
    solve another system, ~1e-8 away."""
    out = np.asarray(v, dtype=np.float64).copy()
    for i in range(len(rp) - 1):
        for t in range(rp[i], rp[i + 1]):
            lo, hi = min(i, ci[t]), max(i, ci[t])
            h = ((lo * 2654435761) ^ (hi * 40503 + 0x9e3779b9)) & 0xffffffff
            out[t] *= 1.0 + 1e-6 * ((h % 65536) / 65536.0 - 0.5)
    return out


def test_cuda(c, rng):
    """The CUDA backend: float64 everywhere, solve on a float64 matrix too."""
    x = rng.standard_normal(64)
    h = ok(c, "upload", {"data": f64b(x), "dtype": "f64"})["handle"]
    got = ok(c, "download", {"handle": h})["data"]
    check(got == f64b(x), "cuda float64 upload/download byte for byte")
    ok(c, "release", {"handle": h})
    k = 48
    rp, ci, v = laplacian(k)
    n = k * k
    v64 = perturbed(rp, ci, v)
    m64 = csr64(c, rp, ci, v64, n)
    b = rng.standard_normal(n)
    # the float64 values themselves: 1e-10 of the float64 system
    for method, precond in (("cg", "none"), ("cg", "jacobi"), ("bicgstab", "none"), ("cg", "amg"),
                            ("cg", "auto")):
        r = ok(c, "solve", {"matrix": m64, "b": f64b(b), "dtype": "f64", "rtol": 1e-10,
                            "method": method, "precond": precond})
        xs = np.frombuffer(r["x"], "<f8")
        res = np.linalg.norm(b - matvec(rp, ci, v64, xs)) / np.linalg.norm(b)
        check(r["converged"] and res <= 1e-10,
              f"cuda solve on a float64 matrix, {method} + {precond}: {r['iterations']} iterations,"
              f" true residual {res:.3g}")
    # float32 b and x with a float64 matrix: x rounded once, the residual at float32's level
    r = ok(c, "solve", {"matrix": m64, "b": f32b(b), "rtol": 1e-6})
    xs = np.frombuffer(r["x"], "<f4").astype(np.float64)
    res = np.linalg.norm(b.astype(np.float32) - matvec(rp, ci, v64, xs)) / np.linalg.norm(b)
    check(r["converged"] and res <= 1e-5, f"cuda float64 matrix, float32 b: true residual {res:.3g}")
    ok(c, "release", {"matrix": m64})
    m = ok(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                             "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f32b(v)})["matrix"]
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


def depth(n):
    """How deep a float64 sum of n terms goes in the backend: the GPU's grid
    never has fewer than 1536 threads once n >= 2^14 (each thread's share,
    then ~30 levels of shuffles, blocks and partials); the CPU's OpenMP
    loop sums a thread's share, n at most."""
    return n / 1536 + 42 if ec.test_backend() == "cuda" else n + 2


def exact_dot(x, y):
    """x . y within u sum|x y| (math.fsum of the rounded products)."""
    return math.fsum(x * y)


def test_big_vectors(c, rng):
    """dot, nrm2, axpby on float64 vectors large enough for many blocks."""
    n = 100003
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    cuda = ec.test_backend() == "cuda"
    r = ok(c, "dot", {"x": f64b(x), "y": f64b(y), "dtype": "f64"})
    want = exact_dot(x, y)
    check(abs(r["value"] - want) <= (depth(n) + 1) * EPS64 * (np.abs(x) @ np.abs(y)) and
          (r["algo"] == "gkcu" or not cuda), f"dot n={n}: {r['value']!r} vs {want!r}")
    norm = math.sqrt(math.fsum(x * x))  # within 1.5 u
    for scale in (1.0, 2.0 ** 600, 2.0 ** -600):
        xs = x * scale  # exact: a power of two, no entry leaves the normal range
        want = norm * scale
        r = ok(c, "nrm2", {"x": f64b(xs), "dtype": "f64"})
        # the sum's relative error halved by the root, a few roundings more
        # (the CPU's rescaling divides each entry by the largest: one more)
        tol = (depth(n) / 2 + 6) * EPS64 * want
        check(abs(r["value"] - want) <= tol, f"nrm2 of x * {scale:g}: {r['value']!r} vs {want!r}")
    for bad, want in ((np.nan, "nan"), (np.inf, "inf")):
        xs = x.copy()
        xs[77] = bad
        r = ok(c, "nrm2", {"x": f64b(xs), "dtype": "f64"})
        check(str(r["value"]) == want, f"nrm2 with {want}: {r['value']!r}")
    alpha, beta = 3e200, -2e-200
    r = ok(c, "axpby", {"x": f64b(x), "y": f64b(y), "alpha": alpha, "beta": beta, "dtype": "f64"})
    z = np.frombuffer(r["y"], "<f8")
    scale = np.abs(alpha * x) + np.abs(beta * y)
    check(np.all(np.abs(z - (alpha * x + beta * y)) <= 3 * EPS64 * scale),
          "axpby with scalars beyond float32's range")
    r = ok(c, "axpby", {"x": f64b(x), "y": f64b(np.full(n, np.nan)), "alpha": 0.5, "beta": 0.0,
                        "dtype": "f64"})
    check(np.array_equal(np.frombuffer(r["y"], "<f8"), 0.5 * x), "axpby beta 0: y (NaN) not read")


def skewed_csr(rng, n, long_len):
    """n x n, random rows of 0..6 entries and row 3 of long_len (a long row:
    the GPU runs 32 lanes per row on it)."""
    rp, ci, v = [0], [], []
    for i in range(n):
        k = long_len if i == 3 else int(rng.integers(0, 7))
        cols = np.sort(rng.choice(n, size=min(k, n), replace=False))
        ci.extend(cols.tolist()), v.extend(rng.standard_normal(len(cols)).tolist())
        rp.append(len(ci))
    return np.array(rp), np.array(ci), np.array(v)


def test_spmv_pairs(c, rng):
    """Every pair of float32/float64 values and vectors; y rounded once."""
    cuda = ec.test_backend() == "cuda"
    n = 3001  # (n + 1 + nnz) * 4 is odd in 8-byte units for some draws: padded values
    rp, ci, v = skewed_csr(rng, n, 2500)
    nnz = len(ci)
    rows_len = np.diff(rp)
    v32 = v.astype(np.float32).astype(np.float64)
    mats = {"f64": csr64(c, rp, ci, v, n),
            "f32": ok(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                                        "col_idx": np.asarray(ci, "<i4").tobytes(),
                                        "values": f32b(v)})["matrix"]}
    r = ok(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                             "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f64b(v),
                             "dtype": "f64"})
    check((r["algo"] in ("scalar", "vector") or not cuda) and r["nnz"] == nnz, f"csr_upload f64: {r}")
    ok(c, "release", {"matrix": r["matrix"]})
    for vdt, m in mats.items():
        vals = v if vdt == "f64" else v32
        for xdt in ("f64", "f32"):
            x = rng.standard_normal(n)
            y = rng.standard_normal(n)
            if xdt == "f32":
                x, y = x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)
            enc = f64b if xdt == "f64" else f32b
            alpha, beta = (0.75, -1.25)
            for algo in ("auto", "scalar", "vector", "balanced") if cuda else ("auto",):
                r = ok(c, "spmv", {"matrix": m, "x": enc(x), "y": enc(y), "alpha": alpha, "beta": beta,
                                   "algo": algo, "dtype": xdt})
                got = np.frombuffer(r["y"], "<f8" if xdt == "f64" else "<f4").astype(np.float64)
                want = alpha * matvec(rp, ci, vals, x) + beta * y
                mag = abs(alpha) * matvec(rp, ci, np.abs(vals), np.abs(x)) + abs(beta * y)
                # the backend's bound, (L + 8) u of the row's magnitude, plus
                # NumPy's own row sums' (L u); a float32 y's rounding on top
                tol = (2 * rows_len + 8) * EPS64 * mag * (1 + 2.0 ** -23) + \
                    (np.abs(want) * 2.0 ** -24 if xdt == "f32" else 0)
                if cuda and xdt == "f32" and vdt == "f32":  # the float32 kernels sum in float32
                    tol = (rows_len + 8) * 2.0 ** -24 * mag + np.abs(want) * 2.0 ** -24
                ran = "scalar" if algo == "scalar" else "vector"
                check(len(got) == n and np.all(np.abs(got - want) <= tol) and
                      (r["algo"] == ran or (xdt == "f32" and vdt == "f32") or not cuda),
                      f"spmv values {vdt}, x {xdt}, algo {algo} (ran {r['algo']}): worst "
                      f"{np.max(np.abs(got - want) / np.maximum(tol, 1e-300)):.3g} of the bound")
    # by value, float64 throughout
    x = rng.standard_normal(n)
    r = ok(c, "spmv", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                       "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f64b(v), "x": f64b(x),
                       "alpha": 1e-300, "dtype": "f64"})
    got = np.frombuffer(r["y"], "<f8")
    want = 1e-300 * matvec(rp, ci, v, x)
    check(np.all(np.abs(got - want) <= (2 * rows_len + 8) * EPS64 * 1e-300 * matvec(rp, ci, np.abs(v), np.abs(x))
                 + 1e-320), "spmv by value f64, alpha below float32's range")
    for m in mats.values():
        ok(c, "release", {"matrix": m})


def test_batch_cg(c, rng):
    """A float64 CG iteration per batch on a float64 Laplacian: each batch's
    spmv, dots and axpbys in float64 on the device, alpha and beta from the
    dots on the device; it follows NumPy's float64 CG to 1e-9."""
    k = 20
    rp, ci, v = laplacian(k)
    n = k * k
    A = np.zeros((n, n))
    for i in range(n):
        A[i, ci[rp[i]:rp[i + 1]]] = v[rp[i]:rp[i + 1]]
    m = csr64(c, rp, ci, v, n)
    b = rng.standard_normal(n)
    up = lambda a: ok(c, "upload", {"data": f64b(a), "dtype": "f64"})["handle"]  # noqa: E731
    hx, hr, hp, hq = up(np.zeros(n)), up(b), up(b), up(np.zeros(n))
    x64 = ec.batch_cg(c, m, A, b, hx, hr, hp, hq, 25, 1e-9, "float64 batch CG", 15)
    xs = np.frombuffer(ok(c, "download", {"handle": hx})["data"], "<f8")
    check(np.linalg.norm(xs - x64) <= 1e-9 * np.linalg.norm(x64), "float64 batch CG x follows NumPy's")
    # a scalar dividing by zero: the step fails, its output unwritten, named "number"
    hz = up(np.zeros(n))
    before = ok(c, "download", {"handle": hp})["data"]
    expect_error(c, "batch", {"steps": [{"op": "dot", "x": H(hz), "y": H(hz)},
                                        {"op": "axpby", "x": H(hx), "y": H(hp), "beta": {"over": 0}}]},
                 ["step 1 (axpby)", "'beta'", "not a finite number", "steps 0 to 0 ran"])
    check(ok(c, "download", {"handle": hp})["data"] == before, "the failing float64 step wrote nothing")
    # a float32 matrix with float64 vectors in a batch spmv
    m32 = ok(c, "csr_upload", {"rows": n, "cols": n, "row_ptr": np.asarray(rp, "<i4").tobytes(),
                               "col_idx": np.asarray(ci, "<i4").tobytes(), "values": f32b(v)})["matrix"]
    xv = rng.standard_normal(n)
    hxv = up(xv)
    ok(c, "batch", {"steps": [{"op": "spmv", "matrix": m32, "x": H(hxv), "out": hq, "alpha": 1e-200}]})
    got = np.frombuffer(ok(c, "download", {"handle": hq})["data"], "<f8")
    want = 1e-200 * (A @ xv)
    check(np.all(np.abs(got - want) <= 24 * EPS64 * 1e-200 * (np.abs(A) @ np.abs(xv))),
          "batch spmv, float32 matrix, float64 vectors, alpha beyond float32's range")
    for hh in (hx, hr, hp, hq, hz, hxv):
        ok(c, "release", {"handle": hh})
    ok(c, "release", {"matrix": m}), ok(c, "release", {"matrix": m32})


def main():
    if ec.test_backend() == "cuda":
        return ec.run("e2e_f64", (test_vectors, test_spmv, test_batch, test_batch_cg, test_refusals,
                                  test_cuda, test_big_vectors, test_spmv_pairs))
    return ec.run("e2e_f64", (test_vectors, test_spmv, test_solve, test_batch, test_batch_cg,
                              test_refusals, test_big_vectors, test_spmv_pairs))


if __name__ == "__main__":
    sys.exit(main())
