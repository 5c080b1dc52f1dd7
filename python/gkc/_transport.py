"""The socket: where gkcd listens, connecting, and passing a region's memfd.

The address rules are libgkc's (proto/proto_socket.c): an explicit path,
else ``$GKC_SOCKET``, else ``$XDG_RUNTIME_DIR/gkcd.sock``, else
``/run/gkcd/gkcd.sock``.  Empty variables count as unset.
"""
from __future__ import annotations

import array
import errno
import mmap
import os
import socket
from typing import Any, Optional, Sequence, Tuple

from . import errors

DEFAULT_SOCKET = "/run/gkcd/gkcd.sock"
# sizeof(struct sockaddr_un.sun_path) - 1 on Linux.
_MAX_PATH = 107


def socket_path(override: Optional[str] = None) -> str:
    """The socket path a client uses, by the rules above."""
    if override:
        path = override
    elif os.environ.get("GKC_SOCKET"):
        path = os.environ["GKC_SOCKET"]
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = os.path.join(os.environ["XDG_RUNTIME_DIR"], "gkcd.sock")
    else:
        path = DEFAULT_SOCKET
    if len(os.fsencode(path)) > _MAX_PATH:
        raise errors.InvalidArgument(  # type: ignore[attr-defined]
            f"socket path {path!r} is longer than a Unix socket address holds ({_MAX_PATH} bytes)")
    return path


def connect_socket(path: str, blocking: bool = True) -> socket.socket:
    """A connected stream socket, or ``gkc.ConnectError`` naming the path and why."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        s.close()
        raise errors.ConnectError(  # type: ignore[attr-defined]
            f"cannot connect to gkcd at {path}: {e.strerror or e}") from e
    s.setblocking(blocking)
    return s


def make_memfd(nbytes: int, name: str = "gkc-region") -> Tuple[int, mmap.mmap]:
    """A memfd of exactly nbytes, sealed against shrinking and growing, and its
    shared mapping.  The seals are what let gkcd map it without risking SIGBUS;
    F_SEAL_SEAL keeps anyone holding the descriptor from changing them."""
    if not hasattr(os, "memfd_create"):
        raise errors.InvalidArgument("regions need memfd_create (Linux)")  # type: ignore[attr-defined]
    try:
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError as e:
        raise errors.InvalidArgument(f"memfd_create failed: {e.strerror or e}") from e  # type: ignore[attr-defined]
    try:
        os.ftruncate(fd, nbytes)
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        mm = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as e:
        os.close(fd)
        raise errors.OutOfMemory(  # type: ignore[attr-defined]
            f"cannot create a {nbytes}-byte region: {e.strerror or e}") from e
    return fd, mm


# Linux's UIO_MAXIOV: the most buffers one sendmsg takes.
_IOV_MAX = 1024


def send_parts(sock: socket.socket, parts: Sequence[Any], fd: Optional[int] = None) -> None:
    """Sends parts back to back, whole, with gather writes (no buffer is
    joined or copied here); fd, when given, goes with the first bytes
    (SCM_RIGHTS).  On a socket with a timeout each wait is bounded by it."""
    views = [v for v in (memoryview(p).cast("B") for p in parts) if v.nbytes]
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))] if fd is not None else []
    while views:
        n = sock.sendmsg(views[:_IOV_MAX], anc)
        anc = []
        while n:
            if n >= views[0].nbytes:
                n -= views.pop(0).nbytes
            else:
                views[0] = views[0][n:]
                n = 0


def send_with_fd(sock: socket.socket, data: bytes, fd: int) -> int:
    """Sends the start of data with fd attached (SCM_RIGHTS); returns the bytes
    sent (at least 1), or raises BlockingIOError on a non-blocking socket that
    cannot take any.  The caller sends the rest as ordinary bytes."""
    fds = array.array("i", [fd])
    while True:
        try:
            return sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except InterruptedError:
            continue
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise BlockingIOError(e.errno, e.strerror) from e
            raise
