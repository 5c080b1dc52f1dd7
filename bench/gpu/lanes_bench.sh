#!/bin/bash
# lanes_bench.sh: sharing one GPU (issue 11), in one call on a GPU machine.
#
#   BUILD=build/gpu bash bench/gpu/lanes_bench.sh OUTDIR     (from the repository root)
#
# Stages (STAGES="tests bench probe", all by default):
#   tests  ctest: test_gpu_lanes (split, lane streams, sliced kernels) and
#          e2e_lanes (gkcd with lanes on, off, and the forced fallback)
#   bench  bench_lanes through gkcd, three daemons in turn:
#            lanes     the default (--latency-sms 8: green contexts)
#            off       --latency-sms 0
#            fallback  GKCD_CUDA_LANES=streams (priorities + slices of --slice-us 100)
#          two clients loop resident sgemm 8192^3, a third sends 2000 tiny
#          requests (reduce of 1000 floats inline, spmv on resident west0067)
#   probe  lanes_probe: the same arrangement without gkcd (plain streams,
#          priority, slices, green contexts)
# CSV and logs go to OUTDIR (lanes.csv, tiny_*.csv, probe.csv, gkcd_*.log,
# status_*.json); a summary table is printed last.  About 2-3 minutes.
set -u
OUT=${1:?usage: lanes_bench.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
STAGES=${STAGES:-"tests bench probe"}
ROOT=$(pwd -P)
BUILD=${BUILD:-build/gpu}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
# ctest's files hold the absolute source path the build was configured in;
# when this copy of the tree lives elsewhere, make that path point here.
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
if [ -n "$SRC" ] && [ "$(readlink -f "$SRC" 2>/dev/null)" != "$ROOT" ]; then
  [ -e "$SRC" ] && mv "$SRC" "$SRC.moved.$$"
  mkdir -p "$(dirname "$SRC")" && ln -s "$ROOT" "$SRC"
fi
B=$ROOT/$BUILD
GKCD=$B/daemon/gkcd GKC=$B/client/gkc
T=$(mktemp -d)
summary=()

if has tests; then
  (cd "$B" && timeout 240 ctest -R '^(test_gpu_lanes|e2e_lanes)$' --output-on-failure) >"$OUT/ctest_lanes.log" 2>&1
  summary+=("ctest test_gpu_lanes e2e_lanes: rc=$? $(grep -E 'tests passed' "$OUT/ctest_lanes.log")")
  grep -E "^lanes: |no green contexts|checks passed|Failed|FAIL" "$OUT/ctest_lanes.log" | head -12
fi

run_cfg() { # label, env (or -), gkcd args...
  local label=$1 env=$2; shift 2
  local sock=$T/$label.sock
  if [ "$env" = - ]; then
    "$GKCD" --backend cuda --socket "$sock" "$@" >"$OUT/gkcd_$label.log" 2>&1 &
  else
    env "$env" "$GKCD" --backend cuda --socket "$sock" "$@" >"$OUT/gkcd_$label.log" 2>&1 &
  fi
  local pid=$! up=0
  for _ in $(seq 300); do "$GKC" --socket "$sock" ping >/dev/null 2>&1 && { up=1; break; }; sleep 0.05; done
  if [ $up = 1 ]; then
    timeout 100 "$B/bench/gpu/bench_lanes" --socket "$sock" --label "$label" --csv "$OUT" \
      --matrix "$ROOT/tests/data/west0067.mtx" 2>>"$OUT/bench_lanes.log"
    echo "bench_lanes $label: rc=$?"
    "$GKC" --socket "$sock" status --json >"$OUT/status_$label.json" 2>&1
  else
    echo "gkcd ($label) did not start"
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  grep -E "lanes:" "$OUT/gkcd_$label.log" | head -4
}

if has bench; then
  rm -f "$OUT/lanes.csv"
  run_cfg lanes -
  run_cfg off - --latency-sms 0
  run_cfg fallback GKCD_CUDA_LANES=streams --slice-us 100
fi

if has probe; then
  timeout 120 "$B/bench/gpu/lanes_probe" --csv "$OUT" >"$OUT/probe.txt" 2>"$OUT/probe.log"
  echo "lanes_probe: rc=$?"
fi

echo
for s in "${summary[@]}"; do echo "$s"; done
[ -f "$OUT/probe.txt" ] && cat "$OUT/probe.txt"
if [ -f "$OUT/lanes.csv" ]; then
  echo
  echo "through gkcd: 2 clients loop resident sgemm 8192^3, 1 client sends 2000 tiny requests"
  awk -F, 'NR > 1 { p50i[$1] = $4; p99i[$1] = $5; p50l[$1] = $6; p99l[$1] = $7; solo[$1] = $8; load[$1] = $9; err[$1] = $11; order[n++] = $1 }
    END {
      printf "%-9s %9s %9s %9s %9s %7s %7s %9s %9s %6s\n", "config", "idle p50", "idle p99", "load p50", "load p99",
             "p50 x", "p99 x", "bulk solo", "bulk load", "errors"
      for (i = 0; i < n; i++) { c = order[i]
        printf "%-9s %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f %9.2f %9.2f %6d\n", c, p50i[c], p99i[c], p50l[c], p99l[c],
               p50l[c] / p50i[c], p99l[c] / p99i[c], solo[c], load[c], err[c] }
      if ("lanes" in load && "off" in solo && solo["off"] > 0) {
        printf "targets (lanes): loaded p50 <= 1.3x idle: %.2fx %s; loaded p99 <= 1.5x idle: %.2fx %s;\n",
               p50l["lanes"] / p50i["lanes"], (p50l["lanes"] <= 1.3 * p50i["lanes"] ? "met" : "MISSED"),
               p99l["lanes"] / p99i["lanes"], (p99l["lanes"] <= 1.5 * p99i["lanes"] ? "met" : "MISSED")
        printf "  bulk loaded with lanes >= 0.92x bulk alone with lanes off: %.2f / %.2f = %.3fx %s\n",
               load["lanes"], solo["off"], load["lanes"] / solo["off"], (load["lanes"] >= 0.92 * solo["off"] ? "met" : "MISSED")
      }
    }' "$OUT/lanes.csv"
fi
