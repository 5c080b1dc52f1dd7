"""What lives on gkcd between requests: regions, resident arrays and matrices.

Each object belongs to the connection that made it and dies with it.  Release
it explicitly (``.release()``) or use it as a context manager (``with`` on a
blocking connection, ``async with`` on an asyncio one); on an asyncio
connection ``release()`` returns an awaitable.  Using an object after its
release raises ``gkc.InvalidArgument`` before anything is sent.
"""
from __future__ import annotations

import mmap
from typing import TYPE_CHECKING, Any, Optional, Tuple

import numpy as np

from . import errors

if TYPE_CHECKING:  # pragma: no cover
    from ._api import Api

# The wire's dtypes (PROTOCOL.md, "Element types") as NumPy's.
_DTYPES = {"f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "i32": np.dtype("<i4")}


class _Owned:
    """Something with a wire id, owned by a connection, released once."""

    _kind = "object"

    def __init__(self, conn: "Api", ident: int) -> None:
        self._conn = conn
        self.id = ident
        self.released = False
        # Which gkcd instance holds it (gkc._reconnect): private objects and
        # regions live as long as their connection, shared ones as long as
        # their instance's shared objects (restored across a planned restart).
        self.shared = False
        self.made_in = conn._instance
        self.stale: Optional[str] = None  # why, once it did not survive a reconnect
        conn._stale.pop(ident, None)  # the number is this object's now
        conn._owned.add(self)

    def _check(self, conn: "Api") -> None:
        """Raises unless this object may be named in a request on conn."""
        if self.stale:
            raise errors.StaleHandle(self.stale)  # type: ignore[attr-defined]
        if self.released:
            raise errors.InvalidArgument(f"{self._kind} {self.id} was already released")  # type: ignore[attr-defined]
        if conn is not self._conn:
            raise errors.InvalidArgument(  # type: ignore[attr-defined]
                f"{self._kind} {self.id} belongs to another connection")

    def _mark_released(self) -> None:
        self.released = True

    def _release_request(self) -> Tuple[str, dict]:
        raise NotImplementedError

    def release(self) -> Any:
        """Frees it on gkcd.  Returns None on a blocking connection, an
        awaitable on an asyncio one."""
        self._check(self._conn)
        method, params = self._release_request()
        self._mark_released()
        return self._conn._invoke(method, params, lambda res: None)

    def __enter__(self):
        if self._conn._is_async:
            raise TypeError(f"a {self._kind} of an asyncio connection needs 'async with'")
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.released and not self._conn.closed and not self.stale:
            try:
                self.release()
            except errors.StaleHandle:  # gkcd restarted meanwhile: nothing left to free
                pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.released and not self._conn.closed and not self.stale:
            try:
                r = self.release()
                if r is not None:
                    await r
            except errors.StaleHandle:  # gkcd restarted meanwhile: nothing left to free
                pass


class Array(_Owned):
    """A resident array: ``c.upload(x)``, or a result with ``out="handle"``.

    Pass it wherever a method takes an array; gkcd then uses its copy.
    ``shape`` is remembered here (gkcd stores a flat array); ``wire_dtype``
    is ``"f32"``, ``"f64"`` or ``"i32"`` and ``dtype`` the NumPy dtype
    (``download`` returns it)."""

    _kind = "array handle"

    def __init__(self, conn: "Api", ident: int, shape: Tuple[int, ...], dtype: str) -> None:
        super().__init__(conn, ident)
        self.shape = tuple(int(s) for s in shape)
        self.wire_dtype = dtype
        self.dtype = _DTYPES[dtype]
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        self.nbytes = self.size * self.dtype.itemsize
        # The device it lives on (an int), or the devices holding a copy (a
        # tuple) when replicated; None from a gkcd without devices.
        self.device: Any = None

    def _release_request(self) -> Tuple[str, dict]:
        return "release", {"handle": self.id}

    def download(self, out: Optional[np.ndarray] = None) -> Any:
        """The array's values (``c.download(self, out)``)."""
        return self._conn.download(self, out=out)

    def __repr__(self) -> str:
        state = " released" if self.released else ""
        return f"<gkc.Array handle={self.id} shape={self.shape} dtype={self.wire_dtype}{state}>"


class Matrix(_Owned):
    """A resident CSR matrix: ``c.csr_upload(A)``.  Pass it to ``spmv``.
    ``wire_dtype`` is its values' (``"f32"`` or ``"f64"``), independent of
    the vectors it is used with."""

    _kind = "matrix"

    def __init__(self, conn: "Api", ident: int, rows: int, cols: int, nnz: int, algo: str,
                 dtype: str = "f32") -> None:
        super().__init__(conn, ident)
        self.rows, self.cols, self.nnz, self.algo = rows, cols, nnz, algo
        self.wire_dtype = dtype
        self.shape = (rows, cols)
        self.device: Any = None  # as Array.device
        # partitioned (csr_upload(devices=...)): per row block, its device,
        # row0, rows, nnz and halo (x entries it reads from other devices)
        self.partition: Optional[list] = None

    def _release_request(self) -> Tuple[str, dict]:
        return "release", {"matrix": self.id}

    def __repr__(self) -> str:
        state = " released" if self.released else ""
        return (f"<gkc.Matrix {self.id} {self.rows}x{self.cols} nnz={self.nnz} dtype={self.wire_dtype}"
                f" algo={self.algo}{state}>")


class Region(_Owned):
    """A sealed memfd shared with gkcd: ``c.region(nbytes)``.

    ``array(shape, dtype, offset)`` gives a NumPy view of its memory.  Such a
    view (or any slice of it that is C-contiguous) passed as an argument
    travels as a region reference, not as bytes, and passed as ``out=`` it
    receives the result in place.  Do not change bytes a request is reading
    until its reply has arrived.
    """

    _kind = "region"

    def __init__(self, conn: "Api", ident: int, mm: mmap.mmap, nbytes: int) -> None:
        super().__init__(conn, ident)
        self.nbytes = nbytes
        self._mm = mm
        self._bytes = np.frombuffer(mm, dtype=np.uint8)
        self.address = int(self._bytes.__array_interface__["data"][0])

    def array(self, shape: Any, dtype: Any = np.float32, offset: int = 0) -> np.ndarray:
        """A NumPy view of ``shape`` elements of ``dtype`` at byte ``offset``."""
        self._check(self._conn)
        dt = np.dtype(dtype)
        shp = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        count = int(np.prod(shp, dtype=np.int64)) if shp else 1
        if offset < 0 or count < 0 or offset + count * dt.itemsize > self.nbytes:
            raise errors.InvalidArgument(  # type: ignore[attr-defined]
                f"region {self.id}: {count} x {dt} at offset {offset} does not fit in {self.nbytes} bytes")
        if offset % dt.itemsize:
            raise errors.InvalidArgument(  # type: ignore[attr-defined]
                f"region {self.id}: offset {offset} is not a multiple of {dt.itemsize}")
        return self._bytes[offset:offset + count * dt.itemsize].view(dt).reshape(shp)

    def span(self, a: np.ndarray, addr: Optional[int] = None) -> Optional[Tuple[int, int]]:
        """(offset, bytes) of a within this region, or None when it lies
        elsewhere.  addr: a's data address, when the caller has it already."""
        if self.released:
            return None
        if addr is None:
            addr = int(a.__array_interface__["data"][0])
        if self.address <= addr and addr + a.nbytes <= self.address + self.nbytes:
            return addr - self.address, int(a.nbytes)
        return None

    def _release_request(self) -> Tuple[str, dict]:
        return "shm_release", {"region": self.id}

    def _mark_released(self) -> None:
        self.released = True
        self._conn._regions.pop(self.id, None)
        self._bytes = None  # type: ignore[assignment]
        try:
            self._mm.close()
        except BufferError:
            pass  # views are alive; the mapping goes when the last one does

    def __repr__(self) -> str:
        state = " released" if self.released else ""
        return f"<gkc.Region {self.id} {self.nbytes} bytes{state}>"
