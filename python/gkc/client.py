"""The blocking connection: each call sends one request and waits for its reply.

    with gkc.connect() as c:              # $GKC_SOCKET, $XDG_RUNTIME_DIR/gkcd.sock, /run/gkcd/gkcd.sock
        C = c.sgemm(A, B)

A connection may be shared between threads (calls take turns); for many
requests in flight at once use :mod:`gkc.aio`.
"""
from __future__ import annotations

import os
import socket
import threading
from typing import Any, Dict, Optional

from . import errors
from ._api import Api, Decode
from ._rpc import Rpc, closed_error, outcome
from ._transport import connect_socket, send_with_fd, socket_path


class Connection(Api):
    """A blocking connection to gkcd.  See :class:`gkc._api.Api` for the methods."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = None) -> None:
        """path: the socket (default as libgkc); timeout: seconds to wait for
        any one reply (None: no limit), after which gkc.Timeout is raised and
        the connection is closed."""
        super().__init__()
        self.path = socket_path(path)
        self._sock = connect_socket(self.path)
        self._sock.settimeout(timeout)
        self._rpc = Rpc()
        self._replies: Dict[int, Any] = {}
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

    def _fail(self, e: errors.Error) -> errors.Error:
        self._broken = e
        self.close()
        return e

    def _invoke(self, method: str, params: Dict[str, Any], decode: Decode,
                fd: Optional[int] = None) -> Any:
        try:
            with self._lock:
                if self._broken is not None:
                    raise type(self._broken)(self._broken.message, code=self._broken.code)
                if self.closed:
                    raise closed_error("the connection is closed")
                msgid, data = self._rpc.request(method, params)
                sending, fd = fd, None
                failure = self._send(data, sending)
                res = outcome(*self._wait(msgid, failure))
        finally:
            if fd is not None:
                os.close(fd)
        return decode(res)

    def _send(self, data: bytes, fd: Optional[int]) -> Optional[str]:
        """Sends a request (closing fd); returns why it failed, or None.  A
        failed send still waits for replies: gkcd may have answered (too_large)
        or said why it closes (too_many_connections, timeout) first."""
        try:
            if fd is not None:
                try:
                    sent = send_with_fd(self._sock, data, fd)
                finally:
                    os.close(fd)
                data = data[sent:]
            self._sock.sendall(data)
        except socket.timeout:
            raise self._fail(errors.Timeout("gkcd took no bytes within the timeout"))  # type: ignore[attr-defined]
        except OSError as e:
            return f"sending to gkcd: {e.strerror or e}"
        return None

    def _wait(self, msgid: int, failure: Optional[str] = None) -> Any:
        while msgid not in self._replies:
            try:
                d = self._sock.recv(1 << 20)
            except socket.timeout:
                raise self._fail(errors.Timeout("no reply from gkcd within the timeout"))  # type: ignore[attr-defined]
            except OSError as e:
                raise self._fail(closed_error(failure or f"receiving from gkcd: {e.strerror or e}"))
            if not d:
                raise self._fail(closed_error(failure or "gkcd closed the connection"))
            replies, ended = self._rpc.feed(d)
            for mid, err, res in replies:
                self._replies[mid] = (err, res)
            if ended is not None:
                self._fail(ended)
                if msgid not in self._replies:
                    raise ended
        return self._replies.pop(msgid)


def connect(path: Optional[str] = None, timeout: Optional[float] = None) -> Connection:
    """A blocking :class:`Connection` to gkcd (a context manager)."""
    return Connection(path, timeout)
