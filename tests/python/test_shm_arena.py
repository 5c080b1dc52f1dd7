"""The transparent shared-memory arena: big arrays through sealed memfds.

Every result through the arena is compared bit for bit with the same call
on a connection without it (shm=False): the same bytes reach gkcd either way,
so anything but equality is a bug.  The tests give the threshold explicitly
(T below), so that the default (measured, and free to change) moves nothing.
"""
import asyncio
import gc
import logging
import os
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import gkc
import gkc.aio
from gkc import _arena
from conftest import fault_injection

T = 64 << 10  # the threshold these tests use, in bytes


class Spy:
    """Records (method, bytes) of every request the connection packs."""

    def __init__(self, conn):
        self.sizes = []
        real = conn._rpc.request

        def request(method, params):
            msgid, frame = real(method, params)
            self.sizes.append((method, len(frame)))
            return msgid, frame
        conn._rpc.request = request

    def last(self, method):
        return [n for m, n in self.sizes if m == method][-1]


def owner(a):
    """The object at the end of a's base chain."""
    b = a
    while isinstance(b, np.ndarray) and b.base is not None:
        b = b.base
    return b


def in_arena(a):
    return isinstance(owner(a), _arena.ArenaSlice)


def regions(c):
    return c.status()["resident"]["regions"]


def wait_for(pred, what):
    for _ in range(300):
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(what)


@pytest.fixture
def pair(gkcd):
    """An arena connection and an inline one to the same gkcd."""
    with gkcd.connect(timeout=120, shm_threshold=T) as a, \
            gkcd.connect(timeout=120, shm=False) as i:
        yield a, i


# --- settings ---------------------------------------------------------------------------

def test_settings_keywords_and_environment(gkcd, monkeypatch):
    monkeypatch.delenv("GKC_NO_SHM", raising=False)
    monkeypatch.delenv("GKC_SHM_THRESHOLD", raising=False)
    monkeypatch.delenv("GKC_SHM_MAX_BYTES", raising=False)
    with gkcd.connect() as c:
        assert c.shm_state == "unused" and c.shm_reason == ""
        assert c.shm_threshold == _arena.DEFAULT_THRESHOLD
        assert c.shm_info()["max_bytes"] == _arena.DEFAULT_MAX_BYTES
    with gkcd.connect(shm=False) as c:
        assert c.shm_state == "disabled" and "shm=False" in c.shm_reason
    monkeypatch.setenv("GKC_NO_SHM", "1")
    monkeypatch.setenv("GKC_SHM_THRESHOLD", "96K")
    monkeypatch.setenv("GKC_SHM_MAX_BYTES", "3M")
    with gkcd.connect() as c:
        assert c.shm_state == "disabled" and "GKC_NO_SHM" in c.shm_reason
        assert c.shm_threshold == 96 << 10 and c.shm_info()["max_bytes"] == 3 << 20
        x = np.ones(1 << 16, np.float32)
        assert c.reduce(x) == 65536.0 and c.shm_state == "disabled"
    # A keyword given wins over the environment.
    with gkcd.connect(shm=True, shm_threshold=1000) as c:
        assert c.shm_state == "unused" and c.shm_threshold == 1000
    monkeypatch.setenv("GKC_SHM_THRESHOLD", "lots")
    with pytest.raises(gkc.InvalidArgument, match="GKC_SHM_THRESHOLD"):
        gkcd.connect()


# --- the threshold ----------------------------------------------------------------------

@pytest.mark.parametrize("nbytes", [T - 4, T, T + 4])
def test_arguments_around_the_threshold(pair, rng, nbytes):
    a, i = pair
    x = rng.standard_normal(nbytes // 4).astype(np.float32)
    spy = Spy(a)
    calls = a.shm_info()["calls"]
    assert a.reduce(x) == i.reduce(x)
    if nbytes < T:
        assert spy.last("reduce") > nbytes  # the bytes went in the request
        assert a.shm_info()["calls"] == calls
    else:
        assert spy.last("reduce") < 300  # a region reference
        assert a.shm_info()["calls"] == calls + 1 and a.shm_state == "active"


@pytest.mark.parametrize("nbytes", [T - 4, T, T + 4])
def test_results_around_the_threshold(pair, rng, nbytes):
    a, i = pair
    n = nbytes // 4
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    got, want = a.axpby(x, y, alpha=2.0, beta=-0.5), i.axpby(x, y, alpha=2.0, beta=-0.5)
    assert got.shape == want.shape == (n,) and got.dtype == np.float32
    assert np.array_equal(got, want)
    assert in_arena(got) == (nbytes >= T)
    assert not in_arena(want)


# --- every method, arena against inline -------------------------------------------------

def test_sgemm_equal_to_inline(pair, rng):
    a, i = pair
    A = rng.standard_normal((300, 200)).astype(np.float32)
    B = rng.standard_normal((200, 150)).astype(np.float32)
    C = rng.standard_normal((300, 150)).astype(np.float32)
    got = a.sgemm(A, B, alpha=1.5, beta=0.5, C=C)
    assert np.array_equal(got, i.sgemm(A, B, alpha=1.5, beta=0.5, C=C))
    assert in_arena(got) and got.shape == (300, 150) and got.flags.writeable
    got = a.sgemm(B, A, trans_a=True, trans_b=True)
    assert np.array_equal(got, i.sgemm(B, A, trans_a=True, trans_b=True))


def test_reduce_and_dot_equal_to_inline(pair, rng):
    a, i = pair
    x = rng.standard_normal(100000).astype(np.float32)
    y = rng.standard_normal(100000).astype(np.float32)
    for op in ("sum", "min", "max"):
        assert a.reduce(x, op=op) == i.reduce(x, op=op)
    assert a.dot(x, y) == i.dot(x, y)
    # float64 inputs are converted when asked (dtype=), integers as they always were.
    x64 = rng.standard_normal(50000)
    assert a.reduce(x64, dtype="float32") == i.reduce(x64, dtype="float32")
    ints = rng.integers(-1000, 1000, size=50000)
    assert a.reduce(ints) == i.reduce(ints)
    with pytest.raises(gkc.InvalidArgument, match="numbers"):
        a.reduce(np.array(["a"] * 50000))


def test_spmv_equal_to_inline(pair, rng):
    a, i = pair
    M = sp.random(20000, 3000, density=0.002, format="csr",
                  random_state=np.random.RandomState(rng.integers(2**31))).astype(np.float32)
    x = rng.standard_normal(3000).astype(np.float32)
    y = rng.standard_normal(20000).astype(np.float32)
    got = a.spmv(M, x, alpha=2.0, beta=1.0, y=y)
    assert np.array_equal(got, i.spmv(M, x, alpha=2.0, beta=1.0, y=y))
    assert in_arena(got)
    # The tuple form, int64 indices converted to int32 on the way in.
    t = (M.indptr.astype(np.int64), M.indices.astype(np.int64), M.data, M.shape)
    assert np.array_equal(a.spmv(t, x), i.spmv(t, x))


def test_upload_download_equal_to_inline(pair, rng):
    a, i = pair
    x = rng.standard_normal((300, 100)).astype(np.float32)
    k = rng.integers(-2**31, 2**31, size=40000, dtype=np.int64).astype(np.int32)
    with a.upload(x) as hx, a.upload(k) as hk:
        gx, gk = hx.download(), hk.download()
        assert np.array_equal(gx, x) and gx.shape == (300, 100) and in_arena(gx)
        assert np.array_equal(gk, k) and gk.dtype == np.int32 and in_arena(gk)
    with i.upload(x) as hx:
        assert np.array_equal(hx.download(), x)


def test_solve_equal_to_inline(pair, rng):
    a, i = pair
    n = 20000
    L = sp.diags([-np.ones(n - 1), 2.5 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    b = rng.standard_normal(n).astype(np.float32)
    ra, ri = a.solve(L, b, max_iter=30), i.solve(L, b, max_iter=30)
    assert np.array_equal(ra.x, ri.x) and ra.iterations == ri.iterations
    assert in_arena(ra.x)


def test_a_result_passed_on_is_not_copied(pair, rng):
    a, _ = pair
    x = rng.standard_normal(50000).astype(np.float32)
    y = a.axpby(x, x, alpha=1.0, beta=1.0)
    assert in_arena(y)
    spy = Spy(a)
    in_use = a.shm_info()["in_use"]
    assert a.reduce(y, op="max") == float(y.max())
    assert spy.last("reduce") < 300
    assert a.shm_info()["in_use"] == in_use  # read in place: no new slice
    # As out=, it is written in place.
    z = a.axpby(x, y, alpha=1.0, beta=-1.0, out=y)
    assert z is y and np.array_equal(y, -x)  # x - 2x, exact in float32


# --- slices: owned by the results, then reused ------------------------------------------

def test_result_owns_its_slice_until_collected(pair, rng):
    a, i = pair
    x = rng.standard_normal(T // 4).astype(np.float32)
    r = a.axpby(x, x, alpha=3.0, beta=0.0)
    sl = owner(r)
    assert isinstance(sl, _arena.ArenaSlice) and sl.size >= T
    spot = (sl.segment.id, sl.offset)
    assert a.shm_info()["in_use"] == sl.size  # the inputs' slices were given back
    v = r[10:20]  # a view keeps the slice too
    del r, sl
    assert a.shm_info()["in_use"] > 0
    assert np.array_equal(v, i.axpby(x, x, alpha=3.0, beta=0.0)[10:20])
    del v
    assert a.shm_info()["in_use"] == 0
    r2 = a.axpby(x, x, alpha=3.0, beta=0.0)
    assert (owner(r2).segment.id, owner(r2).offset) == spot  # the same bytes, reused
    assert a.shm_info()["regions"] == [spot[0]]


def test_results_outlive_the_connection(gkcd, rng):
    x = rng.standard_normal(T).astype(np.float32)
    with gkcd.connect(shm_threshold=T) as c:
        r = c.axpby(x, x, alpha=1.0, beta=1.0)
        assert in_arena(r)
    assert c.closed and np.array_equal(r, x + x)  # still mapped: r holds it
    r[:] = 1.0
    del r
    gc.collect()


# --- full arena, refused registration ---------------------------------------------------

def test_full_arena_goes_inline(gkcd, rng):
    x = rng.standard_normal(T // 4).astype(np.float32)
    with gkcd.connect(shm_threshold=T, shm_max_bytes=4 * T) as c, c.upload(x) as h, \
            gkcd.connect(shm=False) as i:
        held = [c.download(h) for _ in range(4)]
        assert all(in_arena(r) for r in held)
        info = c.shm_info()
        assert info["bytes"] == 4 * T and info["in_use"] == 4 * T and info["fallbacks"] == 0
        more = c.download(h)
        assert not in_arena(more) and np.array_equal(more, x)
        assert c.shm_info()["fallbacks"] == 1 and c.shm_state == "active"
        del held[0]
        assert in_arena(c.download(h))
        # Bigger than the whole arena: inline too.
        big = rng.standard_normal(2 * T).astype(np.float32)
        spy = Spy(c)
        assert c.reduce(big) == i.reduce(big)
        assert spy.last("reduce") > 8 * T and c.shm_info()["fallbacks"] == 2


def gkc_warnings(caplog):
    return [r for r in caplog.records if r.name == "gkc" and r.levelno >= logging.WARNING]


def test_refused_registration_goes_inline_and_says_why(gkcd, rng, caplog):
    caplog.set_level(logging.WARNING, logger="gkc")
    x = rng.standard_normal(T).astype(np.float32)
    with gkcd.connect(shm_threshold=T) as c:
        # gkcd lets a connection hold 64 regions: with all of them taken by
        # the caller, the arena's registration is refused.
        mine = [c.region(4096) for _ in range(64)]
        with gkcd.connect(shm=False) as i:
            want = i.axpby(x, x, alpha=2.0, beta=1.0)
            assert c.axpby(x, x, alpha=2.0, beta=1.0).tobytes() == want.tobytes()
            assert c.shm_state == "unavailable"
            assert "shm_register" in c.shm_reason and "64 regions" in c.shm_reason
            logs = gkc_warnings(caplog)
            assert len(logs) == 1 and "64 regions" in logs[0].getMessage()
            # Once per connection: the next big call says nothing more.
            assert c.reduce(x) == i.reduce(x)
            assert len(gkc_warnings(caplog)) == 1
        # Freeing regions later does not bring it back: it said it would not.
        mine[0].release()
        spy = Spy(c)
        c.reduce(x)
        assert spy.last("reduce") > x.nbytes and c.shm_state == "unavailable"


def test_no_memfd_goes_inline_and_says_why(gkcd, rng, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="gkc")
    monkeypatch.delattr(os, "memfd_create")
    x = rng.standard_normal(T).astype(np.float32)
    with gkcd.connect(shm_threshold=T) as c, gkcd.connect(shm=False) as i:
        assert np.array_equal(c.axpby(x, x), i.axpby(x, x))
        assert c.shm_state == "unavailable" and "memfd" in c.shm_reason
        assert len(gkc_warnings(caplog)) == 1


def test_registration_short_of_memory_is_not_final(daemon_factory, rng, caplog):
    # gkcd holds a region's bytes against its memory budget while it maps it:
    # with the budget taken by resident data, the registration waits, is
    # answered busy, and the call goes inline; once memory is free, the next
    # big call registers.
    caplog.set_level(logging.WARNING, logger="gkc")
    d = daemon_factory("--memory-budget", "16M", "--budget-queue", "0", "--queue-wait", "0.3")
    x = rng.standard_normal(T // 4).astype(np.float32)
    with d.connect(shm=False) as hog, d.connect(shm_threshold=T) as c:
        # 12 MiB resident leaves 4 MiB: short of the first region (4 MiB) and
        # its request, enough for x by value.
        hs = [hog.upload(np.zeros((3 << 20) // 4, np.float32)) for _ in range(4)]
        assert c.reduce(x) == hog.reduce(x)
        assert c.shm_state == "unused" and c.shm_info()["fallbacks"] == 1
        assert hog.status()["budget_refused"] == 1  # the registration, answered busy
        assert not gkc_warnings(caplog) and c.shm_reason == ""
        hs[0].release()
        assert c.reduce(x) == hog.reduce(x)
        assert c.shm_state == "active" and c.shm_info()["calls"] == 1


def test_close_releases_the_regions(gkcd, rng):
    x = rng.standard_normal(T).astype(np.float32)
    with gkcd.connect() as watcher:
        base = regions(watcher)
        c = gkcd.connect(shm_threshold=T)
        assert regions(watcher) == base  # nothing registered before a call needs it
        r = c.axpby(x, x)
        assert c.shm_state == "active" and regions(watcher) == base + len(c.shm_info()["regions"])
        c.close()
        wait_for(lambda: regions(watcher) == base, "gkcd still holds the arena's regions")
        assert np.array_equal(r, x + x)


def test_threads_share_one_arena(gkcd, rng):
    x = rng.standard_normal(T).astype(np.float32)
    with gkcd.connect(shm_threshold=T) as c, gkcd.connect(shm=False) as i:
        want = i.axpby(x, x, alpha=2.0, beta=0.5)
        bad = []

        def work():
            for _ in range(20):
                if not np.array_equal(c.axpby(x, x, alpha=2.0, beta=0.5), want):
                    bad.append(1)
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not bad
        gc.collect()
        assert c.shm_info()["in_use"] == 0


# --- the asyncio client -----------------------------------------------------------------

def test_aio_arena(gkcd, rng):
    xs = [rng.standard_normal(T // 4 + 17 * k).astype(np.float32) for k in range(12)]

    async def main():
        async with gkc.aio.connect(gkcd.sock, shm_threshold=T) as a, \
                gkc.aio.connect(gkcd.sock, shm=False) as i:
            assert a.shm_state == "unused" and i.shm_state == "disabled"
            got = await asyncio.gather(*(a.axpby(x, x, alpha=2.0, beta=-1.0) for x in xs))
            want = await asyncio.gather(*(i.axpby(x, x, alpha=2.0, beta=-1.0) for x in xs))
            for g, w in zip(got, want):
                assert np.array_equal(g, w) and in_arena(g)
            assert a.shm_state == "active"
            sums = await asyncio.gather(*(a.reduce(x) for x in xs))
            assert sums == await asyncio.gather(*(i.reduce(x) for x in xs))
            del got, g
            assert a.shm_info()["in_use"] == 0
            regs = len(a.shm_info()["regions"])
            st = await i.status()
            return regs, st["resident"]["regions"]

    regs, during = asyncio.run(main())
    assert regs >= 1 and during >= regs


def test_aio_cancelled_call_keeps_its_slices_until_the_reply(daemon_factory, rng):
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to hold a request")
    d = daemon_factory(env={"GKCD_FAULT": "axpby:delay=400"})
    x = rng.standard_normal(T).astype(np.float32)

    async def main():
        async with gkc.aio.connect(d.sock, shm_threshold=T) as c:
            await c.reduce(x)  # the arena exists
            task = asyncio.ensure_future(c.axpby(x, x))
            await asyncio.sleep(0.1)  # sent; gkcd waits before it runs
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # gkcd will still read x and write the result there.
            assert c.shm_info()["in_use"] >= 3 * x.nbytes
            for _ in range(300):
                if c.shm_info()["in_use"] == 0:
                    break
                await asyncio.sleep(0.01)
            assert c.shm_info()["in_use"] == 0
            # The late reply was matched to the cancelled call, not to this one.
            assert await c.reduce(x, op="max") == float(x.max())
    asyncio.run(main())


def test_aio_refused_registration(gkcd, rng, caplog):
    caplog.set_level(logging.WARNING, logger="gkc")
    x = rng.standard_normal(T).astype(np.float32)

    async def main():
        async with gkc.aio.connect(gkcd.sock, shm_threshold=T) as c:
            await asyncio.gather(*(c.region(4096) for _ in range(64)))
            got = await asyncio.gather(*(c.axpby(x, x) for _ in range(4)))
            assert all(np.array_equal(g, x + x) and not in_arena(g) for g in got)
            assert c.shm_state == "unavailable" and "64 regions" in c.shm_reason
    asyncio.run(main())
    assert len(gkc_warnings(caplog)) == 1


# --- inline, big: no copies either ------------------------------------------------------

def test_inline_big_arrays_are_not_copied(gkcd, rng):
    A = rng.standard_normal((256, 256)).astype(np.float32)
    with gkcd.connect(shm=False) as c:
        frames = []
        real = c._rpc.request

        def request(method, params):
            msgid, frame = real(method, params)
            frames.append(frame)
            return msgid, frame
        c._rpc.request = request
        C = c.sgemm(A, A)
        # A went to the socket from its own memory, not from a packed copy.
        assert any(isinstance(p, memoryview) and p.obj is A for p in frames[-1].parts)
        assert len(frames[-1]) > 2 * A.nbytes
        # The reply's bin was received into C's own buffer: C is a view of it.
        buf = owner(C)
        assert isinstance(buf, np.ndarray) and buf.dtype == np.uint8 and buf.nbytes == C.nbytes
        assert C.flags.writeable
    with gkcd.connect(shm_threshold=T) as a:
        assert np.array_equal(a.sgemm(A, A), C)


def test_parallel_copy_into_the_arena_is_exact():
    """Big copies into the arena go in pieces on threads: the bytes are those
    of one np.copyto, for a cast, a non-contiguous source and an odd length."""
    from gkc import _arena
    rng = np.random.default_rng(7)
    n = (_arena.PARALLEL_COPY_MIN // 4) * 3 + 5
    for src in (rng.standard_normal(n).astype(np.float32),
                rng.standard_normal(n),  # float64 -> float32, cast as NumPy does
                rng.standard_normal(2 * n).astype(np.float32)[::2]):
        want = np.empty(n, np.float32)
        np.copyto(want, src, casting="unsafe")
        got = np.empty(n, np.float32)
        _arena.copy_into(got, src)
        assert got.tobytes() == want.tobytes()


def test_copy_threads_from_the_environment(monkeypatch):
    """GKC_COPY_THREADS: a count is taken, anything else falls back to the
    default (up to 16), never to zero threads."""
    from gkc import _arena
    for value, want in (("3", 3), ("1", 1), ("0", None), ("-2", None), ("lots", None), ("", None)):
        monkeypatch.setenv("GKC_COPY_THREADS", value)
        got = _arena._copy_threads()
        assert got == (want or min(16, os.cpu_count() or 1)), (value, got)


# --- shm_reserve --------------------------------------------------------------------------

def test_shm_reserve_makes_the_region_before_the_first_call(gkcd, rng):
    """A region made (pages faulted in on threads), registered, and then used
    by the first big call without another; a size that fits reserves no
    more; the bounds and an arena that is off are named."""
    nbytes = 20 << 20  # over PARALLEL_COPY_MIN: populated in pieces
    with gkcd.connect(shm_threshold=T) as c, gkcd.connect(shm=False) as i:
        assert c.shm_reserve(nbytes) is None
        info = c.shm_info()
        assert len(info["regions"]) == 1 and info["bytes"] >= nbytes and info["calls"] == 0
        c.shm_reserve(nbytes // 2)
        c.shm_reserve(0)
        assert c.shm_info()["regions"] == info["regions"]
        x = rng.standard_normal(nbytes // 8).astype(np.float32)
        y = rng.standard_normal(nbytes // 8).astype(np.float32)
        got = c.axpby(x, y, alpha=2.0, beta=-0.5)
        assert np.array_equal(got, i.axpby(x, y, alpha=2.0, beta=-0.5)) and in_arena(got)
        after = c.shm_info()
        assert after["regions"] == info["regions"] and after["fallbacks"] == 0
        with pytest.raises(gkc.InvalidArgument, match="'nbytes' must be a non-negative int"):
            c.shm_reserve(-1)
        with pytest.raises(gkc.InvalidArgument, match="more than one region may hold"):
            c.shm_reserve(1 << 40)
    with gkcd.connect(shm=False) as off, \
            pytest.raises(gkc.InvalidArgument, match="shm_reserve: the arena is off"):
        off.shm_reserve(4096)


def test_aio_shm_reserve(gkcd, rng):
    async def main():
        async with gkc.aio.connect(gkcd.sock, shm_threshold=T) as a:
            await a.shm_reserve(8 << 20)
            info = a.shm_info()
            assert len(info["regions"]) == 1 and info["bytes"] >= 8 << 20
            x = rng.standard_normal(1 << 20).astype(np.float32)
            assert await a.reduce(x, "max") == float(x.max())
            assert a.shm_info()["calls"] == 1 and a.shm_info()["fallbacks"] == 0

    asyncio.run(main())


def test_populate_keeps_the_region_zero():
    from gkc._transport import make_memfd
    n = _arena.PARALLEL_COPY_MIN + 3 * 4096
    fd, mm = make_memfd(n)
    try:
        _arena.populate(mm, n)
        assert not np.frombuffer(mm, np.uint8).any()
    finally:
        mm.close()
        os.close(fd)


@pytest.mark.parametrize("fallback", [False, True], ids=["populate_write", "fallback"])
def test_populate_keeps_bytes_and_allocates_only_its_pages(monkeypatch, fallback):
    """populate over part of a region (issue #25): the bytes under it and
    beside it stay, only its pages are allocated (the memfd's st_blocks),
    in one piece and on several threads; the same where the kernel has no
    MADV_POPULATE_WRITE (a write to each page)."""
    from gkc._transport import make_memfd
    if fallback:
        monkeypatch.setattr(_arena, "_POPULATE_WRITE", None)
    n = 48 << 20
    fd, mm = make_memfd(n)
    try:
        a = np.frombuffer(mm, np.uint8)
        assert os.fstat(fd).st_blocks == 0
        a[100:5100] = 0x5A
        _arena.populate(mm, (3 << 20) + 100, 64)
        assert (a[100:5100] == 0x5A).all() and a[99] == 0 and a[5100] == 0
        got = os.fstat(fd).st_blocks * 512
        assert (3 << 20) + 164 <= got <= (3 << 20) + 164 + 8192
        _arena.populate(mm, 20 << 20, (8 << 20) + 64)  # several threads
        got = os.fstat(fd).st_blocks * 512
        assert (23 << 20) <= got <= (23 << 20) + 16384
        assert not a[8 << 20:(28 << 20) + 64].any()
    finally:
        del a
        mm.close()
        os.close(fd)


@pytest.mark.parametrize("fallback", [False, True], ids=["populate_write", "fallback"])
def test_first_calls_on_fresh_pages(gkcd, rng, monkeypatch, fallback):
    """A new connection's first calls, their slices on pages never touched
    (populated before the copy, the result's before gkcd writes it), and a
    call that grows the arena: every result the inline connection's bytes."""
    if fallback:
        monkeypatch.setattr(_arena, "_POPULATE_WRITE", None)
    with gkcd.connect(shm_threshold=T) as c, gkcd.connect(shm=False) as i:
        a = rng.standard_normal((512, 512)).astype(np.float32)
        b = rng.standard_normal((512, 512)).astype(np.float32)
        got = c.sgemm(a, b)
        assert in_arena(got) and np.array_equal(got, i.sgemm(a, b))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-3)
        x = rng.standard_normal(6 << 20).astype(np.float32)  # 24 MiB: a new region
        y = rng.standard_normal(6 << 20).astype(np.float32)
        got = c.axpby(x, y, alpha=2.0, beta=-0.5)
        assert in_arena(got) and np.array_equal(got, i.axpby(x, y, alpha=2.0, beta=-0.5))
        assert c.reduce(x, "sum") == i.reduce(x, "sum")
        assert c.shm_info()["fallbacks"] == 0


def test_kept_regions_serve_the_next_connection(gkcd, rng, monkeypatch):
    """A closed connection's idle region serves the next connection's growth
    (its size, not a new one's; its old bytes never in a result); one an
    array still lies in, or over GKC_SHM_KEEP, is not kept; a forked child
    forgets them."""
    monkeypatch.delenv("GKC_SHM_KEEP", raising=False)
    _arena.forget_kept()
    try:
        x = rng.standard_normal(5 << 20).astype(np.float32)  # 20 MiB: a 32 MiB region
        with gkcd.connect(shm_threshold=T) as c:
            want = c.reduce(x, "sum")
            assert c.shm_info()["bytes"] == 32 << 20
        assert _arena.kept_bytes() == 32 << 20
        small = rng.standard_normal(1 << 18).astype(np.float32)  # 1 MiB
        with gkcd.connect(shm=False) as s:  # gkcd keeps its mapping too ("reuse")
            for _ in range(500):
                if s.status()["resident"]["regions_kept_bytes"] >= 32 << 20:
                    break
                time.sleep(0.01)
            hits = s.status()["resident"]["regions_kept_hits"]
        with gkcd.connect(shm_threshold=T) as c, gkcd.connect(shm=False) as i:
            assert c.reduce(small, "max") == float(small.max())
            assert i.status()["resident"]["regions_kept_hits"] == hits + 1
            assert c.shm_info()["bytes"] == 32 << 20 and _arena.kept_bytes() == 0
            got = c.axpby(small, small, alpha=-1.0, beta=0.0)
            assert in_arena(got) and np.array_equal(got, i.axpby(small, small, alpha=-1.0, beta=0.0))
            assert c.reduce(x, "sum") == want
        assert _arena.kept_bytes() == 0  # got still lies in it
        del got
        with gkcd.connect(shm_threshold=T) as c:
            c.reduce(x, "sum")
        assert _arena.kept_bytes() == 32 << 20
        pid = os.fork()
        if pid == 0:
            os._exit(0 if _arena.kept_bytes() == 0 else 1)
        assert os.waitpid(pid, 0)[1] == 0
        assert _arena.kept_bytes() == 32 << 20
        monkeypatch.setenv("GKC_SHM_KEEP", "16M")
        _arena.forget_kept()
        with gkcd.connect(shm_threshold=T) as c:
            c.reduce(x, "sum")
        assert _arena.kept_bytes() == 0
    finally:
        _arena.forget_kept()


def test_shm_register_pinned_flag(gkcd):
    """shm_register's "pinned": true is answered after the region is
    registered for DMA (nothing to register on the CPU backend: the same
    answer); a value that is not a bool names the argument."""
    from gkc._transport import make_memfd
    with gkcd.connect(shm=False) as c:
        fd, mm = make_memfd(1 << 20)
        res = c._invoke("shm_register", {"bytes": 1 << 20, "pinned": True}, lambda r: r, fd)
        assert res["bytes"] == 1 << 20 and res["region"] > 0
        assert c.status()["resident"]["regions"] >= 1
        c.call("shm_release", {"region": res["region"]})
        mm.close()
        fd, mm = make_memfd(4096)
        with pytest.raises(gkc.InvalidArgument, match="pinned"):
            c._invoke("shm_register", {"bytes": 4096, "pinned": "yes"}, lambda r: r, fd)
        mm.close()
        fd, mm = make_memfd(4096)
        with pytest.raises(gkc.InvalidArgument, match="reuse"):
            c._invoke("shm_register", {"bytes": 4096, "reuse": 1}, lambda r: r, fd)
        mm.close()


def test_shm_register_reuse_kept_only_with_its_connection(daemon_factory):
    """shm_register's "reuse": true lets gkcd keep the region's mapping once
    its connection closes, and answer the same memfd's next registration
    from it; not after shm_release, and not without "reuse"."""
    from gkc._transport import make_memfd
    d = daemon_factory()

    def resident(c):
        return c.status()["resident"]

    def settle(c, want):
        for _ in range(500):
            if resident(c)["regions_kept_bytes"] == want:
                return
            time.sleep(0.01)
        assert resident(c)["regions_kept_bytes"] == want

    fd, mm = make_memfd(1 << 20)
    fd2, mm2 = make_memfd(1 << 20)
    with d.connect(shm=False) as s:
        with d.connect(shm=False) as c:
            c._invoke("shm_register", {"bytes": 1 << 20, "reuse": True}, lambda r: r, os.dup(fd))
            c._invoke("shm_register", {"bytes": 1 << 20}, lambda r: r, os.dup(fd2))
        settle(s, 1 << 20)  # only the one with "reuse"
        hits = resident(s)["regions_kept_hits"]
        with d.connect(shm=False) as c:
            r = c._invoke("shm_register", {"bytes": 1 << 20, "reuse": True}, lambda r: r, os.dup(fd2))
            assert resident(s)["regions_kept_hits"] == hits  # another file: not from the kept one
            c.call("shm_release", {"region": r["region"]})
            r = c._invoke("shm_register", {"bytes": 1 << 20, "reuse": True}, lambda r: r, os.dup(fd))
            assert resident(s)["regions_kept_hits"] == hits + 1
            assert resident(s)["regions_kept_bytes"] == 0
            c.call("shm_release", {"region": r["region"]})
        settle(s, 0)  # released by shm_release: not kept
    for m, f in ((mm, fd), (mm2, fd2)):
        m.close()
        os.close(f)
