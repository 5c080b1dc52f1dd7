#!/usr/bin/env bash
# mpi_gpu.sh: examples/mpi_cg on one GPU, in one call of the lent machine:
# 1 rank on one gkcd (the baseline), 2 ranks sharing one gkcd, 2 ranks on
# 2 gkcd (one each) on the same GPU, and 4 ranks on 2 gkcd, for each grid.
#
#   bench/gpu/mpi_gpu.sh DIR [GRIDS] [REPEATS]
#
# DIR holds gkcd and mpi_cg (built with -DGKC_STATIC_DEPS=ON; mpi_cg linked
# against Open MPI's libmpi.so.40) and, when the machine has no Open MPI,
# ompi/: Debian 12's Open MPI runtime unpacked with dpkg -x (docs/CLUSTER.md,
# "On a machine without Open MPI").  GRIDS (default "128 192") are the edges
# of the 3-D Poisson problems, solved by CG to 1e-6; REPEATS (default 3) runs
# per case, the best time per iteration kept.  Writes one JSON line per run
# to $OUT/mpi_gpu.jsonl (mpi_cg's --json, plus case and daemons), the
# daemons' logs and nvidia-smi to $OUT, and prints a Markdown table last.
# BACKEND=cpu tries the script where there is no GPU.
set -uo pipefail
dir=$(cd "${1:?usage: mpi_gpu.sh DIR [GRIDS] [REPEATS]}" && pwd -P)
grids=${2:-128 192}
reps=${3:-3}
OUT=${OUT:-/tmp/mpi-gpu-out}
mkdir -p "$OUT"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -rf "$tmp"; }
trap cleanup EXIT

# Open MPI 4.1 moves with OPAL_PREFIX; Debian's PMIx has its own prefix and
# finds its plugins through PMIX_PKGLIBDIR.  hwloc's plugins (X11, OpenCL)
# are not carried: HWLOC_PLUGINS_PATH points nowhere.
gkcd_libs=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -d "$dir/ompi" ]; then
  o=$dir/ompi
  l=$o/usr/lib/x86_64-linux-gnu
  export OPAL_PREFIX=$o/usr PMIX_PKGLIBDIR=$l/pmix2/lib/pmix HWLOC_PLUGINS_PATH=$tmp/none
  export PATH=$o/usr/bin:$PATH
  export LD_LIBRARY_PATH=$l:$o/lib/x86_64-linux-gnu:$l/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OMPI_MCA_mca_base_component_show_load_errors=0
fi
# Shared memory only, no InfiniBand or UCX probing; run as root on the lent
# machine; ranks yield while they wait in MPI (they share cores with gkcd).
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1

{ date -u; uname -r; orterun --version 2>&1 | head -1
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv; } \
  >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# Starts gkcd NAME with the extra flags given, on $tmp/NAME.sock.
start_gkcd() {
  local name=$1; shift
  # Open MPI's library path is not gkcd's.
  LD_LIBRARY_PATH=$gkcd_libs "$dir/gkcd" --socket "$tmp/$name.sock" --log-level warn "$@" \
    2>"$OUT/gkcd_$name.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -S "$tmp/$name.sock" ] && return 0; sleep 0.05; done
  echo "gkcd $name did not come up:"; cat "$OUT/gkcd_$name.log"; exit 1
}
start_gkcd a --backend "${BACKEND:-cuda}"
start_gkcd b --backend "${BACKEND:-cuda}"
start_gkcd cpu --backend cpu

# run CASE GRID NP SOCKET... : NP ranks split evenly over the sockets given.
run() {
  local case=$1 grid=$2 np=$3; shift 3
  local per=$((np / $#)) cmd=(orterun) sep=()
  for s in "$@"; do
    cmd+=("${sep[@]}" -np "$per" env GKC_SOCKET="$tmp/$s.sock" "$dir/mpi_cg"
          --grid "$grid" --tol 1e-6 --json)
    sep=(:)
  done
  local line
  if ! line=$(timeout 120 "${cmd[@]}" 2>"$tmp/err"); then
    echo "FAILED: $case grid $grid np $np: $(tail -3 "$tmp/err")"; return 1
  fi
  python3 -c 'import json,sys
r=json.loads(sys.argv[1]); r["case"]=sys.argv[2]; r["daemons"]=int(sys.argv[3])
print(json.dumps(r))' "$line" "$case" "$#" >>"$OUT/mpi_gpu.jsonl"
}

for g in $grids; do
  for _ in $(seq "$reps"); do
    run "1 rank, 1 gkcd (baseline)" "$g" 1 a
    run "2 ranks, 1 gkcd" "$g" 2 a
    run "2 ranks, 2 gkcd" "$g" 2 a b
    run "4 ranks, 2 gkcd" "$g" 4 a b
  done
  run "1 rank, 1 gkcd, CPU backend" "$g" 1 cpu
done
nvidia-smi --query-gpu=memory.used,temperature.gpu --format=csv >>"$OUT/env.txt" 2>&1

python3 - "$OUT/mpi_gpu.jsonl" <<'EOF'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    k = (r["rows"], r["case"])
    if k not in best or r["s_per_iteration"] < best[k]["s_per_iteration"]:
        best[k] = r
print("| problem | case | iterations | rel. residual | ms / iteration (best) | vs baseline "
      "| comm share | requests / it / rank | halo bytes / spmv | spmv |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for (rows, case), r in best.items():
    base = best.get((rows, "1 rank, 1 gkcd (baseline)"))
    speed = base["s_per_iteration"] / r["s_per_iteration"] if base else float("nan")
    print("| %s | %s | %d | %.2e | %.3f | %.2fx | %.0f%% | %.1f | %d | %s |" % (
        r["matrix"].split(",")[1].split("grid")[0].strip(), case, r["iterations"],
        r["rel_residual"], r["s_per_iteration"] * 1e3, speed, r["comm_share"] * 100,
        r["requests_per_iteration"], r["halo_bytes_per_spmv"], r.get("spmv_algo", "")))
EOF
