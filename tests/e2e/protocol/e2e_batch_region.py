#!/usr/bin/python3
"""e2e_batch_region.py: `batch` spmv steps whose x or out is a slice of a
shared-memory region (PROTOCOL.md, "batch").

Starts its own gkcd ($GKCD_BIN) and speaks msgpack-rpc directly: registers
sealed memfds by hand (shm_register with SCM_RIGHTS), checks the results
against float64 NumPy (x read from a region, out written into one, a later
step reading what an earlier one wrote into the region, float64 slices,
the reply's region fields), and every refusal: offset or bytes past the
region's end, offsets and lengths that overflow 64 bits, a length that is
not the matrix's, a misaligned offset, an unknown region, another
connection's region, out overlapping x, a bin, region operands where only
handles go; gkcd answers each with a message naming the step and the
argument, and keeps serving.
Exits 0 when all pass, 77 when msgpack or numpy is missing.
"""
import fcntl
import mmap
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import msgpack
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

from e2e_common import EPS, H, check, download, f32b, ok, upload  # noqa: E402
import e2e_common as ec  # noqa: E402
import e2e_wire as ep  # noqa: E402



class Region:
    """A sealed memfd of `size` bytes registered on connection c, mapped here."""

    def __init__(self, c, size):
        fd = os.memfd_create("e2e_batch_region", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        self.map = mmap.mmap(fd, size)
        msgid = c.next_id
        c.next_id += 1
        frame = msgpack.packb([0, msgid, "shm_register", [{"bytes": size}]], use_bin_type=True)
        socket.send_fds(c.s, [frame], [fd])
        os.close(fd)  # gkcd holds its own
        r = c.reply()
        assert r[1] == msgid and r[2] is None, r
        self.id = r[3]["region"]
        self.size = size

    def f32(self, offset, n):
        return np.frombuffer(self.map, dtype="<f4", count=n, offset=offset)

    def f64(self, offset, n):
        return np.frombuffer(self.map, dtype="<f8", count=n, offset=offset)

    def ref(self, offset, nbytes, dtype=None):
        r = {"region": self.id, "offset": offset, "bytes": nbytes}
        if dtype:
            r["dtype"] = dtype
        return r


def rnd(rng, n):
    return rng.uniform(-1, 1, n).astype(np.float32).astype(np.float64)


def random_csr(rng, rows, cols, per_row):
    rp, ci, vals = [0], [], []
    for _ in range(rows):
        k = int(rng.integers(1, per_row * 2 + 1))
        ci += list(rng.integers(0, cols, k))
        vals += list(rnd(rng, k))
        rp.append(len(ci))
    A = np.zeros((rows, cols))
    for i in range(rows):
        for j in range(rp[i], rp[i + 1]):
            A[i, ci[j]] += vals[j]
    return rp, ci, vals, A


def close(got, ref, mag, what, k=16):
    bad = np.abs(got - ref) > k * EPS * mag + 1e-30
    return check(not bad.any(), f"{what}: {int(bad.sum())} elements off")


def test_results(c, rng):
    """x from a region, out into a region, and a step reading what the one
    before it wrote there, with handle steps around them."""
    n, rows = int(rng.integers(200, 800)), int(rng.integers(100, 400))
    rpA, ciA, vA, A = random_csr(rng, rows, n, 5)   # rows x n
    rpB, ciB, vB, B = random_csr(rng, n, rows, 5)   # n x rows
    mA = ec.csr_upload(c, rows, n, rpA, ciA, vA)
    mB = ec.csr_upload(c, n, rows, rpB, ciB, vB)
    R = Region(c, 64 + 4 * n + 4 * rows + 4 * n + 100)
    xoff, yoff, zoff = 64, 64 + 4 * n, 64 + 4 * n + 4 * rows
    x = rnd(rng, n)
    R.f32(xoff, n)[:] = x
    R.f32(yoff, rows)[:] = 7.0        # overwritten by step 0
    R.f32(zoff, n)[:] = 7.0           # overwritten by step 1
    w = rnd(rng, rows)
    hw, hq, hz = upload(c, w), upload(c, np.zeros(rows)), upload(c, np.zeros(n))
    steps = [
        # 0: region y = A x (x in the region)
        {"op": "spmv", "matrix": mA, "x": R.ref(xoff, 4 * n), "out": {"region": R.id, "offset": yoff}},
        # 1: region z = B y (reads step 0's output from the region), with "bytes"
        {"op": "spmv", "matrix": mB, "x": R.ref(yoff, 4 * rows),
         "out": {"region": R.id, "offset": zoff, "bytes": 4 * n}},
        # 2: q = 2 A z + w (handle out, region x, beta from a handle)
        {"op": "spmv", "matrix": mA, "x": R.ref(zoff, 4 * n), "y": H(hw), "alpha": 2.0,
         "beta": 1.0, "out": hq},
        # 3: a dot on the result, then a region out from a handle x
        {"op": "dot", "x": H(hq), "y": H(hq)},
        {"op": "spmv", "matrix": mB, "x": H(hq), "out": hz},
    ]
    r = ok(c, "batch", {"steps": steps})
    res = r["results"]
    y_ref = A @ x
    y = R.f32(yoff, rows).astype(np.float64)
    close(y, y_ref, np.abs(A) @ np.abs(x), "step 0: spmv x from a region, out into it")
    z_ref = B @ y  # from the float32 y the daemon wrote
    z = R.f32(zoff, n).astype(np.float64)
    close(z, z_ref, np.abs(B) @ np.abs(y), "step 1: spmv reading step 0's region output")
    q = download(c, hq)
    close(q, 2 * A @ z + w, 2 * np.abs(A) @ np.abs(z) + np.abs(w), "step 2: region x, handle y and out")
    check(abs(res[3]["value"] - q @ q) <= 1e-12 * (q @ q), "step 3: dot of step 2's output")
    close(download(c, hz), B @ q, np.abs(B) @ np.abs(q), "step 4: handle x after region steps")
    check(res[0] == {"op": "spmv", "region": R.id, "offset": yoff, "bytes": 4 * rows},
          f"a region out's result names region, offset and bytes: {res[0]!r}")
    check(res[1] == {"op": "spmv", "region": R.id, "offset": zoff, "bytes": 4 * n}, f"{res[1]!r}")
    check(res[2] == {"op": "spmv", "handle": hq, "bytes": 4 * rows}, f"{res[2]!r}")
    check(np.array_equal(R.f32(xoff, n), x.astype(np.float32)), "x's slice is left as it was")


def test_f64(c, rng):
    """float64 slices: the dtype comes from the reference (or a handle)."""
    n, rows = 300, 200
    rp, ci, v, A = random_csr(rng, rows, n, 4)
    m = ec.csr_upload(c, rows, n, rp, ci, v)
    R = Region(c, 8 * (n + rows) + 8)
    x = rng.uniform(-1, 1, n)
    R.f64(0, n)[:] = x
    hw = ok(c, "upload", {"data": np.zeros(rows).tobytes(), "dtype": "f64"})["handle"]
    ok(c, "batch", {"steps": [
        {"op": "spmv", "matrix": m, "x": R.ref(0, 8 * n, "f64"), "out": {"region": R.id, "offset": 8 * n + 8}},
        {"op": "spmv", "matrix": m, "x": R.ref(0, 8 * n, "f64"), "out": hw}]})
    got = R.f64(8 * n + 8, rows)
    ref = A @ x
    check(np.allclose(got, ref, rtol=0, atol=1e-6 * (np.abs(A) @ np.abs(x)).max()),
          "float64 spmv from a region into a region")
    hwd = np.frombuffer(ok(c, "download", {"handle": hw})["data"], "<f8")
    check(np.array_equal(hwd, got), "float64 region out equals the handle out")
    # float32 handles with a float64 region: both dtypes named
    hx32 = upload(c, np.zeros(rows))
    ec.expect_error(c, "batch", {"steps": [
        {"op": "spmv", "matrix": m, "x": R.ref(0, 8 * n, "f64"), "out": hx32}]},
        ("steps[0] (spmv)", "'out'", "float64", "float32"))


def err(c, steps, *needles):
    return ec.expect_error(c, "batch", {"steps": steps}, needles, label=steps)


def test_refusals(c, rng):
    n, rows = 64, 32
    rp, ci, v, _ = random_csr(rng, rows, n, 3)
    m = ec.csr_upload(c, rows, n, rp, ci, v)
    R = Region(c, 4096)
    hx, hq = upload(c, rnd(rng, n)), upload(c, np.zeros(rows))
    top = 2 ** 64 - 4

    def sp(x, out=None, **kw):
        return [{"op": "dot", "x": H(hx), "y": H(hx)},
                dict({"op": "spmv", "matrix": m, "x": x, "out": hq if out is None else out}, **kw)]

    # x: bounds, overflow, length, alignment, region ownership, form
    err(c, sp(R.ref(4096 - 4 * n + 4, 4 * n)), "steps[1] (spmv)", "'x'", "outside region")
    err(c, sp(R.ref(8192, 4 * n)), "steps[1] (spmv)", "'x'", "outside region")
    err(c, sp(R.ref(top, 4 * n)), "steps[1] (spmv)", "'x'", "outside region")
    err(c, sp(R.ref(4, 2 ** 64 - 1)), "steps[1] (spmv)", "'x'", "outside region")
    err(c, sp(R.ref(0, 4 * n - 4)), "steps[1] (spmv)", "'x'", f"expected {n} float32")
    err(c, sp(R.ref(0, 4 * n + 4)), "steps[1] (spmv)", "'x'", f"expected {n} float32")
    err(c, sp(R.ref(2, 4 * n)), "steps[1] (spmv)", "'x'", "not a multiple of 4")
    err(c, sp(R.ref(0, 4 * n, "f64")), "steps[1] (spmv)", "'x'")
    err(c, sp({"region": 999999, "offset": 0, "bytes": 4 * n}), "steps[1] (spmv)", "'x'",
        "no region 999999")
    err(c, sp({"region": R.id, "offset": 0}), "steps[1] (spmv)", "'x'", "'bytes'")
    err(c, sp(f32b(np.ones(n))), "steps[1] (spmv)", "'x'", "region slice")
    # out: bounds, overflow, "bytes", alignment, unknown keys, overlap with x
    err(c, sp(H(hx), {"region": R.id, "offset": 4096 - 4 * rows + 4}), "steps[1] (spmv)", "'out'",
        "does not fit region")
    err(c, sp(H(hx), {"region": R.id, "offset": top}), "steps[1] (spmv)", "'out'", "does not fit")
    err(c, sp(H(hx), {"region": R.id, "offset": 0, "bytes": 4 * rows + 4}), "steps[1] (spmv)",
        "'out'", "'bytes'")
    err(c, sp(H(hx), {"region": R.id, "offset": 6}), "steps[1] (spmv)", "'out'", "not a multiple")
    err(c, sp(H(hx), {"region": R.id, "offset": 0, "len": 4}), "steps[1] (spmv)", "'out'",
        "exactly 'region' and 'offset'")
    err(c, sp(H(hx), {"region": 999999, "offset": 0}), "steps[1] (spmv)", "'out'", "no region")
    err(c, sp(R.ref(0, 4 * n), {"region": R.id, "offset": 4 * n - 4}), "steps[1] (spmv)", "'out'",
        "overlap")
    err(c, sp(R.ref(128, 4 * n), {"region": R.id, "offset": 64}), "steps[1] (spmv)", "'out'", "overlap")
    # region operands only where PROTOCOL.md allows them
    err(c, [{"op": "dot", "x": R.ref(0, 4 * n), "y": H(hx)}], "steps[0] (dot)", "'x'", "resident")
    err(c, [{"op": "spmv", "matrix": m, "x": H(hx), "y": R.ref(0, 4 * rows), "beta": 1.0,
             "out": hq}], "steps[0] (spmv)", "'y'", "resident")
    err(c, [{"op": "axpby", "x": H(hx), "y": H(hx), "out": {"region": R.id, "offset": 0}}],
        "steps[0] (axpby)", "'out'")
    # another connection's region: its id means nothing here
    c2 = ep.Conn(c.s.getpeername(), timeout=60)
    R2 = Region(c2, 4096)
    err(c, sp(R2.ref(0, 4 * n)), "steps[1] (spmv)", "'x'", f"no region {R2.id} on this connection")
    err(c, sp(H(hx), {"region": R2.id, "offset": 0}), "steps[1] (spmv)", "'out'",
        f"no region {R2.id} on this connection")
    # a released region is unknown too
    ok(c2, "shm_release", {"region": R2.id})
    c2.close()
    # gkcd keeps serving, and the region still works
    good = sp(R.ref(0, 4 * n), {"region": R.id, "offset": 4 * n})
    check(len(ok(c, "batch", {"steps": good})["results"]) == 2, "a good batch after the refusals")
    check(c.call("ping", {})[2] is None, "gkcd answers ping")


def main():
    return ec.run("e2e_batch_region", (test_results, test_f64, test_refusals))


if __name__ == "__main__":
    sys.exit(main())
