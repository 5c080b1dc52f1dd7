"""Every compute method on float32 arrays against NumPy/SciPy in float64, on
fresh random inputs (float64 arrays: test_f64.py)."""
import numpy as np
import pytest
import scipy.sparse as sp

import gkc
from conftest import EPS32, f32


def assert_close(got, ref, mag, terms):
    """|got - ref| within float32 rounding of `terms` products of magnitude mag."""
    got = np.asarray(got, dtype=np.float64)
    tol = (terms + 2) * 2 * EPS32 * mag + 1e-30
    bad = np.abs(got - ref) > tol
    assert not bad.any(), (f"{bad.sum()} of {bad.size} entries off; worst "
                           f"{np.max(np.abs(got - ref) - tol):.3g} over tolerance")


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("beta", [0.0, -0.75])
def test_sgemm(conn, rng, trans_a, trans_b, beta):
    m, n, k = rng.integers(1, 80, size=3)
    A = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    B = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    C = rng.standard_normal((m, n)).astype(np.float32)
    alpha = float(rng.uniform(-2, 2))
    info = {}
    got = conn.sgemm(A, B, alpha=alpha, beta=beta, C=C if beta else None,
                     trans_a=trans_a, trans_b=trans_b, info=info)
    assert isinstance(got, np.ndarray) and got.shape == (m, n) and got.dtype == np.float32
    a, b, c = f32(A), f32(B), f32(C)
    oa, ob = (a.T if trans_a else a), (b.T if trans_b else b)
    ref = alpha * (oa @ ob) + (beta * c if beta else 0)
    mag = abs(alpha) * (np.abs(oa) @ np.abs(ob)) + abs(beta) * np.abs(c)
    assert_close(got, ref, mag, k + 2)
    assert isinstance(info.get("algo"), str) and info.get("kernel_us", -1) >= 0


def test_sgemm_shape_mismatch_is_invalid_argument(conn):
    with pytest.raises(gkc.InvalidArgument, match="'B'"):
        conn.sgemm(np.ones((2, 3), np.float32), np.ones((4, 2), np.float32))
    with pytest.raises(gkc.InvalidArgument, match="2-D"):
        conn.sgemm(np.ones(3, np.float32), np.ones((3, 2), np.float32))


def test_sgemm_beta_without_c_names_c(conn):
    with pytest.raises(gkc.InvalidArgument, match="'c'"):
        conn.sgemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), beta=1.0)


@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_reduce(conn, rng, op):
    n = int(rng.integers(1, 200000))
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    got = conn.reduce(x, op=op)
    xs = f32(x)
    assert isinstance(got, float)
    if op == "sum":
        # A rigorous bound for any order of summation.
        assert abs(got - xs.sum()) <= (n + 2) * EPS32 * np.abs(xs).sum()
    else:
        assert got == getattr(xs, op)()


def test_reduce_sum_exact_on_integers(conn, rng):
    # Every partial sum of up to 16000 integers in [-1000, 1000] is below
    # 2^24 and so exact in float32, whatever the order: the sum must be exact.
    n = int(rng.integers(1, 16000))
    x = rng.integers(-1000, 1001, size=n).astype(np.float32)
    assert conn.reduce(x) == x.astype(np.float64).sum()


def random_csr(rng, rows, cols, density):
    A = sp.random(rows, cols, density=density, format="csr", random_state=np.random.RandomState(rng.integers(2**31)),
                  data_rvs=lambda k: rng.standard_normal(k))
    return A.astype(np.float32)


@pytest.mark.parametrize("form", ["csr", "coo", "tuple", "tuple_shape"])
def test_spmv(conn, rng, form):
    rows, cols = (int(v) for v in rng.integers(1, 400, size=2))
    A = random_csr(rng, rows, cols, 0.05)
    x = rng.standard_normal(cols).astype(np.float32)
    y = rng.standard_normal(rows).astype(np.float32)
    alpha, beta = float(rng.uniform(-2, 2)), float(rng.uniform(-2, 2))
    arg = {"csr": A, "coo": A.tocoo(),
           "tuple": (A.indptr, A.indices, A.data),
           "tuple_shape": (A.indptr, A.indices, A.data, A.shape)}[form]
    got = conn.spmv(arg, x, alpha=alpha, beta=beta, y=y)
    assert got.shape == (rows,) and got.dtype == np.float32
    Af = sp.csr_matrix((f32(A.data), A.indices, A.indptr), shape=A.shape)
    ref = alpha * (Af @ f32(x)) + beta * f32(y)
    mag = abs(alpha) * (abs(Af) @ np.abs(f32(x))) + abs(beta) * np.abs(f32(y))
    assert_close(got, ref, mag, max(1, int(np.diff(A.indptr).max(initial=0))) + 2)


def test_spmv_bad_csr_is_invalid_argument(conn):
    with pytest.raises(gkc.InvalidArgument, match="col_idx"):
        conn.spmv((np.array([0, 1]), np.array([5]), np.array([1.0])), np.ones(2))
    with pytest.raises(gkc.InvalidArgument, match="row_ptr"):
        conn.spmv((np.array([0, 2]), np.array([0]), np.array([1.0])), np.ones(2))


def test_dot(conn, rng):
    n = int(rng.integers(1, 100000))
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    got = conn.dot(x, y)
    ref = f32(x) @ f32(y)
    assert abs(got - ref) <= (n + 2) * 2 * EPS32 * (np.abs(f32(x)) @ np.abs(f32(y)))


def test_dot_lengths_differ_is_invalid_argument(conn):
    with pytest.raises(gkc.InvalidArgument):
        conn.dot(np.ones(3), np.ones(4))


def test_nrm2(conn, rng):
    for n in (1, 7, int(rng.integers(1, 100000)), 1 << 20):
        x = rng.standard_normal(n).astype(np.float32)
        info = {}
        got = conn.nrm2(x, info=info)
        ref = float(np.sqrt(np.sum(x.astype(np.float64) ** 2)))
        assert abs(got - ref) <= 1e-12 * ref, (n, got, ref)
        assert info["n"] == n


def test_nrm2_on_a_handle_and_bad_input(conn, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    h = conn.upload(x)
    ref = float(np.linalg.norm(x.astype(np.float64)))
    assert abs(conn.nrm2(h) - ref) <= 1e-12 * ref
    conn.release(h)
    with pytest.raises(gkc.InvalidArgument, match="'y'"):
        conn.call("nrm2", {"x": x.tobytes(), "y": x.tobytes()})
    with pytest.raises(gkc.InvalidArgument, match="'x'"):
        conn.call("nrm2", {})


def test_axpby(conn, rng):
    n = int(rng.integers(1, 100000))
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal((n,)).astype(np.float32)
    alpha, beta = float(rng.uniform(-3, 3)), float(rng.uniform(-3, 3))
    got = conn.axpby(x, y, alpha=alpha, beta=beta)
    assert got.shape == (n,) and got.dtype == np.float32
    ref = alpha * f32(x) + beta * f32(y)
    assert_close(got, ref, np.abs(alpha * f32(x)) + np.abs(beta * f32(y)), 2)


def test_ping_and_status(conn):
    p = conn.ping()
    assert p["protocol"] == gkc.PROTOCOL and p["backend"] in ("cpu", "cuda")
    st = conn.status()
    assert st["connections"] >= 1 and "limits" in st


def test_raw_call_reaches_any_method(conn, rng):
    x = rng.standard_normal(7).astype(np.float32)
    res = conn.call("reduce", {"x": x.tobytes(), "op": "max"})
    assert res["value"] == float(x.max()) and res["n"] == 7
