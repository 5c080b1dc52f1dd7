"""The shared-memory ring (PROTOCOL.md, "Rings"): a blocking connection's
frames through a submission ring (sq) and a completion ring (cq) in one
sealed memfd, instead of the socket.

The rings are byte pipes: the same msgpack-rpc frames go in as would go on
the socket, so :class:`gkc._rpc.Rpc` reads the cq's bytes exactly as it
reads the socket's.  Indices are free-running uint32 byte counters, each
written by one side; ours are kept here and only published, and every
index gkcd wrote is bounded before it is used.

Waking: a wait polls the ring first (for a reply: twice the recent waits'
moving average, at most ``spin_us``, ``$GKC_RING_SPIN_US``, default 200 on
a host of 8 or more CPUs (a reply 60-150 us away is caught polling, not
after a wake-up), else 100,
and not at all while replies take longer: polling for a late reply only
takes a CPU from gkcd), then sets our WANT flag, looks once more and
sleeps in poll() on the socket, where gkcd's doorbell (one byte) or its
end arrives; after publishing, we ring gkcd's doorbell only when its flag
asks for it.  The fence between a flag's store and the next load is an
uncontended lock's acquire and release (an atomic read-modify-write: a
full barrier on x86); a sleep is bounded besides, and rings gkcd again
when our bytes are still unread while its flag says it waits for bytes,
so that a wake lost on a weaker machine costs milliseconds, not a hang.
"""
from __future__ import annotations

import os
import select
import socket
import threading
import time
from typing import Any, Optional, Sequence

from . import errors

HDR = 4096
MAGIC = 0x47524B47
VERSION = 1
# The words of the header page, as uint32 indices (byte offset / 4).
_SQ_TAIL, _SQ_HEAD, _CQ_TAIL, _CQ_HEAD, _DFLAGS, _CFLAGS, _FD_MSGS = 16, 32, 48, 64, 80, 96, 112
WANT_DATA, WANT_ROOM = 1, 2
_M = 0xFFFFFFFF
_NAP_MS = 20
DEFAULT_BYTES = 256 << 10
DEFAULT_SPIN_US = 100


def wanted(ring: Optional[bool]) -> bool:
    """Whether a connection tries a ring: the keyword, else not GKC_NO_RING.
    Unless the keyword asked for it, the connection takes one only while its
    arena is on: without the arena every array goes in the frames, and big
    frames go faster on the socket, where gkcd's reader threads take them
    off its event loop; where descriptors cannot be passed (GKC_NO_SHM's
    reason) a ring cannot be had either."""
    if ring is not None:
        return bool(ring)
    off = os.environ.get("GKC_NO_RING", "")
    return not off or off == "0"


DEFAULT_SPIN_US_BIG = 200  # on a host of BIG_CPUS or more: the client's own CPU to spend
BIG_CPUS = 8


def spin_us() -> int:
    default = DEFAULT_SPIN_US_BIG if (os.cpu_count() or 1) >= BIG_CPUS else DEFAULT_SPIN_US
    v = os.environ.get("GKC_RING_SPIN_US", "")
    try:
        return max(0, int(v)) if v else default
    except ValueError:
        return default


def _corrupt(what: str) -> errors.Error:
    return errors.ProtocolError(f"gkcd's {what} in the shared-memory ring is out of bounds")  # type: ignore[attr-defined]


class Ring:
    """Our side of a ring mapped at mm (HDR + sq + cq bytes) on sock."""

    def __init__(self, sock: socket.socket, mm: Any, sq: int, cq: int, spin: int) -> None:
        self._sock = sock
        self._mm = mm
        self._data = memoryview(mm)
        self._w = self._data[:HDR].cast("I")
        self.sq, self.cq = sq, cq
        self._cq_at = HDR + sq
        self._tail = 0      # the sq's, ours
        self._head = 0      # the cq's, ours
        self._fd_msgs = 0
        self._flags = 0
        self._spin_ns = spin * 1000
        self._wait_avg = self._spin_ns / 2  # recent waits for a reply, ns
        self._fence_lock = threading.Lock()
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        self.wakes_sent = 0

    def close(self) -> None:
        self._w.release()
        self._data.release()
        self._mm.close()

    def _fence(self) -> None:
        self._fence_lock.acquire()
        self._fence_lock.release()

    def _bell(self) -> None:
        self.wakes_sent += 1
        try:
            self._sock.send(b"\0", socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            pass  # gkcd has doorbells enough waiting
        except OSError:
            pass  # its end shows on the next read

    def _avail(self) -> int:
        n = (self._w[_CQ_TAIL] - self._head) & _M
        if n > self.cq:
            raise _corrupt("completion ring's tail")
        return n

    def _room(self) -> int:
        used = (self._tail - self._w[_SQ_HEAD]) & _M
        if used > self.sq:
            raise _corrupt("submission ring's head")
        return self.sq - used

    def _set_flags(self, flags: int) -> None:
        if flags != self._flags:
            self._flags = flags
            self._w[_CFLAGS] = flags

    def _wait(self, flag: int, deadline: Optional[float]) -> bool:
        """Until flag's condition holds: True, or False when gkcd is gone
        (and nothing is left to read); socket.timeout past deadline."""
        ready = self._avail if flag == WANT_DATA else self._room
        if ready():
            return True
        t0 = time.perf_counter_ns()
        budget = self._spin_ns
        if flag == WANT_DATA:
            budget = 0 if self._wait_avg > budget else min(budget, 2 * self._wait_avg)
        end = t0 + budget
        try:
            while time.perf_counter_ns() < end:
                if ready():
                    return True
                os.sched_yield()  # gkcd may need this CPU to answer
            return self._sleep(flag, ready, deadline)
        finally:
            if flag == WANT_DATA:
                self._wait_avg = 0.75 * self._wait_avg + 0.25 * (time.perf_counter_ns() - t0)

    def _sleep(self, flag: int, ready: Any, deadline: Optional[float]) -> bool:
        try:
            while True:
                self._set_flags(flag)
                self._fence()
                if ready():
                    return True
                nap = _NAP_MS
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise socket.timeout("timed out")
                    nap = min(nap, max(1, int(left * 1000)))
                if self._poll.poll(nap):
                    try:
                        data = self._sock.recv(4096, socket.MSG_DONTWAIT)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        return bool(ready())
                elif self._room() != self.sq and self._w[_DFLAGS] & WANT_DATA:
                    self._bell()  # our bytes wait unread while gkcd waits for bytes: ring again
        finally:
            self._set_flags(0)

    def pass_fd(self, fd: int) -> None:
        """Sends fd on the socket (one doorbell byte carrying it), counted
        before the request that takes it goes into the sq."""
        import array
        self._sock.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        self._fd_msgs = (self._fd_msgs + 1) & _M
        self._w[_FD_MSGS] = self._fd_msgs

    def send(self, parts: Sequence[Any], deadline: Optional[float] = None) -> None:
        """Writes every part into the sq, waiting for room as needed."""
        sq, base = self.sq, HDR
        for p in parts:
            mv = memoryview(p).cast("B")
            while mv.nbytes:
                room = self._room()
                if not room:
                    if not self._wait(WANT_ROOM, deadline):
                        raise BrokenPipeError("gkcd closed the connection")
                    continue
                k = min(room, mv.nbytes)
                at = self._tail & (sq - 1)
                first = min(sq - at, k)
                self._data[base + at:base + at + first] = mv[:first]
                if k > first:
                    self._data[base:base + k - first] = mv[first:k]
                mv = mv[k:]
                self._tail = (self._tail + k) & _M
                self._w[_SQ_TAIL] = self._tail
                self._fence()
                if self._w[_DFLAGS] & WANT_DATA:
                    self._bell()

    def recv_into(self, buf: memoryview, deadline: Optional[float] = None) -> int:
        """Like socket.recv_into: bytes of the cq into buf, waiting for some;
        0 once gkcd is gone and the cq is empty."""
        n = self._avail()
        if not n:
            if not self._wait(WANT_DATA, deadline):
                return 0
            n = self._avail()
        n = min(n, buf.nbytes)
        cq, base = self.cq, self._cq_at
        at = self._head & (cq - 1)
        first = min(cq - at, n)
        buf[:first] = self._data[base + at:base + at + first]
        if n > first:
            buf[first:n] = self._data[base:base + n - first]
        self._head = (self._head + n) & _M
        self._w[_CQ_HEAD] = self._head
        self._fence()
        if self._w[_DFLAGS] & WANT_ROOM:
            self._bell()
        return n

    def gone(self) -> bool:
        """Between calls: drains doorbells; True when gkcd closed the socket."""
        while True:
            try:
                data = self._sock.recv(4096, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                return True
            if not data:
                return True


def layout_bytes(sq: int, cq: int) -> int:
    return HDR + sq + cq


def init_header(mm: Any) -> None:
    w = memoryview(mm)[:HDR].cast("I")
    w[0], w[1] = MAGIC, VERSION
    w.release()
