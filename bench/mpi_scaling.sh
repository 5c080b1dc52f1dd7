#!/usr/bin/env bash
# mpi_scaling.sh: strong scaling of examples/mpi_cg over 1, 2 and 4 ranks.
#
#   bench/mpi_scaling.sh [--json | --csv] BUILD_DIR [GRID] [REPEATS]
#
# Starts two gkcd (standing for two nodes; ranks split in halves over them,
# each told its socket through $GKC_SOCKET), solves the 3-D Poisson problem
# GRID^3 (default 48) with CG to 1e-6 REPEATS times (default 3) per rank
# count, and prints a Markdown row per count with the best time per
# iteration.  DAEMONS=1 puts every rank on one gkcd (several ranks sharing a
# GPU through its scheduler).  For GPU runs pass extra gkcd flags in GKCD_FLAGS.  Ranks yield
# while they wait in MPI (mpi_yield_when_idle): they share cores with gkcd.
# --json prints the best run of each count as mpi_cg --json reports it (one
# array); --csv a header row and one row per count (ranks, iterations,
# ms_per_iteration, comm_share, requests_per_iteration, halo_bytes_per_spmv).
set -euo pipefail
fmt=text
while [[ ${1-} == -* ]]; do
  case $1 in
    --json) fmt=json ;;
    --csv) fmt=csv ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "mpi_scaling.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
build=${1:?usage: mpi_scaling.sh [--json | --csv] BUILD_DIR [GRID] [REPEATS]}
grid=${2:-48}
reps=${3:-3}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
second=b
[ "${DAEMONS:-2}" = 1 ] && second=a
for d in a $second; do
  # shellcheck disable=SC2086
  "$build/daemon/gkcd" --socket "$tmp/$d.sock" --log-level warn ${GKCD_FLAGS:-} 2>"$tmp/$d.log" &
  pids+=($!)
done
for _ in $(seq 100); do [ -S "$tmp/a.sock" ] && [ -S "$tmp/$second.sock" ] && break; sleep 0.05; done
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
args=(--grid "$grid" --tol 1e-6 --json)
if [ "$fmt" = text ]; then
  echo "| ranks | iterations | ms / iteration (best of $reps) | comm share | requests / it / rank | halo bytes / spmv |"
  echo "|---:|---:|---:|---:|---:|---:|"
fi
bests=()
for np in 1 2 4; do
  best=""
  for _ in $(seq "$reps"); do
    if [ "$np" -eq 1 ]; then
      cmd=(mpirun -np 1 env GKC_SOCKET="$tmp/a.sock" "$build/examples/mpi_cg" "${args[@]}")
    else
      h=$((np / 2))
      cmd=(mpirun -np "$h" env GKC_SOCKET="$tmp/a.sock" "$build/examples/mpi_cg" "${args[@]}"
           : -np "$h" env GKC_SOCKET="$tmp/$second.sock" "$build/examples/mpi_cg" "${args[@]}")
    fi
    out=$(timeout 300 "${cmd[@]}")
    best=$(python3 -c 'import json,sys
r=json.loads(sys.argv[1]); b=sys.argv[2]
if b and json.loads(b)["s_per_iteration"] <= r["s_per_iteration"]: print(b)
else: print(sys.argv[1])' "$out" "$best")
  done
  bests+=("$best")
  [ "$fmt" = text ] || continue
  python3 -c 'import json,sys
r=json.loads(sys.argv[1])
print("| %d | %d | %.3f | %.0f%% | %.1f | %d |" % (r["ranks"], r["iterations"],
      r["s_per_iteration"] * 1e3, r["comm_share"] * 100, r["requests_per_iteration"],
      r["halo_bytes_per_spmv"]))' "$best"
done
[ "$fmt" = text ] || python3 -c 'import csv, json, sys
rs = [json.loads(a) for a in sys.argv[2:]]
if sys.argv[1] == "json":
    print(json.dumps(rs))
else:
    w = csv.writer(sys.stdout)
    w.writerow(["ranks", "iterations", "ms_per_iteration", "comm_share", "requests_per_iteration",
                "halo_bytes_per_spmv"])
    for r in rs:
        w.writerow([r["ranks"], r["iterations"], round(r["s_per_iteration"] * 1e3, 6), r["comm_share"],
                    r["requests_per_iteration"], r["halo_bytes_per_spmv"]])' "$fmt" "${bests[@]}"
