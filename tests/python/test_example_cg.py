"""examples/python_cg.py: CG on a SuiteSparse SPD matrix, resident on gkcd."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

EXAMPLE = os.path.join(ROOT, "examples", "python_cg.py")
sys.path.insert(0, os.path.dirname(EXAMPLE))


def run(gkcd, *args):
    return subprocess.run([sys.executable, EXAMPLE, "--socket", gkcd.sock, *args],
                          capture_output=True, text=True, timeout=600)


def test_cg_on_a_suitesparse_spd_matrix(gkcd):
    import python_cg
    path = python_cg.find_matrix()
    if path is None:
        pytest.skip("1138_bus.mtx is in none of $GKC_TEST_DATA, $GKC_SHARED_MATRICES, "
                    "tests/data, ../shared/matrices")
    p = run(gkcd, "--matrix", path, "--tol", "1e-5", "--json")
    assert p.returncode == 0, p.stderr + p.stdout
    out = json.loads(p.stdout)
    assert out["matrix"] == "1138_bus.mtx" and out["rows"] == 1138 and out["nnz"] == 4054
    assert out["converged"] and 0 < out["iterations"] < 20000
    # gkcd's float32 check said < tol; the float64 residual here may differ
    # from it only by float32 rounding of b - A x.
    assert out["residual_scaled"] < 1.5e-5
    assert out["residual"] < 1e-4


def test_cg_prints_iterations_and_residual(gkcd):
    import python_cg
    path = python_cg.find_matrix()
    if path is None:
        pytest.skip("1138_bus.mtx not found")
    p = run(gkcd, "--matrix", path, "--max-iter", "5")
    assert p.returncode == 1  # not converged in 5 iterations
    assert "iterations:   5 " in p.stdout and "residual:" in p.stdout and "float64" in p.stdout


def test_cg_refuses_a_nonsymmetric_matrix(gkcd):
    p = run(gkcd, "--matrix", os.path.join(ROOT, "tests", "data", "west0067.mtx"))
    assert p.returncode == 2 and "not a symmetric" in p.stderr
