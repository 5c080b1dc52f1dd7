"""e2e_common.py: what the raw msgpack-rpc tests (e2e_batch.py, e2e_solve.py)
share: pass/fail counting, and requests over e2e_python's Conn with float32
arrays as little-endian bytes.  Import it once numpy is known to be there.
"""
import sys

import numpy as np

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


def f32b(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def upload(c, a):
    return ok(c, "upload", {"data": f32b(a), "dtype": "f32"})["handle"]


def download(c, h):
    return np.frombuffer(ok(c, "download", {"handle": h})["data"], dtype="<f4").astype(np.float64)
