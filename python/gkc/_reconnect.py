"""Connecting again after gkcd went away, and naming what did not survive.

The rules are libgkc's (gkc.h, "reconnecting"; PROTOCOL.md, "Instances and
restarts"):

- a call that finds its connection gone (gkcd closed it while it was idle:
  a restart, an idle timeout) connects again first, up to ``tries`` times,
  waiting ``backoff_ms``, then twice that, ... (at most 5 s) in between;
  ``reconnect=0`` (or ``GKC_RECONNECT=off``) turns that off;
- a request in flight when gkcd went away is never sent again: its call
  raises ``gkc.ConnectionFailed`` saying so (the next call reconnects),
  unless the caller opted in (``reconnect=(tries, backoff_ms, True)`` or
  ``GKC_RECONNECT=...,idempotent``) and the call gives the same result run
  twice (``IDEMPOTENT``, its result returned as bytes, sent inline without
  a descriptor): then it is sent once more on the new connection, blocking
  and asyncio connections alike (on one of :mod:`gkc.aio`, every such call
  that was in flight is sent again, in the order they were first sent, each
  at most once; the others raise);
- after connecting again, the new gkcd is asked its instances (one ping
  before anything else); every object of the old connection (regions,
  private arrays and matrices) and every shared one whose instance's
  shared objects the new gkcd does not hold becomes stale: naming it raises
  ``gkc.StaleHandle`` before anything is sent, naming the object and both
  instances.
"""
from __future__ import annotations

import os
import select
import socket
import time
from typing import Any, Dict, Optional, Tuple

import msgpack

from . import errors

DEFAULT_TRIES = 6
DEFAULT_BACKOFF_MS = 100
MAX_BACKOFF_MS = 5000
HELLO_S = 5.0


# Methods whose request may be sent twice with the same result (libgkc's
# list): what the caller's opt-in lets a reconnect send again.
IDEMPOTENT = frozenset({"ping", "status", "metrics", "reduce", "dot", "nrm2", "download",
                        "sgemm", "spmv", "axpby", "solve"})


class Policy:
    """How a connection reconnects: ``tries`` (0: never), ``backoff_ms``, and
    whether an idempotent call in flight may be sent again (``idempotent``)."""

    def __init__(self, tries: int = DEFAULT_TRIES, backoff_ms: int = DEFAULT_BACKOFF_MS,
                 idempotent: bool = False) -> None:
        if tries < 0 or backoff_ms < 0:
            raise errors.InvalidArgument(  # type: ignore[attr-defined]
                f"reconnect: tries and backoff_ms must be >= 0, not {tries} and {backoff_ms}")
        self.tries, self.backoff_ms = int(tries), int(backoff_ms)
        self.idempotent = bool(idempotent)

    def delays(self) -> Any:
        """The waits before each attempt (none before the first), in seconds."""
        d = self.backoff_ms
        for i in range(self.tries):
            yield 0.0 if i == 0 else d / 1000.0
            if i > 0:
                d = MAX_BACKOFF_MS if d > MAX_BACKOFF_MS // 2 else d * 2


def policy(reconnect: Any = None) -> Policy:
    """The policy from the ``reconnect=`` keyword (None: ``$GKC_RECONNECT``,
    else the default; an int: tries; a (tries, backoff_ms) pair; False: off)."""
    if reconnect is None:
        v = os.environ.get("GKC_RECONNECT", "")
        if v in ("off", "no", "false"):
            return Policy(0)
        try:
            idem = "idempotent" in v.split(",")
            parts = [p for p in v.split(",") if p != "idempotent"]
            if parts and parts[0]:
                return Policy(int(parts[0]), int(parts[1]) if len(parts) > 1 else DEFAULT_BACKOFF_MS,
                              idem)
        except ValueError:
            pass  # as libgkc: a value that does not parse leaves the default
        return Policy()
    if reconnect is False:
        return Policy(0)
    if reconnect is True:
        return Policy()
    if isinstance(reconnect, Policy):
        return reconnect
    if isinstance(reconnect, tuple):
        return Policy(*reconnect)
    return Policy(int(reconnect))


def resendable(pol: Policy, method: str, params: Any, staged: bool, fd: bool) -> bool:
    """Whether a request lost in flight may be sent once more (see above)."""
    if not pol.idempotent or pol.tries == 0 or method not in IDEMPOTENT or staged or fd:
        return False
    # A result written into a resident object or a region is no result as
    # bytes, and an array sent as a region reference named the dead
    # connection's region.
    if not isinstance(params, dict) or "out" in params:
        return False
    return not any(isinstance(v, dict) and "region" in v for v in params.values())


def lost(message: str) -> errors.Error:
    """The error of the requests in flight when the connection broke under
    them (marked ``in_flight``: what may make one resendable)."""
    e = errors.ConnectionFailed(message)  # type: ignore[attr-defined]
    e.in_flight = True  # type: ignore[attr-defined]
    return e


def not_sent_again(e: errors.Error, method: str, pol: Policy, resent: bool = False) -> errors.Error:
    """What a call lost in flight raises when it is not sent (again)."""
    how = (" (it had been sent again once already, after an earlier loss)" if resent
           else " (the next call connects again)" if pol.tries else "")
    return type(e)(f"{e.message}: this {method} was in flight and may or may not have run; it was "
                   f"not sent again{how}", code=e.code)


def could_not_resend(e: errors.Error, method: str, why: BaseException) -> errors.Error:
    """What a call lost in flight raises when connecting again, to send it
    once more, failed."""
    return type(e)(f"{e.message}; this {method} was in flight and could not be sent again: {why}",
                   code=e.code)


def instances(res: Any) -> Tuple[str, str]:
    """(instance, shared_instance) named by a reply map ("" when absent)."""
    if not isinstance(res, dict):
        return "", ""
    i, s = res.get("instance", ""), res.get("shared_instance", "")
    return (i if isinstance(i, str) else ""), (s if isinstance(s, str) else "")


def hello(sock: socket.socket, msgid: int) -> Tuple[str, str]:
    """Pings gkcd on a fresh blocking socket; its (instance, shared_instance)."""
    sock.sendall(msgpack.packb([0, msgid, "ping", [{}]], use_bin_type=True))
    u = msgpack.Unpacker(raw=False, max_buffer_size=1 << 16)
    deadline = time.monotonic() + HELLO_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.Timeout(f"gkcd did not answer the hello ping within {HELLO_S:g} s")  # type: ignore[attr-defined]
        r, _, _ = select.select([sock], [], [], left)
        if not r:
            continue
        data = sock.recv(65536)
        if not data:
            raise errors.ConnectionFailed("gkcd closed the new connection before answering the hello")  # type: ignore[attr-defined]
        u.feed(data)
        for msg in u:
            if isinstance(msg, list) and len(msg) == 4 and msg[0] == 1 and msg[1] == msgid:
                if msg[2] is not None:
                    raise errors.from_wire(msg[2])
                return instances(msg[3])
            if isinstance(msg, list) and len(msg) == 3 and msg[0] == 2 and msg[1] == "error" and msg[2]:
                raise errors.from_wire(msg[2][0])
            raise errors.ProtocolError(f"gkcd did not answer the hello ping: {msg!r:.100}")  # type: ignore[attr-defined]


def connect_again(path: str, pol: Policy, why: str, msgid: int) -> Tuple[socket.socket, str, str]:
    """A new blocking socket to path, hello done, within the policy; raises
    gkc.ConnectError naming why the old one was lost and the last failure."""
    from ._transport import connect_socket
    t0 = time.monotonic()
    last: Optional[BaseException] = None
    for delay in pol.delays():
        if delay:
            time.sleep(delay)
        try:
            s = connect_socket(path)
        except errors.Error as e:
            last = e
            continue
        try:
            inst, shared = hello(s, msgid)
            return s, inst, shared
        except (errors.Error, OSError) as e:
            last = e
            s.close()
    raise errors.ConnectError(  # type: ignore[attr-defined]
        f"the connection to gkcd was lost ({why}) and {pol.tries} attempt(s) to connect again over "
        f"{time.monotonic() - t0:.1f} s failed; the last: {last}")


def idle_gone(sock: socket.socket) -> bool:
    """Whether an idle connection has been closed by gkcd (or was told why
    it will be): anything readable while no request is pending."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def _name(inst: str) -> str:
    return f"instance {inst}" if inst else "an unknown instance (an older gkcd)"


def mark_stale(conn: Any, old_instance: str) -> None:
    """After conn connected again: its objects that did not survive are
    stale (their check raises), and remembered by id for the request scan."""
    for o in list(conn._owned):
        if o.released or getattr(o, "stale", None):
            continue
        if not getattr(o, "shared", False):
            made = o.made_in or old_instance
            o.stale = (f"{o._kind} {o.id} is stale: it was made on an earlier connection to gkcd "
                       f"{_name(made)} and died with it; this connection was made again (to "
                       f"{_name(conn._instance)}), which holds nothing of the old one (only shared "
                       f"objects can outlive their connection)")
        elif not o.made_in or o.made_in != conn._shared_instance:
            o.stale = (f"shared {o._kind} {o.id} is stale: it belonged to the shared objects of "
                       f"gkcd {_name(o.made_in)}, and the gkcd reached after reconnecting holds "
                       f"those of {_name(conn._shared_instance)} (it restarted without restoring them)")
        else:
            continue
        conn._stale[o.id] = o.stale


_ID_KEYS = ("handle", "region", "matrix")


def scan(stale: Dict[int, str], method: str, params: Any) -> None:
    """Raises gkc.StaleHandle when params name a stale object's id: handles,
    regions and matrices anywhere in the map (batch steps' `out` too)."""
    if not stale:
        return
    todo = [params]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, int) and not isinstance(x, bool) and x in stale and (
                        k in _ID_KEYS or k == "out"):
                    raise errors.StaleHandle(f"{method}: {stale[x]}")  # type: ignore[attr-defined]
                if isinstance(x, (dict, list)):
                    todo.append(x)
        elif isinstance(v, list):
            todo.extend(v)


