#!/bin/bash
# rows_run.sh: the tree after the method table ("one row per method") on a
# lent GPU machine, one call: ctest -L gpu, compute-sanitizer on nrm2, the
# request path against the build before it (bench_sgemm_rtt, bench_rpc:
# behaviour must be the same within noise), and the data path by value
# against CuPy in-process (bench/gpu/datapath_vs_cupy.py, the gkc CLI with
# the arena on and off).  Logs in $OUT/rows_logs.tgz, a summary last.
#
# Build on the workstation (sm_90 + compute_90 PTX) with
#   cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKC_STATIC_DEPS=ON \
#     -DGKC_FAULT_INJECTION=ON -DGKC_METRICS_HTTP=OFF && cmake --build build/rel
# (without libmicrohttpd: the device machine lacks it, and cuda_module's last
# check starts gkcd where the carried copy is not on the library path)
# pack it without objects (tar of build/rel less *.o, *.a, CMakeFiles; xz -9e:
# its 64 MiB window folds the repeated fatbins, ~5 MiB) into
# .carry/rel.tar.xz, the older build's gkcd and gkcd-cuda.so (base/) and the
# matrices (matrices/) into .carry/bm.tar.xz, libmicrohttpd.so.12 into
# .carry/lib; then on the device, from the repository root (carry .carry):
#   bash bench/gpu/rows_run.sh
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
ROOT=$(pwd -P)
L=$(mktemp -d /tmp/rows-logs.XXXXXX)
STAGES=${STAGES:-"tests datapath cli rtt rpc sanitize"}
DEADLINE=${DEADLINE:-520} # seconds: a stage that would start later is skipped
has() {
  case " $STAGES " in *" $1 "*) ;; *) return 1;; esac
  if [ "$SECONDS" -ge "$DEADLINE" ]; then echo "skipped $1: past ${DEADLINE}s"; return 1; fi
}
# Libraries the build links that the device machine may lack (libmicrohttpd).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
[ -d build/rel ] || { mkdir -p build && tar xJf .carry/rel.tar.xz -C build; }
[ -f .carry/bm.tar.xz ] && [ ! -d .carry/base ] && tar xJf .carry/bm.tar.xz -C .carry
B=$ROOT/build/rel
# ctest's files hold the source and build paths as configured here.
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
if [ -n "$SRC" ] && [ "$(readlink -f "$SRC" 2>/dev/null)" != "$ROOT" ]; then
  mkdir -p "$(dirname "$SRC")"; [ -e "$SRC" ] && mv "$SRC" "$SRC.moved.$$"; ln -s "$ROOT" "$SRC"
fi
SH=$(dirname "$SRC")/shared
mkdir -p "$SH"; [ -e "$SH/matrices" ] || ln -s "$ROOT/.carry/matrices" "$SH/matrices"
export GKC_GPU_MATRICES=$ROOT/.carry/matrices
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -4
date -u
S=$SECONDS

if has tests; then
  (cd "$B" && timeout 300 ctest -L gpu --output-on-failure --timeout 200) > "$L/ctest_gpu.log" 2>&1
  summary+=("ctest -L gpu rc=$? ($((SECONDS - S)) s): $(grep -E 'tests passed' "$L/ctest_gpu.log")")
  grep -E "Test +#" "$L/ctest_gpu.log" | sed 's/  */ /g'
  grep -E "CHECK FAILED|FAIL" "$L/ctest_gpu.log" | head -20
fi

if has sanitize; then
  GKC_GPU_TEST_SHORT=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/gpu/test_gpu_blas1" > "$L/memcheck_blas1.log" 2>&1
  summary+=("memcheck test_gpu_blas1 rc=$?: $(grep -E 'ERROR SUMMARY' "$L/memcheck_blas1.log" | tail -1)")
fi

if has datapath; then
  timeout 200 python3 bench/gpu/datapath_vs_cupy.py --gkcd "$B/daemon/gkcd" --repeat 3 \
    --json "$OUT/datapath.json" > "$L/datapath.md" 2> "$L/datapath.log"
  summary+=("datapath_vs_cupy rc=$? ($((SECONDS - S)) s)")
  cat "$L/datapath.md"
fi

# The gkc CLI by value, arena on and off, on one gkcd: round trip and gkcd's share.
if has cli; then
  sock=$L/cli.sock
  "$B/daemon/gkcd" --backend cuda --socket "$sock" > "$L/gkcd-cli.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  for shm in on off on off; do
    extra=(); [ $shm = off ] && extra=(--no-shm)
    for c in "sgemm --random 8192x8192x8192" "reduce --random 67108864"; do
      echo "== $c shm=$shm" >> "$L/cli.log"
      GKC_SOCKET=$sock timeout 60 "$B/client/gkc" $c "${extra[@]}" --json >> "$L/cli.log" 2>&1
    done
  done
  kill -TERM $pid; wait $pid
  summary+=("cli done ($((SECONDS - S)) s)")
  python3 - "$L/cli.log" <<'PY'
import json, sys
cur = None
for line in open(sys.argv[1]):
    if line.startswith("=="):
        cur = line[3:].strip()
    elif line.startswith("{"):
        d = json.loads(line)
        keys = [k for k in ("round_trip_us", "server_us", "worker_us", "kernel_us", "h2d_us", "d2h_us") if k in d]
        print(cur, " ".join(f"{k}={d[k]:.0f}" for k in keys))
PY
fi

# bench_sgemm_rtt (resident sgemm 1024^3, the request path) on the build before
# (.carry/base) and this one, alternated.
rtt() {
  local bin=$1 tag=$2; shift 2
  local sock=$L/g-$tag.sock
  "$bin" --backend cuda --socket "$sock" "$@" > "$L/gkcd-$tag.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  echo "== $tag" >> "$L/rtt.log"
  timeout 60 "$B/bench/gpu/bench_sgemm_rtt" --socket "$sock" --n 1024 --calls 300 >> "$L/rtt.log" 2>&1 ||
    echo "$tag: bench rc=$?" >> "$L/rtt.log"
  kill -TERM $pid; wait $pid
}
if has rtt && [ -x .carry/base/gkcd ]; then
  for v in base1 new1 base2 new2; do
    case $v in base*) rtt "$ROOT/.carry/base/gkcd" $v ;; new*) rtt "$B/daemon/gkcd" $v ;; esac
  done
  grep -E "^==|medians|p50|status|rc=" "$L/rtt.log" | head -40
fi

if has rpc && [ -x .carry/base/gkcd ]; then
  for which in base new base new; do
    bin=$B/daemon/gkcd; [ $which = base ] && bin=$ROOT/.carry/base/gkcd
    echo "== $which" >> "$L/rpc.log"
    timeout 60 "$B/bench/bench_rpc" --gkcd "$bin" --backend cuda --pin split --methods reduce \
      --conns 1 --window 0 --repeat 1 --count 5000 --rtt-count 20000 >> "$L/rpc.log" 2>&1
  done
  grep -E "^==|^\| split|^\| pin|reply server|echo" "$L/rpc.log" | head -30
fi

printf '%s\n' "${summary[@]}"
tar czf "$OUT/rows_logs.tgz" -C "$L" . && echo "logs: $OUT/rows_logs.tgz ($((SECONDS - S)) s)"
