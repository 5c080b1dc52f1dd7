#!/bin/bash
# spmv_reduce_run.sh: one call on the lent GPU for the spmv and reduce
# kernels: their GPU tests, the benchmark beside cuSPARSE / CUB (every size
# and matrix, validated before timing), the tuning lab, compute-sanitizer
# (memcheck on the short test lists, racecheck on reduce's short list and
# spmv's tiny one).  The three calls of 2026-11-25 ran
# STAGES="env tests lab sanitize bench" DEADLINE=288 TEST_S=80 in 105-120 s.
# Binaries and matrices are copied next to this script into one folder
# (carry it), e.g. from the workstation:
#   cmake --build build/gpu --target test_gpu_spmv test_gpu_reduce bench_gpu
#   D=<carried folder>; mkdir -p $D/matrices
#   cp build/gpu/tests/gpu/test_gpu_{spmv,reduce} build/gpu/bench/gpu/bench_gpu \
#      bench/gpu/spmv_reduce_run.sh $D/; cp <shared>/matrices/*.mtx $D/matrices/
# then on the device machine: STAGES="env tests lab bench sanitize" bash $D/spmv_reduce_run.sh
# (TESTS=test_gpu_spmv OPS=spmv: spmv alone, 50-65 s in the three calls of
# the v7 pass)
# Logs go to $OUT; the last lines are a short table.
set -u
D=$(cd "$(dirname "$0")" && pwd -P)
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"env tests lab bench sanitize"}   # also: ncu
TESTS=${TESTS:-"test_gpu_spmv test_gpu_reduce"}    # the tests (and sanitizer runs) to take
DEADLINE=${DEADLINE:-280}
export GKC_GPU_MATRICES=$D/matrices
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
has() {
  case " $STAGES " in *" $1 "*) ;; *) return 1;; esac
  if [ "$SECONDS" -ge "$DEADLINE" ]; then echo "skipped $1: past ${DEADLINE}s"; return 1; fi
}
left() { local l=$((DEADLINE - SECONDS)); [ "$l" -lt 5 ] && l=5; [ "$l" -gt "$1" ] && l=$1; echo "$l"; }

if has env; then
  { date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
    nvidia-smi --query-gpu=driver_version --format=csv,noheader; } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi
if has tests; then
  for t in $TESTS; do
    timeout $(left ${TEST_S:-100}) "$D/$t" > "$OUT/$t.log" 2>&1
    echo "$t rc=$? $(grep -E 'runs,|seed' "$OUT/$t.log" | tr '\n' ' ')"
    grep -m5 FAIL "$OUT/$t.log"
  done
fi
if has lab; then
  timeout $(left 120) "$D/bench_gpu" --ops ${OPS:-reduce,spmv} --lab --matrices "$GKC_GPU_MATRICES" \
    --json "$OUT/lab.json" > "$OUT/lab.log" 2>&1
  echo "lab rc=$?"
fi
if has bench; then
  timeout $(left 90) "$D/bench_gpu" --ops ${OPS:-reduce,spmv} --matrices "$GKC_GPU_MATRICES" \
    --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"
fi
if has ncu; then
  # one profiled launch per balanced variant and cuSPARSE's kernels (--validate-only)
  for m in ${NCU_SYNTH:-stencil2d stencil3d}; do
    timeout $(left 90) ncu --clock-control none -k regex:"spmv_balanced|csrmv|partition" \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      "$D/bench_gpu" --ops spmv --lab --validate-only --synth $m > "$OUT/ncu_$m.txt" 2>&1
    echo "ncu $m rc=$?"
  done
fi
if has sanitize; then
  # memcheck on the short lists; racecheck (every shared-memory access
  # instrumented: the short spmv list ran past 110 s) on reduce's short list
  # and spmv's tiny one (GKC_GPU_TEST_TINY), our kernels only
  {
    for t in $TESTS; do
      echo "== memcheck $t (short)"
      GKC_GPU_TEST_SHORT=1 timeout $(left 70) compute-sanitizer --tool memcheck --leak-check no --print-limit 20 \
        --error-exitcode 9 "$D/$t" 2>&1 | tail -8
      echo "rc=${PIPESTATUS[0]}"
    done
    case " $TESTS " in *" test_gpu_reduce "*)
      echo "== racecheck test_gpu_reduce (short)"
      GKC_GPU_TEST_SHORT=1 GKC_GPU_TEST_NO_VENDOR=1 timeout $(left 60) compute-sanitizer --tool racecheck \
        --print-limit 20 --error-exitcode 9 "$D/test_gpu_reduce" 2>&1 | tail -8
      echo "rc=${PIPESTATUS[0]}";;
    esac
    echo "== racecheck test_gpu_spmv (tiny)"
    GKC_GPU_TEST_TINY=1 GKC_GPU_TEST_NO_VENDOR=1 timeout $(left 60) compute-sanitizer --tool racecheck \
      --print-limit 20 --error-exitcode 9 "$D/test_gpu_spmv" 2>&1 | tail -8
    echo "rc=${PIPESTATUS[0]}"
  } > "$OUT/sanitizer.log" 2>&1
  grep -E "^==|rc=|ERROR SUMMARY|RACECHECK SUMMARY|runs," "$OUT/sanitizer.log"
fi
# the short table (full logs under $OUT): case, algo, median ms, x vendor
for f in lab bench; do
  [ -f "$OUT/$f.log" ] || continue
  echo "--- $f"
  grep -E "^(reduce|spmv) " "$OUT/$f.log" | grep -E "${SUMMARY:-stencil|powerlaw|2\^(20|24|28)}" |
    grep -vE "smem|vector/w|bal/t|scalar|auto" | cut -c10-40,45-71,103-108 | tr -s ' '
done
