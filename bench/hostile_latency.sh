#!/usr/bin/env bash
# hostile_latency.sh: what the hostile mix costs the clients that behave.
#
#   BUILD=build/rel bash bench/hostile_latency.sh [--json | --csv] [SECONDS]   (from the repository root)
#
# Runs tests/e2e_hostile (built in $BUILD) for SECONDS of attack (default
# 60) after IDLE seconds (default 10) with only its 8 well-behaved clients,
# and prints their round trips, p50 and p99, in both phases of the same run,
# beside what the attackers saw.  The well-behaved clients send one small
# request at a time (sgemm up to 64^3, reduce up to 4096 floats), so a round
# trip is the request path plus queueing behind the attackers' work.
# The test's own checks still run: the exit status is the test's.
# --json or --csv print the well-behaved clients' round trips per phase
# (phase, requests, p50_ms, p99_ms, max_ms; one array, or a header row and
# one row per phase) instead of the test's lines.
set -euo pipefail
fmt=text
while [[ ${1-} == -* ]]; do
  case $1 in
    --json) fmt=json ;;
    --csv) fmt=csv ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "hostile_latency.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
build=${BUILD:-build}
secs=${1:-60}
[ -x "$build/tests/e2e_hostile" ] || { echo "no $build/tests/e2e_hostile: build it first (ninja -C $build e2e_hostile gkcd)" >&2; exit 2; }
[ "$fmt" = text ] &&
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${secs} s of attack"
set +e
out=$(GKCD_BIN=$build/daemon/gkcd GKC_HOSTILE_SECONDS=$secs GKC_HOSTILE_IDLE_SECONDS=${IDLE:-10} \
  "$build/tests/e2e_hostile" 2>&1)
st=$?
set -e
if [ "$fmt" = text ]; then
  grep -E '^(hostile|e2e_hostile)' <<<"$out" || true
else
  # "hostile latency, idle   : 1234 requests, round trip p50 0.1 ms, p99 0.2 ms, max 0.3 ms"
  python3 -c 'import csv, json, re, sys
pat = re.compile(r"^hostile latency, (\S+)\s*: (\d+) requests, round trip p50 ([\d.]+) ms, "
                 r"p99 ([\d.]+) ms, max ([\d.]+) ms")
rows = [dict(phase=m[1], requests=int(m[2]), p50_ms=float(m[3]), p99_ms=float(m[4]), max_ms=float(m[5]))
        for m in map(pat.match, sys.stdin) if m]
if sys.argv[1] == "json":
    print(json.dumps(rows))
else:
    w = csv.DictWriter(sys.stdout, fieldnames=["phase", "requests", "p50_ms", "p99_ms", "max_ms"])
    w.writeheader()
    w.writerows(rows)' "$fmt" <<<"$out"
  [ "$st" = 0 ] || grep -E '^(hostile|e2e_hostile)' <<<"$out" >&2 || true
fi
exit "$st"
