#!/bin/bash
# solve_run.sh: the GPU `solve` and `batch` in one call on the lent GPU
# machine: their tests, compute-sanitizer, the benchmark, the bcsstk13
# rounding spread and the small-request round trips; logs and CSVs under
# $OUT, a summary last.
# Build on the workstation (sm_90 + compute_90 PTX) with
#   cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKC_STATIC_DEPS=ON \
#     -DGKC_MPI=OFF -DGKC_METRICS_HTTP=OFF && cmake --build build/gpu
# copy the matrices (1138_bus 45 KB, bcsstk13 1.0 MB) to .carry/matrices,
# then on the device machine, from the repository root:
#   STAGES="tests bench spread rpc" BUILD=build/gpu bash bench/gpu/solve_run.sh
# tests     test_gpu_solve (every loop kind, fp32), e2e_solve.py and
#           e2e_batch.py on the CUDA backend (numpy, scipy, msgpack needed)
# sanitize  compute-sanitizer memcheck (each loop kind apart, and cond_probe:
#           a bare conditional while-node), initcheck, racecheck; short test
# bench     solve_bench.py (CSV in $OUT/solve)
# spread    solve_pcg_spread.py: bcsstk13's PCG count under float64 roundings
# rpc       bench_rpc (16-float reduce against a Unix-socket echo, pinned
#           split) and bench_resident's resident sgemm 1024^3
set -u
OUT=${OUT:-/tmp/gkc-out}
LOG=$(mktemp -d /tmp/solve-logs.XXXXXX) # every log; $OUT/solve_logs.tgz at the end
mkdir -p "$OUT"
STAGES=${STAGES:-"tests sanitize bench spread rpc"}
BUILD=${BUILD:-build/gpu}
ROOT=$(pwd -P)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GKC_SHARED_MATRICES=${GKC_SHARED_MATRICES:-$ROOT/.carry/matrices}
export GKCD_BIN=$ROOT/$BUILD/daemon/gkcd
export PYTHONUNBUFFERED=1
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1
date -u

if has tests; then
  timeout 120 "$BUILD/tests/gpu/test_gpu_solve" > "$LOG/test_gpu_solve.log" 2>&1
  rc=$?; summary+=("test_gpu_solve rc=$rc: $(grep -c FAIL "$LOG/test_gpu_solve.log") FAIL lines")
  for t in e2e_solve e2e_batch; do
    GKC_TEST_BACKEND=cuda timeout 120 python3 "tests/e2e/protocol/$t.py" > "$LOG/${t}_gpu.log" 2>&1
    rc=$?; summary+=("${t}_gpu rc=$rc: $(tail -1 "$LOG/${t}_gpu.log")")
  done
  # every method through gkcd (the tiny reduce/dot path included)
  for t in e2e_gpu e2e_lib; do
    [ -x "$BUILD/tests/$t" ] || continue
    GKC_TEST_DATA=$ROOT/tests/data GKC_TEST_BACKEND=cuda timeout 120 "$BUILD/tests/$t" \
      > "$LOG/$t.log" 2>&1
    rc=$?; summary+=("$t (cuda) rc=$rc: $(tail -1 "$LOG/$t.log")")
  done
fi

if has bench; then
  timeout 200 python3 bench/gpu/solve_bench.py --build "$BUILD" --out "$LOG/solve" \
    --matrices "$GKC_SHARED_MATRICES" ${BENCH_ARGS:-} > "$LOG/solve_bench.log" 2>&1
  rc=$?; summary+=("solve_bench rc=$rc")
  # the same with the lanes off (one lane on all SMs, primary context)
  timeout 120 python3 bench/gpu/solve_bench.py --build "$BUILD" --out "$LOG/solve_lanes_off" \
    --matrices "$GKC_SHARED_MATRICES" --gkcd-args "--latency-sms 0" ${BENCH_ARGS:-} \
    > "$LOG/solve_bench_lanes_off.log" 2>&1
  rc=$?; summary+=("solve_bench --latency-sms 0 rc=$rc")
fi

if has spread; then
  timeout 60 python3 bench/gpu/solve_pcg_spread.py --matrix "$GKC_SHARED_MATRICES/bcsstk13.mtx" \
    --gkcd "$BUILD" > "$LOG/spread.log" 2>&1
  rc=$?; summary+=("spread rc=$rc")
fi

if has rpc; then
  { timeout 60 "$BUILD/bench/bench_rpc" --gkcd "$GKCD_BIN" --backend cuda --pin split \
      --methods reduce --conns 1 --window 0 --repeat 1 --count 5000 --rtt-count 20000 ${RPC_ARGS:-}
    timeout 60 "$BUILD/bench/bench_resident" --gkcd "$GKCD_BIN" --backend cuda --n 1024 \
      --reps 30 --no-spmv --no-cg; } > "$LOG/rpc.log" 2>&1
  rc=$?; summary+=("rpc rc=$rc")
  "$GKCD_BIN" --backend cuda --socket "$LOG/g.sock" > "$LOG/gkcd_sgemm.log" 2>&1 &
  gpid=$!
  for i in $(seq 50); do [ -S "$LOG/g.sock" ] && break; sleep 0.2; done
  for algo in auto regblock; do
    timeout 60 "$BUILD/bench/gpu/bench_sgemm_rtt" --socket "$LOG/g.sock" --n 1024 --calls 300 \
      --algo $algo >> "$LOG/rpc.log" 2>&1
  done
  kill -TERM $gpid; wait $gpid
fi

if has sanitize; then
  st=${SAN_TIMEOUT:-60}
  for kinds in ${SAN_KINDS:-"unrolled,stream" while}; do
    GKC_GPU_TEST_SHORT=1 GKC_GPU_TEST_SOLVE_KINDS=$kinds timeout $st compute-sanitizer \
      --tool memcheck --error-exitcode 9 "$BUILD/tests/gpu/test_gpu_solve" \
      > "$LOG/memcheck_${kinds/,/_}.log" 2>&1
    rc=$?; summary+=("memcheck ($kinds) rc=$rc: $(grep -E "ERROR SUMMARY" "$LOG/memcheck_${kinds/,/_}.log" | tail -1)")
  done
  for v in "" --no-cond --relaunch --early-destroy --wide; do
    timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/bench/gpu/cond_probe" $v \
      > "$LOG/cond_probe${v}.log" 2>&1
    rc=$?; summary+=("cond_probe $v memcheck rc=$rc: $(grep -E "count|ERROR SUMMARY" "$LOG/cond_probe${v}.log" | tr '\n' ' ')")
  done
  for tool in ${SAN_TOOLS:-}; do
    # racecheck is slow: one part of the test a run (the fp32 part alone
    # takes over 100 s), so each finishes within its timeout
    parts=all kinds=
    [ "$tool" = racecheck ] && parts="outcomes accuracy poll" kinds=unrolled
    for part in $parts; do
      [ "$part" = all ] && part=
      GKC_GPU_TEST_SHORT=1 GKC_GPU_TEST_SOLVE_KINDS=$kinds GKC_GPU_TEST_SOLVE_PARTS=$part \
        timeout $st compute-sanitizer --tool $tool --error-exitcode 9 \
        "$BUILD/tests/gpu/test_gpu_solve" > "$LOG/sanitize_$tool$part.log" 2>&1
      rc=$?; summary+=("compute-sanitizer $tool $part rc=$rc: $(grep -E "SUMMARY" "$LOG/sanitize_$tool$part.log" | tail -1)")
    done
  done
fi

grep -E "FAIL|SKIP" "$LOG/test_gpu_solve.log" 2>/dev/null | head -20
grep -E "fp32|laplacian 2-D" "$LOG/test_gpu_solve.log" 2>/dev/null | head -12
grep -E "FAIL" "$LOG"/e2e_*_gpu.log 2>/dev/null | head -10
sed -n '/^summary/,$p' "$LOG/solve_bench.log" 2>/dev/null
echo "== lanes off (--latency-sms 0):"
sed -n '/^summary/,/^targets/p' "$LOG/solve_bench_lanes_off.log" 2>/dev/null
grep -h "" "$LOG"/solve*/solve_bench.csv 2>/dev/null | cut -d, -f1,23 | tr '\n' ' '; echo
cat "$LOG/spread.log" 2>/dev/null
grep -E "^\| split|^\| pin|reply server|^sgemm [0-9]+\^3 resident" "$LOG/rpc.log" 2>/dev/null | head -20
grep -E "Invalid|illegal|Error|at 0x|by thread" "$LOG"/memcheck_while.log 2>/dev/null | head -12
printf '%s\n' "${summary[@]}"
tar czf "$OUT/solve_logs.tgz" -C "$LOG" . && echo "logs: $OUT/solve_logs.tgz"
