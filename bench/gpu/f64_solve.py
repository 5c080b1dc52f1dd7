#!/usr/bin/env python3
"""f64_solve.py: a float64 CG solve of the 2-D Laplacian through gkcd's
Python package, against CuPy's cg in the caller's process on the same GPU,
in the same run (issue #27's first target: the true residual of the x
returned, recomputed here in float64, <= rtol).

    f64_solve.py SOCKET [--n 2048] [--rtol 1e-8] [--repeat 3] [--json PATH]

The matrix (5-point, float32 values: exact) is uploaded once; b = ones in
float64.  Prints one markdown row per solver: iterations, median time to
solution, true relative residual of x.  CuPy is skipped when absent.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gkc  # noqa: E402


def laplacian(n):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (n, n))
    return (sp.kron(sp.identity(n), t) + sp.kron(t, sp.identity(n))).tocsr()


def true_res(a, b, x):
    return float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("socket")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    o = ap.parse_args()
    a = laplacian(o.n)
    a32 = a.astype(np.float32)
    b = np.ones(a.shape[0])
    rows = []
    c = gkc.connect(o.socket)
    m = c.csr_upload(a32)
    for method in ("cg", "pcg"):
        times, r = [], None
        for _ in range(o.repeat):
            t0 = time.perf_counter()
            r = c.solve(m, b, rtol=o.rtol, method=method)
            times.append(time.perf_counter() - t0)
        rows.append({"solver": f"gkcd {method} (float64 b, x)", "iterations": r.iterations,
                     "ms": 1e3 * sorted(times)[len(times) // 2], "dtype": str(r.x.dtype),
                     "converged": bool(r.converged), "reported": r.residual,
                     "true_residual": true_res(a, b, np.asarray(r.x, np.float64))})
    c.close()
    try:
        import cupy as cp
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cla
        ag, bg = csp.csr_matrix(a), cp.asarray(b)
        times, it = [], [0]

        def count(_):
            it[0] += 1
        for _ in range(o.repeat):
            it[0] = 0
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            try:  # rtol= in CuPy releases that follow SciPy 1.12, tol= before
                xg, info = cla.cg(ag, bg, rtol=o.rtol, maxiter=10 * a.shape[0], callback=count)
            except TypeError:
                xg, info = cla.cg(ag, bg, tol=o.rtol, maxiter=10 * a.shape[0], callback=count)
            x = cp.asnumpy(xg)
            times.append(time.perf_counter() - t0)
        rows.append({"solver": "CuPy cg (float64, in-process)", "iterations": it[0],
                     "ms": 1e3 * sorted(times)[len(times) // 2], "dtype": str(x.dtype),
                     "converged": info == 0, "reported": float("nan"), "true_residual": true_res(a, b, x)})
    except ImportError as e:
        print(f"CuPy: {e}", file=sys.stderr)
    print(f"2-D Laplacian {o.n}^2, b = ones (float64), rtol {o.rtol:g}\n")
    print("| solver | iterations | ms | x dtype | converged | true residual |")
    print("|---|---:|---:|---|---|---:|")
    for r in rows:
        print(f"| {r['solver']} | {r['iterations']} | {r['ms']:.1f} | {r['dtype']} | {r['converged']} |"
              f" {r['true_residual']:.2e} |")
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"n": o.n, "rtol": o.rtol, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
