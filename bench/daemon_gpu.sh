#!/bin/bash
# daemon_gpu.sh: gkcd's CUDA backend end to end, in one call on a GPU machine.
#
#   BUILD=build-dev bash bench/daemon_gpu.sh        (from the repository root)
#
# Stages (STAGES="tests e2e oom mdwe path"):
#   tests  ctest -L gpu: the kernel tests and e2e_gpu (every algo through gkcd)
#   e2e    the CPU-backend end-to-end tests again, on the CUDA backend
#   oom    a request larger than the free GPU memory gets out_of_memory while
#          small requests beside it succeed (gpu_hog holds the rest)
#   mdwe   gkcd under a MemoryDenyWriteExecute-like seccomp filter
#   soak   10k mixed requests on the CUDA backend, all checked, memory back to start
#   resident  bench_resident (socket vs regions, resident spmv, CG) beside bench_direct
#   path   sgemm 4096^3 through gkc, time broken down (socket, H2D, kernel, D2H)
#   spin   small resident requests with the workers and the loop polling for
#          more work (--spin-us 100) against sleeping at once (0):
#          bench_rpc round trips, resident spmv (bench_resident, spmv_probe)
#          and CG, each with gkcd's queue_us / worker_us split
# Logs go to $OUT; a summary is printed last.
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"tests e2e oom mdwe soak resident path"}
ROOT=$(pwd -P)
BUILD=${BUILD:-build-dev}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GKC_SHARED_MATRICES=$ROOT/.carry/matrices
# ctest's files hold the absolute source path the build was configured in;
# when this copy of the tree lives elsewhere, make that path point here.
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
if [ -n "$SRC" ] && [ "$(readlink -f "$SRC" 2>/dev/null)" != "$ROOT" ]; then
  [ -e "$SRC" ] && mv "$SRC" "$SRC.moved.$$"
  mkdir -p "$(dirname "$SRC")" && ln -s "$ROOT" "$SRC"
fi
B=${SRC:-$ROOT}/$BUILD
GKCD=$B/daemon/gkcd GKC=$B/client/gkc
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
summary=()
T=$(mktemp -d)

start_gkcd() { # socket, extra args...
  local s=$1; shift
  "$@" --socket "$s" >>"$OUT/gkcd.log" 2>&1 &
  for _ in $(seq 200); do "$GKC" --socket "$s" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "gkcd did not start: $*"; return 1
}

if has tests; then
  (cd "$B" && timeout 400 ctest -L gpu --output-on-failure) >"$OUT/ctest_gpu.log" 2>&1
  summary+=("ctest -L gpu: rc=$? $(grep -E 'tests passed' "$OUT/ctest_gpu.log")")
  grep -E "e2e_gpu: |spmv: every algo" "$OUT/ctest_gpu.log" | head -3
fi

if has e2e; then
  (cd "$B" && GKC_TEST_BACKEND=cuda timeout 300 ctest -R 'e2e_lib|e2e_pipeline|e2e_lifecycle|e2e_resident' \
     --output-on-failure) >"$OUT/ctest_e2e_cuda.log" 2>&1
  summary+=("e2e on the cuda backend: rc=$? $(grep -E 'tests passed' "$OUT/ctest_e2e_cuda.log")")
fi

if has oom; then
  # gkcd first (its contexts and handles need memory of their own), then a
  # hog that leaves ~700 MiB, then a request whose 1 GiB result cannot fit.
  if start_gkcd "$T/oom.sock" "$GKCD" --backend cuda --max-request-bytes 3G; then
    "$B/tests/gpu_hog" 700 >"$OUT/hog.log" 2>&1 &
    hog=$!
    for _ in $(seq 300); do grep -q holding "$OUT/hog.log" && break; sleep 0.1; done
    cat "$OUT/hog.log"
    "$GKC" --socket "$T/oom.sock" sgemm --random 16384x16384x1 >"$OUT/oom_big.log" 2>&1 &
    big=$!
    ok=0
    for i in $(seq 20); do
      "$GKC" --socket "$T/oom.sock" sgemm --random 256 --check >/dev/null 2>&1 && ok=$((ok + 1))
    done
    wait $big; bigrc=$?
    summary+=("oom: big request rc=$bigrc ($(grep -o 'out_of_memory.*' "$OUT/oom_big.log" | head -1)); small requests ok: $ok/20")
    kill $hog 2>/dev/null; wait $hog 2>/dev/null
    # With the memory back, the same big request succeeds: nothing was left broken.
    "$GKC" --socket "$T/oom.sock" sgemm --random 16384x16384x1 >>"$OUT/oom_big.log" 2>&1
    summary+=("oom: the same request after the hog is gone: rc=$?")
    "$GKC" --socket "$T/oom.sock" status --json >"$OUT/oom_status.json"
    pkill -TERM -f "oom.sock"; sleep 0.5
  fi
fi

if has mdwe; then
  res=()
  start_gkcd "$T/mdwe.sock" "$B/tests/mdwe_exec" "$GKCD" --backend cuda && {
    for a in naive smem regblock cublas; do
      "$GKC" --socket "$T/mdwe.sock" sgemm --random 300x200x100 --algo $a --check >/dev/null 2>>"$OUT/mdwe.log" && res+=("sgemm/$a:ok") || res+=("sgemm/$a:FAIL")
    done
    "$GKC" --socket "$T/mdwe.sock" sgemm --random 512 --algo cublas_tf32 --precision tf32 --check >/dev/null 2>>"$OUT/mdwe.log" && res+=("sgemm/cublas_tf32:ok") || res+=("sgemm/cublas_tf32:FAIL")
    for a in smem shfl cub; do
      "$GKC" --socket "$T/mdwe.sock" reduce --random 1000003 --algo $a --check >/dev/null 2>>"$OUT/mdwe.log" && res+=("reduce/$a:ok") || res+=("reduce/$a:FAIL")
    done
    for a in scalar vector balanced cusparse; do
      "$GKC" --socket "$T/mdwe.sock" spmv --random 20000x20000 --algo $a --check >/dev/null 2>>"$OUT/mdwe.log" && res+=("spmv/$a:ok") || res+=("spmv/$a:FAIL")
    done
    summary+=("MemoryDenyWriteExecute-like filter: ${res[*]}")
    pkill -TERM -f "mdwe.sock" ; sleep 0.5
  }
  [ ${#res[@]} -eq 0 ] && summary+=("mdwe: gkcd did not start under the filter; see $OUT/gkcd.log")
fi

if has soak; then
  # 10k mixed requests, every reply checked; device memory back to its level.
  start_gkcd "$T/soak.sock" "$GKCD" --backend cuda && {
    timeout 300 python3 bench/gpu_soak.py "$T/soak.sock" --count 10000 >"$OUT/soak.txt" 2>&1
    summary+=("soak on cuda: rc=$? $(tr '\n' ' ' <"$OUT/soak.txt")")
    pkill -TERM -f "soak.sock"; sleep 0.5
  }
fi

if has resident; then
  # Regions and resident data against the socket path, and the same work
  # done directly in one process (bench_direct), in the same run.
  timeout 300 "$B/bench/bench_resident" --gkcd "$GKCD" --backend cuda --cg-grid 2048 \
    --cg-iters 200 --time-limit 150 --json >"$OUT/resident.json" 2>"$OUT/resident.err"
  summary+=("bench_resident: rc=$?")
  timeout 120 "$B/bench/gpu/bench_direct" --n 2048 --iters 200 --json "$OUT/direct.json" --csv "$OUT/direct.csv" \
    >"$OUT/direct.txt" 2>&1
  summary+=("bench_direct: rc=$?")
  tail -30 "$OUT/direct.txt"
fi

if has path; then
  start_gkcd "$T/path.sock" "$GKCD" --backend cuda && {
    for algo in auto cublas regblock; do
      for i in 1 2 3 4 5 6; do
        "$GKC" --socket "$T/path.sock" --json sgemm --random 4096x4096x4096 --algo $algo --seed $i
      done >"$OUT/path_$algo.jsonl" 2>>"$OUT/path.err"
    done
    python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
print("daemon path, sgemm 4096^3 (median of runs 2-6; ms)")
print(f"{'algo':10} {'round trip':>10} {'in gkcd':>8} {'socket+client':>13} {'H2D':>7} {'kernel':>7} {'D2H':>7} {'TFLOP/s kernel':>15} {'TFLOP/s rt':>10}")
for algo in ("auto", "cublas", "regblock"):
    rows = [json.loads(l) for l in open(f"{out}/path_{algo}.jsonl") if l.strip()][1:]
    med = lambda k: statistics.median(r[k] for r in rows) / 1e3
    rt, sv = med("round_trip_us"), med("server_us")
    fl = 2 * 4096**3
    print(f"{rows[0]['algo']:10} {rt:10.2f} {sv:8.2f} {rt - sv:13.2f} {med('h2d_us'):7.2f} "
          f"{med('kernel_us'):7.2f} {med('d2h_us'):7.2f} {fl / med('kernel_us') / 1e9:15.1f} "
          f"{fl / rt / 1e9:10.2f}")
PY
    pkill -TERM -f "path.sock"; sleep 0.5
  } 2>&1 | tee "$OUT/path.txt"
fi

if has spin; then
  for spin in 0 100; do
    start_gkcd "$T/spin$spin.sock" "$GKCD" --backend cuda --spin-us $spin && {
      echo "== --spin-us $spin"
      timeout 60 "$B/bench/bench_rpc" --socket "$T/spin$spin.sock" --no-echo --pin none --conns 1 \
        --window 0 --rtt-count 5000 --count 5000 --repeat 1 2>&1 | grep -E "RTT, 1 conn|via libgkc"
      timeout 120 "$B/bench/bench_resident" --socket "$T/spin$spin.sock" --no-sgemm --cg-grid 2048 \
        --cg-iters 200 2>&1 | grep -E "^\| resident|iterations/s"
      timeout 60 python3 bench/spmv_probe.py "$T/spin$spin.sock" 2>&1
      timeout 10 "$GKC" --socket "$T/spin$spin.sock" --json status | python3 -c \
        'import json,sys; d=json.load(sys.stdin); print("spin_hits", d.get("spin_hits"), "loop_spin_hits", d.get("loop_spin_hits"), "of", d["methods"]["spmv"]["requests"] + d["methods"]["dot"]["requests"] + d["methods"]["axpby"]["requests"] + d["methods"]["reduce"]["requests"], "spmv/dot/axpby/reduce requests")'
      pkill -TERM -f "spin$spin.sock"; sleep 0.5
    }
  done 2>&1 | tee "$OUT/spin.txt"
  summary+=("spin: see spin.txt")
fi

echo "=== summary"
for s in "${summary[@]}"; do echo "$s"; done
