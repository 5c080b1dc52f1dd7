"""e2e_wire.py: what the raw msgpack-rpc tests share, written only from
proto/PROTOCOL.md: pass/fail counting (check, ctx), float32 and int32 bytes,
a gkcd of their own on a temporary socket (Daemon), a connection that sends
requests and matches replies (Conn), reply checks, and float64 references.

Uses the standard library and the `msgpack` package (numpy when present);
exits 77 (skipped) when msgpack is missing.
"""
import math
import os
import random
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

try:
    import msgpack
except ImportError:
    print("SKIP: the python3 msgpack package is missing "
          "(apt-get install python3-msgpack)", file=sys.stderr)
    sys.exit(77)

try:
    import numpy as np
except ImportError:
    np = None

PASSED = 0
FAILED = 0
CTX = ""


def check(cond, what):
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        # Name the line in the test function, not in a helper.
        stack = traceback.extract_stack()[:-1]
        frame = next((f for f in reversed(stack) if f.name.startswith("test_")), stack[-1])
        print(f"{os.path.basename(frame.filename)}:{frame.lineno}: FAIL [{CTX}]: {what}",
              file=sys.stderr)
    return cond


def ctx(name):
    global CTX
    CTX = name


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def i32(values):
    return struct.pack(f"<{len(values)}i", *values)


def unf32(b):
    return list(struct.unpack(f"<{len(b) // 4}f", b))


def rnd(n, rng):
    # Values exactly representable in float32, so the reference sees the
    # same inputs as the daemon.
    return [struct.unpack("<f", struct.pack("<f", rng.uniform(-1, 1)))[0] for _ in range(n)]


# --------------------------------------------------------------------------
# the daemon

class Daemon:
    def __init__(self, args=(), env=None, socket_arg=True):
        self.bin = os.environ.get("GKCD_BIN")
        if not self.bin:
            print("GKCD_BIN is not set (run through ctest)", file=sys.stderr)
            sys.exit(1)
        self.dir = tempfile.mkdtemp(prefix="gkc-py-")
        self.sock = os.path.join(self.dir, "gkcd.sock")
        self.log = open(os.path.join(self.dir, "gkcd.log"), "w+")
        cmd = [self.bin] + (["--socket", self.sock] if socket_arg else []) + list(args)
        e = dict(os.environ)
        e.pop("GKC_SOCKET", None)
        e.pop("XDG_RUNTIME_DIR", None)
        e.update(env or {})
        self.proc = subprocess.Popen(cmd, stderr=self.log, env=e)

    def wait_ready(self, path=None):
        path = path or self.sock
        for _ in range(500):
            if self.proc.poll() is not None:
                raise RuntimeError(f"gkcd exited with {self.proc.returncode}: {self.logtext()}")
            try:
                c = Conn(path)
                r = c.call("ping", {})
                c.close()
                if r[2] is None:
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("gkcd did not answer a ping within 10 s")

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            check(False, f"gkcd did not exit within {timeout} s of signal {sig}")
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


# --------------------------------------------------------------------------
# a connection: raw bytes in, msgpack values out, with the raw frame of each

class Closed(Exception):
    pass


class Conn:
    def __init__(self, path, timeout=30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.u = msgpack.Unpacker(raw=False, max_buffer_size=0)
        self.raw = bytearray()  # bytes received and not yet consumed
        self.base = 0           # stream offset of raw[0]
        self.next_id = 1

    def close(self):
        self.s.close()

    def send(self, b):
        self.s.sendall(b)

    def send_req(self, method, params, msgid=None):
        if msgid is None:
            msgid = self.next_id
            self.next_id += 1
        self.send(msgpack.packb([0, msgid, method, [params]], use_bin_type=True))
        return msgid

    def recv(self):
        """One message and its raw bytes; raises Closed at end-of-stream."""
        while True:
            try:
                msg = self.u.unpack()
                end = self.u.tell()
                frame = bytes(self.raw[: end - self.base])
                del self.raw[: end - self.base]
                self.base = end
                return msg, frame
            except msgpack.OutOfData:
                pass
            try:
                d = self.s.recv(1 << 20)
            except ConnectionResetError:
                d = b""
            if not d:
                raise Closed()
            self.raw += d
            self.u.feed(d)

    def reply(self):
        return self.recv()[0]

    def call(self, method, params, msgid=None):
        msgid = self.send_req(method, params, msgid)
        r = self.reply()
        return r

    def is_closed(self):
        try:
            self.recv()
            return False
        except Closed:
            return True
        except socket.timeout:
            return False


def is_error(r, code, msgid, *needles):
    """r is [1, msgid, {"code", "message"}, nil] as expected."""
    ok = (isinstance(r, list) and len(r) == 4 and r[0] == 1 and isinstance(r[2], dict)
          and r[3] is None and r[2].get("code") == code and r[1] == msgid
          and isinstance(r[2].get("message"), str)
          and all(n in r[2]["message"] for n in needles))
    return check(ok, f"expected error {code} msgid {msgid} naming {needles}, got {r!r:.300}")


def is_ok(r, msgid):
    ok = (isinstance(r, list) and len(r) == 4 and r[0] == 1 and r[1] == msgid and r[2] is None)
    check(ok, f"expected a result for msgid {msgid}, got {r!r:.300}")
    return r[3] if ok else None


def ping_ok(c):
    try:
        msgid = c.send_req("ping", {})
        r = c.reply()
    except (Closed, OSError) as e:
        return check(False, f"connection should stay open, ping failed: {e!r}")
    return check(r[0] == 1 and r[1] == msgid and r[2] is None and r[3].get("protocol") == 1,
                 f"connection should stay open, ping got {r!r:.200}")


def closed_ok(c):
    return check(c.is_closed(), "connection should be closed after the error reply")


# --------------------------------------------------------------------------
# references

def sgemm_ref(m, n, k, alpha, a, ta, b, tb, beta, cin):
    out = []
    for i in range(m):
        for j in range(n):
            s = mag = 0.0
            for p in range(k):
                av = a[p * m + i] if ta else a[i * k + p]
                bv = b[j * k + p] if tb else b[p * n + j]
                s += av * bv
                mag += abs(av * bv)
            v = alpha * s
            mag = abs(alpha) * mag
            if beta != 0:
                v += beta * cin[i * n + j]
                mag += abs(beta * cin[i * n + j])
            out.append((v, mag))
    return out


def close_all(got, ref, rel=1e-5):
    if len(got) != len(ref):
        return False
    return all(abs(g - v) <= rel * mag + 1e-6 for g, (v, mag) in zip(got, ref))


def spmv_ref(rows, rp, ci, vals, x, alpha, beta, y):
    out = []
    for r in range(rows):
        s = mag = 0.0
        for j in range(rp[r], rp[r + 1]):
            s += vals[j] * x[ci[j]]
            mag += abs(vals[j] * x[ci[j]])
        v, mag = alpha * s, abs(alpha) * mag
        if beta != 0:
            v += beta * y[r]
            mag += abs(beta * y[r])
        out.append((v, mag))
    return out
