"""The methods, written once for the blocking and the asyncio connection.

Each method is one function: it turns Python arguments into the request's
argument map (PROTOCOL.md's table for that method) and names a ``decode``
that turns the result map into what the caller gets.  It then returns
``self._invoke(method, params, decode)``, which the blocking connection runs
to completion and the asyncio one returns as an awaitable.  Adding a method
that gkcd gains is one more such function here.

Arrays, wherever a method takes one, may be a NumPy array (or anything
``numpy.asarray`` takes), a resident :class:`Array`, or a view of a
:class:`Region` of this connection (sent as a region reference, not copied).
Float arrays keep their dtype (PROTOCOL.md, "Element types"): a float64
NumPy array (or a resident float64 :class:`Array`) is sent as float64 and
its results come back float64; a float32 one stays float32; lists and
integer arrays are sent as float32, as always.  The float arrays of one
call share a dtype: a float32 array beside a float64 one is an error that
names both, unless ``dtype=`` (``"float32"``/``"f32"``, ``"float64"``/``"f64"``)
says which to convert them to.  ``sgemm`` and ``reduce`` take float32
only: a float64 array there is an error naming it, unless the caller asks
for the conversion with ``dtype="float32"``.  Nothing is narrowed silently.

``out=`` (sgemm, spmv, axpby, solve, download) chooses where a result goes: None
(a new NumPy array), ``"handle"`` (a new resident :class:`Array`), an
existing :class:`Array` (overwritten), or a region view (written in place).
Every compute method takes ``deadline_ms`` and ``info``: a dict that is
filled with the reply's other fields (``algo``, ``kernel_us``, ...).

Which dtype goes on the wire is gkc._dtypes.

Big arrays go through the connection's shared-memory arena (gkc._arena;
the methods' arena half, staging and growth, is gkc._calls_arena) unless it is off: an argument of ``shm_threshold`` bytes or more is copied
into it once and sent as a region reference, and a result of that size
(with ``out=None``) comes back as a NumPy array over the arena, whose
``.base`` (an ``ArenaSlice``) owns those bytes until the array and its
views are gone.  ``connection.shm_state`` says whether it is in use.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arena, errors
from ._arena import Arena, In, InPlace, Out
from ._batch import Batch, BatchResult
from ._calls_arena import ArenaCalls
from ._dtypes import _NAMES, _bad, _floats, _typed, _wire_dtype
from ._objects import _DTYPES, Array, Matrix, Region

ArrayArg = Union[np.ndarray, Array, Sequence[float]]
OutArg = Union[None, str, Array, np.ndarray]
Decode = Callable[[Any], Any]

_INT32_MAX = 2**31 - 1

class SolveResult:
    """What ``solve`` returns.

    ``x`` (as ``out=`` said: a NumPy array, a resident :class:`Array` or the
    region view; of b's dtype), ``iterations``, ``residual`` (gkcd's float64
    ||b - A x|| / ||b|| of the x returned), ``converged``, ``reason``
    (``converged``, ``max_iter``, ``breakdown``, ``non_finite``,
    ``deadline``), ``history`` (the relative residual after each iteration,
    a float64 NumPy array, or None unless asked for), ``method``,
    ``precond`` (``none``, ``jacobi``, ``amg``: what ran), ``levels`` and
    ``amg_setup_us`` (with ``amg``: its hierarchy's levels and the
    microseconds gkcd took to build it; else 0), ``amg_reused`` (True when
    the matrix's hierarchy, kept from an earlier solve, was used: no setup)
    and ``info`` (algo and timings)."""

    def __init__(self, x: Any, res: Dict[str, Any]) -> None:
        self.x = x
        self.iterations = int(res["iterations"])
        self.residual = float(res["residual"])
        self.converged = bool(res["converged"])
        self.reason = str(res["reason"])
        self.method = str(res.get("method", ""))
        self.precond = str(res.get("precond", ""))
        self.levels = int(res.get("levels", 0))
        self.amg_setup_us = float(res.get("amg_setup_us", 0.0))
        self.amg_reused = bool(res.get("amg_reused", False))
        h = res.get("history")
        self.history = None if h is None else np.frombuffer(h, dtype="<f8").copy()
        self.info = {k: v for k, v in res.items() if k not in ("x", "history")}

    def __repr__(self) -> str:
        return (f"<gkc.SolveResult {self.method}: {self.reason} after {self.iterations} "
                f"iterations, residual {self.residual:.3g}>")


class Api(ArenaCalls):
    """Methods shared by :class:`gkc.Connection` and :class:`gkc.aio.AsyncConnection`."""

    _is_async = False
    closed = False

    def __init__(self, shm: Optional[bool] = None, shm_threshold: Optional[int] = None,
                 shm_max_bytes: Optional[int] = None) -> None:
        self._regions: Dict[int, Region] = {}
        self._owned: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._arena_settings = _arena.settings(shm, shm_threshold, shm_max_bytes)
        self._arena = Arena(*self._arena_settings)
        # gkcd's instances as it last said (gkc._reconnect), stale objects'
        # ids (what a request naming one is refused with), connections made
        # again since the first.
        self._instance = ""
        self._shared_instance = ""
        self._stale: Dict[int, str] = {}
        self.reconnects = 0

    def _note(self, res: Any) -> Any:
        """Remembers the instances a reply names; returns res."""
        from ._reconnect import instances
        inst, shared = instances(res)
        if inst:
            self._instance = inst
        if shared:
            self._shared_instance = shared
        return res

    def _made(self, obj: Any, res: Any, shared: bool) -> Any:
        """obj was made by the reply res: where it lives."""
        self._note(res)
        obj.shared = bool(shared)
        obj.made_in = self._shared_instance if shared else self._instance
        return obj

    def _restart_arena(self) -> None:
        """The connection was made again: gkcd freed the arena's regions
        with the old one; the arena starts over."""
        for k, r in list(self._regions.items()):
            if isinstance(r, _arena.Segment):
                del self._regions[k]
                r._mark_released()
        self._arena.close()
        self._arena = Arena(*self._arena_settings)

    # --- what a connection provides -----------------------------------------------------

    def _invoke(self, method: str, params: Dict[str, Any], decode: Decode,
                fd: Optional[int] = None) -> Any:
        """Sends [0, msgid, method, [params]] (with fd attached, then closed)
        and returns decode(result), or an awaitable of it."""
        raise NotImplementedError

    # --- methods of several requests -----------------------------------------------------

    def _drive(self, gen: Any) -> Any:
        """Runs a generator that yields (method, params, decode) requests and
        is sent each decoded result (or thrown its error): to completion on a
        blocking connection, as an awaitable on an asyncio one.  A method of
        several requests is written once as such a generator."""
        if self._is_async:
            return self._adrive(gen)
        try:
            req = next(gen)
        except StopIteration as stop:
            return stop.value
        while True:
            try:
                try:
                    if req[0] is None:  # (None, event): wait for another call's work
                        val = req[1].wait()
                    else:
                        val = self._invoke(*req)
                except errors.Error as e:
                    req = gen.throw(e)
                    continue
                req = gen.send(val)
            except StopIteration as stop:
                return stop.value

    async def _adrive(self, gen: Any) -> Any:
        try:
            req = next(gen)
        except StopIteration as stop:
            return stop.value
        while True:
            try:
                try:
                    if req[0] is None:  # (None, event): wait for another call's work
                        val = await req[1].wait()
                    else:
                        val = await self._invoke(*req)
                except errors.Error as e:
                    req = gen.throw(e)
                    continue
                req = gen.send(val)
            except StopIteration as stop:
                return stop.value

    # --- arguments --------------------------------------------------------------------

    def _array(self, name: str, x: ArrayArg, wire: str = "f32") -> Tuple[Any, Tuple[int, ...]]:
        """(wire value, shape) for an array argument of dtype wire ("f32",
        "f64", "i32"): a handle reference, a region reference, or raw
        little-endian bytes (converted to wire: _floats decided it may)."""
        if isinstance(x, Array):
            x._check(self)
            if x.wire_dtype != wire:
                raise _bad(f"'{name}': resident array {x.id} holds {_NAMES[x.wire_dtype]},"
                           f" {_NAMES[wire]} is needed")
            return {"handle": x.id}, x.shape
        if isinstance(x, (Matrix, Region)):
            raise _bad(f"'{name}' takes an array, not a {x._kind}")
        want = _DTYPES[wire]
        if isinstance(x, np.ndarray) and x.dtype == want and x.flags.c_contiguous and x.size:
            ref = self._region_ref(x)
            if ref is not None:
                r, off, n = ref
                wire_ref = {"region": r, "offset": off, "bytes": n}
                if wire == "f64":  # the reference says so itself (PROTOCOL.md)
                    wire_ref["dtype"] = wire
                if isinstance(self._regions.get(r), _arena.Segment):
                    return InPlace(x, wire_ref), x.shape
                return wire_ref, x.shape
        a = np.asarray(x)
        if wire == "i32":
            if a.dtype.kind not in "iub":
                raise _bad(f"'{name}' must hold integers, not {a.dtype}")
            if a.size and (a.min() < -_INT32_MAX - 1 or a.max() > _INT32_MAX):
                raise _bad(f"'{name}' holds values outside int32")
        elif a.dtype.kind not in "fiub":
            raise _bad(f"'{name}' must hold numbers, not {a.dtype}")
        if self._arena.wants(int(a.size) * want.itemsize):
            return In(a, want), a.shape  # copied into the arena, converted on the way
        a = np.ascontiguousarray(a, dtype=want)
        return memoryview(a).cast("B"), a.shape

    def _region_ref(self, a: np.ndarray) -> Optional[Tuple[int, int, int]]:
        if not self._regions:
            return None
        # An array whose base chain ends at an array owning its memory was
        # allocated by NumPy, so lies in no region: skip the address lookup
        # (it costs more than the rest of a small call's arguments).
        b = a
        while True:
            nb = b.base
            if nb is None:
                if b.flags.owndata:
                    return None
                break
            if not isinstance(nb, np.ndarray):
                break
            b = nb
        addr = int(a.__array_interface__["data"][0])
        for r in self._regions.values():
            span = r.span(a, addr)
            if span is not None:
                if span[0] % a.dtype.itemsize:
                    return None  # gkcd needs aligned elements: send the bytes instead
                return r.id, span[0], span[1]
        return None

    def _out(self, params: Dict[str, Any], key: str, out: OutArg, size: int,
             wire: str = "f32") -> Optional[Out]:
        """Adds params["out"] for out=; size is the result's element count,
        wire its dtype.  With out=None, a result big enough for the arena
        gets a placeholder (returned, for _result) that staging turns into a
        slice of it."""
        dtype = _DTYPES[wire]
        if out is None:
            if self._arena.wants(size * dtype.itemsize):
                slot = Out(size * dtype.itemsize, dtype)
                params["out"] = {key: slot}
                return slot
            return None
        if isinstance(out, str):
            if out != "handle":
                raise _bad(f"'out' must be None, 'handle', a gkc.Array or a region view, not {out!r}")
            params["out"] = {key: "handle"}
        elif isinstance(out, Array):
            out._check(self)
            if out.size != size or out.wire_dtype != wire:
                raise _bad(f"'out': resident array {out.id} holds {out.size} {_NAMES[out.wire_dtype]},"
                           f" the result is {size} {_NAMES[wire]}")
            params["out"] = {key: {"handle": out.id}}
        elif isinstance(out, np.ndarray):
            if out.dtype != dtype or not out.flags.c_contiguous or out.size != size:
                raise _bad(f"'out' must be a C-contiguous {dtype.name} region view of {size} elements")
            ref = self._region_ref(out)
            if ref is None:
                raise _bad("'out' is a NumPy array outside this connection's live regions")
            params["out"] = {key: {"region": ref[0], "offset": ref[1]}}
        else:
            raise _bad(f"'out' must be None, 'handle', a gkc.Array or a region view, not {type(out).__name__}")
        return None

    def _result(self, res: Dict[str, Any], key: str, out: OutArg, shape: Tuple[int, ...],
                slot: Optional[Out] = None, wire: str = "f32") -> Any:
        dtype = _DTYPES[wire]
        v = res.get(key)
        if out is None:
            if slot is not None:
                a = slot.result(v, shape)
                if a is not None:
                    return a
            if isinstance(v, np.ndarray):
                # A big bin, received into a buffer of its own: no copy.
                return v.view(dtype).reshape(shape)
            if not isinstance(v, (bytes, bytearray)):
                raise errors.ProtocolError(f"reply field {key!r} is not a bin")  # type: ignore[attr-defined]
            return np.frombuffer(v, dtype=dtype).reshape(shape).copy()
        if not isinstance(v, dict):
            raise errors.ProtocolError(f"reply field {key!r} is not a reference")  # type: ignore[attr-defined]
        if isinstance(out, str):
            return self._made(Array(self, int(v["handle"]), shape, wire), None, False)
        return out

    @staticmethod
    def _common(params: Dict[str, Any], algo: Optional[str], deadline_ms: Optional[int]) -> Dict[str, Any]:
        if algo is not None:
            params["algo"] = algo
        if deadline_ms is not None:
            params["deadline_ms"] = int(deadline_ms)
        return params

    @staticmethod
    def _info(info: Optional[Dict[str, Any]], res: Dict[str, Any], *data: str) -> None:
        if info is not None:
            info.update({k: v for k, v in res.items() if k not in data})

    # --- service ----------------------------------------------------------------------

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, *,
             fd: Optional[int] = None) -> Any:
        """Any method by name, with a raw argument map; returns the raw result
        (bins as bytes).  For methods this package does not wrap."""
        def decode(res: Any) -> Any:
            if isinstance(res, dict):  # big bins arrive as NumPy buffers: bytes, as promised
                return {k: v.tobytes() if isinstance(v, np.ndarray) else v for k, v in res.items()}
            return res
        return self._invoke(method, dict(params or {}), decode, fd)

    def ping(self) -> Any:
        """``{"version", "protocol", "backend", "instance", "shared_instance"}``."""
        return self._invoke("ping", {}, self._note)

    def status(self) -> Any:
        """The daemon's counters and limits (PROTOCOL.md, ``status``)."""
        return self._invoke("status", {}, self._note)

    def metrics(self) -> str:
        """gkcd's counters in the Prometheus text format (PROTOCOL.md,
        ``metrics``): the text ``gkcd --metrics-listen`` serves at GET /metrics."""
        return self._invoke("metrics", {}, lambda res: res)

    # --- compute ----------------------------------------------------------------------

    def sgemm(self, A: ArrayArg, B: ArrayArg, *, alpha: float = 1.0, beta: float = 0.0,
              C: Optional[ArrayArg] = None, trans_a: bool = False, trans_b: bool = False,
              algo: Optional[str] = None, precision: Optional[str] = None, out: OutArg = None,
              deadline_ms: Optional[int] = None, info: Optional[Dict[str, Any]] = None,
              device: Optional[int] = None, dtype: Any = None) -> Any:
        """``alpha * op(A) @ op(B) + beta * C`` in float32, an (m, n) array.

        A and B are 2-D (op(A) = A.T when trans_a).  C is needed when beta != 0.
        ``device`` runs it on that device (never split across several).
        float32 only: a float64 A, B or C is an error naming it, unless
        ``dtype="float32"`` asks for them to be converted."""
        _floats(self, "sgemm", (("A", A), ("B", B), ("C", C)), dtype, f32_only=True)
        a, ash = self._array("A", A)
        b, bsh = self._array("B", B)
        if len(ash) != 2 or len(bsh) != 2:
            raise _bad(f"'A' and 'B' must be 2-D, not of shapes {ash} and {bsh}")
        m, k = (ash[1], ash[0]) if trans_a else ash
        kb, n = (bsh[1], bsh[0]) if trans_b else bsh
        if k != kb:
            raise _bad(f"'B': op(A) is {m}x{k} but op(B) is {kb}x{n}")
        p: Dict[str, Any] = {"m": m, "n": n, "k": k, "a": a, "b": b, "alpha": float(alpha),
                             "beta": float(beta), "trans_a": bool(trans_a), "trans_b": bool(trans_b)}
        if C is not None:
            p["c"] = self._array("C", C)[0]
        if precision is not None:
            p["precision"] = precision
        self._where(p, device, False)
        slot = self._out(p, "c", out, m * n)

        def decode(res: Dict[str, Any]) -> Any:
            self._info(info, res, "c")
            return self._result(res, "c", out, (m, n), slot)
        return self._invoke("sgemm", self._common(p, algo, deadline_ms), decode)

    def reduce(self, x: ArrayArg, op: str = "sum", *, algo: Optional[str] = None,
               deadline_ms: Optional[int] = None, info: Optional[Dict[str, Any]] = None,
               device: Optional[int] = None, dtype: Any = None) -> Any:
        """The ``sum``, ``min`` or ``max`` of x's float32 values, as a float.
        ``device`` runs it on that device (never split across several).
        float32 only: a float64 x is an error, unless ``dtype="float32"``
        asks for it to be converted."""
        _floats(self, "reduce", (("x", x),), dtype, f32_only=True)
        p = self._where({"x": self._array("x", x)[0], "op": op}, device, False)

        def decode(res: Dict[str, Any]) -> float:
            self._info(info, res, "value")
            return float(res["value"])
        return self._invoke("reduce", self._common(p, algo, deadline_ms), decode)

    def spmv(self, A: Any, x: ArrayArg, *, alpha: float = 1.0, beta: float = 0.0,
             y: Optional[ArrayArg] = None, algo: Optional[str] = None, out: OutArg = None,
             deadline_ms: Optional[int] = None, info: Optional[Dict[str, Any]] = None,
             dtype: Any = None) -> Any:
        """``alpha * A @ x + beta * y`` with a sparse A, a (rows,) array of
        x's dtype (float32 or float64).

        A is a resident :class:`Matrix`, a SciPy sparse matrix (any format;
        converted to CSR), or a tuple ``(row_ptr, col_idx, values)`` whose
        column count is x's length (or ``(row_ptr, col_idx, values, shape)``).
        A resident matrix keeps its own dtype, whatever x's; one sent here
        shares x's and y's (``dtype=`` converts them all)."""
        parts = None if isinstance(A, Matrix) else self._csr_parts(A)
        args = [("x", x), ("y", y)] if parts is None else [("values", parts[2]), ("x", x), ("y", y)]
        wire = _floats(self, "spmv", args, dtype)
        xv, xsh = self._array("x", x, wire)
        cols = int(np.prod(xsh, dtype=np.int64))
        if isinstance(A, Matrix):
            A._check(self)
            rows = A.rows
            p: Dict[str, Any] = {"matrix": A.id}
        else:
            p = self._csr(parts, cols, wire)
            rows = p["rows"]
        p.update({"x": xv, "alpha": float(alpha), "beta": float(beta)})
        if y is not None:
            p["y"] = self._array("y", y, wire)[0]
        slot = self._out(p, "y", out, rows, wire)

        def decode(res: Dict[str, Any]) -> Any:
            self._info(info, res, "y")
            return self._result(res, "y", out, (rows,), slot, wire)
        return self._invoke("spmv", _typed(self._common(p, algo, deadline_ms), wire), decode)

    @staticmethod
    def _csr_parts(A: Any) -> Tuple[Any, Any, Any, Optional[Tuple[int, ...]]]:
        """(row_ptr, col_idx, values, shape or None) of a SciPy matrix or a tuple."""
        if hasattr(A, "tocsr") and hasattr(A, "shape"):
            A = A.tocsr()
            return A.indptr, A.indices, A.data, A.shape
        if isinstance(A, tuple) and len(A) in (3, 4):
            return A[0], A[1], A[2], (tuple(A[3]) if len(A) == 4 else None)
        raise _bad("'A' must be a gkc.Matrix, a scipy.sparse matrix or (row_ptr, col_idx, values[, shape])")

    def _csr(self, parts: Any, cols: Optional[int], wire: str) -> Dict[str, Any]:
        """rows, cols, row_ptr, col_idx, values (of dtype wire) for _csr_parts."""
        rp, ci, vals, shape = parts
        rpv, rpsh = self._array("row_ptr", rp, "i32")
        civ, _ = self._array("col_idx", ci, "i32")
        vv, _ = self._array("values", vals, wire)
        rows = int(np.prod(rpsh, dtype=np.int64)) - 1
        if shape is None:
            if cols is None:
                raise _bad("'A': give the shape as (row_ptr, col_idx, values, (rows, cols))")
            shape = (rows, cols)
        if int(shape[0]) != rows:
            raise _bad(f"'A': row_ptr has {rows + 1} entries for {shape[0]} rows")
        return {"rows": rows, "cols": int(shape[1]), "row_ptr": rpv, "col_idx": civ, "values": vv}

    def dot(self, x: ArrayArg, y: ArrayArg, *, algo: Optional[str] = None,
            deadline_ms: Optional[int] = None, info: Optional[Dict[str, Any]] = None,
            dtype: Any = None) -> Any:
        """x . y of two float32 or two float64 vectors of equal length,
        summed in float64, as a float."""
        wire = _floats(self, "dot", (("x", x), ("y", y)), dtype)
        p = _typed({"x": self._array("x", x, wire)[0], "y": self._array("y", y, wire)[0]}, wire)

        def decode(res: Dict[str, Any]) -> float:
            self._info(info, res, "value")
            return float(res["value"])
        return self._invoke("dot", self._common(p, algo, deadline_ms), decode)

    def nrm2(self, x: ArrayArg, *, algo: Optional[str] = None,
             deadline_ms: Optional[int] = None, info: Optional[Dict[str, Any]] = None,
             dtype: Any = None) -> Any:
        """||x||_2 of a float32 or float64 vector (its squares summed in
        float64), as a float."""
        wire = _floats(self, "nrm2", (("x", x),), dtype)
        p = _typed({"x": self._array("x", x, wire)[0]}, wire)

        def decode(res: Dict[str, Any]) -> float:
            self._info(info, res, "value")
            return float(res["value"])
        return self._invoke("nrm2", self._common(p, algo, deadline_ms), decode)

    def axpby(self, x: ArrayArg, y: ArrayArg, *, alpha: float = 1.0, beta: float = 1.0,
              algo: Optional[str] = None, out: OutArg = None, deadline_ms: Optional[int] = None,
              info: Optional[Dict[str, Any]] = None, dtype: Any = None) -> Any:
        """``alpha * x + beta * y``, shaped like y, of x's and y's dtype
        (float32 or float64; alpha and beta kept in float64 for float64).
        ``out=y`` with y resident updates it in place."""
        wire = _floats(self, "axpby", (("x", x), ("y", y), ("out", out if isinstance(out, (Array, np.ndarray)) else None)), dtype)
        xv, _ = self._array("x", x, wire)
        yv, ysh = self._array("y", y, wire)
        n = int(np.prod(ysh, dtype=np.int64))
        p: Dict[str, Any] = {"x": xv, "y": yv, "alpha": float(alpha), "beta": float(beta)}
        slot = self._out(p, "y", out, n, wire)

        def decode(res: Dict[str, Any]) -> Any:
            self._info(info, res, "y")
            return self._result(res, "y", out, ysh, slot, wire)
        return self._invoke("axpby", _typed(self._common(p, algo, deadline_ms), wire), decode)

    # --- solving ------------------------------------------------------------------------

    def solve(self, A: Any, b: ArrayArg, x0: Optional[ArrayArg] = None, *, rtol: float = 1e-6,
              atol: float = 0.0, max_iter: Optional[int] = None, method: str = "cg",
              history: bool = False, out: OutArg = None, deadline_ms: Optional[int] = None,
              precision: str = "fp64", dtype: Any = None, precond: str = "none") -> Any:
        """Solves A x = b inside gkcd by ``cg``, ``pcg`` (Jacobi) or
        ``bicgstab``; returns a :class:`SolveResult`.

        ``precond`` preconditions ``cg`` and ``bicgstab``: ``"none"`` (the
        default), ``"jacobi"`` (diag(A)^-1) or ``"amg"`` (one V-cycle of
        smoothed-aggregation algebraic multigrid, built for the call: a few
        tens of iterations on Laplacian-like matrices where Jacobi needs
        hundreds; on the CUDA backend set up on the host, its V-cycle run
        on the GPU; kept with a resident matrix for the next call) or
        ``"auto"`` (gkcd picks ``"amg"`` for a matrix near an M-matrix, whose
        off-diagonal weight is at most 10% positive, else ``"jacobi"``; the
        result's ``precond`` says which ran).  ``pcg`` is ``cg`` with
        ``"jacobi"`` and takes no other.

        A is a resident :class:`Matrix` (square), or a SciPy sparse matrix
        or ``(row_ptr, col_idx, values, (n, n))``, then uploaded for this
        call (with its values' dtype, float32 or float64) and released after
        it.  b and x0 are arrays of n values, in any form a method takes
        (``x0=None``: zero), of one dtype (``dtype=`` converts them): x comes
        back in it.  A float64 b gives a float64 x whose true residual
        ||b - A x|| / ||b|| is at most rtol whenever ``converged``; a float32
        x is rounded after the solve, so its residual may end above a tight
        rtol.  Stops when
        ||r|| <= max(rtol ||b||, atol) or after max_iter iterations (None:
        gkcd's default, min(10 n, 10^8)).  ``out`` as for spmv; an ``out``
        that is the resident x0 updates it in place.  ``precision="fp32"``
        keeps the vectors in float32 (dots and scalars in float64): less
        memory traffic per iteration, more iterations at tight tolerances.
        Not converging is not an error: look at ``converged`` and
        ``reason``."""
        return self._drive(self._solve(A, b, x0, rtol, atol, max_iter, method, history, out,
                                       deadline_ms, precision, dtype, precond))

    def _solve(self, A: Any, b: ArrayArg, x0: Optional[ArrayArg], rtol: float, atol: float,
               max_iter: Optional[int], method: str, history: bool, out: OutArg,
               deadline_ms: Optional[int], precision: str = "fp64", dtype: Any = None,
               precond: str = "none") -> Any:
        wire = _floats(self, "solve", (("b", b), ("x0", x0)), dtype)
        p: Dict[str, Any] = {"b": self._array("b", b, wire)[0], "method": method, "rtol": float(rtol),
                             "atol": float(atol), "history": bool(history)}
        _typed(p, wire)
        if precision != "fp64":
            p["precision"] = precision
        # "none" is the default of cg and bicgstab and not pcg's (jacobi):
        # left off, a request reads as it did before precond existed.
        if precond != "none":
            p["precond"] = precond
        if x0 is not None:
            p["x0"] = self._array("x0", x0, wire)[0]
        if max_iter is not None:
            p["max_iter"] = int(max_iter)
        if deadline_ms is not None:
            p["deadline_ms"] = int(deadline_ms)
        temp = None
        if isinstance(A, Matrix):
            A._check(self)
            n, p["matrix"] = A.rows, A.id
        else:
            parts = self._csr_parts(A)
            vwire = _floats(self, "csr_upload", (("values", parts[2]),))
            m = _typed(self._csr(parts, None, vwire), vwire)
            if m["rows"] != m["cols"]:
                raise _bad(f"'A' is {m['rows']} x {m['cols']}: solve needs a square matrix")
            n = m["rows"]
            temp = yield ("csr_upload", m, lambda res: int(res["matrix"]))
            p["matrix"] = temp
        slot = self._out(p, "x", out, n, wire)
        try:
            res = yield ("solve", p, lambda res: SolveResult(self._result(res, "x", out, (n,), slot,
                                                                          wire), res))
        finally:
            if temp is not None and not self.closed:
                yield ("release", {"matrix": temp}, lambda res: None)
        return res

    def batch(self, steps: Union[Batch, Any], *, deadline_ms: Optional[int] = None,
              info: Optional[Dict[str, Any]] = None) -> Any:
        """Runs the steps of a :class:`gkc.Batch` in order as one request;
        returns a :class:`BatchResult` (a float per dot or reduce step, the
        Array written per other step).  See gkc.Batch for building steps."""
        if not isinstance(steps, Batch):
            raise _bad(f"'steps' must be a gkc.Batch, not {type(steps).__name__}")
        p: Dict[str, Any] = {"steps": steps.wire(self)}
        if deadline_ms is not None:
            p["deadline_ms"] = int(deadline_ms)
        outs = [s.get("out") for s in steps.steps]

        def decode(res: Dict[str, Any]) -> BatchResult:
            self._info(info, res, "results")
            r = BatchResult(float(e["value"]) if "value" in e else outs[i]
                            for i, e in enumerate(res["results"]))
            r.info = {k: v for k, v in res.items() if k != "results"}
            return r
        return self._invoke("batch", p, decode)

    # --- resident data and regions ----------------------------------------------------

    @staticmethod
    def _where(p: Dict[str, Any], device: Optional[int], replicate: bool) -> Dict[str, Any]:
        """The optional ``device`` (an int >= 0) and ``replicate`` arguments
        (PROTOCOL.md, "Devices"); gkcd checks the device exists."""
        if device is not None:
            if isinstance(device, bool) or not isinstance(device, (int, np.integer)) or device < 0:
                raise _bad(f"'device' must be a device number (an int >= 0), not {device!r}")
            if replicate:
                raise _bad("'device' and 'replicate' cannot be given together: a replicated"
                           " object lives on every device")
            p["device"] = int(device)
        if replicate:
            p["replicate"] = True
        return p

    @staticmethod
    def _device_of(res: Dict[str, Any]) -> Any:
        """The reply's ``device`` (an int), or ``devices`` (a tuple) when the
        object is replicated or the request was split."""
        if "devices" in res:
            return tuple(int(d) for d in res["devices"])
        return int(res["device"]) if "device" in res else None

    def upload(self, x: ArrayArg, *, dtype: Optional[str] = None, shared: bool = False,
               device: Optional[int] = None, replicate: bool = False) -> Any:
        """Keeps x on gkcd; returns a resident :class:`Array`.  dtype is
        ``"f32"``, ``"f64"`` or ``"i32"`` (or a NumPy dtype of those); by
        default x's own: f64 for a float64 array, i32 for an integer one,
        f32 for anything else (float32, lists).  A dtype other than x's
        converts it.
        With several devices, ``device`` puts it on that one and
        ``replicate=True`` keeps a read-only copy on every one; the array's
        ``device`` attribute says where it went."""
        if dtype is None:
            if isinstance(x, Array):
                dtype = x.wire_dtype
            else:
                k = np.asarray(x).dtype
                dtype = "i32" if k.kind in "iu" else "f64" if k == np.float64 else "f32"
        dtype = _wire_dtype(dtype, floats=False)
        data, shape = self._array("data", x, dtype)
        p = self._where({"data": data, "dtype": dtype, "shared": bool(shared)}, device, replicate)

        def decode(res: Dict[str, Any]) -> Array:
            arr = Array(self, int(res["handle"]), shape, dtype)
            arr.device = self._device_of(res)
            return self._made(arr, res, shared)
        return self._invoke("upload", p, decode)

    def download(self, a: Array, *, out: Optional[np.ndarray] = None) -> Any:
        """A resident array's values: a new NumPy array of its shape, or
        written into the region view out (returned)."""
        if not isinstance(a, Array):
            raise _bad(f"'handle' must be a gkc.Array, not {type(a).__name__}")
        a._check(self)
        p: Dict[str, Any] = {"handle": a.id}
        slot = None
        if out is None:
            slot = self._out(p, "data", None, a.size, a.wire_dtype)
        else:
            if out.dtype != a.dtype or not out.flags.c_contiguous or out.size != a.size:
                raise _bad(f"'out' must be a C-contiguous {a.dtype} region view of {a.size} elements")
            ref = self._region_ref(out)
            if ref is None:
                raise _bad("'out' is a NumPy array outside this connection's live regions")
            p["out"] = {"data": {"region": ref[0], "offset": ref[1]}}

        def decode(res: Dict[str, Any]) -> Any:
            if out is not None:
                return out
            return self._result(res, "data", None, a.shape, slot, a.wire_dtype)
        return self._invoke("download", p, decode)

    def csr_upload(self, A: Any, *, shared: bool = False, device: Optional[int] = None,
                   replicate: bool = False, devices: Any = None, dtype: Any = None) -> Any:
        """Keeps a sparse matrix on gkcd (validated once); returns a :class:`Matrix`.
        A is a SciPy sparse matrix or ``(row_ptr, col_idx, values, (rows, cols))``.
        Its values keep their dtype: float64 (SciPy's default) stays float64,
        float32 stays float32, anything else is sent as float32; ``dtype=``
        converts them (a partitioned matrix, and the CUDA backend for now,
        take float32 only).
        ``device`` and ``replicate`` as for :meth:`upload`.  ``devices="all"``
        (or a list of device indices) partitions the rows over those devices,
        balanced by nonzeros: spmv and solve (cg, pcg) on it run on all of them;
        ``Matrix.partition`` says how it was cut."""
        parts = self._csr_parts(A)
        wire = _floats(self, "csr_upload", (("values", parts[2]),), dtype)
        p = _typed(self._csr(parts, None, wire), wire)
        p["shared"] = bool(shared)
        self._where(p, device, replicate)
        if devices is not None:
            if isinstance(devices, str):
                if devices != "all":
                    raise _bad(f"'devices' must be \"all\" or a list of device indices, not {devices!r}")
                p["devices"] = "all"
            else:
                p["devices"] = [int(d) for d in devices]

        def decode(res: Dict[str, Any]) -> Matrix:
            m = Matrix(self, int(res["matrix"]), int(res["rows"]), int(res["cols"]),
                       int(res["nnz"]), str(res.get("algo", "")), wire)
            m.device = self._device_of(res)
            m.partition = [dict(b) for b in res["partition"]] if "partition" in res else None
            return self._made(m, res, shared)
        return self._invoke("csr_upload", p, decode)

    def release(self, obj: Union[Array, Matrix, Region]) -> Any:
        """``obj.release()``."""
        return obj.release()

    def region(self, nbytes: int) -> Any:
        """A new shared-memory :class:`Region` of nbytes (a sealed memfd passed
        to gkcd over SCM_RIGHTS)."""
        from ._transport import make_memfd
        nbytes = int(nbytes)
        if nbytes < 1:
            raise _bad(f"'bytes' must be at least 1, not {nbytes}")
        fd, mm = make_memfd(nbytes)

        def decode(res: Dict[str, Any]) -> Region:
            r = Region(self, int(res["region"]), mm, nbytes)
            self._regions[r.id] = r
            return r
        try:
            return self._invoke("shm_register", {"bytes": nbytes}, decode, fd)
        except BaseException:
            mm.close()
            raise

    def _forget_all(self) -> None:
        """The connection closed: gkcd freed its objects."""
        for r in list(self._regions.values()):
            r._mark_released()
        for o in list(self._owned):
            o.released = True
