"""The blocking connection: each call sends one request and waits for its reply.

    with gkc.connect() as c:              # $GKC_SOCKET, $XDG_RUNTIME_DIR/gkcd.sock, /run/gkcd/gkcd.sock
        C = c.sgemm(A, B)

A connection may be shared between threads (calls take turns); for many
requests in flight at once use :mod:`gkc.aio`.

Big arrays go through shared memory (the connection's arena, see
gkc._arena) unless ``shm=False``; ``c.shm_state`` says what it does.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Dict, Optional

from . import _reconnect, _ring, errors
from ._api import Api, Decode
from ._arena import Staged
from ._rpc import Frame, Rpc, closed_error, outcome
from ._transport import connect_socket, make_memfd, send_parts, socket_path


def in_flight(message: str) -> errors.Error:
    """The error of a request lost in flight (marked, for _invoke's resend)."""
    e = closed_error(message)
    e.in_flight = True  # type: ignore[attr-defined]
    return e


class Connection(Api):
    """A blocking connection to gkcd.  See :class:`gkc._api.Api` for the methods."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = None, *,
                 shm: Optional[bool] = None, shm_threshold: Optional[int] = None,
                 shm_max_bytes: Optional[int] = None, reconnect: Any = None,
                 ring: Optional[bool] = None) -> None:
        """path: the socket (default as libgkc); timeout: seconds to wait for
        any one reply (None: no limit), after which gkc.Timeout is raised and
        the connection is closed.  shm: big arrays through shared memory
        (default on, unless GKC_NO_SHM=1); shm_threshold: the size in bytes
        from which an argument or result goes that way (default
        $GKC_SHM_THRESHOLD, else gkc._arena.DEFAULT_THRESHOLD); shm_max_bytes:
        the most shared memory the connection keeps ($GKC_SHM_MAX_BYTES, else
        1 GiB).  reconnect: how a call connects again after gkcd went away
        (gkc._reconnect): None ($GKC_RECONNECT, else 6 tries from 100 ms),
        an int of tries, (tries, backoff_ms), (tries, backoff_ms, True) to
        let an idempotent call in flight be sent once more, or False
        (never).  ring: requests and replies through a shared-memory ring
        (gkc._ring; default on while the arena is, unless GKC_NO_RING=1;
        True asks for it even with the arena off), set up at the first
        call; a gkcd that has none leaves the connection on the socket.
        Keywords given win over the environment."""
        super().__init__(shm, shm_threshold, shm_max_bytes)
        self._policy = _reconnect.policy(reconnect)
        self._timeout = timeout
        self._user_closed = False
        self.path = socket_path(path)
        self._sock = connect_socket(self.path)
        self._sock.settimeout(timeout)
        self._rpc = Rpc()
        self._replies: Dict[int, Any] = {}
        # Arena slices of requests whose caller stopped waiting (an exception
        # while waiting): freed when their reply arrives, not before.
        self._orphans: Dict[int, Staged] = {}
        self._lock = threading.Lock()
        self._broken: Optional[errors.Error] = None
        self.closed = False
        self._ring_choice = ring
        self._ring_want = _ring.wanted(ring)
        self._ring: Optional[_ring.Ring] = None

    @property
    def ring_active(self) -> bool:
        """Whether this connection's frames go through a shared-memory ring now."""
        return self._ring is not None

    def _ring_end(self) -> None:
        if self._ring is not None:
            self._ring.close()
            self._ring = None

    def _ring_start(self) -> None:
        """Sets a ring up (with the lock held, nothing in flight): on any
        refusal the connection stays on the socket for good."""
        self._ring_want = False
        sq = cq = _ring.DEFAULT_BYTES
        try:
            fd, mm = make_memfd(_ring.layout_bytes(sq, cq), "gkc-ring")
        except errors.Error:
            return
        try:
            _ring.init_header(mm)
            msgid, frame = self._rpc.request("ring_register", {"sq_bytes": sq, "cq_bytes": cq})
            failure = self._send(frame, fd)
            fd = -1  # _send closed it
            err, res = self._wait(msgid, failure)
            if err is None and isinstance(res, dict) and res.get("ring") is True \
                    and res.get("sq_bytes") == sq and res.get("cq_bytes") == cq:
                self._ring = _ring.Ring(self._sock, mm, sq, cq, _ring.spin_us())
                mm = None
        finally:
            if fd >= 0:
                os.close(fd)
            if mm is not None:
                mm.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the socket; gkcd frees this connection's regions and
        (unshared) resident objects."""
        self._user_closed = True
        if not self.closed:
            self.closed = True
            self._sock.close()
            self._ring_end()
            self._forget_all()
            self._arena.close()
            self._orphans.clear()

    def _fail(self, e: errors.Error) -> errors.Error:
        self._broken = e
        if self._policy.tries == 0:
            self.close()
            self._user_closed = False
        else:
            # Kept for reconnecting: the objects stay known (to be named
            # stale), only the socket goes.
            self._sock.close()
            self._ring_end()
        return e

    def _revive(self) -> None:
        """Before a call: when gkcd closed the connection (noticed now, or by
        an earlier call), connect again as the policy allows."""
        if self._user_closed or self._policy.tries == 0:
            return
        if self._broken is None:
            if not _reconnect.idle_gone(self._sock):
                return
            if self._ring is not None:  # its socket carries doorbells: only its end matters
                if not self._ring.gone():
                    return
                self._broken = closed_error("gkcd closed the connection")
            # Idle, yet readable: the end of the stream, or gkcd's word before it.
            try:
                data = self._sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError as e:
                data, self._broken = b"", errors.ConnectionFailed(f"receiving from gkcd: {e}")  # type: ignore[attr-defined]
            if data:
                buf = self._rpc.buffer()
                buf[:len(data)] = data
                _, ended = self._rpc.received(len(data))
                if ended is None:
                    return
                self._broken = ended
            elif self._broken is None:
                self._broken = closed_error("gkcd closed the connection")
            self._sock.close()
        self._ring_end()
        self._ring_want = _ring.wanted(self._ring_choice)  # the new connection may take one
        old = self._instance
        sock, inst, shared = _reconnect.connect_again(self.path, self._policy, self._broken.message, 0)
        sock.settimeout(self._timeout)
        self._sock = sock
        self._instance, self._shared_instance = inst, shared
        self._rpc = Rpc()
        self._rpc._next = 1  # 0 was the hello's
        self._replies.clear()
        self._orphans.clear()
        self._broken = None
        self.closed = False
        self.reconnects += 1
        _reconnect.mark_stale(self, old)
        self._restart_arena()

    def _invoke(self, method: str, params: Dict[str, Any], decode: Decode,
                fd: Optional[int] = None) -> Any:
        try:
            return self._invoke_once(method, params, decode, fd)
        except errors.ConnectionFailed as e:
            # In flight when gkcd went away: sent once more only when the
            # caller opted in and the call may run twice (gkc._reconnect).
            if not getattr(e, "in_flight", False) or not _reconnect.resendable(
                    self._policy, method, params, getattr(e, "staged", False), fd is not None):
                raise
            return self._invoke_once(method, params, decode, None)

    def _invoke_once(self, method: str, params: Dict[str, Any], decode: Decode,
                     fd: Optional[int] = None) -> Any:
        staged: Optional[Staged] = None
        try:
            with self._lock:
                self._revive()
            # Before anything is sent: an object that did not survive a reconnect.
            _reconnect.scan(self._stale, method, params)
            # Before taking the lock: a growth of the arena is a request too.
            if self._staging(params):
                staged = self._drive(self._stage(params))
            with self._lock:
                if self._broken is not None:
                    raise type(self._broken)(self._broken.message, code=self._broken.code)
                if self.closed:
                    raise closed_error("the connection is closed")
                # The ring goes with the arena unless asked for (gkc._ring.wanted).
                if self._ring_want and self._ring is None and \
                        (self._ring_choice or self.shm_state in ("unused", "active")):
                    self._ring_start()
                msgid, frame = self._rpc.request(method, params)
                sending, fd = fd, None
                failure = self._send(frame, sending)
                try:
                    reply = self._wait(msgid, failure)
                except BaseException as e:
                    if isinstance(e, errors.ConnectionFailed):
                        e.staged = staged is not None  # type: ignore[attr-defined]
                    if staged is not None and not self.closed:
                        # gkcd may still read or write those slices.
                        self._orphans[msgid], staged = staged, None
                    raise
            return decode(outcome(*reply))
        finally:
            if staged is not None:
                staged.release()
            if fd is not None:
                os.close(fd)

    def _send(self, frame: Frame, fd: Optional[int]) -> Optional[str]:
        """Sends a request (closing fd); returns why it failed, or None.  A
        failed send still waits for replies: gkcd may have answered (too_large)
        or said why it closes (too_many_connections, timeout) first."""
        try:
            try:
                if self._ring is not None:
                    if fd is not None:
                        self._ring.pass_fd(fd)
                    self._ring.send(frame.parts, self._deadline())
                else:
                    send_parts(self._sock, frame.parts, fd)
            finally:
                if fd is not None:
                    os.close(fd)
        except socket.timeout:
            raise self._fail(errors.Timeout("gkcd took no bytes within the timeout"))  # type: ignore[attr-defined]
        except OSError as e:
            return f"sending to gkcd: {e.strerror or e}"
        return None

    def _wait(self, msgid: int, failure: Optional[str] = None) -> Any:
        deadline = self._deadline()
        while msgid not in self._replies:
            try:
                if self._ring is not None:
                    n = self._ring.recv_into(self._rpc.buffer(), deadline)
                else:
                    n = self._sock.recv_into(self._rpc.buffer())
            except socket.timeout:
                raise self._fail(errors.Timeout("no reply from gkcd within the timeout"))  # type: ignore[attr-defined]
            except OSError as e:
                raise self._fail(in_flight((failure or f"receiving from gkcd: {e.strerror or e}") +
                                           ": the request was in flight and was not sent again"))
            if not n:
                raise self._fail(in_flight((failure or "gkcd closed the connection") +
                                           ": the request was in flight and was not sent again"))
            replies, ended = self._rpc.received(n)
            for mid, err, res in replies:
                orphan = self._orphans.pop(mid, None)
                if orphan is not None:
                    orphan.release()
                else:
                    self._replies[mid] = (err, res)
            if ended is not None:
                self._fail(ended)
                if msgid not in self._replies:
                    raise ended
        return self._replies.pop(msgid)

    def _deadline(self) -> Optional[float]:
        return None if self._timeout is None else time.monotonic() + self._timeout


def connect(path: Optional[str] = None, timeout: Optional[float] = None, *,
            shm: Optional[bool] = None, shm_threshold: Optional[int] = None,
            shm_max_bytes: Optional[int] = None, reconnect: Any = None,
            ring: Optional[bool] = None) -> Connection:
    """A blocking :class:`Connection` to gkcd (a context manager); the
    keywords as for :class:`Connection`."""
    return Connection(path, timeout, shm=shm, shm_threshold=shm_threshold,
                      shm_max_bytes=shm_max_bytes, reconnect=reconnect, ring=ring)
