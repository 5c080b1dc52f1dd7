"""Errors: one exception class per gkc error code, all under :class:`Error`.

The rows below mirror ``proto/gkc_errors.h`` (the C library's table) and
generate the classes, so the two cannot drift apart silently: the test suite
compares them.  Rows marked ``wire`` are codes gkcd sends in an error reply
(or in an ``error`` notification before it closes a connection); the others
only arise inside this client.

Every exception carries ``code`` (the wire string, e.g. ``"invalid_argument"``),
``value`` (the C library's negative number) and the message, which for wire
errors is the daemon's own text naming the offending argument.
"""
from __future__ import annotations

from typing import Dict, Optional, Type

__all__ = ["Error", "ERRORS", "error_class", "from_wire"]

#  (value, wire string, class name, default text, sent by gkcd)
_TABLE = (
    (-1, "parse_error", "ParseError", "bytes are not valid msgpack", True),
    (-2, "invalid_request", "InvalidRequest", "not a msgpack-rpc request", True),
    (-3, "unknown_method", "UnknownMethod", "unknown method", True),
    (-4, "invalid_argument", "InvalidArgument", "invalid argument", True),
    (-5, "too_large", "TooLarge", "request over a configured limit", True),
    (-6, "out_of_memory", "OutOfMemory", "out of memory", True),
    (-7, "busy", "Busy", "server busy, retry later", True),
    (-8, "device_error", "DeviceError", "device error", True),
    (-9, "internal", "Internal", "internal server error", True),
    (-10, "deadline_exceeded", "DeadlineExceeded", "request waited past its deadline", True),
    (-11, "too_many_connections", "TooManyConnections", "gkcd has no connection slot free", True),
    (-12, "device_lost", "DeviceLost", "the device running the request failed", True),
    (-13, "timeout", "Timeout", "the connection made no progress in time", True),
    (-20, "connect", "ConnectError", "cannot connect to gkcd", False),
    (-21, "io", "ConnectionFailed", "connection to gkcd failed", False),
    (-22, "protocol", "ProtocolError", "malformed reply from gkcd", False),
    (-23, "unknown_code", "UnknownCode", "gkcd sent an unknown error code", False),
    (-24, "cancelled", "Cancelled", "request cancelled before its reply", False),
    (-25, "stale_handle", "StaleHandle", "the object belongs to an earlier connection or gkcd instance", False),
)


class Error(Exception):
    """Base of every gkc error.  ``str(e)`` is the message."""

    code: str = ""
    value: int = 0
    default_text: str = ""
    wire: bool = False

    def __init__(self, message: Optional[str] = None, *, code: Optional[str] = None) -> None:
        self.message = message if message else self.default_text
        if code is not None:  # an UnknownCode keeps what the daemon sent
            self.code = code
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"gkc.{type(self).__name__}({self.message!r})"


#: wire string -> exception class, for every row of the table
ERRORS: Dict[str, Type[Error]] = {}

for _value, _wire, _name, _text, _sent in _TABLE:
    _cls = type(_name, (Error,), {
        "code": _wire, "value": _value, "default_text": _text, "wire": _sent,
        "__doc__": f"``{_wire}`` ({_value}): {_text}."
                   + ("" if _sent else "  Raised by the client, never sent by gkcd."),
        "__module__": "gkc",
    })
    ERRORS[_wire] = _cls
    globals()[_name] = _cls
    __all__.append(_name)
del _value, _wire, _name, _text, _sent, _cls


def error_class(code: str) -> Type[Error]:
    """The class for a wire code; ``UnknownCode`` for a code this client does not know."""
    return ERRORS.get(code, ERRORS["unknown_code"])


def from_wire(err: object) -> Error:
    """The exception for an error map ``{"code": str, "message": str}`` from gkcd."""
    if not isinstance(err, dict) or not isinstance(err.get("code"), str):
        return ERRORS["protocol"](f"malformed error from gkcd: {err!r:.200}")
    code = err["code"]
    msg = err.get("message")
    msg = msg if isinstance(msg, str) and msg else None
    cls = error_class(code)
    if code not in ERRORS:
        return cls(f"{code}: {msg or 'gkcd sent an error code this client does not know'}", code=code)
    return cls(msg)
