#!/bin/bash
# amg_run.sh: solve with precond amg on the GPU (issue #27) in one call on
# the lent GPU machine: its tests, compute-sanitizer, the benchmark; logs
# under $OUT, a summary last.
# Build first (sm_90 + compute_90 PTX), on the device machine or here:
#   cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKC_STATIC_DEPS=ON \
#     -DGKC_FAULT_INJECTION=ON && cmake --build build/rel
# then, from the repository root:
#   STAGES="tests sanitize bench" BUILD=build/rel bash bench/gpu/amg_run.sh
# tests     test_gpu_amg (every loop kind; SuiteSparse SPD matrices from
#           $GKC_GPU_MATRICES, default .carry/matrices or ../shared/matrices),
#           test_gpu_solve (the preconditioner-free paths, unchanged),
#           e2e_solve.py on the CUDA backend (its precond cases now run there)
# sanitize  compute-sanitizer memcheck on the short test_gpu_amg
# bench     bench/gpu/amg_solve.py: 2-D 2048^2 and 3-D 160^3, none/jacobi/amg,
#           setup and time to solution, against CuPy's cg when it imports
set -u
OUT=${OUT:-/tmp/gkc-out}
LOG=$(mktemp -d /tmp/amg-logs.XXXXXX)
mkdir -p "$OUT"
STAGES=${STAGES:-"tests sanitize bench"}
BUILD=${BUILD:-build/rel}
ROOT=$(pwd -P)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for cand in "${GKC_GPU_MATRICES:-}" "$ROOT/.carry/matrices" "$ROOT/../shared/matrices"; do
  [ -n "$cand" ] && [ -d "$cand" ] && { export GKC_GPU_MATRICES=$cand; break; }
done
export GKCD_BIN=$ROOT/$BUILD/daemon/gkcd
export PYTHONUNBUFFERED=1
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1
nproc
date -u

if has tests; then
  timeout 300 "$BUILD/tests/gpu/test_gpu_amg" > "$LOG/test_gpu_amg.log" 2>&1
  rc=$?; summary+=("test_gpu_amg rc=$rc: $(grep -c FAIL "$LOG/test_gpu_amg.log") FAIL lines")
  timeout 200 "$BUILD/tests/gpu/test_gpu_solve" > "$LOG/test_gpu_solve.log" 2>&1
  rc=$?; summary+=("test_gpu_solve rc=$rc: $(grep -c FAIL "$LOG/test_gpu_solve.log") FAIL lines")
  GKC_TEST_BACKEND=cuda timeout 300 python3 tests/e2e/protocol/e2e_solve.py \
    > "$LOG/e2e_solve_gpu.log" 2>&1
  rc=$?; summary+=("e2e_solve_gpu rc=$rc: $(tail -1 "$LOG/e2e_solve_gpu.log")")
fi

if has sanitize; then
  GKC_GPU_TEST_SHORT=1 timeout ${SAN_TIMEOUT:-300} compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$BUILD/tests/gpu/test_gpu_amg" > "$LOG/memcheck_amg.log" 2>&1
  rc=$?; summary+=("memcheck test_gpu_amg (short) rc=$rc: $(grep -E "ERROR SUMMARY" "$LOG/memcheck_amg.log" | tail -1)")
fi

if has bench; then
  timeout 400 python3 bench/gpu/amg_solve.py --build "$BUILD" --json "$OUT/amg_solve.json" \
    ${BENCH_ARGS:-} > "$LOG/amg_solve.log" 2>&1
  rc=$?; summary+=("amg_solve rc=$rc")
fi

grep -E "FAIL|SKIP|SuiteSparse|rho\(" "$LOG/test_gpu_amg.log" 2>/dev/null | head -30
grep -E "unrolled:|laplacian|random spd|convection|bcsstk|1138" "$LOG/test_gpu_amg.log" 2>/dev/null | head -40
grep -E "FAIL" "$LOG/test_gpu_solve.log" "$LOG/e2e_solve_gpu.log" 2>/dev/null | head -10
grep -E "Invalid|illegal|Error|at 0x|by thread" "$LOG/memcheck_amg.log" 2>/dev/null | head -12
sed -n '/^CG to rtol/,$p' "$LOG/amg_solve.log" 2>/dev/null
tail -5 "$LOG/amg_solve.log" 2>/dev/null
printf '%s\n' "${summary[@]}"
tar czf "$OUT/amg_logs.tgz" -C "$LOG" . && echo "logs: $OUT/amg_logs.tgz"
