#!/usr/bin/env python3
"""bench_ring.py: the Python package over the shared-memory ring against
the socket and a bare Unix-socket echo (issue #28).

One 16-float reduce at a time, round trip from the call to the value in
hand, p50 and p99 over --count requests per shape, the shapes taking turns
in rounds of --round:
  echo            this Python process sending the same request's bytes to a
                  bare echo server (bench_ring --echo, C) and reading them
                  back: the socket's floor from Python
  python socket   gkc.connect(ring=False).reduce(x)
  python ring     gkc.connect().reduce(x) (the ring, the package's default)

  bench/bench_ring.py --gkcd build/daemon/gkcd --bench-ring build/bench/bench_ring [--spin-us 50]

--json prints one JSON object instead of the Markdown table.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import msgpack  # noqa: E402
import numpy as np  # noqa: E402

import gkc  # noqa: E402


def wait_socket(path, proc, what):
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"bench_ring.py: {what} did not come up")
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gkcd", required=True)
    ap.add_argument("--bench-ring", required=True, help="bench_ring, for its echo server")
    ap.add_argument("--spin-us", type=int, default=None, help="gkcd --spin-us")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--round", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-ring-py-")
    procs = []
    try:
        gsock, esock = os.path.join(d, "gkcd.sock"), os.path.join(d, "echo.sock")
        args = [a.gkcd, "--socket", gsock, "--rings", "on"] + (["--spin-us", str(a.spin_us)] if a.spin_us is not None else [])
        log = open(os.path.join(d, "gkcd.log"), "w")
        procs.append(subprocess.Popen(args, stderr=log))
        procs.append(subprocess.Popen([a.bench_ring, "--echo", esock], stdout=subprocess.DEVNULL))
        wait_socket(gsock, procs[0], "gkcd")
        wait_socket(esock, procs[1], "the echo server")
        deadline = time.monotonic() + 20
        while True:
            try:
                with gkc.connect(gsock, ring=False) as c:
                    c.ping()
                break
            except gkc.Error:
                if time.monotonic() > deadline:
                    sys.exit("bench_ring.py: gkcd does not answer")
                time.sleep(0.02)
        x = (np.arange(1, 17, dtype=np.float32) / 8)
        want = float(x.astype(np.float64).sum())
        frame = msgpack.packb([0, 0, "reduce", [{"x": x.tobytes()}]], use_bin_type=True)
        es = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        es.connect(esock)
        back = bytearray(len(frame))
        mv = memoryview(back)
        cs, cr = gkc.connect(gsock, ring=False), gkc.connect(gsock)

        def echo():
            es.sendall(frame)
            got = 0
            while got < len(frame):
                n = es.recv_into(mv[got:])
                if not n:
                    sys.exit("bench_ring.py: the echo server closed")
                got += n

        def red(c):
            def f():
                v = c.reduce(x)
                if abs(v - want) > 1e-5 * want:
                    sys.exit(f"bench_ring.py: reduce gave {v}, not {want}")
            return f
        shapes = [("echo", echo), ("python socket", red(cs)), ("python ring", red(cr))]
        for _ in range(1000):
            for _, f in shapes:
                f()
        if back != frame:
            sys.exit("bench_ring.py: the echo changed the bytes")
        if not cr.ring_active:
            sys.exit("bench_ring.py: gkcd took no ring (an older gkcd?)")
        lat = {n: [] for n, _ in shapes}
        pc = time.perf_counter_ns
        done = 0
        while done < a.count:
            k = min(a.round, a.count - done)
            for n, f in shapes:
                out = lat[n]
                for _ in range(k):
                    t0 = pc()
                    f()
                    out.append((pc() - t0) / 1e3)
            done += k
        rows = []
        for n, _ in shapes:
            v = np.sort(np.array(lat[n]))
            rows.append({"shape": n, "p50_us": float(np.percentile(v, 50)), "p99_us": float(np.percentile(v, 99))})
        bells = cr._ring.wakes_sent if cr._ring else None
        cs.close()
        cr.close()
        es.close()
        p = {r["shape"]: r["p50_us"] for r in rows}
        if a.json:
            print(json.dumps({"bench": "bench_ring.py", "spin_us": a.spin_us, "count": a.count,
                              "rows": rows, "ring_doorbells": bells}))
        else:
            print(f"Python, 16-float reduce, one at a time, {a.count} each (gkcd --spin-us "
                  f"{a.spin_us if a.spin_us is not None else 'default'})\n")
            print("| shape | p50 us | p99 us |\n|---|---|---|")
            for r in rows:
                print(f"| {r['shape']} | {r['p50_us']:.1f} | {r['p99_us']:.1f} |")
            print(f"\nring / echo p50: {p['python ring'] / p['echo']:.2f}x; ring / socket p50: "
                  f"{p['python ring'] / p['python socket']:.2f}x; doorbells rung by the ring client: {bells}")
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.send_signal(signal.SIGTERM)
                try:
                    pr.wait(10)
                except subprocess.TimeoutExpired:
                    pr.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
