#!/usr/bin/env bash
# Which files of gkcd one request runs through, in order: the measure of
# the method table's "one way through" (daemon/README.md).  Builds gkcd with
# -finstrument-functions and tests/tools/trace_path.c into build/trace,
# starts it on a temporary socket, sends a warm-up sgemm, then traces one
# sgemm (SIGUSR1 on, SIGUSR2 off) and prints the files in order, how many,
# and how many hand-offs go back into a file already visited (two counts:
# tests/tools/trace_path.py says which).
#
#   tests/tools/trace_path.sh [M N K]     (default 64 64 64)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build/trace
mkdir -p "$dir"
cc -O0 -g -c tests/tools/trace_path.c -o "$dir/trace_path.o"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGKC_CUDA=OFF \
  -DCMAKE_C_FLAGS="-finstrument-functions" \
  -DCMAKE_EXE_LINKER_FLAGS="$PWD/$dir/trace_path.o -ldl" >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" --target gkcd >/dev/null
m=${1:-64} n=${2:-64} k=${3:-64}
tmp=$(mktemp -d)
trap '[ -n "${pid:-}" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
GKCD_TRACE_OUT=$tmp/trace "$dir/daemon/gkcd" --socket "$tmp/s" --threads 1 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/s" ] && break; sleep 0.05; done
# One connection: a warm-up sgemm (first-use paths), then the traced one.
PYTHONPATH=python python3 - "$tmp/s" "$pid" "$m" "$n" "$k" <<'PY'
import os, signal, sys, time
import numpy as np
import gkc
sock, pid, m, n, k = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
c = gkc.connect(sock)
a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
c.sgemm(a, b)
time.sleep(0.2)
os.kill(pid, signal.SIGUSR1)
time.sleep(0.1)
c.sgemm(a, b)
time.sleep(0.1)
os.kill(pid, signal.SIGUSR2)
c.close()
PY
kill -TERM $pid
wait $pid || true
python3 tests/tools/trace_path.py "$dir/daemon/gkcd" "$tmp/trace"
