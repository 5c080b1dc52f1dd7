"""Every error class gkcd can be made to send, provoked once, through the package.

Not provoked here: `busy` from a full thread queue (only by timing; a full
memory-budget queue provokes it deterministically instead).
`deadline_exceeded` (a thread held by an injected delay), `device_error`,
`device_lost` and `internal` need a fault-injection build (GKCD_FAULT), and
`too_many_connections` and `timeout` only from a gkcd that sends the error
notification (the tests say so when they skip).
"""
import asyncio
import os
import re
import time

import msgpack
import numpy as np
import pytest

import gkc
from conftest import ROOT, fault_injection


def test_classes_match_the_c_table():
    with open(os.path.join(ROOT, "proto", "gkc_errors.h"), encoding="utf-8") as f:
        rows = re.findall(r'XX\((\w+),\s*(-?\d+),\s*"(\w+)",\s*"([^"]*)"\)', f.read())
    assert len(rows) >= 18
    assert {w: int(v) for _, v, w, _ in rows} == {c.code: c.value for c in gkc.ERRORS.values()}
    for _, v, w, text in rows:
        cls = gkc.ERRORS[w]
        assert issubclass(cls, gkc.Error) and cls.default_text == text
        assert getattr(gkc, cls.__name__) is cls
    assert gkc.InvalidArgument.code == "invalid_argument" and gkc.Busy.value == -7
    assert gkc.TooManyConnections.wire and gkc.Timeout.wire and not gkc.ConnectError.wire


def test_parse_error(gkcd):
    with gkcd.connect() as c:
        c._sock.sendall(b"\xc1")  # never valid msgpack
        with pytest.raises(gkc.ParseError):
            c.ping()


def test_invalid_request(gkcd):
    with gkcd.connect() as c:
        c._sock.sendall(msgpack.packb(42))  # msgpack, but not a request
        with pytest.raises(gkc.InvalidRequest, match="array"):
            c.ping()


def test_unknown_method(conn):
    with pytest.raises(gkc.UnknownMethod, match="frobnicate"):
        conn.call("frobnicate")
    assert conn.ping()["protocol"] == 1  # the connection stays usable


def test_invalid_argument_names_the_argument(conn):
    with pytest.raises(gkc.InvalidArgument, match="'op'"):
        conn.reduce(np.ones(3, np.float32), op="median")
    with pytest.raises(gkc.InvalidArgument, match="'algo'"):
        conn.sgemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), algo="nope")
    with pytest.raises(gkc.InvalidArgument, match="alhpa"):
        conn.call("sgemm", {"m": 1, "n": 1, "k": 1, "a": b"\0" * 4, "b": b"\0" * 4, "alhpa": 1.0})
    e = pytest.raises(gkc.InvalidArgument, conn.reduce, np.ones(3), op="median").value
    assert e.code == "invalid_argument" and e.value == -4 and isinstance(e, gkc.Error)


def test_too_large_result(conn):
    big = np.full((65536, 1), 0.5, dtype=np.float32)
    with pytest.raises(gkc.TooLarge):
        conn.sgemm(big, big.T)  # a 16 GiB result
    assert conn.ping()["protocol"] == 1


def test_too_large_request(daemon_factory):
    d = daemon_factory("--max-request-bytes", "64K")
    with d.connect() as c:
        assert c.reduce(np.ones(15000, np.float32)) == 15000.0
        with pytest.raises(gkc.TooLarge):
            c.reduce(np.ones(25000, np.float32))
        # gkcd closes a connection after a request whose end it cannot know.
        with pytest.raises(gkc.ConnectionFailed):
            c.ping()


@pytest.fixture
def tight(daemon_factory):
    """A gkcd with a 1 MiB memory budget, 400 kB of it held by a resident array.
    Arrays go by value (shm=False): the budget counts the bytes gkcd receives,
    and an argument in shared memory is not received."""
    d = daemon_factory("--memory-budget", "1M", "--budget-queue", "0", "--queue-wait", "0.3")
    c = d.connect(shm=False)
    c.upload(np.zeros(100000, np.float32))
    yield c
    c.close()


def test_busy_after_waiting_for_memory_past_queue_wait(tight):
    assert tight.reduce(np.ones(50000, np.float32)) == 50000.0  # fits beside the array
    with pytest.raises(gkc.Busy, match="queue-wait"):
        tight.reduce(np.ones(200000, np.float32))  # would fit alone; must wait, and waits past --queue-wait


def test_out_of_memory_for_an_upload_over_the_budget(tight):
    with pytest.raises(gkc.OutOfMemory, match="memory-budget"):
        tight.upload(np.ones(200000, np.float32))


def test_too_large_for_the_whole_budget(tight):
    with pytest.raises(gkc.TooLarge, match="memory budget"):
        tight.reduce(np.ones(300000, np.float32))


def test_deadline_exceeded_while_waiting_for_a_thread(daemon_factory):
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to hold its only thread")
    d = daemon_factory("--threads", "1", env={"GKCD_FAULT": "reduce:delay=400"})

    async def main():
        async with gkc.aio.connect(d.sock) as c:
            first = asyncio.ensure_future(c.reduce(np.ones(4, np.float32)))
            await asyncio.sleep(0.05)
            with pytest.raises(gkc.DeadlineExceeded):
                await c.dot(np.ones(4), np.ones(4), deadline_ms=50)
            assert await first == 4.0
    asyncio.run(main())


def test_release_admits_a_request_waiting_for_memory(daemon_factory):
    d = daemon_factory("--memory-budget", "1M", "--budget-queue", "4")

    async def main():
        async with gkc.aio.connect(d.sock, shm=False) as c:  # by value, as `tight`
            h = await c.upload(np.zeros(100000, np.float32))
            waiting = asyncio.ensure_future(c.reduce(np.ones(200000, np.float32)))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await h.release()
            assert await asyncio.wait_for(waiting, 5) == 200000.0
    asyncio.run(main())


@pytest.mark.parametrize("code", ["device_error", "device_lost", "internal", "out_of_memory"])
def test_injected_faults(daemon_factory, code):
    if not fault_injection():
        pytest.skip("gkcd built without GKC_FAULT_INJECTION: no way to make it send " + code)
    d = daemon_factory(env={"GKCD_FAULT": f"reduce:{code}"})
    with d.connect() as c:
        with pytest.raises(gkc.ERRORS[code], match="injected fault") as e:
            c.reduce(np.ones(4, np.float32))
        assert type(e.value).code == code
        assert c.dot(np.ones(4), np.ones(4)) == 4.0  # other methods are unaffected


def test_too_many_connections(daemon_factory):
    d = daemon_factory("--max-connections", "1")
    for _ in range(100):  # gkcd may not have seen the start-up probe close yet
        first = d.connect()
        try:
            first.ping()
            break
        except (gkc.ConnectionFailed, gkc.TooManyConnections):
            first.close()
            time.sleep(0.05)
    with first:
        second = d.connect()
        try:
            second.ping()
        except gkc.TooManyConnections as e:
            assert e.code == "too_many_connections" and "--max-connections 1" in e.message
        else:
            pytest.fail("a second connection over --max-connections 1 was served")
        finally:
            second.close()
        first.ping()


def test_timeout_notification(daemon_factory):
    d = daemon_factory("--request-timeout", "1")
    with d.connect(timeout=30) as c:
        c._sock.sendall(b"\x94\x00")  # the start of a request that never ends
        t0 = time.monotonic()
        with pytest.raises(gkc.Timeout) as e:
            c.ping()
        assert "--request-timeout" in e.value.message and time.monotonic() - t0 < 20
