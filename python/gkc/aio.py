"""The asyncio connection: many requests in flight on one socket.

    async with gkc.aio.connect() as c:
        sums = await asyncio.gather(*(c.reduce(x) for x in xs))

Every method of :class:`gkc.Connection` exists here and returns an awaitable.
Requests go out as soon as they are called (in call order); one task reads
replies and hands each to its caller by msgid, in whatever order gkcd
answers.  gkcd reads at most ``max-conn-requests`` requests of a connection
at once; the rest wait in the socket, so any number may be awaited together.
Big arrays go through the connection's shared-memory arena as on a blocking
connection (the same ``shm*`` keywords; gkc._arena).

Restarts (gkc._reconnect): when gkcd goes away, every call in flight raises
``gkc.ConnectionFailed`` saying it was not sent again, and the next call
connects again; with ``reconnect=(tries, backoff_ms, True)`` (or
``GKC_RECONNECT=...,idempotent``) each one that gives the same result run
twice is instead sent once more on the new connection, in the order the
calls were first sent, and returns its result.
"""
from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Dict, Generator, Optional

from . import _reconnect, errors
from ._api import Api, Decode
from ._arena import Staged
from ._rpc import Frame, Rpc, closed_error, outcome
from ._transport import connect_socket, send_with_fd, socket_path

__all__ = ["AsyncConnection", "connect"]


class AsyncConnection(Api):
    """An asyncio connection to gkcd; make one with :func:`connect`."""

    _is_async = True

    def __init__(self, sock: socket.socket, path: str, shm: Optional[bool] = None,
                 shm_threshold: Optional[int] = None, shm_max_bytes: Optional[int] = None,
                 reconnect: Any = None) -> None:
        super().__init__(shm, shm_threshold, shm_max_bytes)
        self._policy = _reconnect.policy(reconnect)
        self._reviving: Optional["asyncio.Future[Any]"] = None
        self.path = path
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._rpc = Rpc()
        self._pending: Dict[int, "asyncio.Future[Any]"] = {}
        self._send_lock = asyncio.Lock()
        # Arena slices of requests whose caller stopped waiting (cancelled):
        # freed when their reply arrives, not before.
        self._orphans: Dict[int, Staged] = {}
        self._broken: Optional[errors.Error] = None
        self.closed = False
        self._reader = self._loop.create_task(self._read())

    async def __aenter__(self) -> "AsyncConnection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the socket; requests still pending get gkc.Cancelled."""
        if self.closed:
            return
        self.closed = True
        try:
            # Makes a send in progress fail at once, so the socket is not
            # closed under it.
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._reader.cancel()
        try:
            await self._reader
        except (asyncio.CancelledError, Exception):
            pass
        try:
            await asyncio.wait_for(self._send_lock.acquire(), 1.0)
            self._send_lock.release()
        except asyncio.TimeoutError:
            pass
        self._sock.close()
        self._fail_pending(errors.Cancelled("the connection was closed before the reply"))  # type: ignore[attr-defined]
        self._forget_all()
        self._arena.close()
        self._orphans.clear()

    def _fail_pending(self, e: errors.Error) -> None:
        for fut in self._pending.values():
            if not fut.done():
                err = type(e)(e.message, code=e.code)
                err.in_flight = getattr(e, "in_flight", False)  # type: ignore[attr-defined]
                fut.set_exception(err)
        self._pending.clear()

    async def _read(self) -> None:
        try:
            while True:
                n = await self._loop.sock_recv_into(self._sock, self._rpc.buffer())
                if not n:
                    raise _reconnect.lost("gkcd closed the connection")
                replies, ended = self._rpc.received(n)
                for mid, err, res in replies:
                    fut = self._pending.pop(mid, None)
                    if fut is not None and not fut.done():
                        fut.set_result((err, res))
                    orphan = self._orphans.pop(mid, None)
                    if orphan is not None:
                        orphan.release()
                if ended is not None:
                    raise ended
        except errors.Error as e:
            self._broken = e
        except OSError as e:
            self._broken = _reconnect.lost(f"receiving from gkcd: {e.strerror or e}")
        self._fail_pending(self._broken)

    async def _revive(self) -> None:
        """gkcd closed the connection (every request pending then has been
        failed): connect again as the policy allows, once for all callers."""
        if self.closed or self._broken is None or self._policy.tries == 0:
            return
        if self._reviving is not None:
            await asyncio.shield(self._reviving)
            return
        self._reviving = self._loop.create_future()
        try:
            old = self._instance
            sock, inst, shared = await self._loop.run_in_executor(
                None, _reconnect.connect_again, self.path, self._policy, self._broken.message, 0)
            sock.setblocking(False)
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = sock
            self._instance, self._shared_instance = inst, shared
            self._rpc = Rpc()
            self._rpc._next = 1  # 0 was the hello's
            self._orphans.clear()
            self._broken = None
            self.reconnects += 1
            _reconnect.mark_stale(self, old)
            self._restart_arena()
            self._reader = self._loop.create_task(self._read())
        finally:
            fut, self._reviving = self._reviving, None
            fut.set_result(None)

    async def _invoke(self, method: str, params: Dict[str, Any], decode: Decode,
                      fd: Optional[int] = None) -> Any:
        try:
            return await self._invoke_once(method, params, decode, fd)
        except errors.ConnectionFailed as e:
            if not getattr(e, "in_flight", False):
                raise
            lost = e
        # Lost in flight when gkcd went away.  Every caller whose request
        # was pending wakes here in the order the requests were sent (the
        # reader failed them so), so the ones the policy lets go again are
        # sent again in that order, after one reconnect for all (_revive).
        if not _reconnect.resendable(self._policy, method, params, getattr(lost, "staged", False),
                                     fd is not None):
            raise _reconnect.not_sent_again(lost, method, self._policy) from None
        try:
            return await self._invoke_once(method, params, decode, None)
        except errors.ConnectError as e:
            raise _reconnect.could_not_resend(lost, method, e) from None
        except errors.ConnectionFailed as e:
            if getattr(e, "in_flight", False):  # lost again: at most once
                raise _reconnect.not_sent_again(e, method, self._policy, resent=True) from None
            raise

    async def _invoke_once(self, method: str, params: Dict[str, Any], decode: Decode,
                           fd: Optional[int] = None) -> Any:
        staged: Optional[Staged] = None
        try:
            await self._revive()
            # Before anything is sent: an object that did not survive a reconnect.
            _reconnect.scan(self._stale, method, params)
            if self._staging(params):
                staged = await self._adrive(self._stage(params))
            if self._broken is not None:
                raise type(self._broken)(self._broken.message, code=self._broken.code)
            if self.closed:
                raise closed_error("the connection is closed")
            msgid, frame = self._rpc.request(method, params)
            fut = self._loop.create_future()
            self._pending[msgid] = fut
            try:
                sending, fd = fd, None
                await self._send(frame, sending)
                err, res = await fut
            except BaseException as e:
                if isinstance(e, errors.ConnectionFailed):
                    e.staged = staged is not None  # type: ignore[attr-defined]
                if staged is not None and not self.closed and (fut.cancelled() or not fut.done()):
                    # Cancelled before the reply: gkcd may still read or
                    # write those slices.
                    self._orphans[msgid], staged = staged, None
                raise
            finally:
                self._pending.pop(msgid, None)
                if fut.done() and not fut.cancelled():
                    fut.exception()  # failed while we were still sending: ours is raised instead
            return decode(outcome(err, res))
        finally:
            if staged is not None:
                staged.release()
            if fd is not None:
                os.close(fd)

    async def _send(self, frame: Frame, fd: Optional[int]) -> None:
        """Sends one request whole (requests never interleave), closing fd.
        A failed send is left to the reader: gkcd may still answer or say why."""
        async with self._send_lock:
            try:
                parts = list(frame.parts)
                if fd is not None:
                    try:
                        first = bytes(parts[0])
                        while True:
                            try:
                                sent = send_with_fd(self._sock, first, fd)
                                break
                            except BlockingIOError:
                                await self._writable()
                    finally:
                        os.close(fd)
                    parts[0] = first[sent:]
                for part in parts:
                    if len(part):
                        # A memoryview of the caller's array: sent from there.
                        await self._loop.sock_sendall(self._sock, part)
            except OSError as e:
                # A live reader sees the close and fails this request with
                # gkcd's reason; a finished one no longer can.
                if self._reader.done():
                    raise self._broken or closed_error(f"sending to gkcd: {e.strerror or e}")

    async def _writable(self) -> None:
        fut = self._loop.create_future()
        fd = self._sock.fileno()
        self._loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self._loop.remove_writer(fd)


class _Connecting:
    """``await connect()`` or ``async with connect() as c``."""

    def __init__(self, path: Optional[str], shm: Dict[str, Any]) -> None:
        self._path = path
        self._shm = shm  # and reconnect=
        self._conn: Optional[AsyncConnection] = None

    async def _open(self) -> AsyncConnection:
        path = socket_path(self._path)
        sock = connect_socket(path, blocking=False)
        try:
            self._conn = AsyncConnection(sock, path, **self._shm)
        except BaseException:
            sock.close()
            raise
        return self._conn

    def __await__(self) -> Generator[Any, None, AsyncConnection]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncConnection:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None:
            await self._conn.close()


def connect(path: Optional[str] = None, *, shm: Optional[bool] = None,
            shm_threshold: Optional[int] = None, shm_max_bytes: Optional[int] = None,
            reconnect: Any = None) -> _Connecting:
    """An :class:`AsyncConnection` to gkcd: ``c = await gkc.aio.connect()``
    or ``async with gkc.aio.connect() as c``.  The ``shm*`` keywords as for
    :func:`gkc.connect`."""
    return _Connecting(path, {"shm": shm, "shm_threshold": shm_threshold,
                              "shm_max_bytes": shm_max_bytes, "reconnect": reconnect})
