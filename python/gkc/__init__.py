"""gkc: a Python client for gkcd, the GPU compute daemon.

    import numpy as np, gkc

    with gkc.connect() as c:                      # the socket as libgkc finds it
        C = c.sgemm(A, B, alpha=2.0)              # a NumPy float32 array
        s = c.reduce(x, op="max")                 # a float
        y = c.spmv(scipy_csr, x)                  # or (row_ptr, col_idx, values)
        with c.upload(x) as hx, c.csr_upload(M) as hM:
            y = c.spmv(hM, hx, out="handle")      # stays on gkcd
        res = c.solve(scipy_csr, b, method="pcg", rtol=1e-8)   # res.x, res.iterations
        r = c.region(1 << 20)                     # shared memory, no copies
        v = r.array((1000,), np.float32)

Arrays of 128 KiB or more go through shared memory on their own: each
connection keeps an arena of sealed memfd regions registered with gkcd; a
big argument is copied into it once (no bytes in the request) and a big
result comes back as a NumPy array over it, owning its slice until it is
collected (``result.base`` is a :class:`gkc.ArenaSlice`).  ``connect(shm=False)``
or ``GKC_NO_SHM=1`` turns that off; ``shm_threshold=`` / ``GKC_SHM_THRESHOLD``
moves the size; ``c.shm_state`` and ``c.shm_reason`` say what happens.
Below the threshold, or with the arena off, arrays still go without extra
copies: straight from their memory to the socket, and a big result straight
from the socket into the array returned.

Errors are exceptions under :class:`gkc.Error`, one class per code
(``gkc.InvalidArgument``, ``gkc.Busy``, ...), carrying gkcd's message.
:mod:`gkc.aio` has the same methods for asyncio, with requests pipelined.
The wire protocol is proto/PROTOCOL.md in the gkc sources.
"""
from __future__ import annotations

from . import errors
from ._api import SolveResult
from ._arena import ArenaSlice
from ._batch import Batch, BatchResult, Value
from ._objects import Array, Matrix, Region
from ._transport import DEFAULT_SOCKET, socket_path
from .client import Connection, connect
from .errors import ERRORS, Error

__version__ = "0.1.0"
PROTOCOL = 1

# One class per row of the error table (gkc.InvalidArgument, gkc.Busy, ...).
globals().update({cls.__name__: cls for cls in ERRORS.values()})

__all__ = ["connect", "Connection", "Array", "Matrix", "Region", "ArenaSlice", "Batch", "BatchResult", "Value",
           "SolveResult", "Error", "ERRORS",
           "socket_path", "DEFAULT_SOCKET", "PROTOCOL", "errors", "aio"] + \
          [cls.__name__ for cls in ERRORS.values()]


def __getattr__(name: str) -> object:
    if name == "aio":  # asyncio is imported only by those who use it
        import importlib
        return importlib.import_module(".aio", __name__)
    raise AttributeError(f"module 'gkc' has no attribute {name!r}")
