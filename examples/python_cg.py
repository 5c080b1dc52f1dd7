#!/usr/bin/python3
"""python_cg.py: conjugate gradients through gkcd with the gkc Python package.

Solves A x = b for a symmetric positive definite SuiteSparse matrix (read
with scipy.io.mmread).  The matrix and every vector stay resident on gkcd:
each iteration is one spmv (q = A p, into the existing q), two dots and
three in-place axpby, so only scalars cross the socket until x is
downloaded.  Arithmetic on gkcd is float32 (dots return float64); the final
residual is computed here in float64 from the downloaded x.

As examples/cg.c does, it solves the Jacobi-scaled system
D^-1/2 A D^-1/2 y = D^-1/2 b (D = diag(A)), whose condition number the
scale of the rows does not inflate, and x = D^-1/2 y; b = A x* with x*
uniform in [-1, 1].  When the recurrence's residual drops below --tol, the
true residual is computed on gkcd and, if it is not below --tol, replaces
the recurrence's (at most 8 times).

    python_cg.py [--matrix A.mtx] [--tol 1e-5] [--max-iter N] [--socket PATH] [--json]

Without --matrix it looks for 1138_bus.mtx in $GKC_TEST_DATA, $GKC_SHARED_MATRICES,
tests/data and ../shared/matrices.  Exit status: 0 converged (by gkcd's
float32 check), 1 not converged or a gkcd error, 2 a usage error.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # run from the source tree too
import gkc  # noqa: E402


def find_matrix(name="1138_bus.mtx"):
    dirs = [os.environ.get("GKC_TEST_DATA"), os.environ.get("GKC_SHARED_MATRICES"),
            os.path.join(HERE, "..", "tests", "data"), os.path.join(HERE, "..", "..", "shared", "matrices")]
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    return None


def cg(c, M, hb, n, tol, max_iter):
    """CG on resident M and b; returns (x as a resident array, iterations,
    replacements, whether gkcd's last check of b - A x was below tol)."""
    bnorm = math.sqrt(c.dot(hb, hb))
    hx = c.upload(np.zeros(n, np.float32))
    hr = c.upload(np.zeros(n, np.float32))
    c.axpby(hb, hr, alpha=1.0, beta=0.0, out=hr)  # r = b (x = 0)
    hp = c.upload(np.zeros(n, np.float32))
    c.axpby(hr, hp, alpha=1.0, beta=0.0, out=hp)  # p = r
    hq = c.spmv(M, hp, out="handle")
    rr = c.dot(hr, hr)
    it = replacements = 0
    converged = False
    with hr, hp, hq:
        while it < max_iter:
            if math.sqrt(rr) / bnorm < tol:
                # The recurrence says done: check b - A x on gkcd.
                c.spmv(M, hx, out=hq)
                c.axpby(hb, hq, alpha=1.0, beta=-1.0, out=hr)
                rr = c.dot(hr, hr)
                converged = math.sqrt(rr) / bnorm < tol
                if converged or replacements == 8:
                    break
                replacements += 1
                c.axpby(hr, hp, alpha=1.0, beta=0.0, out=hp)  # restart the directions
            c.spmv(M, hp, out=hq)                              # q = A p
            pq = c.dot(hp, hq)
            if pq <= 0:
                raise SystemExit(f"p.Ap = {pq:g} <= 0: the matrix is not positive definite")
            alpha = rr / pq
            c.axpby(hp, hx, alpha=alpha, beta=1.0, out=hx)     # x += alpha p
            c.axpby(hq, hr, alpha=-alpha, beta=1.0, out=hr)    # r -= alpha q
            rr_new = c.dot(hr, hr)
            c.axpby(hr, hp, alpha=1.0, beta=rr_new / rr, out=hp)  # p = r + beta p
            rr = rr_new
            it += 1
    return hx, it, replacements, converged


def main():
    ap = argparse.ArgumentParser(description="Conjugate gradients on gkcd, matrix and vectors resident.")
    ap.add_argument("--matrix", help="symmetric positive definite Matrix Market file (default: 1138_bus.mtx)")
    ap.add_argument("--tol", type=float, default=1e-5, help="relative residual of the scaled system (default 1e-5)")
    ap.add_argument("--max-iter", type=int, default=20000, help="CG iterations at most (default 20000)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the exact solution x* (default 1)")
    ap.add_argument("--socket", help="gkcd's socket (default: $GKC_SOCKET, ...)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    path = args.matrix or find_matrix()
    if not path:
        ap.error("no --matrix given and 1138_bus.mtx not found")
    A = sp.csr_matrix(scipy.io.mmread(path), dtype=np.float64)
    n = A.shape[0]
    if A.shape[0] != A.shape[1] or abs(A - A.T).max() > 1e-12 * abs(A).max():
        ap.error(f"{path} is not a symmetric square matrix")
    d = A.diagonal()
    if np.any(d <= 0):
        ap.error(f"{path} has a diagonal entry <= 0: not positive definite")
    s = 1.0 / np.sqrt(d)
    As = sp.diags(s) @ A @ sp.diags(s)                     # D^-1/2 A D^-1/2, in float64
    xs = np.random.default_rng(args.seed).uniform(-1, 1, n)
    b = A @ xs
    bs = s * b

    t0 = time.monotonic()
    with gkc.connect(args.socket) as c:
        # float32 on gkcd, as this example's iteration is (dtype= converts:
        # the package never narrows float64 on its own).
        with c.csr_upload(As.tocsr(), dtype="float32") as M, c.upload(bs, dtype="f32") as hb:
            t1 = time.monotonic()
            hx, it, repl, converged = cg(c, M, hb, n, args.tol, args.max_iter)
            t2 = time.monotonic()
            with hx:
                y = hx.download().astype(np.float64)
        algo = M.algo
    x = s * y
    res_scaled = np.linalg.norm(bs - As @ y) / np.linalg.norm(bs)
    res = np.linalg.norm(b - A @ x) / np.linalg.norm(b)
    out = {"matrix": os.path.basename(path), "rows": n, "nnz": int(A.nnz), "spmv_algo": algo,
           "iterations": it, "replacements": repl, "tol": args.tol,
           "residual_scaled": float(res_scaled), "residual": float(res),
           "error_max": float(np.max(np.abs(x - xs))),
           "setup_s": t1 - t0, "solve_s": t2 - t1, "converged": converged}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"matrix:       {out['matrix']} ({n} rows, {A.nnz} nonzeros, spmv algo {algo})")
        print(f"iterations:   {it} ({repl} residual replacements), {out['solve_s']:.3f} s")
        print(f"residual:     {res_scaled:.3e} (float64, ||b - A x|| / ||b|| of the scaled system; tol {args.tol:g})")
        print(f"              {res:.3e} (float64, original system)")
        print(f"max |x - x*|: {out['error_max']:.3e}")
    return 0 if out["converged"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except gkc.Error as e:
        print(f"python_cg: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
