"""Building the steps of a ``batch`` request (PROTOCOL.md, "batch").

A :class:`Batch` records steps on resident arrays; ``c.batch(b)`` runs them
in order as one request and returns a :class:`BatchResult`.  The dot and
reduce methods return a :class:`Value` standing for that step's result, and
``alpha``/``beta`` of later steps may be written with it::

    b = gkc.Batch()
    b.spmv(A, p, out=q)                          # q = A p
    pq = b.dot(p, q)
    b.axpby(p, x, alpha=rho / pq, out=x)         # x += (rho / p.q) p
    b.axpby(q, r, alpha=-rho / pq, out=r)        # r -= (rho / p.q) q
    rr = b.dot(r, r)
    b.axpby(r, p, beta=rr / rho, out=p)          # p = r + (r.r / rho) p
    res = c.batch(b)
    rho = res[rr]                                # a float

An spmv step's ``x`` and ``out`` may also be NumPy arrays in a
:class:`gkc.Region` of the connection (``r.array(n, offset=...)``): gkcd
reads x from, and writes the result into, the region's slice, checked
against the region before any step runs; the result's entry for that step
is the array::

    r = c.region(1 << 20)
    g = r.array(n_ghost, offset=0)               # filled by an exchange
    b.spmv(A_ghost, g, y=L, beta=1.0, out=w)     # w = A_ghost g + L
    b.spmv(D, z, out=r.array(m, offset=4096))    # into the region

A scalar may be ``s * v[i] / v[j]`` at most: one Value over another, times
a number (gkcd resolves it as the steps run, so the values never travel).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import errors
from ._objects import Array, Matrix, Region


def _bad(msg: str) -> errors.Error:
    return errors.InvalidArgument(msg)  # type: ignore[attr-defined]


class Scalar:
    """``scale * v[num] / v[den]`` of earlier steps (num, den None: left out)."""

    def __init__(self, num: Optional[int], den: Optional[int], scale: float) -> None:
        self.num, self.den, self.scale = num, den, float(scale)

    def wire(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"scale": self.scale}
        if self.num is not None:
            d["step"] = self.num
        if self.den is not None:
            d["over"] = self.den
        return d

    def _form(self, what: str) -> TypeError:
        return TypeError(f"{what}: a batch scalar is at most s * v[i] / v[j]")

    def __mul__(self, s: Any) -> "Scalar":
        if isinstance(s, (Scalar, Value)):
            raise self._form("a product of two step values")
        return Scalar(self.num, self.den, self.scale * float(s))

    __rmul__ = __mul__

    def __neg__(self) -> "Scalar":
        return Scalar(self.num, self.den, -self.scale)

    def __truediv__(self, o: Any) -> "Scalar":
        if isinstance(o, Value):
            o = Scalar(o.index, None, 1.0)
        if isinstance(o, Scalar):
            if self.den is not None or o.den is not None or o.num is None:
                raise self._form("dividing by this")
            return Scalar(self.num, o.num, self.scale / o.scale)
        return Scalar(self.num, self.den, self.scale / float(o))

    def __rtruediv__(self, s: Any) -> "Scalar":
        if self.den is not None or self.num is None:
            raise self._form("a number over this")
        return Scalar(None, self.num, float(s) / self.scale)

    def __repr__(self) -> str:
        return f"<gkc batch scalar {self.scale} * v[{self.num}] / v[{self.den}]>"


class Value(Scalar):
    """The result of a dot or reduce step ``index`` (an index into the result)."""

    def __init__(self, index: int) -> None:
        super().__init__(index, None, 1.0)
        self.index = index

    def __index__(self) -> int:
        return self.index


Num = Union[float, int, Scalar]


class Batch:
    """Steps of one ``batch`` request; every array a resident :class:`gkc.Array`."""

    def __init__(self) -> None:
        self.steps: List[Dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self.steps)

    def _add(self, step: Dict[str, Any]) -> int:
        self.steps.append(step)
        return len(self.steps) - 1

    def dot(self, x: Array, y: Array) -> Value:
        """x . y (a float in the result)."""
        return Value(self._add({"op": "dot", "x": x, "y": y}))

    def reduce(self, x: Array, fn: str = "sum") -> Value:
        """The sum, min or max of x (a float in the result)."""
        return Value(self._add({"op": "reduce", "x": x, "fn": fn}))

    def axpby(self, x: Array, y: Array, *, alpha: Num = 1.0, beta: Num = 1.0,
              out: Optional[Array] = None) -> int:
        """out = alpha x + beta y (out: y by default; may be x or y)."""
        return self._add({"op": "axpby", "x": x, "y": y, "alpha": alpha, "beta": beta,
                          "out": out if out is not None else y})

    def spmv(self, A: Matrix, x: Union[Array, np.ndarray], *, out: Union[Array, np.ndarray],
             alpha: Num = 1.0, beta: Num = 0.0, y: Optional[Array] = None) -> int:
        """out = alpha A x + beta y (y needed when beta is not 0; out may be y, not x).
        x and out may be NumPy arrays in a gkc.Region of the connection."""
        s = {"op": "spmv", "matrix": A, "x": x, "alpha": alpha, "beta": beta, "out": out}
        if y is not None:
            s["y"] = y
        return self._add(s)

    def sgemm(self, a: Array, b: Array, m: int, n: int, k: int, *, out: Array,
              alpha: Num = 1.0, beta: Num = 0.0, c: Optional[Array] = None,
              trans_a: bool = False, trans_b: bool = False) -> int:
        """out (m x n) = alpha op(a) op(b) + beta c."""
        s = {"op": "sgemm", "a": a, "b": b, "m": int(m), "n": int(n), "k": int(k),
             "alpha": alpha, "beta": beta, "trans_a": bool(trans_a), "trans_b": bool(trans_b),
             "out": out}
        if c is not None:
            s["c"] = c
        return self._add(s)

    def wire(self, conn: Any) -> List[Dict[str, Any]]:
        """The steps as the protocol's maps, each object checked against conn."""
        out = []
        for i, s in enumerate(self.steps):
            w: Dict[str, Any] = {}
            for k, v in s.items():
                if isinstance(v, np.ndarray) and s["op"] == "spmv" and k in ("x", "out"):
                    w[k] = _slice(conn, i, k, v)
                elif isinstance(v, (Array, Matrix)):
                    try:
                        v._check(conn)
                    except errors.Error as e:
                        raise _bad(f"steps[{i}] ({s['op']}): argument '{k}': {e.message}")
                    if isinstance(v, Matrix):
                        w[k] = v.id
                    elif k == "out":
                        w[k] = v.id
                    else:
                        w[k] = {"handle": v.id}
                elif isinstance(v, Scalar):
                    w[k] = v.wire()
                elif k in ("alpha", "beta"):
                    w[k] = float(v)
                else:
                    w[k] = v
            out.append(w)
        return out


def _slice(conn: Any, i: int, key: str, a: np.ndarray) -> Dict[str, Any]:
    """An spmv step's x or out as a slice of one of conn's gkc.Regions."""
    where = f"steps[{i}] (spmv): argument '{key}'"
    wire = {np.dtype("<f4"): "f32", np.dtype("<f8"): "f64"}.get(a.dtype)
    if wire is None or not a.flags.c_contiguous or not a.size:
        raise _bad(f"{where}: a region array must be a non-empty C-contiguous float32 or"
                   f" float64 array, not {a.dtype} of shape {a.shape}")
    ref = conn._region_ref(a)
    if ref is None or not isinstance(conn._regions.get(ref[0]), Region):
        raise _bad(f"{where}: a NumPy array must lie inside a gkc.Region of this connection"
                   " (c.region(...).array(...)); otherwise upload it")
    r, off, n = ref
    if key == "out":
        return {"region": r, "offset": off, "bytes": n}
    d: Dict[str, Any] = {"region": r, "offset": off, "bytes": n}
    if wire == "f64":  # the reference settles the step's dtype (PROTOCOL.md)
        d["dtype"] = wire
    return d


class BatchResult(list):
    """One entry per step: a float for dot and reduce, the :class:`gkc.Array`
    written for the others.  Indexed by step number or by a :class:`Value`."""

    info: Dict[str, Any]
