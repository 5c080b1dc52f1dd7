#!/bin/bash
# device_run.sh: one call on the lent GPU machine does a whole batch: the
# GPU tests (ctest -L gpu), compute-sanitizer on the short test variants,
# the benchmark (and optionally the tuning lab), logs under $OUT.
# Build on the workstation (sm_90 + compute_90 PTX), copy the matrices:
#   cmake -S . -B build-gpu -G Ninja -DGKC_CUDA=ON -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-gpu --target test_gpu_ctx test_gpu_sgemm \
#         test_gpu_reduce test_gpu_spmv bench_gpu
#   mkdir -p .carry/matrices && cp ../shared/matrices/*.mtx .carry/matrices/
# then, on the device machine (run tool; carry build-gpu and .carry), from
# the repository root:
#   STAGES="env tests bench lab sanitize" bash bench/gpu/device_run.sh
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"env tests bench lab sanitize sass"}
ROOT=$(pwd -P)
BUILD=${BUILD:-build-gpu}
export GKC_GPU_MATRICES=$ROOT/.carry/matrices
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEADLINE=${DEADLINE:-540}   # seconds: stages that would start later are skipped
has() {
  case " $STAGES " in *" $1 "*) ;; *) return 1;; esac
  if [ "$SECONDS" -ge "$DEADLINE" ]; then echo "skipped $1: past ${DEADLINE}s"; return 1; fi
  return 0
}
left() { local l=$((DEADLINE + 50 - SECONDS)); [ "$l" -lt 10 ] && l=10; [ "$l" -gt "$1" ] && l=$1; echo "$l"; }

# ctest's files hold the absolute source path the build was configured in;
# when this copy of the tree lives elsewhere, make that path point here.
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
if [ -n "$SRC" ] && [ "$(readlink -f "$SRC" 2>/dev/null)" != "$ROOT" ]; then
  [ -e "$SRC" ] && mv "$SRC" "$SRC.moved.$$"
  mkdir -p "$(dirname "$SRC")" && ln -s "$ROOT" "$SRC"
fi
SRC=${SRC:-$ROOT}

if has env; then
  {
    echo "root: $ROOT"; date -u; uname -r
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
    nvidia-smi -q | grep -iE "product name|persistence|compute mode|mig mode" | head
    which compute-sanitizer cuobjdump ncu
  } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi

if has tests; then
  (cd "$SRC/$BUILD" && timeout $(left 200) ctest -L gpu -R '^test_gpu_' --output-on-failure --timeout 600) > "$OUT/ctest.log" 2>&1
  echo "ctest rc=$?"; grep -E "tests passed|tests failed|Skipped|Failed|FAIL|seed|runs," "$OUT/ctest.log" | head -40
fi

B=$SRC/$BUILD/bench/gpu/bench_gpu
if has sass; then
  cuobjdump -sass "$SRC/$BUILD/cuda/CMakeFiles/gkc_cuda.dir/gkcu_sgemm.cu.o" 2>&1 | gzip > "$OUT/sgemm_sass.txt.gz"
  cuobjdump -sass "$SRC/$BUILD/cuda/CMakeFiles/gkc_cuda.dir/gkcu_spmv.cu.o" 2>&1 | gzip > "$OUT/spmv_sass.txt.gz"
fi

if has bench; then
  timeout $(left 300) "$B" --matrices "$GKC_GPU_MATRICES" --json "$OUT/bench.json" --csv "$OUT/bench.csv" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"
fi
if has lab; then
  timeout $(left 300) "$B" --lab --matrices "$GKC_GPU_MATRICES" --json "$OUT/lab.json" --csv "$OUT/lab.csv" ${LAB_ARGS:-} > "$OUT/lab.log" 2>&1
  echo "lab rc=$?"
fi
if has sanitize; then
  T=$SRC/$BUILD/tests/gpu
  {
    for t in test_gpu_spmv test_gpu_reduce test_gpu_sgemm; do
      echo "== memcheck $t (short)"
      GKC_GPU_TEST_SHORT=1 timeout $(left 100) compute-sanitizer --tool memcheck --leak-check no --print-limit 20 --error-exitcode 9 "$T/$t" 2>&1 | tail -30
      echo "rc=${PIPESTATUS[0]}"
    done
    for t in test_gpu_spmv test_gpu_reduce; do
      echo "== racecheck $t (short)"
      GKC_GPU_TEST_SHORT=1 GKC_GPU_TEST_NO_VENDOR=1 timeout $(left 100) compute-sanitizer --tool racecheck --print-limit 20 --error-exitcode 9 "$T/$t" 2>&1 | tail -30
      echo "rc=${PIPESTATUS[0]}"
    done
  } > "$OUT/sanitizer.log" 2>&1
  grep -E "^==|rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log"
fi

if [ -f "$OUT/bench.log" ]; then grep -vE "^#" "$OUT/bench.log" | cut -c1-118; fi
