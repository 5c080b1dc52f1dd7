#!/usr/bin/python3
"""mpi_model.py: predicted CG time per iteration on 1-1024 nodes (docs/CLUSTER.md).

T(P) = R(P) t_req + (rows per node) c_row + halo(P) + 2 allreduce(P)
  R: requests to gkcd per iteration: 6 on one node, 8 with a halo
     (gather + ghost-column spmv), 4 once a batch method exists
  halo: t_lat + bytes sent per rank / bw (not overlapped: an upper bound;
        the own-column spmv runs while it travels)
  allreduce: a_lat * ceil(log2 P)
Slab: rows in lexicographic order, as gkcm_poisson3d numbers them, so each
rank holds whole z-planes and sends 2 planes (N^2 floats each).  Block: the
grid numbered block by block (each rank a cube), 6 faces (from 8 nodes;
below, the same as slabs).
Prints Markdown tables; the constants are the arguments of model().
--json prints one JSON array, --csv a header row and one row per table,
node count and layout (table,nodes,n3,unknowns,rows_per_node,layout,
ms_per_iteration), instead.
"""
import argparse
import csv
import json
import math
import sys

NODE = {  # per-node figures
    # measured on the 2-core CPU machine (bench/RESULTS.md, "Distributed CG")
    "cpu": dict(t_req=27e-6, c_row=3.7e-9),
    # from the H200 figures in bench/RESULTS.md: resident spmv/dot round
    # trips 0.06-0.16 ms; ~120 bytes a row per iteration at ~2.5 TB/s
    "h200": dict(t_req=80e-6, c_row=0.05e-9),
}
NET = dict(t_lat=2e-6, bw=12e9, a_lat=2e-6)  # assumed: an InfiniBand-class fabric


def t_iter(P, N3, node, layout, batched=False):
    n = N3 ** 3
    rows = n / P
    R = 6 if P == 1 else (4 if batched else 8)
    t = R * node["t_req"] + rows * node["c_row"]
    if P > 1:
        slab = (1 if P == 2 else 2) * N3 * N3 * 4  # one plane each way at the ends
        if layout == "slab" or P < 8:
            nbytes = slab
        else:  # a cube per rank: 6 faces of (rows)^(2/3)
            nbytes = 6 * rows ** (2 / 3) * 4
        t += NET["t_lat"] + nbytes / NET["bw"]
        t += 2 * NET["a_lat"] * math.ceil(math.log2(P))
    return t


ROWS = []  # with --json or --csv: what table() would print


def table(title, node, sizes, layouts):
    for P in (1, 2, 4, 8, 16, 64, 256, 1024):
        N3 = sizes(P)
        for name, (l, b) in layouts.items():
            ROWS.append(dict(table=title, nodes=P, n3=N3, unknowns=N3 ** 3, rows_per_node=N3 ** 3 / P,
                             layout=name, ms_per_iteration=round(t_iter(P, N3, node, l, b) * 1e3, 6)))
    if OUT != "text":
        return
    print(f"\n{title}\n")
    print("| nodes | unknowns | rows/node | " + " | ".join(f"{l} ms/it" for l in layouts) + " |")
    print("|---:|---:|---:|" + "---:|" * len(layouts))
    for P in (1, 2, 4, 8, 16, 64, 256, 1024):
        N3 = sizes(P)
        cells = [f"{t_iter(P, N3, node, l, b) * 1e3:.3f}" for l, b in layouts.values()]
        print(f"| {P} | {N3}^3 = {N3 ** 3:.3g} | {N3 ** 3 / P:.3g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON array on stdout instead of the tables")
    fmt.add_argument("--csv", action="store_true", help="CSV on stdout instead of the tables")
    o = ap.parse_args()
    OUT = "json" if o.json else "csv" if o.csv else "text"
    lay = {"slab": ("slab", False), "block": ("block", False), "block, batched": ("block", True)}
    table("H200 nodes, strong scaling, 512^3 unknowns", NODE["h200"], lambda P: 512, lay)
    table("H200 nodes, weak scaling, 256^3 unknowns a node", NODE["h200"],
          lambda P: round(256 * P ** (1 / 3)), lay)
    table("CPU nodes (this machine's figures), strong scaling, 128^3 unknowns", NODE["cpu"],
          lambda P: 128, {"slab": ("slab", False), "block": ("block", False)})
    if OUT == "json":
        print(json.dumps(ROWS))
    elif OUT == "csv":
        w = csv.DictWriter(sys.stdout, fieldnames=list(ROWS[0]))
        w.writeheader()
        w.writerows(ROWS)
