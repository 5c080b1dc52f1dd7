#!/usr/bin/env python3
"""CG's convergence with each preconditioner: the plot of bench/RESULTS.md (issue #27).

    bench/plot_convergence.py AMG_JSON OUT.png [--anchor 'PROBLEM=ITERATIONS' ...]

Reads bench/gpu/amg_solve.py --json (each gkcd row's "history": the relative
residual after every iteration) and draws, one panel per problem, the
relative residual against the iteration for precond none, jacobi and amg
(log scale), the rtol line, and, per --anchor, hypre BoomerAMG-PCG's
iteration count on the same system as a vertical line (the anchor
bench_amg --rhs ones measures; PROBLEM is the start of the problem's name,
e.g. '2d 2048^2=9').  Needs matplotlib (Debian python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    src, out, rest = args[0], args[1], args[2:]
    anchors = {}
    while rest:
        if rest[0] != "--anchor" or len(rest) < 2 or "=" not in rest[1]:
            print(f"plot_convergence.py: unexpected {' '.join(rest)!r} (--anchor 'PROBLEM=N')",
                  file=sys.stderr)
            return 2
        k, v = rest[1].rsplit("=", 1)
        anchors[k] = int(v)
        rest = rest[2:]
    d = json.load(open(src))
    rows = [r for r in d["rows"] if r["solver"].startswith("gkcd") and r.get("history")]
    if not rows:
        print(f"plot_convergence.py: {src} has no histories (amg_solve.py --json, after 2026-11-29)",
              file=sys.stderr)
        return 1
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    cols = min(2, len(problems))
    nrows = (len(problems) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(problems):]:
        ax.set_visible(False)
    for ax, p in zip(axes.flat, problems):
        for r in rows:
            if r["problem"] != p:
                continue
            h = r["history"]
            ax.semilogy(range(1, len(h) + 1), h, label=f"{r['solver'].replace('gkcd ', '')}"
                        f" ({r['iterations']} it, {r['solve_ms']:.0f} ms)")
        ax.axhline(d["rtol"], color="grey", lw=0.8, ls=":")
        for k, v in anchors.items():
            if p.startswith(k):
                ax.axvline(v, color="black", lw=0.8, ls="--", label=f"BoomerAMG-PCG: {v} it")
        ax.set_xscale("log")
        ax.set_title(p)
        ax.set_xlabel("iteration")
        ax.set_ylabel("relative residual")
        ax.legend(fontsize=8)
    fig.suptitle(f"CG in gkcd ({d.get('backend', 'cuda')} backend, float64), rtol {d['rtol']:g}, b = ones")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
