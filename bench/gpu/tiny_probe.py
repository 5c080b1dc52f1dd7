#!/usr/bin/env python3
"""tiny_probe.py: where a 16-float reduce's round trip goes (issue #28).

Sends N reduces of 16 floats one at a time through the Python package
(ring on, as by default) and prints the medians of the client's round trip
and of every timing field gkcd put in the replies (server_us, queue_us,
kernel_us, ...), beside N pings.

    tiny_probe.py --socket PATH [--n 5000] [--floats 16]
"""
import argparse
import statistics
import time

import numpy as np

import gkc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--floats", type=int, default=16)
    a = ap.parse_args()
    with gkc.connect(a.socket) as c:
        x = np.random.default_rng(1).standard_normal(a.floats).astype(np.float32)
        for _ in range(200):
            c.reduce(x)
        rt, fields = [], {}
        for _ in range(a.n):
            info: dict = {}
            t0 = time.perf_counter()
            c.reduce(x, info=info)
            rt.append((time.perf_counter() - t0) * 1e6)
            for k, v in info.items():
                if isinstance(v, (int, float)):
                    fields.setdefault(k, []).append(float(v))
        ping = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            c.ping()
            ping.append((time.perf_counter() - t0) * 1e6)
        print(f"ring active: {c.ring_active}; {a.n} reduces of {a.floats} floats, algo {info.get('algo')}")
        print(f"round trip p50 {statistics.median(rt):.1f} us; ping p50 {statistics.median(ping):.1f} us")
        for k, v in sorted(fields.items()):
            print(f"  {k:12s} p50 {statistics.median(v):9.2f}  p10 {np.percentile(v, 10):9.2f}  p90 {np.percentile(v, 90):9.2f}")


if __name__ == "__main__":
    main()
