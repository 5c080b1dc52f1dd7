#!/usr/bin/env bash
# Checks the systemd integration that CMake generates in BUILD_DIR/systemd:
#   - systemd-analyze verify of gkcd.socket + gkcd.service (a copy whose
#     ExecStart= names the built gkcd, since the installed path does not exist
#     in a build tree; nothing else is changed),
#   - systemd-analyze security --offline: fails above an overall exposure of
#     2.5 (GKC_MAX_EXPOSURE overrides), prints the score and what remains,
#   - systemd-sysusers --dry-run and systemd-tmpfiles --root on the sysusers.d
#     and tmpfiles.d files, and that the units name the user and group that
#     sysusers creates,
#   - gkcd.conf.example: every option of `gkcd --help` is documented there,
#     no unknown key, and gkcd accepts the file with its settings uncommented.
# Usage: systemd_test.sh BUILD_DIR/systemd SOURCE_DIR
# The built gkcd is $GKCD_BINARY, else BUILD_DIR/daemon/gkcd.
# Exit status: 0 all passed, 1 something failed, 77 skipped (no systemd-analyze).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR/systemd SOURCE_DIR" >&2
  exit 2
fi
gen=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
max_exposure=${GKC_MAX_EXPOSURE:-2.5}
gkcd=${GKCD_BINARY:-$gen/../daemon/gkcd}

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze is not installed"
  exit 77
fi
systemd-analyze --version | head -1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gkc-systemd-XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export SYSTEMD_COLORS=0 SYSTEMD_PAGER=cat SYSTEMD_LOG_COLOR=0

passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
indent() { sed 's/^/    /'; }

# --- the generated files ------------------------------------------------------
missing=
for f in gkcd.service gkcd.socket gkcd.sysusers gkcd.tmpfiles; do
  [ -f "$gen/$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  fail "not generated in $gen:$missing"
  echo "$passed passed, $failed failed"
  exit 1
fi
if grep -n '@[A-Za-z_]*@' "$gen/gkcd.service"; then
  fail "gkcd.service still holds configure_file placeholders"
else
  pass "gkcd.service has no placeholders left"
fi
exec_lines=$(grep -c '^ExecStart=' "$gen/gkcd.service")
installed=$(sed -n 's/^ExecStart=//p' "$gen/gkcd.service" | head -1)
if [ "$exec_lines" = 1 ] && [[ "$installed" == /*/gkcd ]]; then
  pass "ExecStart= names the installed daemon: $installed"
else
  fail "expected one ExecStart=/ABSOLUTE/PATH/gkcd line, got $exec_lines: '$installed'"
fi

# --- systemd-analyze verify ---------------------------------------------------
# A copy of the units in which only ExecStart= changes: to the built gkcd,
# or to true(1) where there is none, so that verify's check that the command
# exists passes in a build tree.
run_bin=$gkcd
[ -x "$run_bin" ] || run_bin=$(type -P true)
run_bin=$(cd "$(dirname "$run_bin")" && pwd)/$(basename "$run_bin")
mkdir -p "$tmp/units"
cp "$gen/gkcd.socket" "$tmp/units/"
sed "s|^ExecStart=.*|ExecStart=$run_bin|" "$gen/gkcd.service" >"$tmp/units/gkcd.service"
changed=$(diff "$gen/gkcd.service" "$tmp/units/gkcd.service" | grep -c '^>')
[ "$changed" = 1 ] || fail "the verify copy of gkcd.service differs in $changed lines, not 1"
out=$(cd "$tmp/units" && systemd-analyze verify --man=no --generators=no ./gkcd.socket ./gkcd.service 2>&1)
rc=$?
# Complaints about units other than ours (a distribution's own files that
# verify loads as dependencies) are shown, not counted.
ours=$(printf '%s\n' "$out" | grep -i 'gkcd' || true)
if [ $rc -eq 0 ] && [ -z "$ours" ]; then
  pass "systemd-analyze verify gkcd.socket gkcd.service (ExecStart=$run_bin)"
  [ -n "$out" ] && printf '%s\n' "$out" | indent
else
  fail "systemd-analyze verify (exit $rc):"
  printf '%s\n' "$out" | indent
fi

# --- systemd-analyze security -------------------------------------------------
# --offline (systemd 250 and later) reads the unit file instead of asking PID 1.
if ! systemd-analyze --help 2>&1 | grep -q -- '--offline'; then
  echo "SKIP: this systemd-analyze has no 'security --offline': exposure not checked"
  sec='' rc=0 score=skip
else
  sec=$(systemd-analyze security --offline=yes --no-pager "$tmp/units/gkcd.service" 2>&1)
  rc=$?
  score=$(printf '%s\n' "$sec" | sed -n 's/.*Overall exposure level for gkcd.service: \([0-9.]*\).*/\1/p')
fi
if [ "$score" = skip ]; then
  :
elif [ -z "$score" ]; then
  fail "systemd-analyze security printed no overall exposure (exit $rc):"
  printf '%s\n' "$sec" | indent
else
  # The items that still add to the exposure: lines ending in a number.
  remaining=$(printf '%s\n' "$sec" | awk '$NF ~ /^[0-9]+\.[0-9]+$/ && $0 !~ /Overall/ {
      n = $NF; $1 = ""; sub(/[ \t]+[0-9.]+$/, ""); printf "%s\t%s\n", n, $0 }' |
    sort -t "$(printf '\t')" -k1,1nr | awk -F '\t' '{ printf "%4s %s\n", $1, $2 }')
  if awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s + 0 <= m + 0) }'; then
    pass "overall exposure of gkcd.service: $score (limit $max_exposure)"
  else
    fail "overall exposure of gkcd.service: $score, above the limit $max_exposure"
  fi
  n=$(printf '%s\n' "$remaining" | grep -c .)
  echo "    remaining exposure, largest first:"
  printf '%s\n' "$remaining" | head -15 | indent
  [ "$n" -gt 15 ] && echo "    ... and $((n - 15)) more"
fi

# --- sysusers.d ---------------------------------------------------------------
user=$(sed -n 's/^User=//p' "$gen/gkcd.service")
group=$(sed -n 's/^Group=//p' "$gen/gkcd.service")
sgroup=$(sed -n 's/^SocketGroup=//p' "$gen/gkcd.socket")
if command -v systemd-sysusers >/dev/null 2>&1 && systemd-sysusers --help 2>&1 | grep -q -- --dry-run; then
  mkdir -p "$tmp/sysroot"
  out=$(systemd-sysusers --root="$tmp/sysroot" --dry-run "$gen/gkcd.sysusers" 2>&1)
  rc=$?
  gid=$(printf '%s\n' "$out" | sed -n "s/^Creating group '$group' with GID \([0-9]*\).*/\1/p")
  ugid=$(printf '%s\n' "$out" | sed -n "s/^Creating user '$user' .* with UID [0-9]* and GID \([0-9]*\).*/\1/p")
  if [ $rc -eq 0 ] && [ -n "$gid" ] && [ "$ugid" = "$gid" ]; then
    pass "systemd-sysusers --dry-run: creates group '$group' and user '$user' in it"
  else
    fail "systemd-sysusers --dry-run (exit $rc) did not create user '$user' with group '$group':"
    printf '%s\n' "$out" | indent
  fi
else
  echo "SKIP: systemd-sysusers with --dry-run is not available"
fi
if [ -n "$user" ] && [ "$group" = "$user" ] && [ "$sgroup" = "$group" ] &&
   grep -Eq "^g[[:space:]]+${group}[[:space:]]" "$gen/gkcd.sysusers" &&
   grep -Eq "^u[[:space:]]+${user}[[:space:]]+-:${group}[[:space:]]" "$gen/gkcd.sysusers"; then
  pass "User=$user, Group=$group and SocketGroup=$sgroup are the ones gkcd.sysusers creates"
else
  fail "User='$user' Group='$group' SocketGroup='$sgroup' do not match gkcd.sysusers"
fi

# --- tmpfiles.d ---------------------------------------------------------------
if command -v systemd-tmpfiles >/dev/null 2>&1; then
  mkdir -p "$tmp/tmproot"
  out=$(systemd-tmpfiles --root="$tmp/tmproot" --create "$gen/gkcd.tmpfiles" 2>&1)
  rc=$?
  mode=$(stat -c %a "$tmp/tmproot/etc/gkcd" 2>/dev/null)
  # Unprivileged, tmpfiles cannot give the directory to root: that alone is fine.
  others=$(printf '%s\n' "$out" | grep -v 'fchownat() of .* failed: Operation not permitted' | grep -v '^$' || true)
  if [ "$mode" = 755 ] && { [ $rc -eq 0 ] || { [ "$(id -u)" != 0 ] && [ -z "$others" ]; }; }; then
    pass "systemd-tmpfiles --create: /etc/gkcd, mode 0755"
  else
    fail "systemd-tmpfiles --create (exit $rc, /etc/gkcd mode '${mode:-none}'):"
    printf '%s\n' "$out" | indent
  fi
else
  echo "SKIP: systemd-tmpfiles is not installed"
fi

# --- gkcd.conf.example --------------------------------------------------------
example=$src/systemd/gkcd.conf.example
if [ ! -x "$gkcd" ]; then
  echo "SKIP: no built gkcd at $gkcd: gkcd.conf.example not checked"
else
  opts=$("$gkcd" --help | grep -oE '^  --[a-z-]+' | sed 's/^  --//' | grep -vxE 'config|help|version' | tr - _ | sort)
  keys=$(grep -oE '^#[a-z_]+ = ' "$example" | sed 's/^#//; s/ = $//' | sort)
  undocumented=$(comm -23 <(printf '%s\n' "$opts") <(printf '%s\n' "$keys") | tr '\n' ' ')
  unknown=$(comm -13 <(printf '%s\n' "$opts") <(printf '%s\n' "$keys") | tr '\n' ' ')
  if [ -n "$opts" ] && [ -z "${undocumented// /}" ] && [ -z "${unknown// /}" ]; then
    pass "gkcd.conf.example documents all $(printf '%s\n' "$opts" | wc -l) options of gkcd --help"
  else
    fail "gkcd.conf.example: undocumented: [${undocumented% }] unknown: [${unknown% }]"
  fi
  # With its settings uncommented (but the socket, and the user and group
  # names, which need accounts that may not exist here), gkcd must start.
  grep -E '^#[a-z_]+ = ' "$example" | grep -vE '^#(socket|allow_users|allow_groups) ' |
    sed 's/^#//' >"$tmp/gkcd.conf"
  (unset LISTEN_FDS LISTEN_PID LISTEN_FDNAMES NOTIFY_SOCKET
   exec "$gkcd" --config "$tmp/gkcd.conf" --socket "$tmp/gkcd.sock" --backend cpu --threads 1) \
    >"$tmp/gkcd.log" 2>&1 &
  pid=$!
  up=0
  for _ in $(seq 200); do
    [ -S "$tmp/gkcd.sock" ] && { up=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if [ $up = 1 ]; then
    pass "gkcd starts with gkcd.conf.example's settings uncommented ($(wc -l <"$tmp/gkcd.conf") keys)"
  else
    fail "gkcd did not start with gkcd.conf.example's settings uncommented:"
    indent <"$tmp/gkcd.log"
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
