"""msgpack-rpc framing shared by both connections: requests out, events in.

Requests are ``[0, msgid, method, [params]]`` with bins for bytes; replies
``[1, msgid, error, result]`` are matched by msgid.  The one notification
gkcd sends, ``[2, "error", [{"code", "message"}]]`` just before it closes a
connection (no free slot, or no progress in time), becomes the matching
exception; so does an end of stream.

Big arrays are never copied into or out of a msgpack buffer:

- a request is a :class:`Frame`, a list of parts sent in order with one
  gather write: the small packed bytes, and each bin of at least
  ``BIG_BIN`` bytes as the caller's own buffer (a memoryview of the NumPy
  array) behind a bin header written here;
- replies are received into one reusable buffer (``recv_into``) and, while
  they are small, unpacked by msgpack's streaming unpacker as before.  A
  reply still incomplete after ``BIG_BIN`` bytes is walked object by
  object instead; a bin of at least ``BIG_BIN`` bytes in it is received
  straight into a NumPy buffer of its own (allocated, never zeroed) and
  stands in the decoded reply as that ``numpy.ndarray`` of uint8, so the
  caller gets its result without a copy.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple

import msgpack
import numpy as np

from . import errors

_MSGID_MOD = 1 << 32

# Bins at least this long travel as their own part of a request, and are
# received into their own buffer.  Below it, copying is cheaper than the
# extra part (one more iovec, a walk of the reply in Python).
BIG_BIN = 64 << 10
# The receive buffer while replies are small: more than a Unix socket holds
# unread (its default send buffer is about 208 KiB), so one recv takes all.
_CHUNK = 256 << 10
# A big bin stands in the bytes given to msgpack as this ext type, its data
# the bin's index among the message's big bins.  gkcd sends no ext types.
_EXT_BIG = 42
_BIG_STANDIN = struct.Struct(">BbI")  # fixext 4: 0xd6, type, index


class Frame:
    """One packed request: ``parts`` sent back to back make the message.
    ``len()`` is its size in bytes; ``bytes()`` joins it (a copy: tests only)."""

    __slots__ = ("parts", "nbytes")

    def __init__(self, parts: List[Any]) -> None:
        self.parts = parts
        self.nbytes = sum(memoryview(p).nbytes for p in parts)

    def __len__(self) -> int:
        return self.nbytes

    def __bytes__(self) -> bytes:
        return b"".join(bytes(p) for p in self.parts)


def _bin_header(n: int) -> bytes:
    if n < 1 << 8:
        return struct.pack(">BB", 0xC4, n)
    if n < 1 << 16:
        return struct.pack(">BH", 0xC5, n)
    return struct.pack(">BI", 0xC6, n)


def _big(v: Any) -> bool:
    return isinstance(v, (memoryview, bytes, bytearray)) and memoryview(v).nbytes >= BIG_BIN


# The size of every msgpack object's first part, by its first byte: (fixed
# bytes before any payload, bytes of a big-endian length that follows the
# type byte, children per unit of that length (containers), or for fixed
# forms the children right away).  Kinds: 0 scalar, 1 str/bin/ext of length
# L (ext adds its type byte), 2 container.
def _table() -> List[Tuple[int, int, int, int]]:
    t: List[Tuple[int, int, int, int]] = [(0, 0, 0, -1)] * 256  # (kind, head, lenbytes, extra)
    for b in range(0x00, 0x80):
        t[b] = (0, 1, 0, 0)
    for b in range(0x80, 0x90):
        t[b] = (2, 1, 0, 2 * (b & 0x0F))
    for b in range(0x90, 0xA0):
        t[b] = (2, 1, 0, b & 0x0F)
    for b in range(0xA0, 0xC0):
        t[b] = (0, 1 + (b & 0x1F), 0, 0)
    for b in (0xC0, 0xC2, 0xC3):
        t[b] = (0, 1, 0, 0)
    t[0xC4], t[0xC5], t[0xC6] = (3, 2, 1, 0), (3, 3, 2, 0), (3, 5, 4, 0)  # bin
    t[0xC7], t[0xC8], t[0xC9] = (1, 3, 1, 0), (1, 4, 2, 0), (1, 6, 4, 0)  # ext: + its type
    t[0xCA], t[0xCB] = (0, 5, 0, 0), (0, 9, 0, 0)
    for b, n in zip(range(0xCC, 0xD0), (2, 3, 5, 9)):
        t[b] = (0, n, 0, 0)
    for b, n in zip(range(0xD0, 0xD4), (2, 3, 5, 9)):
        t[b] = (0, n, 0, 0)
    for b, n in zip(range(0xD4, 0xD9), (3, 4, 6, 10, 18)):
        t[b] = (0, n, 0, 0)
    t[0xD9], t[0xDA], t[0xDB] = (1, 2, 1, 0), (1, 3, 2, 0), (1, 5, 4, 0)  # str
    t[0xDC], t[0xDD] = (4, 3, 2, 1), (4, 5, 4, 1)  # array16/32
    t[0xDE], t[0xDF] = (4, 3, 2, 2), (4, 5, 4, 2)  # map16/32
    for b in range(0xE0, 0x100):
        t[b] = (0, 1, 0, 0)
    return t


_KIND = _table()


class Rpc:
    """Packs requests and unpacks what arrives, for one connection.

    Receiving: ``buffer()`` is where the next bytes from the socket go
    (``recv_into``), ``received(n)`` says how many came and returns the
    replies they completed."""

    def __init__(self) -> None:
        self._next = 0
        self._packer = msgpack.Packer(use_bin_type=True)
        self._buf = bytearray(_CHUNK)
        self._mv = memoryview(self._buf)
        self._start = 0  # buf[start:end]: received, not yet part of a reply handed out
        self._end = 0
        self._fed = 0    # buf[start:fed]: given to the unpacker too
        self._new_unpacker()
        # A reply being walked (see the module's docstring): the bytes of
        # it before buf[start] (big bins as their stand-ins), the big bins,
        # the containers still open (children left in each), and the bin
        # being received straight into its buffer (buffer, bytes filled).
        self._walking = False
        self._pieces: List[bytes] = []
        self._bigs: List[np.ndarray] = []
        self._open: List[int] = []
        self._into: Optional[np.ndarray] = None
        self._filled = 0

    def _new_unpacker(self) -> None:
        # 0: no limit below 4 GiB; gkcd bounds its replies (max-request-bytes).
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=0)
        self._told = 0  # unpacker.tell() when buf[start] was the unpacker's next byte

    # --- requests ---------------------------------------------------------------------

    def request(self, method: str, params: Dict[str, Any]) -> Tuple[int, Frame]:
        msgid = self._next
        self._next = (self._next + 1) % _MSGID_MOD
        try:
            if not any(_big(v) for v in params.values()):
                return msgid, Frame([self._packer.pack([0, msgid, method, [params]])])
            pk = self._packer
            head = [pk.pack_array_header(4), pk.pack(0), pk.pack(msgid), pk.pack(method),
                    pk.pack_array_header(1), pk.pack_map_header(len(params))]
            parts: List[Any] = []
            for k, v in params.items():
                head.append(pk.pack(k))
                if _big(v):
                    mv = memoryview(v).cast("B")
                    head.append(_bin_header(mv.nbytes))
                    parts.append(b"".join(head))
                    parts.append(mv)
                    head = []
                else:
                    head.append(pk.pack(v))
            if head:
                parts.append(b"".join(head))
            return msgid, Frame(parts)
        except (TypeError, ValueError, OverflowError) as e:
            self._packer = msgpack.Packer(use_bin_type=True)  # may hold half a message
            raise errors.InvalidArgument(f"{method}: cannot encode the arguments: {e}") from e  # type: ignore[attr-defined]

    # --- replies ----------------------------------------------------------------------

    def buffer(self) -> memoryview:
        """Where the next received bytes go (non-empty)."""
        if self._into is not None:
            return memoryview(self._into)[self._filled:]
        keep = self._end - self._start
        if not keep and len(self._buf) > _CHUNK:
            # One long reply grew the buffer; do not keep it that size.
            self._buf = bytearray(_CHUNK)
            self._mv = memoryview(self._buf)
            self._start = self._end = self._fed = 0
        elif len(self._buf) - self._end < _CHUNK // 4:
            if self._start and keep + _CHUNK // 4 <= len(self._buf):
                self._buf[:keep] = self._mv[self._start:self._end]
            else:
                nb = bytearray(max(len(self._buf), keep + _CHUNK))
                nb[:keep] = self._mv[self._start:self._end]
                self._buf = nb
                self._mv = memoryview(nb)
            self._fed -= self._start
            self._start, self._end = 0, keep
        return self._mv[self._end:]

    def received(self, n: int) -> Tuple[List[Tuple[int, Optional[Dict[str, Any]], Any]],
                                        Optional[errors.Error]]:
        """n bytes came into buffer(): the replies they completed as (msgid,
        error map or None, result), and the error that ends the connection,
        if they hold one: a notification, a reply gkcd could not give a
        msgid, or something that is not a reply.  Replies before it are
        still returned."""
        msgs: List[Any] = []
        if self._into is not None:
            self._filled += n
            if self._filled < len(self._into):
                return [], None
            self._bigs.append(self._into)
            self._into = None
            self._close_object()
        else:
            self._end += n
        try:
            while True:
                if self._walking:
                    msg = self._walk()
                    if msg is None:
                        break
                    msgs.append(msg)
                    # What follows this reply was not fed: start afresh there.
                    self._new_unpacker()
                    self._fed = self._start
                if self._fed == self._end:
                    break
                # At most BIG_BIN bytes at a time, so that a big reply is seen
                # begun (and walked) before msgpack has copied it whole.
                upto = min(self._end, self._fed + BIG_BIN)
                self._unpacker.feed(self._mv[self._fed:upto])
                self._fed = upto
                # tell() also counts the bytes of a reply it has begun: only
                # its value after a whole one marks where the next starts.
                told = self._told
                for msg in self._unpacker:
                    msgs.append(msg)
                    told = self._unpacker.tell()
                self._start += told - self._told
                self._told = told
                if self._fed - self._start >= BIG_BIN:
                    # A reply of BIG_BIN bytes or more is under way: walk it.
                    self._walking, self._open = True, [1]
        except errors.Error as e:
            return self._replies(msgs, e)
        except (ValueError, msgpack.UnpackException) as e:
            return self._replies(msgs, errors.ProtocolError(f"undecodable reply: {e}"))  # type: ignore[attr-defined]
        return self._replies(msgs, None)

    def _close_object(self) -> None:
        """One more object of the reply being walked is complete."""
        while self._open:
            self._open[-1] -= 1
            if self._open[-1]:
                return
            self._open.pop()

    def _walk(self) -> Any:
        """Walks the reply at buf[start:end]; returns it once complete, else
        None (the bytes walked are kept in pieces, or a big bin is being
        received into its own buffer)."""
        buf, pos, end = self._buf, self._start, self._end
        while self._open:
            if pos >= end:
                break
            b = buf[pos]
            kind, head, lenbytes, extra = _KIND[b]
            if kind < 0:
                raise errors.ProtocolError(f"byte 0x{b:02x} starts no msgpack object")  # type: ignore[attr-defined]
            if pos + head > end:
                break
            if kind == 0:
                pos += head
                self._close_object()
            elif kind == 2:
                pos += 1
                self._open_container(extra)
            else:
                length = int.from_bytes(buf[pos + 1:pos + 1 + lenbytes], "big")
                if kind == 4:
                    pos += head
                    self._open_container(length * extra)
                elif kind == 3 and length >= BIG_BIN:
                    self._pieces.append(bytes(self._mv[self._start:pos]))
                    self._pieces.append(_BIG_STANDIN.pack(0xD6, _EXT_BIG, len(self._bigs)))
                    data = pos + head
                    have = min(end - data, length)
                    into = np.empty(length, np.uint8)
                    if have:
                        into[:have] = np.frombuffer(self._buf, np.uint8, have, data)
                    self._start = data + have
                    if have == length:
                        self._bigs.append(into)
                        self._close_object()
                        pos = self._start
                        continue
                    self._into, self._filled = into, have
                    return None
                else:
                    if pos + head + length > end:
                        break
                    pos += head + length
                    self._close_object()
        if pos > self._start:
            self._pieces.append(bytes(self._mv[self._start:pos]))
            self._start = pos
        if self._open:
            return None
        data, bigs = b"".join(self._pieces), self._bigs
        self._pieces, self._bigs, self._walking = [], [], False

        def ext(code: int, raw: bytes) -> Any:
            if code != _EXT_BIG:
                return msgpack.ExtType(code, raw)  # as the unpacker gives it
            return bigs[int.from_bytes(raw, "big")]
        return msgpack.unpackb(data, raw=False, ext_hook=ext)

    def _open_container(self, children: int) -> None:
        if children:
            self._open.append(children)
        else:
            self._close_object()

    @staticmethod
    def _replies(msgs: List[Any], ended: Optional[errors.Error]) -> Tuple[
            List[Tuple[int, Optional[Dict[str, Any]], Any]], Optional[errors.Error]]:
        replies: List[Tuple[int, Optional[Dict[str, Any]], Any]] = []
        for msg in msgs:
            if (isinstance(msg, list) and len(msg) == 3 and msg[0] == 2 and msg[1] == "error"
                    and isinstance(msg[2], list) and msg[2]):
                return replies, errors.from_wire(msg[2][0])
            if not (isinstance(msg, list) and len(msg) == 4 and msg[0] == 1):
                return replies, errors.ProtocolError(f"not a msgpack-rpc reply: {msg!r:.200}")  # type: ignore[attr-defined]
            if msg[1] is None:
                # gkcd could not read a request's msgid: our own bytes were bad.
                return replies, errors.from_wire(msg[2])
            if msg[2] is not None and not isinstance(msg[2], dict):
                return replies, errors.ProtocolError(  # type: ignore[attr-defined]
                    f"malformed error in reply {msg[1]}: {msg[2]!r:.200}")
            replies.append((msg[1], msg[2], msg[3]))
        return replies, ended

    def feed(self, data: bytes) -> Tuple[List[Tuple[int, Optional[Dict[str, Any]], Any]],
                                          Optional[errors.Error]]:
        """received() for bytes that came some other way (tests, tools)."""
        replies: List[Tuple[int, Optional[Dict[str, Any]], Any]] = []
        mv = memoryview(data)
        while mv.nbytes:
            dst = self.buffer()
            n = min(dst.nbytes, mv.nbytes)
            dst[:n] = mv[:n]
            mv = mv[n:]
            got, ended = self.received(n)
            replies.extend(got)
            if ended is not None:
                return replies, ended
        return replies, None


def closed_error(what: str = "gkcd closed the connection") -> errors.Error:
    return errors.ConnectionFailed(what)  # type: ignore[attr-defined]


def outcome(err: Optional[Dict[str, Any]], result: Any) -> Any:
    """The result, or raises the reply's error."""
    if err is not None:
        raise errors.from_wire(err)
    return result
