"""msgpack-rpc framing shared by both connections: requests out, events in.

Requests are ``[0, msgid, method, [params]]`` with bins for bytes; replies
``[1, msgid, error, result]`` are matched by msgid.  The one notification
gkcd sends, ``[2, "error", [{"code", "message"}]]`` just before it closes a
connection (no free slot, or no progress in time), becomes the matching
exception; so does an end of stream.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import msgpack

from . import errors

_MSGID_MOD = 1 << 32


class Rpc:
    """Packs requests and unpacks what arrives, for one connection."""

    def __init__(self) -> None:
        # 0: no limit below 4 GiB; gkcd bounds its replies (max-request-bytes).
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=0)
        self._next = 0

    def request(self, method: str, params: Dict[str, Any]) -> Tuple[int, bytes]:
        msgid = self._next
        self._next = (self._next + 1) % _MSGID_MOD
        try:
            data = msgpack.packb([0, msgid, method, [params]], use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise errors.InvalidArgument(f"{method}: cannot encode the arguments: {e}") from e  # type: ignore[attr-defined]
        return msgid, data

    def feed(self, data: bytes) -> Tuple[List[Tuple[int, Optional[Dict[str, Any]], Any]],
                                          Optional[errors.Error]]:
        """The replies in data as (msgid, error map or None, result), and the
        error that ends the connection, if data holds one: a notification, a
        reply gkcd could not give a msgid, or something that is not a reply.
        Replies before it are still returned."""
        self._unpacker.feed(data)
        replies: List[Tuple[int, Optional[Dict[str, Any]], Any]] = []
        for msg in self._unpacker:
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
        return replies, None


def closed_error(what: str = "gkcd closed the connection") -> errors.Error:
    return errors.ConnectionFailed(what)  # type: ignore[attr-defined]


def outcome(err: Optional[Dict[str, Any]], result: Any) -> Any:
    """The result, or raises the reply's error."""
    if err is not None:
        raise errors.from_wire(err)
    return result
