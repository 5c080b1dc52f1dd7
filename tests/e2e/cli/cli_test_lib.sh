# cli_test_lib.sh: what the end-to-end tests of the gkc command-line client
# (e2e_cli.sh, e2e_cli_batch.sh) share: their arguments and environment, a
# scratch folder, gkcd start-up, running gkc, checks that count, readers of
# its JSON and .npy output, a test matrix, and the summary.  Sourced with
# TEST_NAME set and the script's arguments (GKCD_BINARY GKC_BINARY) in $@.
#
# Environment: GKC_TEST_DATA (default: tests/data, two folders up) holds
# west0067.mtx and lp_ship04l.mtx; GKC_SHARED_MATRICES, when it names an
# existing folder, adds every .mtx(.gz) in it to e2e_cli's spmv checks.
# Needs python3 (JSON and .npy checks); uses numpy only when it imports.
set -euo pipefail

GKCD=${1:?usage: $TEST_NAME.sh GKCD_BINARY GKC_BINARY}
GKC=${2:?usage: $TEST_NAME.sh GKCD_BINARY GKC_BINARY}
DATA=${GKC_TEST_DATA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/data}
SHARED=${GKC_SHARED_MATRICES:-}
for f in "$GKCD" "$GKC"; do
  [[ -x $f ]] || { echo "$TEST_NAME: $f is not an executable" >&2; exit 2; }
done
for m in west0067 lp_ship04l; do
  [[ -r $DATA/$m.mtx ]] || { echo "$TEST_NAME: $DATA/$m.mtx not found (GKC_TEST_DATA)" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "$TEST_NAME: python3 is needed" >&2; exit 77; }
HAVE_NUMPY=0
python3 -c 'import numpy' 2>/dev/null && HAVE_NUMPY=1

dir=$(mktemp -d "${TMPDIR:-/tmp}/gkc_$TEST_NAME.XXXXXX")
sock=$dir/s.sock
daemon_pids=()
cleanup() {
  local p
  for p in "${daemon_pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL $1"
  if [[ -n ${2-} ]]; then head -20 <<<"$2" | while IFS= read -r l; do echo "     | $l"; done; fi
}
skip() { echo "skip $1"; }

# Starts a gkcd on socket $1, log $2, more gkcd options after them (extra
# environment in the caller's env); waits until it answers a ping, at most
# ~10 s.
start_daemon() {
  local s=$1 log=$2 i
  shift 2
  "$GKCD" --socket "$s" --log-level warn "$@" 2>"$log" &
  daemon_pids+=($!)
  for ((i = 0; i < 100; i++)); do
    if "$GKC" --socket "$s" ping >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "${daemon_pids[-1]}" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "$TEST_NAME: gkcd did not come up on $s:" >&2
  cat "$log" >&2
  return 1
}

# run ARGS...: gkc on our socket; stdout in $dir/out, stderr in $dir/err, exit in $rc.
run() {
  set +e
  "$GKC" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  set -e
}
# run_raw ARGS...: like run, without --socket.
run_raw() {
  set +e
  "$GKC" "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  set -e
}
output() { cat "$dir/out" "$dir/err"; }

# expect NAME RC [GREP_PATTERN...]: the last run exited RC and its output
# (stdout and stderr) matches every pattern (grep -E).
expect() {
  local name=$1 want=$2 p
  shift 2
  if [[ $rc != "$want" ]]; then
    bad "$name (exit $rc, expected $want)" "$(output)"
    return 0
  fi
  for p in "$@"; do
    # Not grep -q: it would stop reading at the first match, and under
    # pipefail the writer's SIGPIPE would turn a match into a failure.
    if ! output | grep -E -- "$p" >/dev/null; then
      bad "$name (output lacks /$p/)" "$(output)"
      return 0
    fi
  done
  ok "$name"
}

# expect_json NAME PYTHON_CONDITION: the last run exited 0 and its stdout is
# one JSON object d for which the condition holds.
expect_json() {
  local name=$1 cond=$2 why
  if [[ $rc != 0 ]]; then
    bad "$name (exit $rc)" "$(output)"
    return 0
  fi
  if why=$(python3 -c '
import json, sys
num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
try:
    d = json.load(open(sys.argv[1]))
except ValueError as e:
    sys.exit("not JSON: %s" % e)
if not isinstance(d, dict):
    sys.exit("not a JSON object")
if not eval(sys.argv[2]):
    sys.exit("condition false: " + sys.argv[2])
' "$dir/out" "$cond" 2>&1); then
    ok "$name"
  else
    bad "$name ($why)" "$(output)"
  fi
}

# The JSON field $1 of the last run's stdout.
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$dir/out" "$1"; }

# npy_info FILE: "descr shape sum" of a float32 .npy, parsed without numpy.
npy_info() {
  python3 -c '
import ast, struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:6] == b"\x93NUMPY", "bad magic"
major = b[6]
hl, off = (struct.unpack("<H", b[8:10])[0], 10) if major == 1 else (struct.unpack("<I", b[8:12])[0], 12)
assert (off + hl) % 64 == 0, "data not 64-byte aligned"
h = ast.literal_eval(b[off:off + hl].decode("latin1"))
n = 1
for s in h["shape"]:
    n *= s
data = b[off + hl:]
assert len(data) == 4 * n, "data holds %d bytes, shape says %d" % (len(data), 4 * n)
vals = struct.unpack("<%df" % n, data)
assert not h["fortran_order"]
print(h["descr"], "x".join(map(str, h["shape"])), repr(sum(vals)))
' "$1"
}

# write_laplacian PATH G: the 2-D Laplacian (SPD) on a G x G grid, as a
# general Matrix Market file.
write_laplacian() {
  python3 - "$1" "$2" <<'PY'
import sys
path, g = sys.argv[1], int(sys.argv[2])
n = g * g
ent = []
for i in range(g):
    for j in range(g):
        r = i * g + j
        for di, dj, v in ((0, 0, 4), (-1, 0, -1), (1, 0, -1), (0, -1, -1), (0, 1, -1)):
            ii, jj = i + di, j + dj
            if 0 <= ii < g and 0 <= jj < g:
                ent.append((r + 1, ii * g + jj + 1, v))
with open(path, "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n, n, len(ent)))
    f.writelines("%d %d %g\n" % e for e in ent)
PY
}

# finish: gkcd survived everything; the counts; the exit status.
finish() {
  if kill -0 "${daemon_pids[0]}" 2>/dev/null; then
    ok "gkcd is still running after all of the above"
  else
    bad "gkcd is still running after all of the above" "$(cat "$dir/gkcd.log")"
  fi
  echo "($((SECONDS - T0)) s; numpy: $([[ $HAVE_NUMPY == 1 ]] && echo yes || echo no))"
  echo "$pass passed, $fail failed"
  [[ $fail == 0 ]]
}
