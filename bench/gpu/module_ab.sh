#!/bin/bash
# module_ab.sh: the same benchmark against several builds of the CUDA module
# (gkcd-cuda.so), alternated, in one call of a lent GPU machine: a kernel
# change measured against the one before it on the same GPU and in the same
# minutes, not against a figure from another call.
#
#   BUILD=build/rel bash bench/gpu/module_ab.sh OUTDIR ROUNDS A.so B.so ...
#
# Each round runs, for each module in turn, bench_multi's (c) on GPU 0 (the
# 27-point stencil 156^3: the partitioned spmv and CG on one block, and the
# single-device CG with its share of the HBM floor; (a) and (b) kept tiny).
set -u
OUT=${1:?outdir}; ROUNDS=${2:?rounds}; shift 2
B=${BUILD:-build/rel}
mkdir -p "$OUT"
for r in $(seq "$ROUNDS"); do
  for so in "$@"; do
    name=$(basename "$so" .so)
    sock=$(mktemp -u /tmp/ab.XXXXXX.sock)
    GKCD_CUDA_MODULE=$(readlink -f "$so") CUDA_VISIBLE_DEVICES=0 \
      "$B/daemon/gkcd" --backend cuda --socket "$sock" > "$OUT/gkcd-$name-$r.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
    timeout 120 "$B/bench/bench_multi" --one "$sock" --all "$sock" --big-n 512 --many-n 256 \
      --many-count 8 --grid 156 --json "$OUT/$name-$r.json" > "$OUT/$name-$r.txt" 2>&1
    echo "== round $r, $name (rc $?)"
    grep -E '^\(c\)' "$OUT/$name-$r.txt"
    kill "$pid"; wait "$pid" 2>/dev/null
  done
done
