"""The asyncio client: many requests in flight on one connection."""
import asyncio

import numpy as np
import pytest
import scipy.sparse as sp

import gkc
import gkc.aio
from conftest import EPS32, f32


def test_1000_pipelined_requests_matched_by_msgid(gkcd, rng):
    # Each request has its own inputs, so a reply handed to the wrong caller
    # fails that caller's check.
    n = 1000
    kinds = rng.integers(0, 6, size=n)
    inputs = []
    for i, kind in enumerate(kinds):
        if kind == 0:
            inputs.append(rng.standard_normal(int(rng.integers(1, 3000))).astype(np.float32))
        elif kind == 1:
            m, k, p = (int(v) for v in rng.integers(1, 12, size=3))
            inputs.append((rng.standard_normal((m, k)).astype(np.float32),
                           rng.standard_normal((k, p)).astype(np.float32)))
        elif kind == 2:
            A = sp.random(int(rng.integers(1, 60)), int(rng.integers(1, 60)), density=0.2, format="csr",
                          random_state=np.random.RandomState(rng.integers(2**31))).astype(np.float32)
            inputs.append((A, rng.standard_normal(A.shape[1]).astype(np.float32)))
        elif kind == 3:
            k = int(rng.integers(1, 500))
            inputs.append((rng.standard_normal(k).astype(np.float32), rng.standard_normal(k).astype(np.float32)))
        else:
            inputs.append(None)

    async def one(c, kind, x):
        if kind == 0:
            got = await c.reduce(x, op="max")
            assert got == float(f32(x).max())
        elif kind == 1:
            A, B = x
            got = await c.sgemm(A, B)
            mag = np.abs(f32(A)) @ np.abs(f32(B))
            assert np.all(np.abs(got - f32(A) @ f32(B)) <= (A.shape[1] + 2) * 2 * EPS32 * mag)
        elif kind == 2:
            A, v = x
            got = await c.spmv(A, v)
            Af = sp.csr_matrix((f32(A.data), A.indices, A.indptr), shape=A.shape)
            assert np.all(np.abs(got - Af @ f32(v)) <= 2 * (A.shape[1] + 2) * EPS32 * (abs(Af) @ np.abs(f32(v))))
        elif kind == 3:
            a, b = x
            got = await c.dot(a, b)
            assert abs(got - f32(a) @ f32(b)) <= (len(a) + 2) * 2 * EPS32 * (np.abs(f32(a)) @ np.abs(f32(b)))
        elif kind == 4:
            with pytest.raises(gkc.InvalidArgument, match="'op'"):
                await c.reduce(np.ones(3, np.float32), op="median")
        else:
            with pytest.raises(gkc.UnknownMethod):
                await c.call("transpose")
        return kind

    async def main():
        async with gkc.aio.connect(gkcd.sock) as c:
            done = await asyncio.gather(*(one(c, k, x) for k, x in zip(kinds, inputs)))
            assert list(done) == list(kinds)
            assert not c._pending
            st = await c.status()
            assert st["connections"] >= 1
    asyncio.run(main())


def test_aio_regions_and_handles(gkcd, rng):
    async def main():
        async with gkc.aio.connect(gkcd.sock) as c:
            n = 4096
            async with await c.region(8 * n) as r:
                x = r.array(n)
                y = r.array(n, offset=4 * n)
                x[:] = rng.standard_normal(n)
                async with await c.upload(x) as hx:
                    # Two requests at once, both reading the region.
                    hy, s = await asyncio.gather(c.axpby(hx, x, alpha=2.0, beta=1.0, out="handle"),
                                                 c.reduce(x, op="min"))
                    assert s == float(x.min())
                    await c.download(hy, out=y)
                    assert np.array_equal(y, 3 * x)  # 2x + x is exact in float32
                    await hy.release()
                    with pytest.raises(gkc.InvalidArgument, match="released"):
                        await c.reduce(hy)
                assert hx.released
            assert r.released
            with pytest.raises(TypeError, match="async with"):
                with await c.upload(np.ones(2, np.float32)):
                    pass
    asyncio.run(main())


def test_many_regions_registered_concurrently(gkcd, rng):
    # Each shm_register carries its own descriptor; concurrent ones must not mix them up.
    async def main():
        async with gkc.aio.connect(gkcd.sock) as c:
            regions = await asyncio.gather(*(c.region(4096 * (i + 1)) for i in range(12)))
            for i, r in enumerate(regions):
                assert r.nbytes == 4096 * (i + 1)
                r.array(1024 * (i + 1))[:] = i
            sums = await asyncio.gather(*(c.reduce(r.array(1024 * (i + 1))) for i, r in enumerate(regions)))
            assert sums == [float(i * 1024 * (i + 1)) for i in range(12)]
            await asyncio.gather(*(r.release() for r in regions))
    asyncio.run(main())


def test_close_cancels_pending(gkcd):
    async def main():
        c = await gkc.aio.connect(gkcd.sock)
        fut = asyncio.ensure_future(c.sgemm(np.ones((300, 300), np.float32), np.ones((300, 300), np.float32)))
        await asyncio.sleep(0)
        await c.close()
        with pytest.raises((gkc.Cancelled, gkc.ConnectionFailed)):
            await fut
        with pytest.raises(gkc.ConnectionFailed, match="closed"):
            await c.ping()
    asyncio.run(main())
