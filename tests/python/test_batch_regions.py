"""gkc.Batch spmv steps whose x or out is a NumPy array in a gkc.Region
(PROTOCOL.md, "batch": region operands), against SciPy in float64."""
import numpy as np
import pytest
import scipy.sparse as sp

import gkc
from conftest import EPS32, f32


def rand_csr(rng, rows, cols):
    A = sp.random(rows, cols, density=0.02, random_state=rng, format="csr", dtype=np.float32)
    return A + sp.eye(rows, cols, dtype=np.float32, format="csr")


def test_region_x_and_out(conn, rng):
    n, m = 400, 250
    A, B = rand_csr(rng, m, n), rand_csr(rng, n, m)
    Ad, Bd = A.astype(np.float64), B.astype(np.float64)
    with conn.csr_upload(A) as hA, conn.csr_upload(B) as hB, conn.region(1 << 16) as r, \
            conn.upload(np.zeros(n, np.float32)) as hz:
        x = r.array(n, offset=0)
        y = r.array(m, offset=4096)
        x[:] = rng.standard_normal(n).astype(np.float32)
        bt = gkc.Batch()
        bt.spmv(hA, x, out=y)            # region -> region
        d = bt.dot(hz, hz)
        bt.spmv(hB, y, out=hz)           # reads what step 0 wrote
        res = conn.batch(bt)
        yw = Ad @ f32(x)
        assert np.allclose(y, yw, rtol=0, atol=8 * EPS32 * (abs(Ad) @ abs(f32(x))).max())
        zw = Bd @ f32(y)
        assert np.allclose(hz.download(), zw, rtol=0, atol=8 * EPS32 * (abs(Bd) @ abs(f32(y))).max())
        assert res[0] is y and res[2] is hz and res[d] == 0.0


def test_region_refusals(conn, rng):
    n = 64
    A = rand_csr(rng, n, n)
    with conn.csr_upload(A) as hA, conn.region(4096) as r, conn.upload(np.zeros(n, np.float32)) as h:
        bt = gkc.Batch()
        bt.spmv(hA, np.zeros(n, np.float32), out=h)   # not in a region: refused here
        with pytest.raises(gkc.InvalidArgument, match=r"steps\[0\] \(spmv\): argument 'x'.*gkc.Region"):
            conn.batch(bt)
        bt = gkc.Batch()
        bt.spmv(hA, r.array(n - 1), out=h)            # gkcd: the length is not cols
        with pytest.raises(gkc.InvalidArgument, match=r"steps\[0\] \(spmv\): argument 'x'"):
            conn.batch(bt)
        bt = gkc.Batch()
        bt.spmv(hA, r.array(n), out=r.array(n, offset=128))   # out overlaps x
        with pytest.raises(gkc.InvalidArgument, match=r"steps\[0\] \(spmv\): argument 'out'.*overlap"):
            conn.batch(bt)
