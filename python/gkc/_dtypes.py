"""The wire dtype of a call's arrays (PROTOCOL.md, "Element types"): what
``dtype=`` may say, which float dtype each array argument carries, the one
a call sends, and the messages that name a mismatch as gkcd's do.  Used by
every method of gkc._api."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from . import errors
from ._objects import Array


def _bad(msg: str) -> errors.Error:
    return errors.InvalidArgument(msg)  # type: ignore[attr-defined]


# "float32 (f32)": how messages name a wire dtype, as gkcd's do.
_NAMES = {"f32": "float32 (f32)", "f64": "float64 (f64)", "i32": "int32 (i32)"}
_BY_NUMPY = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32"}


def _wire_dtype(dtype: Any, floats: bool = True) -> str:
    """A ``dtype=`` argument as a wire name: "f32", "f64" (or "i32" unless
    floats), from those names or anything ``numpy.dtype`` takes."""
    w = dtype if dtype in ("f32", "f64", "i32") else None
    if w is None:
        try:
            w = _BY_NUMPY.get(np.dtype(dtype))
        except TypeError:
            w = None
    if w is None or (floats and w == "i32"):
        want = "float32 ('f32') or float64 ('f64')" + ("" if floats else " or int32 ('i32')")
        raise _bad(f"'dtype' must be {want}, not {dtype!r}")
    return w


def _carried(x: Any) -> Optional[str]:
    """The float dtype an array argument carries: a resident Array's, or a
    float32 or float64 NumPy array's; None for anything else (lists,
    integers), which takes the call's."""
    if isinstance(x, Array):
        return x.wire_dtype
    if isinstance(x, (np.ndarray, np.generic)):
        return _BY_NUMPY.get(x.dtype) if x.dtype.kind == "f" else None
    return None


def _floats(conn: Any, method: str, args: Sequence[Tuple[str, Any]], dtype: Any = None,
            f32_only: bool = False) -> str:
    """The wire dtype of a call's float arrays (args: (name, value), None
    for an absent one): dtype when given (arrays are then converted to it,
    except resident ones, which must hold it); else the one its arrays
    carry, which must agree; else "f32".  f32_only: the method takes
    float32 alone (sgemm, reduce), so a float64 array is refused unless
    dtype="float32" asks for the conversion.  A resident array is first
    checked to be usable on conn at all (released, another connection's)."""
    for _, x in args:
        if isinstance(x, Array):
            x._check(conn)
    if dtype is not None:
        w = _wire_dtype(dtype)
        if f32_only and w != "f32":
            raise _bad(f"'dtype': {method} takes float32 (f32) only, not {_NAMES[w]}")
        for name, x in args:
            if isinstance(x, Array) and x.wire_dtype != w:
                raise _bad(f"'{name}': resident array {x.id} holds {_NAMES[x.wire_dtype]}, but"
                           f" dtype= asks for {_NAMES[w]} (a resident array is not converted)")
        return w
    seen: Optional[Tuple[str, str]] = None
    for name, x in args:
        c = _carried(x)
        if c is None:
            continue
        if f32_only and c != "f32":
            what = f"resident array {x.id} holds" if isinstance(x, Array) else "is"
            raise _bad(f"'{name}' {what} {_NAMES[c]}, but {method} takes float32 (f32) only"
                       + ("" if isinstance(x, Array) else ": pass dtype='float32' to convert it"))
        if seen is None:
            seen = (name, c)
        elif c != seen[1]:
            raise _bad(f"'{name}' is {_NAMES[c]} but '{seen[0]}' is {_NAMES[seen[1]]}: the"
                       f" float arrays of one {method} share a dtype; pass dtype= to convert")
    return seen[1] if seen else "f32"


def _typed(p: Dict[str, Any], wire: str) -> Dict[str, Any]:
    """Adds the request's `dtype` when it is not the default float32, so
    that a float32 call is what it always was (and an older gkcd takes it)."""
    if wire != "f32":
        p["dtype"] = wire
    return p
