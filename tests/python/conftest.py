"""Fixtures for the gkc Python package's tests: a real gkcd per session.

Run through ctest (`ctest -R python_pytest`), which sets GKCD_BIN to the
daemon of the build tree; the package is imported from python/ in the
sources.  GKC_TEST_SEED fixes the random inputs (the seed is printed).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import gkc  # noqa: E402

# The tests written before reconnecting existed expect a connection gkcd
# closed (fake servers, notifications, stopped daemons) to stay closed;
# test_reconnect.py asks for reconnecting explicitly (reconnect=).
os.environ.setdefault("GKC_RECONNECT", "off")


class Daemon:
    """gkcd from $GKCD_BIN on a socket in a fresh temporary directory."""

    def __init__(self, *args, env=None):
        self.bin = os.environ.get("GKCD_BIN")
        if not self.bin:
            pytest.fail("GKCD_BIN is not set: run these tests through ctest")
        self.dir = tempfile.mkdtemp(prefix="gkc-pytest-")
        self.sock = os.path.join(self.dir, "gkcd.sock")
        self.log = open(os.path.join(self.dir, "gkcd.log"), "w+")
        e = dict(os.environ)
        e.pop("GKC_SOCKET", None)
        e.pop("GKCD_FAULT", None)
        e.update(env or {})
        self.stop_timeout = 30
        self.may_hang = False  # a test that leaves a request stuck sets this
        self.args = args
        self.proc = subprocess.Popen([self.bin, "--socket", self.sock, *args], stderr=self.log, env=e)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gkcd exited with {self.proc.returncode}: {self.logtext()}")
            try:
                with gkc.connect(self.sock) as c:
                    c.ping()
                break
            except gkc.Error:
                if time.monotonic() > deadline:
                    raise RuntimeError("gkcd did not answer a ping within 20 s")
                time.sleep(0.02)

    def connect(self, **kw):
        return gkc.connect(self.sock, **kw)

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


@pytest.fixture(scope="session")
def gkcd():
    d = Daemon()
    yield d
    assert d.stop() == 0, "gkcd did not exit 0 on SIGTERM"


@pytest.fixture
def conn(gkcd):
    with gkcd.connect(timeout=120) as c:
        yield c


@pytest.fixture
def daemon_factory():
    """Starts gkcds with their own options; stops them after the test."""
    started = []

    def start(*args, env=None):
        d = Daemon(*args, env=env)
        started.append(d)
        return d
    yield start
    bad = []
    for d in started:
        log = d.logtext()
        rc = d.stop()
        if rc != 0 and not d.may_hang:
            bad.append(f"gkcd {d.args} exited {rc} on SIGTERM: {log[-2000:]}")
    assert not bad, bad


_SEED = int(os.environ.get("GKC_TEST_SEED", str(time.time_ns() % 2**32)))


def pytest_report_header(config):
    return f"seed: GKC_TEST_SEED={_SEED}; gkcd: {os.environ.get('GKCD_BIN')}"


@pytest.fixture
def rng(request):
    # A fresh stream per test, reproducible from the session seed and the test's name.
    return np.random.default_rng([_SEED, *request.node.nodeid.encode()])


def fault_injection():
    return os.environ.get("GKC_FAULT_INJECTION", "").upper() in ("1", "ON", "TRUE", "YES")


EPS32 = 2.0 ** -24  # unit roundoff of float32


def f32(a):
    """a rounded to float32 and back: the values gkcd computes with."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)
