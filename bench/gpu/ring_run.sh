#!/bin/bash
# ring_run.sh: issue #28's figures and tests on the GPU host, one call:
#
#   bash bench/gpu/ring_run.sh
#
# Build here as round_run.sh says (build/rel, Release, -DGKC_STATIC_DEPS=ON
# -DGKC_FAULT_INJECTION=ON), pack it into .carry/rel.tar.xz and carry
# .carry; or run it where build/rel exists.  Stages:
#   tests   e2e_ring and test_proto_ring (the CUDA gkcd, through ctest), and
#           the Python package's test_ring.py
#   c       bench_ring: 16-float reduce p50/p99 through libgkc, socket and
#           ring, beside a bare Unix-socket echo; gkcd's CPU per request
#           and idle; at gkcd's default --spin-us (100 with 4+ CPUs) and 0
#   python  bench_ring.py: the same from the Python package, beside a
#           Python client of the echo server
# Output in $OUT (ring_*.txt, ring_*.json); a summary last.
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
ROOT=$(pwd -P)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
[ -d build/rel ] || { mkdir -p build && tar xJf .carry/rel.tar.xz -C build; }
B=$ROOT/build/rel
PY=${PY:-python3}
STAGES=${STAGES:-"tests c python"}
has() { case " $STAGES " in *" $1 "*) return 0;; *) return 1;; esac; }

if has tests; then
  (cd "$B" && timeout 600 ctest -R '^(e2e_ring|test_proto_ring)$' --output-on-failure) \
    > "$OUT/ring_tests.txt" 2>&1
  GKCD_BIN=$B/daemon/gkcd timeout 600 $PY -m pytest -p no:cacheprovider -q -rsx \
    tests/python/test_ring.py >> "$OUT/ring_tests.txt" 2>&1
fi
if has c; then
  for spin in default 0; do
    args=(--gkcd "$B/daemon/gkcd" --count 50000 --round 500 --idle 5)
    [ "$spin" = default ] || args+=(--spin-us "$spin")
    timeout 300 "$B/bench/bench_ring" "${args[@]}" > "$OUT/ring_c_spin_$spin.txt" 2>&1
    timeout 300 "$B/bench/bench_ring" "${args[@]}" --json > "$OUT/ring_c_spin_$spin.json" 2>&1
  done
fi
if has python; then
  for spin in default 0; do
    args=(--gkcd "$B/daemon/gkcd" --bench-ring "$B/bench/bench_ring" --count 20000 --round 500)
    [ "$spin" = default ] || args+=(--spin-us "$spin")
    timeout 300 $PY bench/bench_ring.py "${args[@]}" > "$OUT/ring_py_spin_$spin.txt" 2>&1
  done
fi
echo "== ring_run.sh summary =="
grep -hE "tests passed|passed|failed" "$OUT/ring_tests.txt" 2>/dev/null | tail -3
for f in "$OUT"/ring_c_spin_*.txt "$OUT"/ring_py_spin_*.txt; do
  [ -f "$f" ] && { echo "-- $(basename "$f")"; cat "$f"; }
done
