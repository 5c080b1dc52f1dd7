#!/usr/bin/python3
"""e2e_batch.py: the `batch` method against NumPy.

Starts its own gkcd ($GKCD_BIN) and speaks msgpack-rpc directly.  Checks
every op (dot, axpby, spmv, reduce, sgemm) on fresh random resident arrays
against float64 NumPy, scalars taken from earlier steps (a dot's value as a
later axpby's alpha, divided and scaled), a whole CG iteration per request
converging like a float64 CG, a failing step naming its index and op with
the earlier steps' outputs left written, and every validation error.
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

from e2e_common import EPS, H, check, download, f32b, ok, upload  # noqa: E402
import e2e_common as ec  # noqa: E402



def rnd(rng, n):
    return rng.uniform(-1, 1, n).astype(np.float32).astype(np.float64)


def random_csr(rng, rows, cols, per_row):
    rp, ci, vals = [0], [], []
    for _ in range(rows):
        k = int(rng.integers(0, per_row * 2 + 1))
        ci += list(rng.integers(0, cols, k))
        vals += list(rnd(rng, k))
        rp.append(len(ci))
    return np.array(rp), np.array(ci), np.array(vals)


def csr_dense(rows, cols, rp, ci, vals):
    A = np.zeros((rows, cols))
    for i in range(rows):
        for j in range(rp[i], rp[i + 1]):
            A[i, ci[j]] += vals[j]
    return A


def close(got, ref, mag, what, k=8):
    """|got - ref| <= k * 2^-24 * mag elementwise (mag: the sum of the
    magnitudes of what was added up, so the float32 rounding bound)."""
    bad = np.abs(got - ref) > k * EPS * mag + 1e-30
    return check(not bad.any(), f"{what}: {int(bad.sum())} elements off, first at "
                 f"{np.argmax(bad) if bad.any() else -1}")


def test_ops(c, rng):
    n = int(rng.integers(1000, 5000))
    x, y, z = rnd(rng, n), rnd(rng, n), rnd(rng, n)
    hx, hy, hz, ho = upload(c, x), upload(c, y), upload(c, z), upload(c, np.zeros(n))
    rows, cols = int(rng.integers(50, 300)), n
    rp, ci, vals = random_csr(rng, rows, cols, 6)
    A = csr_dense(rows, cols, rp, ci, vals)
    mat = ec.csr_upload(c, rows, cols, rp, ci, vals)
    hq = upload(c, np.zeros(rows))
    m, k, nn = 7, 5, 9
    a, b = rnd(rng, m * k), rnd(rng, k * nn)
    ha, hb, hc = upload(c, a), upload(c, b), upload(c, np.zeros(m * nn))
    steps = [
        {"op": "dot", "x": H(hx), "y": H(hy)},                                   # 0
        {"op": "reduce", "x": H(hz), "fn": "max"},                               # 1
        {"op": "reduce", "x": H(hz)},                                            # 2: sum
        # o = (v0 / v1 * -0.5) x + 2 y
        {"op": "axpby", "x": H(hx), "y": H(hy), "out": ho,
         "alpha": {"step": 0, "over": 1, "scale": -0.5}, "beta": 2.0},           # 3
        {"op": "dot", "x": H(ho), "y": H(ho)},                                   # 4: reads 3's output
        {"op": "spmv", "matrix": mat, "x": H(ho), "out": hq, "alpha": 1.5},      # 5
        {"op": "sgemm", "m": m, "n": nn, "k": k, "a": H(ha), "b": H(hb), "out": hc,
         "alpha": {"step": 1}},                                                  # 6
        {"op": "axpby", "x": H(hz), "y": H(hz), "alpha": 1.0, "beta": 1.0},      # 7: z = 2z in place
    ]
    r = ok(c, "batch", {"steps": steps})
    res = r["results"]
    check(len(res) == len(steps) and [s["op"] for s in res] == [s["op"] for s in steps],
          f"one result per step, in order: {res!r:.200}")
    check(abs(res[0]["value"] - x @ y) <= 1e-12 * (np.abs(x) @ np.abs(y)), f"dot {res[0]['value']!r} vs {x @ y!r}")
    check(res[1]["value"] == z.max(), "reduce max")
    # The CPU backend sums in float64; the CUDA backend's auto may run CUB,
    # which sums float32 (test_gpu_reduce allows it 2e-5 of the sum of |x|).
    sum_tol = 2e-5 if ec.test_backend() == "cuda" else 1e-12
    check(abs(res[2]["value"] - z.sum()) <= sum_tol * np.abs(z).sum(),
          f"reduce sum: {res[2]['value']!r} vs {z.sum()!r}")
    alpha = np.float32(-0.5 * res[0]["value"] / res[1]["value"])
    o = download(c, ho)
    ref = float(alpha) * x + 2 * y
    close(o, ref, np.abs(float(alpha) * x) + np.abs(2 * y), "axpby with alpha from steps 0 and 1")
    check(res[3]["handle"] == ho and res[3]["bytes"] == 4 * n, "axpby result names its handle")
    check(abs(res[4]["value"] - o @ o) <= 1e-12 * (o @ o), "dot of the previous step's output")
    q = download(c, hq)
    close(q, 1.5 * A @ o, 1.5 * np.abs(A) @ np.abs(o), "spmv on the axpby output", k=16)
    cm = download(c, hc).reshape(m, nn)
    ref = res[1]["value"] * (a.reshape(m, k) @ b.reshape(k, nn))
    close(cm, ref, abs(res[1]["value"]) * np.abs(a.reshape(m, k)) @ np.abs(b.reshape(k, nn)),
          "sgemm with alpha from step 1", k=16)
    check(np.array_equal(download(c, hz), 2 * z), "axpby in place")
    check(res[7]["handle"] == hz, "in-place axpby names y's handle")
    # A chain of kernels, however small its prediction: the bulk lane, as solve.
    check(r.get("lane") == "bulk", f"a small batch ran in the {r.get('lane')!r} lane, not bulk")


def test_cg(c, rng):
    """A CG iteration per batch on a 1-D Laplacian: the daemon's float32
    iterates follow a float64 CG's residuals while they stay well above
    float32's rounding (1e-4 here)."""
    n = 500
    rp = [0]
    ci, vals = [], []
    for i in range(n):
        for j, v in ((i - 1, -1.0), (i, 2.0), (i + 1, -1.0)):
            if 0 <= j < n:
                ci.append(j)
                vals.append(v)
        rp.append(len(ci))
    A = csr_dense(n, n, rp, ci, vals)
    mat = ec.csr_upload(c, n, n, rp, ci, vals)
    b = rnd(rng, n)
    hx, hr, hp, hq = upload(c, np.zeros(n)), upload(c, b), upload(c, b), upload(c, np.zeros(n))
    # float64 CG alongside
    x64 = ec.batch_cg(c, mat, A, b, hx, hr, hp, hq, 30, 1e-3, "batch CG", 6)
    x = download(c, hx)
    check(np.linalg.norm(x - x64) <= 1e-3 * np.linalg.norm(x64), "batch CG x follows float64 CG")


def err(c, steps, *needles, code="invalid_argument"):
    return ec.expect_error(c, "batch", {"steps": steps} if steps is not None else {}, needles,
                           code, label=steps)


def test_failing_step(c, rng):
    n = 300
    x, y = rnd(rng, n), rnd(rng, n)
    hx, hy, ho, hz = upload(c, x), upload(c, y), upload(c, np.zeros(n)), upload(c, np.zeros(n))
    before = download(c, hy)
    # step 2 divides by step 1's dot of zeros: alpha is infinite
    err(c, [{"op": "axpby", "x": H(hx), "y": H(hy), "alpha": 3.0, "beta": -1.0, "out": ho},
            {"op": "dot", "x": H(hz), "y": H(hz)},
            {"op": "axpby", "x": H(hx), "y": H(hy), "alpha": {"over": 1}},
            {"op": "axpby", "x": H(hx), "y": H(ho), "alpha": 5.0}],
        "step 2 (axpby)", "'alpha'", "steps 0 to 1 ran")
    o = download(c, ho)
    close(o, 3 * x - y, np.abs(3 * x) + np.abs(y), "step 0's output stays written", k=4)
    check(np.array_equal(download(c, hy), before), "the failing step wrote nothing")


def test_validation(c, rng):
    n = 64
    hx, hy, h2 = upload(c, rnd(rng, n)), upload(c, rnd(rng, n)), upload(c, rnd(rng, n + 1))
    mat = ec.csr_upload(c, 2, n, [0, 1, 2], [0, 1], [1, 2])
    hq = upload(c, np.zeros(2))
    dot = {"op": "dot", "x": H(hx), "y": H(hy)}
    err(c, None, "missing argument 'steps'")
    err(c, [], "'steps'", "1 to 64")
    err(c, [dot] * 65, "'steps'", "1 to 64")
    err(c, [dot, 5], "steps[1]", "map")
    err(c, [dot, {"op": "gemv"}], "steps[1]", "'gemv'", "dot, axpby, spmv, reduce, sgemm")
    err(c, [{"x": H(hx)}], "steps[0]", "missing argument 'op'")
    err(c, [{"op": "dot", "x": H(hx), "y": H(h2)}], "steps[0] (dot)", "'y'")
    err(c, [{"op": "dot", "x": f32b(np.ones(n)), "y": H(hy)}], "steps[0] (dot)", "'x'", "resident")
    err(c, [{"op": "dot", "x": H(hx), "y": H(hy), "alpha": 1}], "steps[0] (dot)", "unknown argument 'alpha'")
    err(c, [dot, {"op": "axpby", "x": H(hx), "y": H(hy), "alpha": {"step": 1}}],
        "steps[1] (axpby)", "'alpha'", "earlier step")
    err(c, [{"op": "axpby", "x": H(hx), "y": H(hy)},
            {"op": "axpby", "x": H(hx), "y": H(hy), "beta": {"over": 0}}],
        "steps[1] (axpby)", "'beta'", "no scalar value")
    err(c, [dot, {"op": "axpby", "x": H(hx), "y": H(hy), "alpha": {"step": 0, "times": 2}}],
        "steps[1] (axpby)", "'alpha'")
    err(c, [{"op": "axpby", "x": H(hx), "y": H(hy), "alpha": float("inf")}], "steps[0] (axpby)", "'alpha'")
    err(c, [{"op": "axpby", "x": H(hx), "y": H(hy), "out": h2}], "steps[0] (axpby)", "'out'", "bytes")
    err(c, [{"op": "spmv", "matrix": mat, "x": H(hx)}], "steps[0] (spmv)", "'out'")
    err(c, [{"op": "spmv", "matrix": mat, "x": H(h2), "out": hq}], "steps[0] (spmv)", "'x'")
    err(c, [{"op": "spmv", "matrix": hx, "x": H(hx), "out": hq}], "steps[0] (spmv)", "'matrix'")
    err(c, [{"op": "spmv", "matrix": mat, "x": H(hx), "out": hq, "beta": 1}], "steps[0] (spmv)", "'y'")
    err(c, [{"op": "sgemm", "m": 8, "n": 8, "k": 8, "a": H(hx), "b": H(hy), "out": hx}],
        "steps[0] (sgemm)", "'out'", "input")
    err(c, [{"op": "sgemm", "m": 8, "n": 8, "k": 9, "a": H(hx), "b": H(hy), "out": hx}],
        "steps[0] (sgemm)", "'a'")
    err(c, [{"op": "reduce", "x": H(hx), "fn": "prod"}], "steps[0] (reduce)", "'fn'")
    err(c, [dot, {"op": "dot", "x": H(999999), "y": H(hy)}], "steps[1] (dot)", "no handle")


def main():
    return ec.run("e2e_batch", (test_ops, test_cg, test_failing_step, test_validation))


if __name__ == "__main__":
    sys.exit(main())
