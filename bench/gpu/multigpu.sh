#!/bin/bash
# multigpu.sh: one device vs every device of a host, through gkcd (issues 14
# and 15), in one command:
#
#   BUILD=build/gpu bash bench/gpu/multigpu.sh [--split | --cpu] [--small] OUTDIR
#
#   (default)  every visible GPU: "one" is gkcd --devices 0, "all" is gkcd
#              with every GPU; (d) P2P bandwidth between them.
#   --split    one GPU cut in two: "one" is gkcd whole, "all" is gkcd
#              --split-device 2 (SM partitions by green contexts).
#   --cpu      the CPU backend: "one" is --cpu-devices 1, "all" --cpu-devices
#              2 (a smoke test of this script where there is no GPU; implies
#              --small).
#   --small    small sizes (sgemm 1024 and 512, stencil 40^3, fewer requests).
#
# Stages: (a)-(c) bench_multi --one --all (sgemm 16384^3 split by the daemon,
# 256 x sgemm 4096^3 from 8 connections, spmv and CG on a partitioned 27-point
# stencil of 101M nonzeros); (d) p2p_bw with `nvidia-smi topo -m` (GPUs only);
# (e) gkcd with GKCD_FAULT=device_lost:dev=1:after=K (needs a gkcd built with
# -DGKC_FAULT_INJECTION=ON) and bench_multi --fault: device 1 fails mid-run,
# the other devices serve every later request.  Logs and JSON go to OUTDIR
# (multigpu.json gathers the figures); a table is printed.  Extra bench_multi
# options may follow in BENCH_ARGS.
set -u
MODE=gpus SMALL=0
while [ $# -gt 1 ]; do
  case $1 in
    --split) MODE=split ;;
    --cpu) MODE=cpu SMALL=1 ;;
    --small) SMALL=1 ;;
    *) echo "multigpu.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
OUT=${1:?usage: multigpu.sh [--split | --cpu] [--small] OUTDIR}
case $OUT in --help|-h) sed -n '2,25p' "$0"; exit 0 ;; esac
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd -P)
ROOT=$(pwd -P)
B=$ROOT/${BUILD:-build/gpu}
GKCD=$B/daemon/gkcd GKC=$B/client/gkc BENCH=$B/bench/bench_multi P2P=$B/bench/gpu/p2p_bw
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in "$GKCD" "$GKC" "$BENCH"; do
  [ -x "$f" ] || { echo "multigpu.sh: $f is missing (build first; BUILD=$B)" >&2; exit 1; }
done
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM

if [ $SMALL = 1 ]; then
  SIZES="--big-n 1024 --many-n 512 --many-count 64 --grid 40 --spmv-reps 10 --cg-iters 50 --fault-count 12 --fault-n 128"
  FAULT_AFTER=10
else
  SIZES=""
  FAULT_AFTER=40
fi
COMMON=(--max-request-bytes 3G --max-conn-reply-bytes 4G --memory-budget 24G --request-timeout 600)
case $MODE in
  gpus)
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    ONE=(--backend cuda --devices 0) ALL=(--backend cuda)
    [ "${NGPU:-0}" -ge 2 ] || echo "multigpu.sh: $NGPU GPU(s) visible: 'all' is the same as 'one' (use --split on one GPU)" ;;
  split) ONE=(--backend cuda) ALL=(--backend cuda --split-device 2) ;;
  cpu) ONE=(--backend cpu --cpu-devices 1) ALL=(--backend cpu --cpu-devices 2) ;;
esac

start() { # label, env assignment or -, gkcd args...
  local label=$1 env=$2; shift 2
  local sock=$T/$label.sock
  if [ "$env" = - ]; then
    "$GKCD" --socket "$sock" "${COMMON[@]}" "$@" >"$OUT/gkcd_$label.log" 2>&1 &
  else
    env "$env" "$GKCD" --socket "$sock" "${COMMON[@]}" "$@" >"$OUT/gkcd_$label.log" 2>&1 &
  fi
  PIDS+=($!)
  for _ in $(seq 600); do "$GKC" --socket "$sock" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "multigpu.sh: gkcd ($label: $*) did not come up; its log:" >&2
  tail -20 "$OUT/gkcd_$label.log" >&2
  return 1
}
stop_all() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; PIDS=(); }

echo "== multigpu.sh: mode $MODE$([ $SMALL = 1 ] && echo ', small sizes'); $(date -u +%FT%TZ)"
command -v nvidia-smi >/dev/null && nvidia-smi -L
rc=0
if start one - "${ONE[@]}" && start all - "${ALL[@]}"; then
  "$GKC" --socket "$T/all.sock" status --json >"$OUT/status_all.json" 2>&1
  # shellcheck disable=SC2086
  # (a) sends 2 GiB and takes 1 GiB back by value: past libgkc's default
  # arena (1 GiB), which would send it inline; the arena is what a caller
  # of that size would set (GKC_SHM_MAX_BYTES).
  GKC_SHM_MAX_BYTES=${GKC_SHM_MAX_BYTES:-4G} \
  timeout 1200 "$BENCH" --one "$T/one.sock" --all "$T/all.sock" $SIZES ${BENCH_ARGS:-} \
    --json "$OUT/throughput.json" 2>&1 | tee "$OUT/bench_multi.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
else
  rc=1
fi
stop_all

P2P_JSON=null
if [ $MODE = gpus ] && [ -x "$P2P" ]; then
  echo "== (d) GPU-to-GPU copies; nvidia-smi topo -m:"
  nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt"
  "$P2P" --json "$OUT/p2p.json" 2>&1 | tee "$OUT/p2p.log"
  [ -s "$OUT/p2p.json" ] && P2P_JSON=$(cat "$OUT/p2p.json")
fi

echo "== (e) device 1 lost after $FAULT_AFTER of its jobs (GKCD_FAULT=device_lost:dev=1:after=$FAULT_AFTER)"
if start fault "GKCD_FAULT=device_lost:dev=1:after=$FAULT_AFTER" "${ALL[@]}"; then
  # shellcheck disable=SC2086
  timeout 600 "$BENCH" --fault "$T/fault.sock" $SIZES ${BENCH_ARGS:-} --json "$OUT/fault.json" 2>&1 |
    tee "$OUT/bench_fault.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  "$GKC" --socket "$T/fault.sock" status --json >"$OUT/status_fault.json" 2>&1
  grep -iE "lost|fault" "$OUT/gkcd_fault.log" | head -5
else
  rc=1
fi
stop_all

{
  echo "{\"mode\": \"$MODE\", \"small\": $SMALL, \"date\": \"$(date -u +%FT%TZ)\","
  echo " \"throughput\": $(cat "$OUT/throughput.json" 2>/dev/null || echo null),"
  echo " \"p2p\": $P2P_JSON,"
  echo " \"fault\": $(cat "$OUT/fault.json" 2>/dev/null || echo null)}"
} >"$OUT/multigpu.json"
echo "== figures: $OUT/multigpu.json (rc=$rc)"
exit $rc
