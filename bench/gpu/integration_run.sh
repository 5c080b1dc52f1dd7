#!/bin/bash
# integration_run.sh: the whole merged tree on a GPU machine in one call:
# ctest -L gpu, the end-to-end tests on --backend cuda, bench_gpu's reduce
# and spmv against CUB and cuSPARSE, and multigpu.sh --split; logs in
# $OUT/logs.tgz.  Build on the workstation with
#   cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKC_STATIC_DEPS=ON \
#     -DGKC_FAULT_INJECTION=ON -DGKC_MPI=OFF -DGKC_METRICS_HTTP=OFF && cmake --build build-dev
# copy it without objects and static libraries to BUILD (64 MiB travel), the
# matrices to .carry/matrices, and run from the repository root:
#   BUILD=build-lead bash bench/gpu/integration_run.sh
# (CTEST_EXCLUDE: the ctest names left out; the Python e2e tests run apart,
# with the python3 on the PATH, which has numpy, scipy and msgpack there).
set -u
ROOT=$(pwd -P); B=$ROOT/${BUILD:-build-lead}
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; L=/tmp/logs; mkdir -p $L
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' $B/CMakeCache.txt)
if [ "$(readlink -f $SRC 2>/dev/null)" != "$ROOT" ]; then mkdir -p $(dirname $SRC); [ -e $SRC ] && mv $SRC $SRC.moved; ln -s $ROOT $SRC; fi
# ctest's files name the build folder and ../shared/matrices as configured
BD=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' $B/CMakeCache.txt)
[ -n "$BD" ] && [ ! -e "$BD" ] && ln -s $B "$BD"
SH=$(dirname "$SRC")/shared
mkdir -p "$SH"; [ -e "$SH/matrices" ] || ln -s $ROOT/.carry/matrices "$SH/matrices"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 GKC_GPU_MATRICES=$ROOT/.carry/matrices PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
S=$SECONDS
(cd $B && timeout 330 ctest -L gpu -E "${CTEST_EXCLUDE:-e2e_solve_gpu|e2e_batch_gpu}" --output-on-failure --timeout 240) > $L/ctest_gpu.log 2>&1
echo "ctest -L gpu rc=$? ($((SECONDS-S)) s)"; grep -E "Test +#|tests passed" $L/ctest_gpu.log | sed 's/  */ /g'
grep -E "CHECK FAILED|FAIL:" $L/ctest_gpu.log | head -20
export GKCD_BIN=$B/daemon/gkcd GKC_BIN=$B/client/gkc GKC_TEST_DATA=$ROOT/tests/data GKC_SHARED_MATRICES=$ROOT/.carry/matrices GKC_FAULT_INJECTION=1 GKC_TEST_BACKEND=cuda
for t in e2e_solve e2e_batch; do timeout 100 python3 tests/e2e/protocol/$t.py > $L/py_$t.log 2>&1; echo "$t.py (cuda) rc=$?: $(tail -1 $L/py_$t.log)"; done
for t in e2e_lib e2e_pipeline e2e_sched e2e_async e2e_solve_lib e2e_resident_handles e2e_resident_matrices e2e_resident_cg; do
  timeout 90 $B/tests/$t > $L/cuda_$t.log 2>&1; echo "$t (cuda) rc=$?: $(tail -1 $L/cuda_$t.log)"; grep -E "CHECK FAILED" $L/cuda_$t.log | head -3; done
echo "== bench_gpu reduce+spmv ($((SECONDS-S)) s)"
timeout 150 $B/bench/gpu/bench_gpu --ops reduce,spmv --matrices $GKC_GPU_MATRICES --json $L/bench.json --csv $OUT/bench_gpu.csv > $L/bench_gpu.log 2>&1; echo "bench_gpu rc=$?"
grep -E "balanced|shfl|cub|cusparse|^#|2\^2[0-8]|stencil|powerlaw" $L/bench_gpu.log | head -60
echo "== multigpu --split ($((SECONDS-S)) s)"
BUILD=${BUILD:-build-lead} BENCH_ARGS="--big-n 8192 --many-n 2048 --many-count 64 --cg-iters 50" timeout 260 bash bench/gpu/multigpu.sh --split /tmp/mg > $L/multigpu.log 2>&1; echo "multigpu rc=$?"; grep -vE "^<[0-9]>" $L/multigpu.log | tail -25
cp -r /tmp/mg $L/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp logs
echo "done ($((SECONDS-S)) s)"
