"""e2e_common.py: what the raw msgpack-rpc tests (e2e_batch.py, e2e_solve.py)
share: pass/fail counting, requests over e2e_wire's Conn with float32
arrays as little-endian bytes, an expected error, and main's frame (a gkcd
of its own on $GKC_TEST_BACKEND, the tests run in turn, the counts).
Import it once numpy is known to be there.
"""
import os
import sys
import time

import numpy as np

import e2e_wire as ep  # Daemon, Conn

PASSED = 0
FAILED = 0


def check(cond, what):
    """Counts one check; a failure is printed, the test goes on."""
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def summary(name):
    """Prints the counts; the exit status: 1 when any check failed."""
    print(f"{name}: {PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


def call(c, method, params):
    """One request on c and its reply [1, msgid, error, result]."""
    msgid = c.send_req(method, params)
    r = c.reply()
    assert r[1] == msgid, r
    return r


def ok(c, method, params):
    """The result of a request that must succeed."""
    r = call(c, method, params)
    if r[2] is not None:
        raise RuntimeError(f"{method} failed: {r[2]}")
    return r[3]


def expect_error(c, method, params, needles, code="invalid_argument", label=None):
    """A check that method(params) fails with code and a message naming every
    one of needles; label (default params) names the request on failure."""
    r = call(c, method, params)
    e = r[2]
    label = params if label is None else label
    return check(isinstance(e, dict) and e.get("code") == code and
                 all(n in e.get("message", "") for n in needles),
                 f"{label!r:.160}: expected {code} naming {needles}, got {e or r[3]!r:.200}")


EPS = 2.0 ** -24  # float32's unit roundoff


def H(h):
    """A resident array as an argument: {"handle": h}."""
    return {"handle": h}


def f32b(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def upload(c, a):
    return ok(c, "upload", {"data": f32b(a), "dtype": "f32"})["handle"]


def download(c, h):
    return np.frombuffer(ok(c, "download", {"handle": h})["data"], dtype="<f4").astype(np.float64)


def csr_upload(c, rows, cols, row_ptr, col_idx, values):
    """The matrix id of a CSR matrix uploaded with float32 values."""
    return ok(c, "csr_upload", {"rows": rows, "cols": cols,
                                "row_ptr": np.asarray(row_ptr, "<i4").tobytes(),
                                "col_idx": np.asarray(col_idx, "<i4").tobytes(),
                                "values": f32b(values)})["matrix"]


def test_backend():
    """The backend under test: $GKC_TEST_BACKEND (ctest -L gpu sets cuda), else cpu."""
    return os.environ.get("GKC_TEST_BACKEND", "cpu")


def run(name, tests):
    """main of a raw msgpack-rpc test: a gkcd of its own (--threads 2) on
    test_backend(), skipped (exit 77) when a backend other than cpu cannot
    start (no GPU); each test(c, rng) in turn on one connection with a
    random generator seeded from $GKC_TEST_SEED or the clock; then gkcd
    must exit 0.  Returns the exit status."""
    seed = int(os.environ.get("GKC_TEST_SEED", time.time_ns() % 2**32))
    print(f"{name}: seed {seed} (GKC_TEST_SEED={seed} reproduces this run)")
    rng = np.random.default_rng(seed)
    backend = test_backend()
    d = ep.Daemon(["--threads", "2", "--backend", backend])
    try:
        d.wait_ready()
    except RuntimeError as e:
        if backend != "cpu":
            print(f"SKIP: gkcd --backend {backend} did not start: {e}", file=sys.stderr)
            sys.exit(77)
        raise
    try:
        c = ep.Conn(d.sock, timeout=120)
        check(ep.Conn(d.sock).call("ping", {})[3]["backend"] == backend, f"backend {backend}")
        for t in tests:
            print(t.__name__)
            t(c, rng)
        c.close()
    finally:
        rc = d.stop()
        check(rc == 0, f"gkcd exited {rc}")
    return summary(name)


def batch_cg(c, mat, A, b, hx, hr, hp, hq, iters, rel, label, digits):
    """CG as one batch request an iteration (q = A p, p.q, x and r updated
    with scalars read from the batch's dots, r.r, p = r + beta p) on the
    resident x, r (= b), p (= b) and q, checked after each iteration
    against float64 CG in NumPy on the dense A: ||r|| within rel.  Returns
    NumPy's x, for the caller to hold the downloaded one to."""
    rz = float(b @ b)
    x64, r64, p64, rz64 = np.zeros(len(b)), b.copy(), b.copy(), b @ b
    for it in range(iters):
        r = ok(c, "batch", {"steps": [
            {"op": "spmv", "matrix": mat, "x": H(hp), "out": hq},
            {"op": "dot", "x": H(hp), "y": H(hq)},
            {"op": "axpby", "x": H(hp), "y": H(hx), "alpha": {"over": 1, "scale": rz}},
            {"op": "axpby", "x": H(hq), "y": H(hr), "alpha": {"over": 1, "scale": -rz}},
            {"op": "dot", "x": H(hr), "y": H(hr)},
            {"op": "axpby", "x": H(hr), "y": H(hp), "alpha": 1.0,
             "beta": {"step": 4, "scale": 1.0 / rz}},
        ]})
        rz = r["results"][4]["value"]
        q64 = A @ p64
        a64 = rz64 / (p64 @ q64)
        x64 += a64 * p64
        r64 -= a64 * q64
        rz_new = r64 @ r64
        p64 = r64 + rz_new / rz64 * p64
        rz64 = rz_new
        err = abs(np.sqrt(rz) - np.sqrt(rz64)) / np.sqrt(rz64)
        if not check(err < rel, f"{label} iteration {it}: ||r|| {np.sqrt(rz):.{digits}e} vs "
                     f"{np.sqrt(rz64):.{digits}e}"):
            break
    return x64
