"""`pip install --no-build-isolation ./python` works offline, and the result imports."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


def test_pip_install_offline(tmp_path, gkcd):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("pip is not installed for this interpreter (Debian: python3-pip)")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--no-deps", "--target", str(target), str(src)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (target / "gkc" / "__init__.py").is_file() and (target / "gkc" / "py.typed").is_file()
    code = ("import sys, gkc, gkc.aio; assert gkc.__file__.startswith(sys.argv[1]), gkc.__file__;"
            "c = gkc.connect(sys.argv[2]); print(c.reduce([1, 2, 3]))")
    p = subprocess.run([sys.executable, "-c", code, str(target), gkcd.sock],
                       capture_output=True, text=True, cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(target)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "6.0"


def test_cmake_installs_the_package_for_the_system_python(tmp_path, gkcd):
    build, cmake = os.environ.get("GKC_BUILD_DIR"), os.environ.get("GKC_CMAKE", "cmake")
    if not build:
        pytest.skip("GKC_BUILD_DIR is not set (ctest sets it)")
    p = subprocess.run([cmake, "--install", build, "--prefix", str(tmp_path), "--component", "python"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    site = tmp_path / "lib" / "python3" / "dist-packages"
    assert sorted(f.name for f in (site / "gkc").iterdir()) == sorted(
        f for f in os.listdir(os.path.join(ROOT, "python", "gkc")) if f.endswith(".py") or f == "py.typed")
    p = subprocess.run([sys.executable, "-c", "import sys, gkc; print(gkc.__file__); "
                        "print(gkc.connect(sys.argv[1]).dot([1, 2], [3, 4]))", gkcd.sock],
                       capture_output=True, text=True, cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(site)))
    assert p.returncode == 0, p.stderr
    where, value = p.stdout.split()
    assert where.startswith(str(site)) and value == "11.0"
    # That directory, under /usr/local or /usr, is on Debian's python3 path for any 3.x.
    if os.path.exists("/etc/debian_version") and sys.executable == "/usr/bin/python3":
        assert "/usr/local/lib/python3/dist-packages" in sys.path or "/usr/lib/python3/dist-packages" in sys.path
