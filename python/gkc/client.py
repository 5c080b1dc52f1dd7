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
from typing import Any, Dict, Optional

from . import errors
from ._api import Api, Decode
from ._arena import Staged
from ._rpc import Frame, Rpc, closed_error, outcome
from ._transport import connect_socket, send_parts, socket_path


class Connection(Api):
    """A blocking connection to gkcd.  See :class:`gkc._api.Api` for the methods."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = None, *,
                 shm: Optional[bool] = None, shm_threshold: Optional[int] = None,
                 shm_max_bytes: Optional[int] = None) -> None:
        """path: the socket (default as libgkc); timeout: seconds to wait for
        any one reply (None: no limit), after which gkc.Timeout is raised and
        the connection is closed.  shm: big arrays through shared memory
        (default on, unless GKC_NO_SHM=1); shm_threshold: the size in bytes
        from which an argument or result goes that way (default
        $GKC_SHM_THRESHOLD, else gkc._arena.DEFAULT_THRESHOLD); shm_max_bytes:
        the most shared memory the connection keeps ($GKC_SHM_MAX_BYTES, else
        1 GiB).  Keywords given win over the environment."""
        super().__init__(shm, shm_threshold, shm_max_bytes)
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

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the socket; gkcd frees this connection's regions and
        (unshared) resident objects."""
        if not self.closed:
            self.closed = True
            self._sock.close()
            self._forget_all()
            self._arena.close()
            self._orphans.clear()

    def _fail(self, e: errors.Error) -> errors.Error:
        self._broken = e
        self.close()
        return e

    def _invoke(self, method: str, params: Dict[str, Any], decode: Decode,
                fd: Optional[int] = None) -> Any:
        staged: Optional[Staged] = None
        try:
            # Before taking the lock: a growth of the arena is a request too.
            if self._staging(params):
                staged = self._drive(self._stage(params))
            with self._lock:
                if self._broken is not None:
                    raise type(self._broken)(self._broken.message, code=self._broken.code)
                if self.closed:
                    raise closed_error("the connection is closed")
                msgid, frame = self._rpc.request(method, params)
                sending, fd = fd, None
                failure = self._send(frame, sending)
                try:
                    reply = self._wait(msgid, failure)
                except BaseException:
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
        while msgid not in self._replies:
            try:
                n = self._sock.recv_into(self._rpc.buffer())
            except socket.timeout:
                raise self._fail(errors.Timeout("no reply from gkcd within the timeout"))  # type: ignore[attr-defined]
            except OSError as e:
                raise self._fail(closed_error(failure or f"receiving from gkcd: {e.strerror or e}"))
            if not n:
                raise self._fail(closed_error(failure or "gkcd closed the connection"))
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


def connect(path: Optional[str] = None, timeout: Optional[float] = None, *,
            shm: Optional[bool] = None, shm_threshold: Optional[int] = None,
            shm_max_bytes: Optional[int] = None) -> Connection:
    """A blocking :class:`Connection` to gkcd (a context manager); the
    keywords as for :class:`Connection`."""
    return Connection(path, timeout, shm=shm, shm_threshold=shm_threshold,
                      shm_max_bytes=shm_max_bytes)
