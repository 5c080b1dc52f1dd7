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

    def start(self, fault=None):
        env = dict(os.environ)
        env.pop("GKCD_FAULT", None)
        if fault:
            env["GKCD_FAULT"] = fault
        self.proc = subprocess.Popen([os.environ["GKCD_BIN"], "--socket", self.sock, "--backend",
                                      "cpu", "--threads", "1"], stderr=subprocess.DEVNULL, env=env)
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
