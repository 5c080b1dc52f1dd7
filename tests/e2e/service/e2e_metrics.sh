#!/usr/bin/env bash
# e2e_metrics.sh: gkcd's Prometheus metrics, through the "metrics" method
# (gkc metrics) and over HTTP (--metrics-listen), checked with promtool and
# against the requests this script sends.
#
#   bash tests/e2e/service/e2e_metrics.sh GKCD_BINARY GKC_BINARY HAVE_MHD(0|1)
#
# Skips (77) only when promtool (Debian package prometheus) is missing.
set -euo pipefail

GKCD=${1:?usage: e2e_metrics.sh GKCD GKC HAVE_MHD}
GKC=${2:?usage: e2e_metrics.sh GKCD GKC HAVE_MHD}
HAVE_MHD=${3:?usage: e2e_metrics.sh GKCD GKC HAVE_MHD}
command -v promtool >/dev/null || { echo "skip: promtool not found (apt-get install prometheus)"; exit 77; }
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

dir=$(mktemp -d "${TMPDIR:-/tmp}/gkc_e2e_metrics.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [[ -z ${2-} ]] || sed 's/^/     | /' <<<"$2" | head -20; }
export GKC_SOCKET=$dir/s.sock

# One sample of the exposition in $1: metric{labels} with labels given as
# "k=v,k=v" in $2 (a subset; the values of matching series are summed).
value() {
  "$PY" - "$1" "$2" "$3" <<'EOF'
import re, sys
path, name, want = sys.argv[1:]
want = dict(kv.split("=", 1) for kv in want.split(",") if kv)
total, seen = 0.0, False
for line in open(path):
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line.strip())
    if not m or m.group(1) != name:
        continue
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
    if all(labels.get(k) == v for k, v in want.items()):
        total += float(m.group(3)); seen = True
print(repr(total) if seen else "absent")
EOF
}

http_get() { # URL [METHOD] -> "STATUS CONTENT-TYPE" on line 1, then the body
  "$PY" - "$@" <<'EOF'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], method=sys.argv[2] if len(sys.argv) > 2 else "GET")
try:
    r = urllib.request.urlopen(req, timeout=10)
    print(r.status, r.headers.get("Content-Type")); sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("Content-Type")); sys.stdout.write(e.read().decode())
EOF
}

if [[ $HAVE_MHD == 1 ]]; then
  "$GKCD" --socket "$GKC_SOCKET" --log-level info --metrics-listen 127.0.0.1:0 2>"$dir/log" &
else
  "$GKCD" --socket "$GKC_SOCKET" --log-level info 2>"$dir/log" &
fi
pid=$!
for ((i = 0; i < 100; i++)); do "$GKC" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$GKC" ping >/dev/null || { cat "$dir/log"; echo "gkcd did not start"; exit 1; }

"$GKC" metrics >"$dir/m0" && ok "gkc metrics answers" || bad "gkc metrics" "$(cat "$dir/m0")"
out=$(promtool check metrics <"$dir/m0" 2>&1) && ok "promtool accepts the method's text" ||
  bad "promtool check metrics (method)" "$out"

# Some work whose counts we know: 5 sgemm, 3 reduce, 2 refused sgemm.
for i in 1 2 3 4 5; do "$GKC" sgemm --random 32x16x8 >/dev/null; done
for i in 1 2 3; do "$GKC" reduce --random 1000 >/dev/null; done
for i in 1 2; do "$GKC" sgemm --random 8x8x8 --algo no_such_algo >/dev/null 2>&1 || true; done
"$GKC" metrics >"$dir/m1"

check_delta() { # NAME LABELS EXPECTED-DELTA WHAT
  local a b
  a=$(value "$dir/m0" "$1" "$2"); b=$(value "$dir/m1" "$1" "$2")
  [[ $a == absent ]] && a=0
  if [[ $b != absent ]] && "$PY" -c "import sys; sys.exit(abs(($b) - ($a) - ($3)) > 1e-9)"; then
    ok "$4 (+$3)"
  else
    bad "$4: $1{$2} went from $a to $b, expected +$3"
  fi
}
check_delta gkcd_requests_total "method=sgemm,code=ok" 5 "sgemm ok counted"
check_delta gkcd_requests_total "method=reduce,code=ok" 3 "reduce ok counted"
check_delta gkcd_requests_total "method=sgemm,code=invalid_argument" 2 "refused sgemm counted by code"
check_delta gkcd_request_duration_seconds_count "method=sgemm" 5 "sgemm latency observed (all lanes)"
check_delta gkcd_request_duration_seconds_bucket "method=reduce,le=+Inf" 3 "reduce +Inf bucket"
check_delta gkcd_requests_total "method=metrics,code=ok" 1 "metrics calls counted"
k=$(value "$dir/m1" gkcd_kernel_seconds_total "method=sgemm")
[[ $k != absent ]] && "$PY" -c "import sys; sys.exit(not $k > 0)" && ok "sgemm kernel seconds > 0 ($k)" ||
  bad "gkcd_kernel_seconds_total{method=sgemm} is $k"
out=$("$PY" - "$dir/m1" <<'EOF'
import re, sys
series = {}
for line in open(sys.argv[1]):
    m = re.match(r'^gkcd_request_duration_seconds_bucket\{method="(\w+)",lane="(\w+)",le="([^"]+)"\} (\d+)$', line)
    if m:
        series.setdefault(m.group(1, 2), []).append((float(m.group(3)), int(m.group(4))))
for key, b in series.items():
    les = [le for le, _ in b]; counts = [c for _, c in b]
    assert les == sorted(les) and les[-1] == float("inf"), (key, les)
    assert counts == sorted(counts), (key, counts)
print(len(series), "histograms")
EOF
) && ok "buckets ascend and are cumulative ($out)" || bad "histogram buckets" "$out"
for g in gkcd_queue_depth gkcd_connections gkcd_memory_budget_bytes gkcd_memory_used_bytes; do
  [[ $(value "$dir/m1" $g "") != absent ]] && ok "$g present" || bad "$g missing"
done
t=$(value "$dir/m1" gkcd_device_memory_bytes "device=0,state=total")
[[ $t != absent ]] && "$PY" -c "import sys; sys.exit(not $t > 0)" && ok "device 0 memory total > 0" ||
  bad "gkcd_device_memory_bytes{device=0,state=total} is $t"
out=$("$PY" - "$GKC_SOCKET" <<'EOF' 2>&1
import socket, struct, sys
# A raw request with an argument: metrics takes none.
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
req = b"\x94\x00\x07\xa7metrics\x91\x81\xa1x\x01"
s.sendall(req); data = s.recv(4096)
print(data)
sys.exit(0 if b"invalid_argument" in data else 1)
EOF
) && ok "metrics with an argument is invalid_argument" || bad "metrics with an argument" "$out"

if [[ $HAVE_MHD == 1 ]]; then
  port=$(sed -n 's/.*serving GET \/metrics on .* (port \([0-9]*\)).*/\1/p' "$dir/log" | head -1)
  if [[ -z $port ]]; then
    bad "gkcd logs its metrics port" "$(cat "$dir/log")"
  else
    ok "gkcd serves HTTP on port $port"
    "$GKC" sgemm --random 16x16x16 >/dev/null
    http_get "http://127.0.0.1:$port/metrics" >"$dir/h"
    head=$(head -1 "$dir/h"); tail -n +2 "$dir/h" >"$dir/m2"
    [[ $head == "200 text/plain; version=0.0.4"* ]] && ok "GET /metrics: $head" || bad "GET /metrics: $head"
    out=$(promtool check metrics <"$dir/m2" 2>&1) && ok "promtool accepts the HTTP text" ||
      bad "promtool check metrics (http)" "$out"
    cp "$dir/m1" "$dir/m0"; cp "$dir/m2" "$dir/m1"
    check_delta gkcd_requests_total "method=sgemm,code=ok" 1 "HTTP scrape sees the next sgemm"
    check_delta gkcd_requests_total "method=metrics,code=ok" 0 "an HTTP scrape is not a metrics request"
    r=$(http_get "http://127.0.0.1:$port/other")
    [[ $r == 404* ]] && ok "GET /other is 404" ||
      bad "GET /other"
    r=$(http_get "http://127.0.0.1:$port/metrics" POST)
    [[ $r == 405* ]] && ok "POST /metrics is 405" ||
      bad "POST /metrics"
  fi
else
  out=$("$GKCD" --socket "$dir/other.sock" --metrics-listen 127.0.0.1:0 2>&1) && rc=0 || rc=$?
  [[ $rc != 0 && $out == *"without libmicrohttpd"* ]] && ok "--metrics-listen says it is not built in" ||
    bad "--metrics-listen without libmicrohttpd (rc $rc)" "$out"
fi

kill "$pid"; wait "$pid" && ok "gkcd exits cleanly with the HTTP thread running" || bad "gkcd exit status $?"
pid=
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
