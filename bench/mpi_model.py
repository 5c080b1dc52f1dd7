#!/usr/bin/python3
"""mpi_model.py: predicted distributed CG time per iteration, 1 to 1,024 nodes of 8 GPUs.

The iteration as gkc-mpi runs it (mpi/dcg.c), per rank (one rank per GPU,
one gkcd per GPU), for a 3-D 7-point Poisson problem in float32:

  variant     requests  Allreduce  halo bytes per iteration (per rank)
  classical   2         2          MPI: 4 s; from gkcd: 4 (s + g); to gkcd: 4 g
  single      1         1          the same (Chronopoulos-Gear)
  one rank    1/8 (classical, chained) or 1 (single); no halo

  The halo rides in the batches (an spmv step reads x from, or writes into,
  the region: gkc_batch_regions): the download is a batch's last step and
  the ghost columns the next batch's first, so no request is the halo's
  alone; without a region gkc-mpi falls back to 4 and 3 requests.

  s = rows sent to neighbours, g = ghosts received (= s for this matrix).
  No vector crosses the socket; the halo goes through a registered
  shared-memory region (pinned by gkcd on the GPU).

T = R t_req + rows (c_row + c_up) + t_pcie + t_halo + exposed Allreduce
  t_req   a request's fixed cost (round trip, launches, the reply): t_req
  c_row   the fused vector work and own-column spmv, per row (bytes / HBM bw)
  c_up    the ghost-column step, a pass over the rank's rows (row_ptr, y, out:
          12 bytes a row) that the protocol cannot restrict to boundary rows
  t_pcie  (down + up bytes) / pinned host-device bandwidth
  t_halo  MPI: the larger of the intra-node and inter-node parts, each
          latency + bytes / bandwidth (not overlapped: an upper bound)
  Allreduce: paid in full, each (nothing runs on gkcd while it travels:
          the ghost columns wait for the next batch).
Layout: slabs (rows in lexicographic order, as gkcm_poisson3d numbers them:
2 planes of N^2 a rank) or blocks (a cube a rank: 6 faces of (rows)^(2/3)).

Assumed network (not measured here; check on the target fabric with the OSU
Micro-Benchmarks, osu_latency / osu_bw / osu_allreduce):
  - 4 x NDR 400 Gb/s InfiniBand per node (one ConnectX-7 per 2 GPUs, as in
    NVIDIA's DGX H100/H200 reference design, which has 8 x 400 Gb/s: we take
    half), 50 GB/s each, 200 GB/s a node; 1.5 us MPI point-to-point latency.
  - Allreduce of a few doubles: host-based recursive doubling, 2.5 us a
    doubling across nodes (the order of osu_allreduce figures for 8 bytes on
    InfiniBand HDR/NDR clusters reported by the MVAPICH project), or
    in-network with SHARP (Graham et al., "Scalable Hierarchical Aggregation
    Protocol (SHArP)", COMHPC 2016: latency nearly flat in node count), taken
    as a flat 5 us; plus 1 us inside a node (8 ranks, shared memory; bench_mpi
    measured 0.43 us for 2 ranks on the CPU machine).
  - Within a node, halos over shared memory (Open MPI vader; no GPUDirect:
    the halo is in host memory already): 10 GB/s, 1 us.
GPU figures: t_req and c_row are per-GPU constants to be replaced with what
bench/gpu/mpi_scaling_gpu.sh measures (requests and bytes are counted by
mpi_cg --json, so only the per-unit costs are assumed): t_req = 25 us (a
batch or resident spmv round trip of a few kernels), c_row from ~130 bytes a
row at 3.5 TB/s, pinned copies at 50 GB/s (DEVICE.md: 55 GB/s measured).
--json / --csv print the rows instead of Markdown tables (table, nodes, gpus,
n3, unknowns, rows_per_gpu, layout, variant, ms_per_iteration).
"""
import argparse
import csv
import json
import math
import sys

GPU = dict(t_req=25e-6, c_row=130 / 3.5e12, c_up=12 / 3.5e12, pcie=50e9)
CPU = dict(t_req=27e-6, c_row=3.7e-9, c_up=0.3e-9, pcie=10e9)  # this 2-core machine
NET = dict(lat=1.5e-6, bw=50e9, node_lat=1e-6, node_bw=10e9,
           a_lat=2.5e-6, a_sharp=5e-6, a_node=1e-6)
GPUS_PER_NODE = 8
VARIANTS = {"classical": dict(R=2, allreduces=2), "single": dict(R=1, allreduces=1)}


def halo_bytes(N3, ranks, layout):
    """Floats sent by one rank per product (= ghosts it receives), as bytes."""
    if ranks == 1:
        return 0.0
    if layout == "slab" or ranks < 8:
        return (1 if ranks == 2 else 2) * N3 * N3 * 4
    return 6 * (N3 ** 3 / ranks) ** (2 / 3) * 4


def allreduce(nodes, ranks, sharp):
    if ranks == 1:
        return 0.0
    t = NET["a_node"] * (1 if ranks > 1 else 0)
    if nodes > 1:
        t += NET["a_sharp"] if sharp else NET["a_lat"] * math.ceil(math.log2(nodes))
    return t


def t_iter(nodes, N3, dev, layout, variant, sharp=False, gpus=GPUS_PER_NODE):
    ranks = nodes * gpus
    rows = N3 ** 3 / ranks
    v = VARIANTS[variant]
    if ranks == 1:  # no halo; classical chains 8 iterations a request
        return (dev["t_req"] / 8 if variant == "classical" else dev["t_req"]) + rows * dev["c_row"]
    hb = halo_bytes(N3, ranks, layout)
    t = v["R"] * dev["t_req"] + rows * (dev["c_row"] + dev["c_up"])
    t += (2 * hb + hb) / dev["pcie"]  # down: sends + ghost dots; up: ghosts
    # Slabs: both neighbours on other nodes only when a node holds one rank
    # of the cut; with 8 per node, 2 of a node's 16 messages cross nodes.
    intra = NET["node_lat"] + hb / NET["node_bw"]
    inter = (NET["lat"] + hb / NET["bw"]) if nodes > 1 else 0.0
    t += max(intra, inter)
    t += v["allreduces"] * allreduce(nodes, ranks, sharp)
    return t


ROWS = []


def table(title, dev, sizes, cases, node_counts, gpus=GPUS_PER_NODE):
    for P in node_counts:
        N3 = sizes(P)
        for name, (layout, variant, sharp) in cases.items():
            ROWS.append(dict(table=title, nodes=P, gpus=P * gpus, n3=N3, unknowns=N3 ** 3,
                             rows_per_gpu=N3 ** 3 / (P * gpus), layout=layout, variant=variant,
                             sharp=sharp, case=name,
                             ms_per_iteration=round(t_iter(P, N3, dev, layout, variant, sharp,
                                                           gpus) * 1e3, 6)))
    if OUT != "text":
        return
    print(f"\n{title}\n")
    print("| nodes | GPUs | unknowns | rows/GPU | " + " | ".join(f"{c} ms/it" for c in cases) + " |")
    print("|---:|---:|---:|---:|" + "---:|" * len(cases))
    for P in node_counts:
        N3 = sizes(P)
        cells = [f"{t_iter(P, N3, dev, *c, gpus) * 1e3:.3f}" for c in cases.values()]
        print(f"| {P} | {P * gpus} | {N3}^3 = {N3 ** 3:.3g} | {N3 ** 3 / (P * gpus):.3g} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON array on stdout instead of the tables")
    fmt.add_argument("--csv", action="store_true", help="CSV on stdout instead of the tables")
    o = ap.parse_args()
    OUT = "json" if o.json else "csv" if o.csv else "text"
    cases = {"block, single, SHARP": ("block", "single", True),
             "block, single": ("block", "single", False),
             "block, classical": ("block", "classical", False),
             "slab, single": ("slab", "single", False)}
    nodes = (1, 2, 8, 64, 256, 1024)
    table("One node of 4 H200 (issue 29's machine), 256^3 strong: 1, 2, 4 GPUs", GPU,
          lambda P: 256, {"slab, classical": ("slab", "classical", False),
                          "slab, single": ("slab", "single", False)}, (1,), gpus=1)
    for g in (2, 4):
        table(f"  ... {g} GPUs", GPU, lambda P: 256,
              {"slab, classical": ("slab", "classical", False),
               "slab, single": ("slab", "single", False)}, (1,), gpus=g)
    table("8-GPU H200 nodes, strong scaling, 1024^3 unknowns", GPU, lambda P: 1024, cases, nodes)
    table("8-GPU H200 nodes, weak scaling, 256^3 unknowns a GPU", GPU,
          lambda P: round(256 * (8 * P) ** (1 / 3)), cases, nodes)
    table("CPU nodes (this machine's figures, one rank a node), strong scaling, 128^3", CPU,
          lambda P: 128, {"slab, single": ("slab", "single", False),
                          "block, classical": ("block", "classical", False)},
          (1, 2, 4, 8, 64), gpus=1)
    if OUT == "json":
        print(json.dumps(ROWS))
    elif OUT == "csv":
        w = csv.DictWriter(sys.stdout, fieldnames=list(ROWS[0]))
        w.writeheader()
        w.writerows(ROWS)
