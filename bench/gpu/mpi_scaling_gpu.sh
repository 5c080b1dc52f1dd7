#!/usr/bin/env bash
# mpi_scaling_gpu.sh: issue 29's table in one call of a 4-GPU machine: one
# gkcd per GPU (--backend cuda --devices i), rank r on GPU r through
# GKC_MPI_SOCKET=.../g%r.sock, the 3-D Poisson problem solved by CG to TOL.
#
#   bench/gpu/mpi_scaling_gpu.sh DIR [GRID] [REPEATS] [VARIANTS]
#
# DIR holds gkcd and mpi_cg (built with -DGKC_STATIC_DEPS=ON, mpi_cg linked
# against Open MPI's libmpi.so.40) and, when the machine has no Open MPI,
# ompi/ (Debian 12's runtime unpacked with dpkg -x: docs/CLUSTER.md, "On a
# machine without Open MPI").  GRID (default 256) is the edge of the
# strong-scaling problem; weak scaling gives each of 4 ranks GRID^3 rows
# (GRID x GRID x 4 GRID).  REPEATS (default 3) runs per case, the best time
# per iteration kept.  VARIANTS (default "classical single"): mpi_cg
# --variant.  The reference is gkcd's own single-device solve (mpi_cg
# --solve, float64 vectors; and --solve=fp32) on GPU 0, on the same problem.
#
# Cases per variant: 1 rank; 2 and 4 ranks, strong (GRID^3); 4 ranks, weak.
# Writes to $OUT: mpi_scaling_gpu.jsonl (mpi_cg --json per run, plus case),
# mpi_scaling_gpu.csv and mpi_scaling_gpu.md (the table, best of REPEATS:
# ms per iteration, iterations, requests/iteration/rank, Allreduce/iteration,
# comm share, halo bytes, speed-up or efficiency against 1 rank of the same
# variant, time against solve's, and the issue's targets), env.txt and
# gkcd_logs.txt.  GPUS=2 runs only the 1- and 2-rank cases.  SAME_GPU=1
# puts every gkcd on GPU 0: the path checked on a one-GPU machine (requests
# per iteration, iterations, answers), its speed-ups meaning nothing.
set -uo pipefail
dir=$(cd "${1:?usage: mpi_scaling_gpu.sh DIR [GRID] [REPEATS] [VARIANTS]}" && pwd -P)
grid=${2:-256}
reps=${3:-3}
variants=${4:-classical single}
tol=${TOL:-1e-6}
gpus=${GPUS:-4}
OUT=${OUT:-/tmp/mpi-scaling-gpu-out}
mkdir -p "$OUT"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -rf "$tmp"; }
trap cleanup EXIT

# Open MPI 4.1 moves with OPAL_PREFIX; Debian's PMIx finds its plugins
# through PMIX_PKGLIBDIR; hwloc's plugins are not carried (docs/CLUSTER.md).
gkcd_libs=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -d "$dir/ompi" ]; then
  o=$dir/ompi
  l=$o/usr/lib/x86_64-linux-gnu
  export OPAL_PREFIX=$o/usr PMIX_PKGLIBDIR=$l/pmix2/lib/pmix HWLOC_PLUGINS_PATH=$tmp/none
  export PATH=$o/usr/bin:$PATH
  export LD_LIBRARY_PATH=$l:$o/lib/x86_64-linux-gnu:$l/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OMPI_MCA_mca_base_component_show_load_errors=0
fi
# Shared memory between the ranks (one host), no fabric probing; as root
# there.  Ranks spin in MPI (the machine has cores to spare: 16 per GPU),
# which keeps the Allreduce and halo waits short.
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0

{ date -u; uname -r; orterun --version 2>&1 | head -1; nproc
  nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,driver_version --format=csv
  nvidia-smi topo -m; } >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

for ((i = 0; i < gpus; i++)); do
  dev=()
  [ "${BACKEND:-cuda}" = cuda ] && dev=(--devices "$((${SAME_GPU:-0} ? 0 : i))")
  LD_LIBRARY_PATH=$gkcd_libs "$dir/gkcd" --socket "$tmp/g$i.sock" --log-level warn \
    --backend "${BACKEND:-cuda}" "${dev[@]}" 2>"$tmp/gkcd_g$i.log" &
  pids+=($!)
done
for ((i = 0; i < gpus; i++)); do
  for _ in $(seq 400); do [ -S "$tmp/g$i.sock" ] && break; sleep 0.05; done
  [ -S "$tmp/g$i.sock" ] || { echo "gkcd g$i did not come up:"; cat "$tmp/gkcd_g$i.log"; exit 1; }
done
export GKC_MPI_SOCKET=$tmp/g%r.sock

# run CASE VARIANT NP GRIDSPEC [mpi_cg flags...]
run() {
  local case=$1 variant=$2 np=$3 g=$4; shift 4
  local line
  if ! line=$(timeout 300 orterun -np "$np" "$dir/mpi_cg" --grid "$g" --tol "$tol" --json "$@" \
      2>"$tmp/err"); then
    echo "FAILED: $case ($variant, $np ranks, grid $g): $(tail -3 "$tmp/err")"
    return 1
  fi
  /usr/bin/python3 -c 'import json,sys
r=json.loads(sys.argv[1]); r["case"]=sys.argv[2]; r["grid"]=sys.argv[3]
print(json.dumps(r))' "$line" "$case" "$g" >>"$OUT/mpi_scaling_gpu.jsonl"
  echo "$case $variant: $(echo "$line" | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin)
print("%d it, %.3f ms/it, %.2f req/it, comm %.0f%%" % (r["iterations"], r["s_per_iteration"]*1e3, r["requests_per_iteration"], r["comm_share"]*100))')"
}

strong=$grid
weak=${grid}x${grid}x$((4 * grid))
: >"$OUT/mpi_scaling_gpu.jsonl"
for _ in $(seq "$reps"); do
  run "reference: gkcd solve" solve 1 "$strong" --solve
  run "reference: gkcd solve fp32" solve_fp32 1 "$strong" --solve=fp32
  for v in $variants; do
    run "1 rank" "$v" 1 "$strong" --variant "$v"
    run "strong, 2 ranks" "$v" 2 "$strong" --variant "$v"
    if [ "$gpus" -ge 4 ]; then
      run "strong, 4 ranks" "$v" 4 "$strong" --variant "$v"
      run "weak, 4 ranks" "$v" 4 "$weak" --variant "$v"
    fi
  done
done
nvidia-smi --query-gpu=index,memory.used,temperature.gpu --format=csv >>"$OUT/env.txt" 2>&1
# The daemons' logs in one file: $OUT brings back at most 8 files.
for ((i = 0; i < gpus; i++)); do echo "== gkcd g$i"; tail -n 100 "$tmp/gkcd_g$i.log"; done \
  >"$OUT/gkcd_logs.txt"

/usr/bin/python3 - "$OUT" <<'EOF'
import csv, json, sys
out = sys.argv[1]
best = {}
for line in open(f"{out}/mpi_scaling_gpu.jsonl"):
    r = json.loads(line)
    k = (r["case"], r["variant"])
    if k not in best or r["s_per_iteration"] < best[k]["s_per_iteration"]:
        best[k] = r
solve = best.get(("reference: gkcd solve", "solve"))
rows = []
for (case, variant), r in best.items():
    one = best.get(("1 rank", variant))
    t = r["s_per_iteration"]
    vs1 = eff = target = ""
    ok = ""
    if one and case.startswith("strong"):
        vs1 = one["s_per_iteration"] / t
        target = {2: 1.7, 4: 3.0}[r["ranks"]]
        ok = "yes" if vs1 >= target else "no"
    if one and case.startswith("weak"):
        eff = one["s_per_iteration"] / t
        target = 0.85
        ok = "yes" if eff >= target else "no"
    if case == "1 rank" and solve:
        target = "<= 1.2x solve"
        ok = "yes" if t <= 1.2 * solve["s_per_iteration"] else "no"
    it_ok = ""
    if one and case != "1 rank" and r["rows"] == one["rows"]:
        it_ok = "yes" if abs(r["iterations"] - one["iterations"]) <= 0.01 * one["iterations"] else "no"
    rows.append(dict(
        case=case, variant=variant, ranks=r["ranks"], grid=r["grid"], rows=r["rows"],
        iterations=r["iterations"], converged=r["converged"], rel_residual=r["rel_residual"],
        ms_per_iteration=round(t * 1e3, 4),
        vs_solve=round(t / solve["s_per_iteration"], 3) if solve else "",
        speedup_vs_1_rank=round(vs1, 3) if vs1 != "" else "",
        weak_efficiency=round(eff, 3) if eff != "" else "",
        target=target, meets_target=ok, iterations_within_1pct=it_ok,
        requests_per_iteration_per_rank=r["requests_per_iteration"],
        allreduces_per_iteration=r.get("allreduces_per_iteration", ""),
        comm_share=r["comm_share"], local_share=r["local_share"],
        server_share=r.get("server_share", ""), kernel_share=r.get("kernel_share", ""),
        mpi_bytes_per_spmv=r.get("mpi_bytes_per_spmv", ""),
        down_bytes_per_spmv=r.get("down_bytes_per_spmv", ""),
        up_bytes_per_spmv=r.get("up_bytes_per_spmv", ""),
        halo_in_region=r.get("halo_in_region", ""), spmv_algo=r["spmv_algo"]))
order = {"reference: gkcd solve": 0, "reference: gkcd solve fp32": 1, "1 rank": 2,
         "strong, 2 ranks": 3, "strong, 4 ranks": 4, "weak, 4 ranks": 5}
rows.sort(key=lambda x: (x["variant"].startswith("solve") is False, x["variant"], order.get(x["case"], 9)))
with open(f"{out}/mpi_scaling_gpu.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
cols = ["case", "variant", "ranks", "grid", "iterations", "ms_per_iteration", "vs_solve",
        "speedup_vs_1_rank", "weak_efficiency", "target", "meets_target", "iterations_within_1pct",
        "requests_per_iteration_per_rank", "allreduces_per_iteration", "comm_share",
        "down_bytes_per_spmv", "up_bytes_per_spmv", "spmv_algo"]
md = ["| " + " | ".join(c.replace("_", " ") for c in cols) + " |",
      "|" + "---|" * len(cols)]
for r in rows:
    md.append("| " + " | ".join(f"{r[c]:.0%}" if c == "comm_share" and r[c] != "" else str(r[c])
                                for c in cols) + " |")
open(f"{out}/mpi_scaling_gpu.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
EOF
