#!/bin/bash
# path_run.sh: the request path of a resident sgemm on the lent GPU machine,
# one call: the CUDA-path tests, then bench_sgemm_rtt against two builds of
# gkcd side by side (BASE: the one before the change, NEW: this tree's) and
# bench_rpc's 16-float reduce against its Unix-socket echo (each build);
# logs under $OUT, a summary last.
# Build on the workstation (sm_90 + compute_90 PTX) with
#   cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKC_STATIC_DEPS=ON \
#     -DGKC_MPI=OFF -DGKC_METRICS_HTTP=OFF && cmake --build build/gpu
# copy into one folder D: daemon/{gkcd,gkcd-cuda.so}, client/gkc, bench/bench_rpc,
# bench/gpu/bench_sgemm_rtt, tests/e2e_* and tests/gpu/test_gpu_multidev, and
# the older build's gkcd and gkcd-cuda.so into D/base/; then, from the
# repository root of the device machine:
#   D=build-path bash bench/gpu/path_run.sh
# STAGES: tests (the e2e tests on --backend cuda, test_gpu_multidev), rtt
# (bench_sgemm_rtt, the variants in RTT_VARIANTS), rpc (bench_rpc, reduce
# against echo, for the builds in RPC_BUILDS).
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
ROOT=$(pwd -P)
D=$ROOT/${D:-build-path}
LOG=$(mktemp -d /tmp/path-logs.XXXXXX)
STAGES=${STAGES:-"tests rtt rpc"}
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1
date -u
S=$SECONDS

if has tests; then
  export GKCD_BIN=$D/daemon/gkcd GKC_BIN=$D/client/gkc GKC_TEST_DATA=$ROOT/tests/data
  timeout 120 "$D/tests/gpu/test_gpu_multidev" > "$LOG/test_gpu_multidev.log" 2>&1
  summary+=("test_gpu_multidev rc=$?: $(tail -1 "$LOG/test_gpu_multidev.log")")
  timeout 120 env GKC_TEST_BACKEND=cuda "$D/tests/e2e_gpu" > "$LOG/e2e_gpu.log" 2>&1
  summary+=("e2e_gpu rc=$?: $(tail -1 "$LOG/e2e_gpu.log")")
  timeout 120 "$D/tests/e2e_lanes" > "$LOG/e2e_lanes.log" 2>&1
  summary+=("e2e_lanes rc=$?: $(tail -1 "$LOG/e2e_lanes.log")")
  for t in e2e_lib e2e_resident_handles e2e_resident_matrices e2e_resident_cg e2e_pipeline \
           e2e_sched e2e_async e2e_resident_regions e2e_resident_raw e2e_lengths \
           e2e_service_deadline e2e_solve_lib; do
    [ -x "$D/tests/$t" ] || continue
    GKC_TEST_BACKEND=cuda timeout 90 "$D/tests/$t" > "$LOG/cuda_$t.log" 2>&1
    summary+=("$t (cuda) rc=$?: $(tail -1 "$LOG/cuda_$t.log")")
  done
  echo "tests done ($((SECONDS - S)) s)"
fi

# One gkcd (build $1, extra arguments after it) on a fresh socket; bench_sgemm_rtt
# against it with the arguments in $RTT; the log line tagged.
rtt() {
  local which=$1 tag=$2; shift 2
  local bin=$D/daemon/gkcd; [ "$which" = base ] && bin=$D/base/gkcd
  local sock=$LOG/g-$tag.sock
  "$bin" --backend cuda --socket "$sock" "$@" > "$LOG/gkcd-$tag.log" 2>&1 &
  local pid=$!
  for i in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  echo "== $tag: $which gkcd $* ; bench $RTT" >> "$LOG/rtt.log"
  timeout 60 "$D/bench/gpu/bench_sgemm_rtt" --socket "$sock" --n 1024 --calls 300 $RTT \
    >> "$LOG/rtt.log" 2>&1 || echo "$tag: bench rc=$?" >> "$LOG/rtt.log"
  kill -TERM $pid; wait $pid
}

if has rtt; then
  for v in ${RTT_VARIANTS:-base1 new1 base2 new2 base-loopspin base-clientspin new-clientspin \
                            new-lanes-off new-regblock}; do
    case $v in
      base[0-9]) RTT="" rtt base $v ;;
      new[0-9]) RTT="" rtt new $v ;;
      base-loopspin) RTT="" rtt base $v --spin-us 1000 ;;
      new-spin1000) RTT="" rtt new $v --spin-us 1000 ;;
      base-clientspin) RTT="--spin" rtt base $v ;;
      new-clientspin) RTT="--spin" rtt new $v ;;
      new-lanes-off) RTT="" rtt new $v --latency-sms 0 ;;
      new-lanes-off-clientspin) RTT="--spin" rtt new $v --latency-sms 0 ;;
      new-latency-us50) RTT="" rtt new $v --latency-us 50 ;;
      new-regblock) RTT="--algo regblock" rtt new $v ;;
    esac
  done
  echo "rtt done ($((SECONDS - S)) s)"
fi

if has rpc; then
  for which in ${RPC_BUILDS:-base new}; do
    bin=$D/daemon/gkcd; [ "$which" = base ] && bin=$D/base/gkcd
    echo "== $which" >> "$LOG/rpc.log"
    timeout 60 "$D/bench/bench_rpc" --gkcd "$bin" --backend cuda --pin split --methods reduce \
      --conns 1 --window 0 --repeat 1 --count 5000 --rtt-count 20000 >> "$LOG/rpc.log" 2>&1
    summary+=("bench_rpc $which rc=$?")
  done
  echo "rpc done ($((SECONDS - S)) s)"
fi

grep -E "FAIL|CHECK FAILED" "$LOG"/*.log 2>/dev/null | head -20
grep -E "^==|^sgemm|medians|p10|status|rc=" "$LOG/rtt.log" 2>/dev/null
grep -E "^==|^\| split|^\| pin|reply server|echo|gkcd" "$LOG/rpc.log" 2>/dev/null | head -30
printf '%s\n' "${summary[@]}"
tar czf "$OUT/path_logs.tgz" -C "$LOG" . && echo "logs: $OUT/path_logs.tgz"
