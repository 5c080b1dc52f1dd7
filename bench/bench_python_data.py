#!/usr/bin/env python3
"""Big arrays from Python: by value (inline) and through the shared-memory arena.

    bench/bench_python_data.py --gkcd build/rel/daemon/gkcd            # the main table
    bench/bench_python_data.py --gkcd ... --sweep                       # inline vs arena, 4 KiB .. 64 MiB
    bench/bench_python_data.py --gkcd ... --package OTHER/python        # another version of the package

It starts its own gkcd (``--backend cpu``) on a socket in a temporary
directory (or uses ``--socket PATH``) and times, through the ``gkc`` package
in python/ beside this script (or ``--package``), what a caller sees: the
wall time of ``c.reduce(x)`` for 64 and 256 MiB of float32 and of
``c.sgemm(A, B)`` at 2048^3, each as the median of ``--repeat`` calls after
one warm-up, and the CPU time the client process spent on each (the median;
process time, so gkcd's share is not in it).  Rows ``inline`` run on a
connection made with ``shm=False`` (every byte in the request and the
reply); rows ``arena`` with the transparent shared-memory arena on.  A package without the ``shm`` keyword
(before it existed) has only inline rows, marked ``old``.

``--target`` measures issue #25's CPU-backend target: by value costs at
most one copy of the data more than the explicit region path,
t(by value) <= 1.25 * (t(region) + t(one copy of the same bytes)), for
``reduce`` of 256 MiB and ``sgemm`` 2048^3 (A and B in, C out), each path
timed in the same rounds, interleaved: ``region`` (the arrays in a
``c.region()`` of the caller's, sgemm's result written into it with
``out=``), ``arena`` (by value, the default), ``inline`` (by value with
``shm=False``, as ``GKC_NO_SHM=1``) and ``copy`` (``np.copyto`` of the same
bytes into memory already touched).  bench/bench_onecopy.c does the same
through libgkc.

``--sweep`` measures the crossover that sets the arena's default threshold:
for each size from 4 KiB to 64 MiB (doubling), the median time of
``reduce`` (an input of that size) and of ``axpby`` (two inputs and a result
of that size) on an inline connection and on an arena one whose threshold
is 0 (everything through the arena), their calls alternating.

The table (Markdown, with the load average before and after: figures from
a busy machine are worth little) goes to stdout, progress to stderr;
``--json`` prints one JSON document instead, ``--csv`` a CSV table.
"""
import argparse
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def start_gkcd(binary, extra, backend="cpu", tries=1000):
    """gkcd on a socket in a fresh temporary directory: (process, socket, directory)."""
    d = tempfile.mkdtemp(prefix="gkc-bench-py-")
    sock = os.path.join(d, "gkcd.sock")
    logf = open(os.path.join(d, "gkcd.log"), "w")
    proc = subprocess.Popen([binary, "--socket", sock, "--backend", backend, *extra], stderr=logf)
    for _ in range(tries):
        if os.path.exists(sock):
            break
        if proc.poll() is not None:
            raise SystemExit(f"gkcd exited with {proc.returncode}")
        time.sleep(0.01)
    return proc, sock, d


def stop_gkcd(proc, d):
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    shutil.rmtree(d, ignore_errors=True)


def med(fn, repeat):
    """(median wall s, min wall s, median CPU s of this process): the CPU
    time is the client's own work (packing, copying), whatever gkcd and the
    rest of the machine do meanwhile."""
    fn()  # warm-up: first touches of pages, the arena's registration
    ts, cpu = [], []
    for _ in range(repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(ts), min(ts), statistics.median(cpu)


def connect(gkc, sock, mode, threshold=None):
    if mode == "old":
        return gkc.connect(sock)
    kw = {"shm": mode == "arena"}
    if threshold is not None:
        kw["shm_threshold"] = threshold
    return gkc.connect(sock, **kw)


class Out:
    """Rows printed as a Markdown table as they come (the default), or kept
    for one JSON document or a CSV table at the end."""

    def __init__(self, fmt, columns):
        self.fmt, self.columns, self.rows = fmt, columns, []
        if fmt == "table":
            print("| " + " | ".join(columns) + " |")
            print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|")

    def row(self, *values):
        self.rows.append(dict(zip(self.columns, values)))
        if self.fmt == "table":
            print("| " + " | ".join(v if isinstance(v, str) else f"{v:.1f}" for v in values) + " |",
                  flush=True)

    def close(self, meta):
        if self.fmt == "json":
            print(json.dumps({**meta, "rows": self.rows}, indent=1))
        elif self.fmt == "csv":
            w = csv.writer(sys.stdout)
            w.writerow(self.columns)
            for r in self.rows:
                w.writerow([r[c] for c in self.columns])


def main_table(gkc, sock, modes, repeat, out):
    rng = np.random.default_rng(1)
    for mib in (64, 256):
        x = rng.standard_normal(mib << 18, dtype=np.float32)
        for mode in modes:
            with connect(gkc, sock, mode) as c:
                m, lo, cpu = med(lambda: c.reduce(x), repeat)
            out.row(f"reduce {mib} MiB", mode, m * 1e3, lo * 1e3, cpu * 1e3)
        x = None  # 256 MiB less before the next size
    n = 2048
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    for mode in modes:
        with connect(gkc, sock, mode) as c:
            m, lo, cpu = med(lambda: c.sgemm(A, B), repeat)
        out.row(f"sgemm {n}^3", mode, m * 1e3, lo * 1e3, cpu * 1e3)


def target(gkc, sock, repeat, out):
    """Rounds of region, arena, inline and copy, interleaved; medians and
    minimums in ms, the bound and the ratios."""
    rng = np.random.default_rng(3)
    region_c = gkc.connect(sock, shm=False)
    arena_c = gkc.connect(sock, shm=True)
    inline_c = gkc.connect(sock, shm=False)
    n = 2048
    x = rng.standard_normal(64 << 20, dtype=np.float32)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    cases = []
    r1 = region_c.region(x.nbytes)
    xr = r1.array(x.shape, np.float32)
    xr[:] = x
    dst = np.ones_like(x)
    cases.append(("reduce 256 MiB",
                  lambda: region_c.reduce(xr), lambda: arena_c.reduce(x), lambda: inline_c.reduce(x),
                  lambda: np.copyto(dst, x), lambda a, b: a == b))
    r2 = region_c.region(3 * A.nbytes)
    Ar, Br, Cr = (r2.array((n, n), np.float32, i * A.nbytes) for i in range(3))
    Ar[:] = A
    Br[:] = B
    scratch = np.ones((3, n, n), dtype=np.float32)

    def copy3():
        np.copyto(scratch[0], A)
        np.copyto(scratch[1], B)
        np.copyto(scratch[2], Cr)
    cases.append((f"sgemm {n}^3",
                  lambda: (region_c.sgemm(Ar, Br, out=Cr), Cr)[1], lambda: arena_c.sgemm(A, B),
                  lambda: inline_c.sgemm(A, B), copy3, lambda a, b: np.array_equal(a, b)))
    for name, f_region, f_arena, f_inline, f_copy, same in cases:
        fns = [f_region, f_arena, f_inline, f_copy]
        ts = [[] for _ in fns]
        for rnd in range(repeat + 1):  # round 0: the warm-up
            res = []
            for i, f in enumerate(fns):
                t0 = time.perf_counter()
                res.append(f())
                if rnd:
                    ts[i].append((time.perf_counter() - t0) * 1e3)
            if not (same(res[0], res[1]) and same(res[0], res[2])):
                raise SystemExit(f"{name}: region, arena and inline results differ")
        med = [statistics.median(t) for t in ts]
        lo = [min(t) for t in ts]
        bound, bound_lo = 1.25 * (med[0] + med[3]), 1.25 * (lo[0] + lo[3])
        r2f = "{:.2f}".format
        out.row(name, med[0], lo[0], med[3], lo[3], bound, med[1], lo[1], r2f(med[1] / bound),
                r2f(lo[1] / bound_lo), "met" if med[1] <= bound else "MISSED", med[2], lo[2],
                r2f(med[2] / bound), r2f(lo[2] / bound_lo))
    for c in (region_c, arena_c, inline_c):
        c.close()


def sweep(gkc, sock, repeat, out):
    """Inline and arena calls alternate, so that both see the same load."""
    rng = np.random.default_rng(2)
    inline = connect(gkc, sock, "inline")
    arena = connect(gkc, sock, "arena", threshold=0)
    size = 4096
    while size <= 64 << 20:
        n = size // 4
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        reps = max(repeat, min(1000, (256 << 20) // size))
        row = []
        for op in ("reduce", "axpby"):
            times = {id(inline): [], id(arena): []}
            for c in (inline, arena):  # warm-up: pages touched, the arena grown
                c.reduce(x) if op == "reduce" else c.axpby(x, y, alpha=2.0)
            for _ in range(reps):
                for c in (inline, arena):
                    t0 = time.perf_counter()
                    if op == "reduce":
                        c.reduce(x)
                    else:
                        c.axpby(x, y, alpha=2.0)
                    times[id(c)].append(time.perf_counter() - t0)
            row += [statistics.median(times[id(inline)]) * 1e6, statistics.median(times[id(arena)]) * 1e6]
        out.row(str(size), *row)
        size *= 2
    inline.close()
    arena.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gkcd", default=os.environ.get("GKCD_BIN"), help="gkcd to start (default $GKCD_BIN)")
    ap.add_argument("--socket", help="use a running gkcd instead")
    ap.add_argument("--package", default=os.path.join(HERE, "..", "python"),
                    help="directory holding the gkc package (default: this source tree's)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sweep", action="store_true", help="inline vs arena from 4 KiB to 64 MiB")
    ap.add_argument("--target", action="store_true",
                    help="issue #25: by value against the region path plus one copy")
    ap.add_argument("--threads", type=int, help="gkcd --threads")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    ap.add_argument("--csv", action="store_true", help="a CSV table instead of the Markdown one")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.package))
    import gkc
    import inspect
    has_shm = "shm" in inspect.signature(gkc.connect).parameters
    log(f"gkc from {os.path.dirname(gkc.__file__)}; arena {'available' if has_shm else 'absent'}")
    fmt = "json" if args.json else "csv" if args.csv else "table"
    # Figures from a loaded machine are worth little: say how loaded it was.
    meta = {"package": os.path.dirname(gkc.__file__), "cpus": os.cpu_count(),
            "load_before": os.getloadavg(), "repeat": args.repeat}
    if fmt == "table":
        print("load average before: %.2f %.2f %.2f; %d CPUs" % (*os.getloadavg(), os.cpu_count()))
    proc = d = None
    sock = args.socket
    if not sock:
        if not args.gkcd:
            raise SystemExit("give --gkcd PATH (or GKCD_BIN) or --socket PATH")
        extra = ["--threads", str(args.threads)] if args.threads else []
        # Room for 256 MiB requests and their copies inside gkcd.
        extra += ["--memory-budget", "4G"]
        proc, sock, d = start_gkcd(args.gkcd, extra)
    try:
        if args.target:
            if not has_shm:
                raise SystemExit("--target needs a package with the shm arena")
            out = Out(fmt, ["call", "region ms", "region min", "copy ms", "copy min", "bound ms",
                            "arena ms", "arena min", "arena ratio", "ratio of mins", "target",
                            "inline ms", "inline min", "inline ratio", "inline ratio of mins"])
            target(gkc, sock, args.repeat, out)
        elif args.sweep:
            if not has_shm:
                raise SystemExit("--sweep needs a package with the shm arena")
            out = Out(fmt, ["bytes", "reduce inline us", "reduce arena us", "axpby inline us",
                            "axpby arena us"])
            sweep(gkc, sock, args.repeat, out)
        else:
            out = Out(fmt, ["call", "mode", "median ms", "min ms", "client CPU ms"])
            main_table(gkc, sock, ["inline", "arena"] if has_shm else ["old"], args.repeat, out)
        meta["load_after"] = os.getloadavg()
        out.close(meta)
    finally:
        if proc is not None:
            stop_gkcd(proc, d)
        if fmt == "table":
            print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
