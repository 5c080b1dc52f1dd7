#!/usr/bin/python3
"""solve_pcg_spread.py: how far float64 rounding alone moves Jacobi-PCG's
iteration count to rtol 1e-8 on a matrix (default bcsstk13, b = ones).

    python3 bench/gpu/solve_pcg_spread.py --matrix DIR/bcsstk13.mtx [--gkcd BUILD]

Runs scipy.sparse.linalg.cg with M = diag(A)^-1, then the same recurrence
written out in numpy (scipy's loop, step for step), then variants that
change only rounding: the dot products exactly rounded (math.fsum) or
summed in another order, the product with A summed in reverse order, and b
perturbed by 1 ulp in random entries.  With --gkcd, also gkcd's own count
on the backend(s) given (cpu, cuda).  Prints one line per variant.
"""
import argparse
import math
import os
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pcg(A, b, rtol, maxiter, dot=np.dot, matvec=None, jacobi=True):
    """scipy's cg loop (1.12+), with the dot and the product pluggable;
    jacobi=False: plain CG (M = I)."""
    matvec = matvec or (lambda v: A @ v)
    dinv = 1.0 / A.diagonal() if jacobi else np.ones(A.shape[0])
    tol = rtol * np.linalg.norm(b)
    x = np.zeros_like(b)
    r = b.copy()
    rho_prev = p = None
    for it in range(maxiter):
        if np.linalg.norm(r) < tol:
            return it
        z = dinv * r
        rho = dot(r, z)
        if it > 0:
            p = (rho / rho_prev) * p + z
        else:
            p = z.copy()
        q = matvec(p)
        alpha = rho / dot(p, q)
        x += alpha * p
        r -= alpha * q
        rho_prev = rho
    return maxiter


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrix", required=True)
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--gkcd", default=None, help="build dir: also ask gkcd")
    ap.add_argument("--backends", default="cpu,cuda", help="gkcd backends to ask (cpu,cuda)")
    a = ap.parse_args()
    A = scipy.io.mmread(a.matrix).tocsr().astype(np.float32).astype(np.float64)
    A.sort_indices()
    n = A.shape[0]
    b = np.ones(n)
    print(f"scipy {__import__('scipy').__version__}, numpy {np.__version__}, n = {n}, nnz = {A.nnz}")
    its = [0]
    kw = {"rtol": a.rtol} if "rtol" in spla.cg.__code__.co_varnames else {"tol": a.rtol}
    _, info = spla.cg(A, b, atol=0.0, maxiter=200000, M=sp.diags(1.0 / A.diagonal()),
                      callback=lambda _: its.__setitem__(0, its[0] + 1), **kw)
    print(f"scipy cg (M = Jacobi): {its[0]} iterations (info {info})")
    print(f"numpy, scipy's loop: {pcg(A, b, a.rtol, 200000)}")
    print(f"numpy, dots exactly rounded (fsum): "
          f"{pcg(A, b, a.rtol, 200000, dot=lambda u, v: math.fsum(u * v))}")
    print(f"numpy, dots summed in reverse: "
          f"{pcg(A, b, a.rtol, 200000, dot=lambda u, v: float(np.sum((u * v)[::-1])))}")
    Ar = A[::-1, ::-1].tocsr()
    print(f"numpy, rows summed in reverse order: "
          f"{pcg(A, b, a.rtol, 200000, matvec=lambda v: (Ar @ v[::-1])[::-1])}")
    rng = np.random.default_rng(1)
    for k in range(4):
        bp = b.copy()
        idx = rng.choice(n, size=10, replace=False)
        bp[idx] = np.nextafter(bp[idx], 2.0)
        print(f"numpy, b with 10 entries 1 ulp up (seed {k}): {pcg(A, bp, a.rtol, 200000)}")
    if a.gkcd:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        import e2e_python as ep
        os.environ["GKCD_BIN"] = os.path.join(a.gkcd, "daemon", "gkcd")
        A32 = A.astype(np.float32)
        for backend in a.backends.split(","):
            for prec in ("fp64", "fp32"):
                d = ep.Daemon(["--backend", backend, "--threads", "2"]).wait_ready()
                try:
                    c = ep.Conn(d.sock, timeout=120)
                    m = c.call("csr_upload", {
                        "rows": n, "cols": n, "row_ptr": np.asarray(A32.indptr, "<i4").tobytes(),
                        "col_idx": np.asarray(A32.indices, "<i4").tobytes(),
                        "values": np.asarray(A32.data, "<f4").tobytes()})[3]["matrix"]
                    r = c.call("solve", {"matrix": m, "b": np.ones(n, "<f4").tobytes(),
                                         "method": "pcg", "rtol": a.rtol, "max_iter": 200000,
                                         "precision": prec})
                    res = r[3] or {}
                    print(f"gkcd {backend} {prec}: {res.get('iterations')} iterations, "
                          f"{res.get('reason')}, residual {res.get('residual')} {r[2] or ''}")
                    c.close()
                finally:
                    d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
