#!/bin/bash
# sgemm_tc_run.sh: one device call for the tf32x3 work (issue 17): the three
# sgemm GPU tests (mma.sync, wgmma, all algos), compute-sanitizer (memcheck, racecheck) on the short
# tf32x3 test, the benchmark (accuracy table, times, optional lab), and the
# SASS instruction mix of the tf32x3 kernels.  Logs under $OUT.
#
# Build here (sm_90 + PTX), copy the binaries into one folder D with this
# script, carry D, then on the device machine:
#   STAGES="tests sanitize bench sass" BENCH_ARGS="--lab" bash D/sgemm_tc_run.sh D
set -u
D=${1:-.}
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"tests sanitize bench"}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader
date -u
if has tests; then
  for t in ${TESTS:-test_gpu_sgemm_wg test_gpu_sgemm_tc test_gpu_sgemm}; do
    timeout ${TEST_TIMEOUT:-90} "$D/$t" > "$OUT/$t.log" 2>&1
    echo "$t rc=$?"; grep -E "FAIL|accuracy|runs,|seed|passed|failed|skipped|^    " "$OUT/$t.log" | head -${FAIL_LINES:-12}
  done
fi
if has sanitize; then
  # racecheck of the short run (2184 runs, 19 configurations) took over 80 s
  {
    for t in ${SAN_TESTS:-test_gpu_sgemm_wg test_gpu_sgemm_tc}; do
    echo "== memcheck $t (short)"
    GKC_GPU_TEST_SHORT=1 timeout ${MEM_TIMEOUT:-120} compute-sanitizer --tool memcheck --leak-check no --print-limit 20 \
      --error-exitcode 9 "$D/$t" 2>&1 | tail -8
    echo "rc=${PIPESTATUS[0]}"
    echo "== racecheck $t (short)"
    GKC_GPU_TEST_SHORT=1 timeout ${RACE_TIMEOUT:-200} compute-sanitizer --tool racecheck --print-limit 20 \
      --error-exitcode 9 "$D/$t" 2>&1 | tail -8
    echo "rc=${PIPESTATUS[0]}"
    done
  } > "$OUT/sanitizer.log" 2>&1
  grep -E "^==|rc=|ERROR SUMMARY|RACECHECK SUMMARY|runs," "$OUT/sanitizer.log"
fi
if has sass && [ -f "$D/gkcu_sgemm_tc.o" ]; then
  cuobjdump -sass "$D/gkcu_sgemm_tc.o" > "$OUT/tc_sass.txt" 2>&1
  # instruction mix per kernel (first entry of each): HMMA count, local memory
  awk '/Function :/ {f=$3} /HMMA/ {h[f]++} /LDL|STL/ {l[f]++} /LDS/ {s[f]++}
       END {for (k in h) printf "%6d HMMA %5d LDS %4d LDL/STL %s\n", h[k], s[k], l[k], k}' "$OUT/tc_sass.txt" |
    sort -k8 | cut -c1-160 | head -30
  gzip -f "$OUT/tc_sass.txt"
fi
if has sass && [ -f "$D/gkcu_sgemm_wg.o" ]; then
  # wgmma kernels: HGMMA, bulk tensor copies, register reallocation, local memory
  cuobjdump -sass "$D/gkcu_sgemm_wg.o" > "$OUT/wg_sass.txt" 2>&1
  awk '/Function :/ {f=$3} /HGMMA/ {h[f]++} /UTMALDG/ {t[f]++} /USETMAXREG/ {r[f]++} /LDL|STL/ {l[f]++}
       END {for (k in h) printf "%5d HGMMA %3d UTMALDG %2d SETMAXREG %4d LDL/STL %s\n", h[k], t[k], r[k], l[k], k}' \
    "$OUT/wg_sass.txt" | cut -c1-150
  gzip -f "$OUT/wg_sass.txt"
fi
if has bench; then
  timeout ${BENCH_TIMEOUT:-170} "$D/bench_sgemm_tc" ${BENCH_ARGS:-} --json "$OUT/bench_sgemm_tc.json" \
    > "$OUT/bench_sgemm_tc.log" 2>&1
  echo "bench rc=$?"
  grep -E "^device|FAILED" "$OUT/bench_sgemm_tc.log" | head
  sed -n '/== accuracy/,/^$/p' "$OUT/bench_sgemm_tc.log" | grep -E "cublas|tf32x3 |wg/" | cut -c1-100
  sed -n '/== accuracy/,/^$/p' "$OUT/bench_sgemm_tc.log" | awk '/tf32x3\// {print $NF, $0}' | sort -g | tail -3 | cut -c1-110
  sed -n '/== summary/,$p' "$OUT/bench_sgemm_tc.log"
fi
# The device tool brings back at most 8 files: bundle the rest.
if [ "$(ls "$OUT" | wc -l)" -gt 8 ]; then
  (cd "$OUT" && tar czf logs.tgz $(ls | grep -vE '^bench_sgemm_tc\.(log|json)$|^logs\.tgz$') &&
    ls | grep -vE '^bench_sgemm_tc\.(log|json)$|^logs\.tgz$' | xargs rm -f)
fi
