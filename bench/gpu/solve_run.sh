#!/bin/bash
# solve_run.sh: the GPU `solve` in one call on the lent GPU machine: its
# tests, compute-sanitizer on the short test, and the benchmark; logs and
# the benchmark's CSV under $OUT, a summary last.
# Build on the workstation (sm_90 + compute_90 PTX; ~31 MB) and copy the
# matrices (1138_bus 45 KB, bcsstk13 1.0 MB):
#   cmake -S . -B build-gpu -G Ninja -DGKC_CUDA=ON -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-gpu --target gkcd test_gpu_solve bench_solve_vendor cg
#   mkdir -p .carry/matrices && cp ../shared/matrices/{1138_bus,bcsstk13}.mtx .carry/matrices/
# then, on the device machine (run tool; carry build-gpu and .carry), from
# the repository root:
#   STAGES="tests bench" bash bench/gpu/solve_run.sh     (about 4 minutes)
#   STAGES="sanitize" bash bench/gpu/solve_run.sh        (at most 9 minutes)
# tests     test_gpu_solve (every loop kind), e2e_solve.py and e2e_batch.py
#           on the CUDA backend (numpy, scipy, msgpack needed)
# sanitize  compute-sanitizer memcheck, initcheck, racecheck on the short test
# bench     solve_bench.py (about a minute; CSV in $OUT/solve)
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"tests sanitize bench"}
BUILD=${BUILD:-build-gpu}
ROOT=$(pwd -P)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GKC_SHARED_MATRICES=$ROOT/.carry/matrices
export GKCD_BIN=$ROOT/$BUILD/daemon/gkcd
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
summary=()

if has tests; then
  timeout 300 "$BUILD/tests/gpu/test_gpu_solve" > "$OUT/test_gpu_solve.log" 2>&1
  rc=$?; summary+=("test_gpu_solve rc=$rc")
  for t in e2e_solve e2e_batch; do
    GKC_TEST_BACKEND=cuda timeout 300 python3 "tests/$t.py" > "$OUT/${t}_gpu.log" 2>&1
    rc=$?; summary+=("${t}_gpu rc=$rc: $(tail -1 "$OUT/${t}_gpu.log")")
  done
fi

if has sanitize; then
  for tool in memcheck initcheck racecheck; do
    GKC_GPU_TEST_SHORT=1 timeout 180 compute-sanitizer --tool $tool --error-exitcode 9 \
      "$BUILD/tests/gpu/test_gpu_solve" > "$OUT/sanitize_$tool.log" 2>&1
    rc=$?; summary+=("compute-sanitizer $tool rc=$rc: $(grep -E "ERROR SUMMARY" "$OUT/sanitize_$tool.log" | tail -1)")
  done
fi

if has bench; then
  timeout 400 python3 bench/gpu/solve_bench.py --build "$BUILD" --out "$OUT/solve" \
    --matrices "$GKC_SHARED_MATRICES" ${BENCH_ARGS:-} > "$OUT/solve_bench.log" 2>&1
  rc=$?; summary+=("solve_bench rc=$rc")
fi

grep -E "^(while|unrolled|stream):|iterations \(cpu|poll |FAIL|SKIP" "$OUT/test_gpu_solve.log" 2>/dev/null | head -60
sed -n '/^summary/,$p' "$OUT/solve_bench.log" 2>/dev/null
printf '%s\n' "${summary[@]}"
