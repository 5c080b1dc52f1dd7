#!/usr/bin/env python3
"""Big arrays by value on the GPU host: gkcd through the Python package
against CuPy in the caller's own process, in the same run.

    bench/gpu/datapath_vs_cupy.py --gkcd build/rel/daemon/gkcd [--repeat 5] [--json FILE]

Starts its own gkcd (--backend cuda) on a temporary socket and times, for
sgemm 2048^3, 4096^3, 8192^3 and reduce of 64 and 256 MiB of float32, what a
caller sees end to end (NumPy arrays in, a NumPy array or float out):
  - gkcd, inline: a connection with shm=False (every byte in the frames);
  - gkcd, arena: the transparent shared-memory arena (the package's default);
  - CuPy: cupy.asarray of each input, the operation, cupy.asnumpy (or
    float() of the sum), synchronised;
each the median of --repeat calls after one warm-up, and the first call of
each size on a fresh connection (the arena's first use of that size, in a
process that keeps no region of an earlier connection), on the next
connection after that one closed (its first call takes the region the
arena's connection left to the process, gkc._arena.keep), and after
shm_reserve on a fresh connection (the arena set up ahead).
With --c-bench PATH (bench/bench_byvalue), the same sizes from C through
libgkc's plain-pointer calls on the same gkcd, arena and inline, first and
repeated, then 8 connections at once by value, beside the same CuPy figures.
Inputs are random, made once per size; every gkcd result is checked
against CuPy's.  Prints a Markdown table (ratios gkcd / CuPy: below 1 is
faster than CuPy); --json writes the figures.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, ".."))
import gkc  # noqa: E402
from gkc import _arena  # noqa: E402
from bench_python_data import start_gkcd  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def timed(fn, repeat):
    fn()  # warm-up
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gkcd", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="sgemm:2048,sgemm:4096,sgemm:8192,reduce:64,reduce:256")
    ap.add_argument("--json")
    ap.add_argument("--gkcd-arg", action="append", default=[])
    ap.add_argument("--c-bench", help="bench_byvalue: the C rows too")
    ap.add_argument("--backend", default="cuda", help="gkcd's backend (cpu: to try this script)")
    args = ap.parse_args()
    try:
        import cupy as cp
    except ImportError:
        cp = None
        log("no CuPy here: gkcd rows only")
    proc, sock, _ = start_gkcd(args.gkcd, args.gkcd_arg, backend=args.backend, tries=3000)
    rng = np.random.default_rng(1)
    rows = []
    try:
        for spec in args.sizes.split(","):
            kind, size = spec.split(":")
            size = int(size)
            if kind == "sgemm":
                a = rng.standard_normal((size, size), dtype=np.float32)
                b = rng.standard_normal((size, size), dtype=np.float32)
                moved = 3 * size * size * 4
                label = f"sgemm {size}^3"
            else:
                a = rng.standard_normal(size << 18, dtype=np.float32)  # size MiB
                b = None
                moved = a.nbytes
                label = f"reduce {size} MiB"
            row = {"case": label, "bytes": moved}
            ref = None
            if cp is not None:
                if kind == "sgemm":
                    def run_cp():
                        return cp.asnumpy(cp.asarray(a) @ cp.asarray(b))
                else:
                    def run_cp():
                        return float(cp.asarray(a).sum())
                ref = run_cp()
                cp.cuda.Device().synchronize()
                row["cupy_s"] = timed(run_cp, args.repeat)
            for mode, shm in (("inline", False), ("arena", True), ("next", True)):
                if mode != "next":
                    _arena.forget_kept()  # a cold process: no region of an earlier connection
                c = gkc.connect(sock, shm=shm)
                call = (lambda: c.sgemm(a, b)) if kind == "sgemm" else (lambda: c.reduce(a))
                t0 = time.perf_counter()
                got = call()
                row[f"{mode}_first_s"] = time.perf_counter() - t0
                if ref is not None:
                    if kind == "sgemm":
                        err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-30))
                    else:
                        err = abs(got - ref) / (np.sum(np.abs(a), dtype=np.float64) + 1e-30)
                    row[f"{mode}_err"] = err
                    if err > 1e-3:
                        raise SystemExit(f"{label} {mode}: result differs from CuPy's ({err:.3g})")
                del got  # a result array over a region keeps it from the next connection
                row[f"{mode}_s"] = timed(call, args.repeat)
                if mode == "arena":
                    row["arena_state"] = c.shm_state
                c.close()
            _arena.forget_kept()
            # The arena set up ahead (shm_reserve, timed on its own), then the
            # first call: what a caller that knows its sizes pays.
            c = gkc.connect(sock, shm=True)
            call = (lambda: c.sgemm(a, b)) if kind == "sgemm" else (lambda: c.reduce(a))
            t0 = time.perf_counter()
            c.shm_reserve(moved + 3 * 64)
            row["reserve_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            call()
            row["reserved_first_s"] = time.perf_counter() - t0
            c.close()
            rows.append(row)
            log(json.dumps(row))
        c_rows = []
        if args.c_bench:
            import subprocess
            import tempfile
            with tempfile.NamedTemporaryFile(suffix=".json") as jf:
                r = subprocess.run([args.c_bench, "--socket", sock, "--sizes", args.sizes,
                                    "--repeat", str(args.repeat), "--json", jf.name],
                                   stdout=subprocess.PIPE, text=True)
                log(r.stdout)
                if r.returncode != 0:
                    raise SystemExit(f"bench_byvalue failed (rc {r.returncode})")
                c_rows = json.load(open(jf.name))
    finally:
        proc.terminate()
        proc.wait()
    print("| case | CuPy ms | gkcd inline ms | inline / CuPy | gkcd arena ms | arena / CuPy |"
          " arena GB/s | arena first / repeat | next connection: first / repeat |"
          " after shm_reserve: first / repeat (reserve ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cu = r.get("cupy_s")
        f = lambda k: f"{r[k] * 1e3:.1f}"  # noqa: E731
        ratio = lambda k: f"{r[k] / cu:.2f}x" if cu else "-"  # noqa: E731
        print(f"| {r['case']} | {cu * 1e3:.1f} |" if cu else f"| {r['case']} | - |",
              f"{f('inline_s')} | {ratio('inline_s')} | {f('arena_s')} | {ratio('arena_s')} |"
              f" {r['bytes'] / r['arena_s'] / 1e9:.1f} | {r['arena_first_s'] / r['arena_s']:.2f} |"
              f" {r['next_first_s'] / r['arena_s']:.2f} |"
              f" {r['reserved_first_s'] / r['arena_s']:.2f} ({r['reserve_s'] * 1e3:.0f}) |")
    if c_rows:
        cupy = {r["case"]: r.get("cupy_s") for r in rows}
        print()
        print("| case (C, libgkc) | path | first ms | repeated ms | repeated / CuPy | first / repeated | GB/s |")
        print("|---|---|---|---|---|---|---|")
        for r in c_rows:
            if "path" not in r:
                continue
            case = r["op"].replace("^3", "^3")
            cu = cupy.get(case)
            ratio = f"{r['median_ms'] / (cu * 1e3):.2f}x" if cu else "-"
            print(f"| {case} | {r['path']} | {r['first_ms']:.1f} | {r['median_ms']:.1f} | {ratio} |"
                  f" {r['first_ms'] / r['median_ms']:.2f} | {r['gbs']:.1f} |")
        for r in c_rows:
            if "conns" in r:
                print(f"\n{r['conns']} connections x {r['calls']} {r['op'][5:]} by value (arena):"
                      f" {r['gbs']:.1f} GB/s aggregate, {r['wall_ms']:.0f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"python": rows, "c": c_rows}, fh, indent=1)


if __name__ == "__main__":
    main()
