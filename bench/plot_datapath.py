#!/usr/bin/env python3
"""Big arrays by value against CuPy in-process: the plot of bench/RESULTS.md.

    bench/plot_datapath.py bench/data/h200x2-2026-11-28/datapath.json bench/plots/datapath_vs_cupy.png

Reads datapath_vs_cupy.py --json (with --c-bench: Python and C rows) and
draws, per case, gkcd's round trip over CuPy's in the same run (below 1:
faster than CuPy in the caller's own process) for each path: Python arena,
Python inline, C arena, C inline; the first call of each size on a fresh
connection as hollow markers, and the first call after shm_reserve as
crosses (when the run has them).  Needs matplotlib (Debian python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    d = json.load(open(sys.argv[1]))
    py = d["python"] if isinstance(d, dict) else d
    c_rows = d.get("c", []) if isinstance(d, dict) else []
    cases = [r["case"] for r in py if r.get("cupy_s")]
    cupy = {r["case"]: r["cupy_s"] for r in py if r.get("cupy_s")}
    series = []  # (label, repeated ratios, first-call ratios)
    for mode in ("arena", "inline"):
        rep = [next(r for r in py if r["case"] == k)[f"{mode}_s"] / cupy[k] for k in cases]
        first = [next(r for r in py if r["case"] == k)[f"{mode}_first_s"] / cupy[k] for k in cases]
        series.append((f"Python, {mode}", rep, first))
    for mode in ("arena", "inline"):
        rows = {r["op"]: r for r in c_rows if r.get("path") == mode}
        if all(k in rows for k in cases):
            series.append((f"C (libgkc), {mode}",
                           [rows[k]["median_ms"] / 1e3 / cupy[k] for k in cases],
                           [rows[k]["first_ms"] / 1e3 / cupy[k] for k in cases]))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for i, (label, rep, first) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(cases))]
        bars = ax.bar(xs, rep, width, label=label)
        ax.scatter(xs, first, marker="o", facecolors="none", edgecolors=bars.patches[0].get_facecolor(),
                   zorder=3, s=28)
    # The first call after shm_reserve (the arena set up ahead), where measured.
    if all("reserved_first_s" in next(r for r in py if r["case"] == k) for k in cases):
        xs = [j - 0.4 + width / 2 for j in range(len(cases))]
        ax.scatter(xs, [next(r for r in py if r["case"] == k)["reserved_first_s"] / cupy[k]
                        for k in cases], marker="x", color="k", zorder=4, s=30,
                   label="Python, first call after shm_reserve")
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases)
    ax.set_ylabel("gkcd round trip / CuPy in-process (log)")
    ax.set_title("By value: gkcd over CuPy, same run (bars: repeated; circles: first call)")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
