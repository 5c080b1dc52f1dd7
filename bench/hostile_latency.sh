#!/usr/bin/env bash
# hostile_latency.sh: what the hostile mix costs the clients that behave.
#
#   BUILD=build/rel bash bench/hostile_latency.sh [SECONDS]   (from the repository root)
#
# Runs tests/e2e_hostile (built in $BUILD) for SECONDS of attack (default
# 60) after IDLE seconds (default 10) with only its 8 well-behaved clients,
# and prints their round trips, p50 and p99, in both phases of the same run,
# beside what the attackers saw.  The well-behaved clients send one small
# request at a time (sgemm up to 64^3, reduce up to 4096 floats), so a round
# trip is the request path plus queueing behind the attackers' work.
# The test's own checks still run: the exit status is the test's.
set -euo pipefail
build=${BUILD:-build}
secs=${1:-60}
[ -x "$build/tests/e2e_hostile" ] || { echo "no $build/tests/e2e_hostile: build it first (ninja -C $build e2e_hostile gkcd)" >&2; exit 2; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${secs} s of attack"
set +e
GKCD_BIN=$build/daemon/gkcd GKC_HOSTILE_SECONDS=$secs GKC_HOSTILE_IDLE_SECONDS=${IDLE:-10} \
  "$build/tests/e2e_hostile" 2>&1 | grep -E '^(hostile|e2e_hostile)'
st=${PIPESTATUS[0]}
exit "$st"
