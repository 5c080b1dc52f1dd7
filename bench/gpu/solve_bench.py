#!/usr/bin/python3
"""solve_bench.py: CG on the GPU four ways, one command, a table at the end.

    python3 bench/gpu/solve_bench.py --build build/rel --out DIR [--grid 2048]
                                     [--matrices DIR] [--scipy-big] [--quick]

Problems (b = ones, x0 = 0): the 2-D 5-point Laplacian on a --grid^2 grid
(default 2048: 4.19M unknowns, 21M nonzeros) with cg; from --matrices
(default .carry/matrices, else ../shared/matrices): 1138_bus with cg and
bcsstk13 with pcg (Jacobi); and a 512^2 Laplacian for the iteration-count
check.  For each:

  (a) vendor   bench_solve_vendor: CG in this machine's process on cuSPARSE
               SpMV + cuBLAS dot/axpy/scal, the dots returned to the host
               (the CUDA samples' way), float32 (vendor_f32) and float64
               (vendor_f64, A converted to double).  pcg: CG on the
               Jacobi-scaled matrix (the same iterations in exact arithmetic).
  (b) solve    one gkcd `solve` request (b resident, x left resident), to
               rtol 1e-8: iterations / wall time of the request.
  (c) batch    CG in Python, one gkcd `batch` request per iteration (the
               PROTOCOL.md example: spmv, 2 dots, 3 axpby), --batch-iters;
               and "batch C": examples/cg --batch, the same iteration from C
               through libgkc (gkc_batch), --batch-iters iterations.
  (d) per-op   examples/cg: every spmv, dot and axpby its own request
               (libgkc), --perop-iters iterations.

Iteration counts: gkcd's solve to rtol 1e-8 against scipy.sparse.linalg.cg
on the same float32 numbers in float64 (allowed +-max(1, 2%)); on the big
Laplacian only with --scipy-big (scipy needs minutes there).

Writes DIR/solve_bench.csv and DIR/solve_bench.json; prints the summary
table and the targets (solve >= 1.3x vendor_f32 and >= 8000 it/s on the big
Laplacian; batch >= 0.8x vendor_f32; counts within 2%).  Exit 0 always when
everything ran (the table says what met its target), 1 on an error, 77 when
numpy, scipy or msgpack is missing.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
try:
    import numpy as np
    import scipy.io
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla
except ImportError as e:
    print(f"SKIP: {e} (apt-get install python3-numpy python3-scipy python3-msgpack)",
          file=sys.stderr)
    sys.exit(77)


def laplacian2d(k):
    T = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(k, k))
    I = sp.identity(k)
    return (sp.kron(I, T) + sp.kron(T, I)).tocsr().astype(np.float32)


def read_mtx(path):
    A = scipy.io.mmread(path).tocsr().astype(np.float32)
    A.sort_indices()
    return A


def exact_dot_iters(A, method, rtol, maxiter):
    """The same CG/PCG with every dot product exactly rounded (math.fsum):
    float64 CG without a summation-order artefact (solve_pcg_spread.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from solve_pcg_spread import pcg
    return pcg(A.astype(np.float64), np.ones(A.shape[0]), rtol, maxiter,
               dot=lambda u, v: math.fsum(u * v), jacobi=method == "pcg")


def scipy_iters(A, method, rtol, maxiter):
    A64 = A.astype(np.float64)
    b = np.ones(A.shape[0])
    M = None
    if method == "pcg":
        M = sp.diags(1.0 / A64.diagonal())
    its = [0]

    def cb(_):
        its[0] += 1
    kw = {"rtol": rtol} if "rtol" in spla.cg.__code__.co_varnames else {"tol": rtol}
    _, info = spla.cg(A64, b, atol=0.0, maxiter=maxiter, M=M, callback=cb, **kw)
    return its[0], info


class Gkcd:
    """gkcd --backend cuda on a private socket, msgpack-rpc by hand."""

    def __init__(self, build, backend, extra=()):
        import e2e_python as ep
        os.environ["GKCD_BIN"] = os.path.join(build, "daemon", "gkcd")
        self.ep = ep
        self.d = ep.Daemon(["--backend", backend, "--threads", "2",
                            "--max-request-bytes", str(1 << 30)] + list(extra)).wait_ready()
        self.c = ep.Conn(self.d.sock, timeout=600)
        self.sock = self.d.sock

    def ok(self, method, params):
        r = self.c.call(method, params)
        if r[2] is not None:
            raise RuntimeError(f"{method}: {r[2]}")
        return r[3]

    def upload(self, a):
        return self.ok("upload", {"data": np.ascontiguousarray(a, "<f4").tobytes(),
                                  "dtype": "f32"})["handle"]

    def csr(self, A):
        return self.ok("csr_upload", {
            "rows": A.shape[0], "cols": A.shape[1],
            "row_ptr": np.asarray(A.indptr, "<i4").tobytes(),
            "col_idx": np.asarray(A.indices, "<i4").tobytes(),
            "values": np.asarray(A.data, "<f4").tobytes()})["matrix"]

    def release(self, **kw):
        self.ok("release", kw)

    def stop(self):
        self.c.close()
        return self.d.stop()


def run_solve(g, mat, bh, method, rtol, max_iter, precision="fp64"):
    t0 = time.perf_counter()
    r = g.ok("solve", {"matrix": mat, "b": {"handle": bh}, "method": method, "rtol": rtol,
                       "max_iter": max_iter, "out": {"x": "handle"}, "precision": precision})
    dt = time.perf_counter() - t0
    g.release(handle=r["x"]["handle"])
    return r, dt


def run_batch_cg(g, mat, n, iters):
    """CG, one batch per iteration; rho = r.r carried from the last reply."""
    ones = np.ones(n, np.float32)
    x = g.upload(np.zeros(n, np.float32))
    r = g.upload(ones)
    p = g.upload(ones)
    q = g.upload(np.zeros(n, np.float32))
    rho = float(n)
    H = lambda h: {"handle": h}  # noqa: E731
    times = {k: [] for k in ("server_us", "queue_us", "worker_us", "kernel_us")}
    t0 = time.perf_counter()
    for _ in range(iters):
        steps = [{"op": "spmv", "matrix": mat, "x": H(p), "out": q},
                 {"op": "dot", "x": H(p), "y": H(q)},
                 {"op": "axpby", "x": H(p), "y": H(x), "alpha": {"over": 1, "scale": rho}},
                 {"op": "axpby", "x": H(q), "y": H(r), "alpha": {"over": 1, "scale": -rho}},
                 {"op": "dot", "x": H(r), "y": H(r)},
                 {"op": "axpby", "x": H(r), "y": H(p), "beta": {"step": 4, "scale": 1.0 / rho}}]
        res = g.ok("batch", {"steps": steps})
        rho = res["results"][4]["value"]
        for k, v in times.items():
            if k in res:
                v.append(res[k])
    dt = time.perf_counter() - t0
    for h in (x, r, p, q):
        g.release(handle=h)
    # where a batch's time goes: medians of the reply's timing fields
    split = {k: sorted(v)[len(v) // 2] for k, v in times.items() if v}
    return dt, math.sqrt(rho / n), split


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-2000:]}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd)}: no JSON: {p.stdout[-500:]} {p.stderr[-1000:]}")
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "rel"),
                    help="the build directory (gkcd, bench_solve_vendor, examples/cg)")
    ap.add_argument("--out", required=True, help="directory for solve_bench.csv/.json")
    ap.add_argument("--grid", type=int, default=2048, help="big Laplacian grid (default 2048)")
    ap.add_argument("--matrices", default=None,
                    help="directory with 1138_bus.mtx, bcsstk13.mtx "
                         "(default .carry/matrices, else ../shared/matrices)")
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--vendor-iters", type=int, default=300)
    ap.add_argument("--batch-iters", type=int, default=200)
    ap.add_argument("--perop-iters", type=int, default=100)
    ap.add_argument("--scipy-big", action="store_true",
                    help="also run scipy's cg on the big Laplacian (minutes)")
    ap.add_argument("--quick", action="store_true", help="grid 512, fewer iterations")
    ap.add_argument("--backend", default="cuda", help="gkcd's backend (cpu: a smoke test)")
    ap.add_argument("--no-vendor", action="store_true", help="skip (a) (no GPU here)")
    ap.add_argument("--gkcd-args", default="",
                    help="more gkcd options, space-separated (e.g. '--latency-sms 0')")
    a = ap.parse_args()
    if a.quick:
        a.grid, a.vendor_iters, a.batch_iters, a.perop_iters = 512, 100, 50, 30
    os.makedirs(a.out, exist_ok=True)
    mdir = a.matrices
    for cand in (os.path.join(ROOT, ".carry", "matrices"),
                 os.path.join(ROOT, "..", "shared", "matrices")):
        if not mdir and os.path.isdir(cand):
            mdir = cand
    vendor = os.path.join(a.build, "bench", "gpu", "bench_solve_vendor")
    cgex = os.path.join(a.build, "examples", "cg")
    t_start = time.time()

    problems = [("laplace%d" % a.grid, "cg", None, a.grid)]
    if a.grid != 512:
        problems.append(("laplace512", "cg", None, 512))
    for name, method in (("1138_bus", "cg"), ("bcsstk13", "pcg")):
        path = os.path.join(mdir, name + ".mtx") if mdir else ""
        if path and os.path.exists(path):
            problems.append((name, method, path, None))
        else:
            print(f"{name}: not found (--matrices), skipped")

    g = Gkcd(a.build, a.backend, a.gkcd_args.split())
    rows = []
    try:
        for name, method, path, grid in problems:
            A = laplacian2d(grid) if grid else read_mtx(path)
            n, nnz = A.shape[0], A.nnz
            print(f"== {name}: n = {n}, nnz = {nnz}, {method} ==", flush=True)
            big = grid == a.grid and grid is not None
            row = {"problem": name, "n": n, "nnz": nnz, "method": method}
            # (a) vendor, both precisions
            src = ["--grid", str(grid)] if grid else ["--matrix", path]
            extra = ["--jacobi"] if method == "pcg" else []
            for prec in () if a.no_vendor else ("f32", "f64"):
                v = run_json([vendor] + src + extra + ["--prec", prec, "--iters",
                             str(a.vendor_iters), "--rtol", str(a.rtol), "--max-iter", "20000"])
                row[f"vendor_{prec}_it_s"] = v["iterations_per_s"]
                row[f"vendor_{prec}_iters_to_rtol"] = v["iterations_to_rtol"]
                print(f"  (a) vendor_{prec}: {v['iterations_per_s']:.0f} it/s "
                      f"({v['ms_per_iteration']:.4f} ms/it); to rtol: "
                      f"{v['iterations_to_rtol']} iterations", flush=True)
            # (b) solve
            mat = g.csr(A)
            bh = g.upload(np.ones(n, np.float32))
            run_solve(g, mat, bh, method, a.rtol, 5)  # warm-up (graph, workspace)
            r, dt = run_solve(g, mat, bh, method, a.rtol, 200000)
            row.update({"solve_iters": r["iterations"], "solve_reason": r["reason"],
                        "solve_residual": r["residual"], "solve_algo": r["algo"],
                        "solve_it_s": r["iterations"] / dt,
                        "solve_kernel_it_s": r["iterations"] / (r["kernel_us"] * 1e-6)
                        if r.get("kernel_us") else float("nan")})
            print(f"  (b) solve: {r['iterations']} iterations, {r['reason']}, residual "
                  f"{r['residual']:.2e}, {dt:.3f} s: {row['solve_it_s']:.0f} it/s "
                  f"(algo {r['algo']})", flush=True)
            # (b32) solve, precision fp32
            run_solve(g, mat, bh, method, a.rtol, 5, "fp32")
            r, dt = run_solve(g, mat, bh, method, a.rtol, 200000, "fp32")
            row.update({"solve32_iters": r["iterations"], "solve32_reason": r["reason"],
                        "solve32_residual": r["residual"], "solve32_it_s": r["iterations"] / dt,
                        "solve32_kernel_it_s": r["iterations"] / (r["kernel_us"] * 1e-6)
                        if r.get("kernel_us") else float("nan")})
            print(f"  (b32) solve fp32: {r['iterations']} iterations, {r['reason']}, residual "
                  f"{r['residual']:.2e}, {dt:.3f} s: {row['solve32_it_s']:.0f} it/s "
                  f"(in the loop {row['solve32_kernel_it_s']:.0f} it/s)", flush=True)
            # (c) batch
            if method == "cg":
                dtb, rel, split = run_batch_cg(g, mat, n, a.batch_iters)
                row["batch_it_s"] = a.batch_iters / dtb
                for k, v in split.items():
                    row["batch_" + k] = v
                print(f"  (c) batch: {a.batch_iters} iterations, {row['batch_it_s']:.0f} it/s; "
                      f"per batch (median, us): round trip {1e6 * dtb / a.batch_iters:.1f}, " +
                      ", ".join(f"{k} {v:.1f}" for k, v in split.items()), flush=True)
            g.release(matrix=mat)
            g.release(handle=bh)
            src_cg = ["--grid", str(grid)] if grid else ["--matrix", path]
            # (c) batch from C
            if method == "cg" and os.path.exists(cgex):
                d = run_json([cgex] + src_cg + ["--batch", "--tol", "1e-30", "--max-iter",
                             str(a.batch_iters), "--socket", g.sock, "--json"])
                # the batches alone, as (c) in Python times them: cg's iterations_per_s
                # also counts its final true-residual check and the download of x (16 MB
                # at 2048^2, ~10-20 ms through the socket)
                row["batch_c_it_s"] = d.get("loop_iterations_per_s", d["iterations_per_s"])
                print(f"  (c) batch from C: {d['iterations']} iterations, "
                      f"{row['batch_c_it_s']:.0f} it/s in the batches "
                      f"({d['iterations_per_s']:.0f} with the check and the download of x)", flush=True)
            # (d) request per operation
            if os.path.exists(cgex):
                d = run_json([cgex] + src_cg +
                             ["--tol", "1e-30", "--max-iter", str(a.perop_iters), "--socket",
                              g.sock, "--json"])
                row["perop_it_s"] = d["iterations_per_s"]
                print(f"  (d) per-op: {d['iterations']} iterations, "
                      f"{d['iterations_per_s']:.0f} it/s", flush=True)
            # scipy
            if not big or a.scipy_big:
                its, info = scipy_iters(A, method, a.rtol, 200000)
                row["scipy_iters"] = its
                print(f"  scipy: {its} iterations (info {info})", flush=True)
            if n <= 100000:
                row["exact_iters"] = exact_dot_iters(A, method, a.rtol, 200000)
                print(f"  float64 CG, dots exactly rounded: {row['exact_iters']} iterations",
                      flush=True)
            rows.append(row)
    finally:
        rc = g.stop()
    if rc != 0:
        print(f"gkcd exited {rc}", file=sys.stderr)

    keys = ["problem", "n", "nnz", "method", "vendor_f32_it_s", "vendor_f64_it_s", "solve_it_s",
            "solve_kernel_it_s", "solve32_it_s", "solve32_kernel_it_s", "batch_it_s",
            "batch_c_it_s", "batch_server_us", "batch_queue_us", "batch_worker_us",
            "batch_kernel_us", "perop_it_s", "solve_iters", "solve32_iters", "scipy_iters", "exact_iters",
            "solve32_reason",
            "solve32_residual",
            "vendor_f32_iters_to_rtol", "vendor_f64_iters_to_rtol", "solve_reason",
            "solve_residual", "solve_algo"]
    with open(os.path.join(a.out, "solve_bench.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(row)
    with open(os.path.join(a.out, "solve_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)

    def fmt(v, d=0):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}f}"
    print(f"\nsummary (iterations/s; ms/iteration in brackets), {time.time() - t_start:.0f} s:")
    hdr = f"{'problem':<13}{'n':>9} {'vendor_f32':>16}{'vendor_f64':>16}{'(b) solve':>16}" \
          f"{'(b) fp32':>16}{'(c) batch':>16}{'(c) batch C':>16}{'(d) per-op':>16}" \
          f"  {'iters':>6}{'it32':>6}" \
          f"{'scipy':>7}"
    print(hdr)
    for row in rows:
        cells = []
        for k in ("vendor_f32_it_s", "vendor_f64_it_s", "solve_it_s", "solve32_it_s",
                  "batch_it_s", "batch_c_it_s", "perop_it_s"):
            v = row.get(k)
            cells.append(f"{fmt(v)} [{fmt(1e3 / v, 3) if v else '-'}]" if v else "-")
        print(f"{row['problem']:<13}{row['n']:>9} " + "".join(f"{c:>16}" for c in cells) +
              f"  {row.get('solve_iters', '-'):>6}{row.get('solve32_iters', '-'):>6}"
              f"{row.get('scipy_iters', '-'):>7}")
    print("\ntargets:")
    for row in rows:
        f32 = row.get("vendor_f32_it_s")
        s = row.get("solve_it_s")
        if f32 and s:
            line = f"  {row['problem']}: solve/vendor_f32 = {s / f32:.2f} (>= 1.3)"
            if row.get("vendor_f64_it_s"):
                line += f", solve/vendor_f64 = {s / row['vendor_f64_it_s']:.2f}"
            if row.get("batch_it_s"):
                line += f", batch/vendor_f32 = {row['batch_it_s'] / f32:.2f} (>= 0.8)"
            if row.get("batch_c_it_s"):
                line += f", batch C/vendor_f32 = {row['batch_c_it_s'] / f32:.2f} (>= 0.8)"
            if row["problem"] == f"laplace{a.grid}":
                line += f", solve {s:.0f} it/s (>= 8000)"
            if row.get("solve32_it_s"):
                line += (f"; fp32: solve/vendor_f32 = {row['solve32_it_s'] / f32:.2f},"
                         f" {row['solve32_it_s']:.0f} it/s")
            print(line)
        if row.get("scipy_iters"):
            its, ref = row["solve_iters"], row["scipy_iters"]
            allowed = max(1, math.ceil(0.02 * ref))
            print(f"  {row['problem']}: {its} iterations vs scipy {ref}: "
                  f"{'within' if abs(its - ref) <= allowed else 'OUTSIDE'} +-{allowed}")
            if row.get("exact_iters"):
                ex = row["exact_iters"]
                allowed_x = max(1, math.ceil(0.02 * ex))
                print(f"  {row['problem']}: {row['solve_iters']} iterations vs float64 CG with "
                      f"exactly rounded dots {ex}: "
                      f"{'within' if abs(row['solve_iters'] - ex) <= allowed_x else 'OUTSIDE'}"
                      f" +-{allowed_x}")
            if row.get("solve32_iters"):
                its = row["solve32_iters"]
                print(f"  {row['problem']}: fp32 {its} iterations vs scipy {ref}: "
                      f"{'within' if abs(its - ref) <= allowed else 'OUTSIDE'} +-{allowed}")
    print(f"CSV: {os.path.join(a.out, 'solve_bench.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
