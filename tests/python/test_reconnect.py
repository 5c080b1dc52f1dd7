"""gkcd restarted under a Python client (issue 30): reconnecting, stale handles."""
import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

import gkc


class Restartable:
    """gkcd on one socket path that can be killed and started again."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gkc-reconnect-")
        self.sock = os.path.join(self.dir, "gkcd.sock")
        self.proc = None
        self.start()

    def start(self, fault=None, args=()):
        env = dict(os.environ)
        env.pop("GKCD_FAULT", None)
        if fault:
            env["GKCD_FAULT"] = fault
        self.proc = subprocess.Popen([os.environ["GKCD_BIN"], "--socket", self.sock, "--backend",
                                      "cpu", "--threads", "1", *args], stderr=subprocess.DEVNULL,
                                     env=env)
        deadline = time.monotonic() + 20
        while True:
            try:
                with gkc.connect(self.sock, reconnect=False) as c:
                    c.ping()
                return
            except gkc.Error:
                assert time.monotonic() < deadline, "gkcd did not come up"
                time.sleep(0.02)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def restart_later(self, delay):
        def run():
            time.sleep(delay)
            self.kill()
            self.start()
        t = threading.Thread(target=run)
        t.start()
        return t

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def daemon():
    if not os.environ.get("GKCD_BIN"):
        pytest.skip("GKCD_BIN is not set")
    d = Restartable()
    yield d
    d.close()


def test_loop_goes_on_across_a_kill(daemon):
    x = np.arange(1, 4097, dtype=np.float32)
    with gkc.connect(daemon.sock, reconnect=(40, 50)) as c:
        t = daemon.restart_later(0.15)
        errors, right, after = 0, 0, 0
        while after < 50:
            try:
                assert c.reduce(x) == 4096 * 4097 / 2
                right += 1
            except gkc.ConnectionFailed as e:
                errors += 1
                assert "not sent again" in str(e)
            if c.reconnects:
                after += 1
        t.join()
        assert c.reconnects == 1
        assert errors <= 1


def test_stale_handles_are_named(daemon):
    x = np.arange(64, dtype=np.float32)
    c = gkc.connect(daemon.sock, reconnect=(40, 50))
    h = c.upload(x)
    hs = c.upload(x, shared=True)
    m = c.csr_upload((np.array([0, 1, 2]), np.array([0, 1]), np.array([2.0, 3.0]), (2, 2)))
    r = c.region(4096)
    old = c.ping()["instance"]
    daemon.kill()
    daemon.start()
    new = c.ping()["instance"]  # stateless: reconnects on its own
    assert c.reconnects == 1 and new != old
    served = c.status()["served"]
    with pytest.raises(gkc.StaleHandle) as e:
        c.reduce(h)
    assert f"array handle {h.id} is stale" in str(e.value) and old in str(e.value) and new in str(e.value)
    with pytest.raises(gkc.StaleHandle, match=f"shared array handle {hs.id} is stale"):
        c.dot(hs, x)
    with pytest.raises(gkc.StaleHandle, match="matrix"):
        c.spmv(m, np.ones(2, np.float32))
    with pytest.raises(gkc.StaleHandle, match="region"):
        c.reduce(r.array(16))
    assert c.status()["served"] == served  # none of those reached gkcd
    with h:  # leaving the block does not complain: nothing is left to free
        pass
    assert c.reduce(c.upload(x)) == float(x.sum())
    c.close()


def test_reconnect_off_keeps_the_old_behaviour(daemon):
    c = gkc.connect(daemon.sock, reconnect=False)
    c.ping()
    daemon.kill()
    daemon.start()
    with pytest.raises(gkc.ConnectionFailed):
        c.ping()
    assert c.reconnects == 0
    c.close()


def test_aio_loop_and_stale_handle(daemon):
    x = np.arange(1, 1025, dtype=np.float32)

    async def main():
        async with gkc.aio.connect(daemon.sock, reconnect=(40, 50)) as c:
            h = await c.upload(x)
            t = daemon.restart_later(0.1)
            lost, right, after = 0, 0, 0
            while after < 30:
                res = await asyncio.gather(*(c.reduce(x) for _ in range(8)), return_exceptions=True)
                for v in res:
                    if isinstance(v, gkc.ConnectionFailed):
                        lost += 1
                    else:
                        assert v == 1024 * 1025 / 2
                        right += 1
                if c.reconnects:
                    after += 1
            t.join()
            assert c.reconnects == 1 and lost <= 8
            with pytest.raises(gkc.StaleHandle, match=f"array handle {h.id} is stale"):
                await c.reduce(h)

    asyncio.run(main())


def test_idempotent_call_in_flight_is_sent_again_when_asked(daemon):
    """A reduce held in gkcd (fault injection) when gkcd is killed: without
    the opt-in its call fails saying it was not sent again; with
    reconnect=(tries, backoff_ms, True) it is sent once more on the new
    connection and returns the right sum.  An upload (it makes an object)
    is never sent again, opt-in or not."""
    from conftest import fault_injection
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to hold a request")
    x = np.arange(1, 4097, dtype=np.float32)

    def held_then_killed(c, call, fault="reduce:delay=600"):
        daemon.kill()
        daemon.start(fault=fault)
        c.ping()  # connected again, to the instance that holds requests
        before = c.reconnects
        t = daemon.restart_later(0.2)  # killed while the call is held, started again clean
        try:
            return call()
        finally:
            t.join()
            assert c.reconnects <= before + 1

    with gkc.connect(daemon.sock, reconnect=(40, 50)) as c:
        with pytest.raises(gkc.ConnectionFailed, match="not sent again"):
            held_then_killed(c, lambda: c.reduce(x))
    with gkc.connect(daemon.sock, reconnect=(40, 50, True)) as c:
        before = c.reconnects
        assert held_then_killed(c, lambda: c.reduce(x)) == 4096 * 4097 / 2
        assert c.reconnects == before + 2  # the ping's, and the resend's
        with pytest.raises(gkc.ConnectionFailed, match="not sent again"):
            held_then_killed(c, lambda: c.upload(x), "upload:delay=600")


def test_idempotent_opt_in_from_the_environment(monkeypatch):
    from gkc import _reconnect
    monkeypatch.setenv("GKC_RECONNECT", "3,20,idempotent")
    p = _reconnect.policy()
    assert (p.tries, p.backoff_ms, p.idempotent) == (3, 20, True)
    monkeypatch.setenv("GKC_RECONNECT", "3,20")
    assert not _reconnect.policy().idempotent
    assert _reconnect.policy((2, 10, True)).idempotent
    assert _reconnect.resendable(p, "reduce", {"x": b"...."}, False, False)
    assert not _reconnect.resendable(p, "reduce", {"x": {"region": 3, "offset": 0}}, False, False)
    assert not _reconnect.resendable(p, "axpby", {"x": b"", "out": {"handle": 4}}, False, False)
    assert not _reconnect.resendable(p, "upload", {"data": b""}, False, False)
    assert not _reconnect.resendable(p, "reduce", {"x": b""}, True, False)


# One worker, one lane: a reduce held by the fault (60 s, far past the test)
# keeps everything queued behind it unanswered until gkcd is killed.
ONE_WORKER = ("--latency-sms", "0")
HOLD_REDUCE = "reduce:delay=60000"


async def _sent_and_read(c, n):
    """Waits until n calls are pending on c, then for a ping: gkcd has then
    read all of them (it reads a connection's requests in order and answers
    ping at once)."""
    for _ in range(1000):
        if len(c._pending) >= n:
            break
        await asyncio.sleep(0)
    assert len(c._pending) == n
    await c.ping()


def test_aio_calls_in_flight_sent_again_when_asked(daemon, rng):
    """gkc.aio with reconnect=(tries, backoff_ms, True): reduces in flight
    when gkcd is killed are sent again to the new one and return their own
    sums; one naming a handle of the dead gkcd raises StaleHandle; an
    upload in flight raises ConnectionFailed saying it was not sent again."""
    from conftest import fault_injection
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to hold a request")
    xa = rng.integers(0, 1000, 16).astype(np.float32)
    xb = rng.integers(0, 1000, 24).astype(np.float32)
    xh = rng.integers(0, 1000, 32).astype(np.float32)

    async def main():
        async with gkc.aio.connect(daemon.sock, reconnect=(40, 50, True)) as c:
            daemon.kill()
            daemon.start(fault=HOLD_REDUCE, args=ONE_WORKER)
            await c.ping()  # connects again: nothing was in flight
            assert c.reconnects == 1
            h = await c.upload(xh)
            calls = [asyncio.ensure_future(c.reduce(h)), asyncio.ensure_future(c.reduce(xa)),
                     asyncio.ensure_future(c.upload(xa)), asyncio.ensure_future(c.reduce(xb))]
            await _sent_and_read(c, 4)
            assert not any(t.done() for t in calls)  # all four held in gkcd
            daemon.kill()
            daemon.start()
            rh, ra, u, rb = await asyncio.gather(*calls, return_exceptions=True)
            assert c.reconnects == 2
            assert ra == float(xa.sum()) and rb == float(xb.sum())
            assert isinstance(rh, gkc.StaleHandle) and f"array handle {h.id} is stale" in str(rh)
            assert isinstance(u, gkc.ConnectionFailed)
            assert "upload was in flight" in str(u) and "not sent again" in str(u)
            assert not c._pending
            assert await c.reduce(xb) == float(xb.sum())

    asyncio.run(main())


def test_aio_calls_in_flight_not_sent_again_without_opt_in(daemon, rng):
    from conftest import fault_injection
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to hold a request")
    x = rng.integers(0, 1000, 16).astype(np.float32)

    daemon.kill()
    daemon.start(fault=HOLD_REDUCE, args=ONE_WORKER)

    async def main():
        async with gkc.aio.connect(daemon.sock, reconnect=(40, 50)) as c:
            calls = [asyncio.ensure_future(c.reduce(x)), asyncio.ensure_future(c.upload(x))]
            await _sent_and_read(c, 2)
            assert not any(t.done() for t in calls)
            daemon.kill()
            daemon.start()
            r, u = await asyncio.gather(*calls, return_exceptions=True)
            assert isinstance(r, gkc.ConnectionFailed) and isinstance(u, gkc.ConnectionFailed)
            assert "reduce was in flight" in str(r) and "not sent again" in str(r)
            assert "upload was in flight" in str(u) and "not sent again" in str(u)
            assert c.reconnects == 0  # nothing was sent again
            assert await c.reduce(x) == float(x.sum())  # the next call connects again
            assert c.reconnects == 1

    asyncio.run(main())


def test_aio_call_in_flight_with_no_gkcd_to_come_back(daemon, rng):
    from conftest import fault_injection
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to hold a request")
    x = rng.integers(0, 1000, 16).astype(np.float32)

    daemon.kill()
    daemon.start(fault=HOLD_REDUCE, args=ONE_WORKER)

    async def main():
        async with gkc.aio.connect(daemon.sock, reconnect=(2, 10, True)) as c:
            call = asyncio.ensure_future(c.reduce(x))
            await _sent_and_read(c, 1)
            assert not call.done()
            daemon.kill()  # and none comes back
            with pytest.raises(gkc.ConnectionFailed, match="reduce was in flight and could not be "
                               "sent again.*2 attempt"):
                await call
            assert c.reconnects == 0

    asyncio.run(main())
    daemon.start()  # for the fixture's close
