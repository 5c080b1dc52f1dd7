#!/usr/bin/env bash
# From a fresh clone to a result: installs what is missing, builds gkc,
# starts gkcd on a private socket, sends it a few requests through the gkc
# command-line client, and stops it again.
#
#   examples/demo.sh          build in ./build, run the demo
#   examples/demo.sh --keep   leave gkcd running afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

tests/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >build-configure.log 2>&1 ||
  { cat build-configure.log; exit 1; }
grep '^-- gkc:' build-configure.log || true
cmake --build build -j "$(nproc 2>/dev/null || echo 2)"

dir=$(mktemp -d "${TMPDIR:-/tmp}/gkc-demo-XXXXXX")
sock=$dir/gkcd.sock
build/daemon/gkcd --socket "$sock" 2>"$dir/gkcd.log" &
pid=$!
stop() { kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
[ $keep = 1 ] || trap stop EXIT

gkc() { build/client/gkc --socket "$sock" "$@"; }
for _ in $(seq 100); do gkc ping >/dev/null 2>&1 && break; sleep 0.1; done

echo; echo "\$ gkc ping"; gkc ping
echo; echo "\$ gkc sgemm --random 512x512x512 --check"; gkc sgemm --random 512x512x512 --check
echo; echo "\$ gkc reduce --random 10000000 --op sum --check"; gkc reduce --random 10000000 --op sum --check
echo; echo "\$ gkc spmv --matrix tests/data/lp_ship04l.mtx --check"; gkc spmv --matrix tests/data/lp_ship04l.mtx --check
echo
if [ $keep = 1 ]; then
  echo "gkcd is still running (pid $pid) on $sock; try: build/client/gkc --socket $sock status"
  echo "stop it with: kill $pid"
else
  echo "Done. To run gkcd yourself: build/daemon/gkcd --socket /tmp/gkcd.sock"
  echo "then, in another shell: build/client/gkc --socket /tmp/gkcd.sock sgemm --random 1024x1024x1024"
fi
