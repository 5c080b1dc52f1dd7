#!/usr/bin/env bash
# cuda_module_test.sh: gkcd and its CUDA backend module (daemon/cuda_module.h).
#   - gkcd links no CUDA library; the module exports one symbol;
#   - the build tree's gkcd finds the module beside it and loads it with every
#     symbol resolved (RTLD_NOW: daemon/gkcd.dynlist is complete), on any
#     machine, GPU or not;
#   - without the module, with a module whose CUDA library is missing, or
#     with one from another build, gkcd says why and serves from the CPU
#     backend (--backend auto) or stops, naming it (--backend cuda).
#   bash tests/cuda_module_test.sh GKCD GKC
set -euo pipefail
gkcd=$1 gkc=$2
module=$(dirname "$gkcd")/gkcd-cuda.so
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gkc-module-XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
fail() { echo "FAIL $1"; [[ -z ${2-} ]] || sed 's/^/     | /' <<<"$2" | head -30; exit 1; }

[[ -f $module ]] || fail "no $module beside $gkcd"
needed=$(readelf -d "$gkcd" | grep NEEDED)
grep -qiE 'cuda|cublas|cusparse' <<<"$needed" && fail "gkcd links a CUDA library" "$needed"
ok "gkcd links no CUDA library"
exported=$(nm -D --defined-only "$module" | awk '{print $3}' | grep -v '^_' || true)
[[ $exported == gkcd_cuda_module_v1 ]] && ok "the module exports gkcd_cuda_module_v1 alone" ||
  fail "the module exports" "$exported"

# start NAME ARGS...: gkcd on $tmp/NAME.sock, log in $tmp/NAME.log; 0 once it
# answers ping (the reply in $tmp/NAME.ping), 1 when it exited (status in
# $tmp/NAME.rc).  Environment for gkcd: through `env` in ARGS.
start() {
  local name=$1 sock=$tmp/$1.sock
  shift
  "$@" --socket "$sock" --log-level info 2>"$tmp/$name.log" &
  pid=$!
  for ((i = 0; i < 300; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      local rc=0
      wait "$pid" || rc=$?
      pid=
      echo "$rc" >"$tmp/$name.rc"
      return 1
    fi
    "$gkc" --socket "$sock" ping --json >"$tmp/$name.ping" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$name: gkcd neither answered nor exited in 30 s" "$(cat "$tmp/$name.log")"
}
stop() {
  kill "$pid"
  wait "$pid" || fail "gkcd's exit status after SIGTERM" "$(cat "$tmp/$1.log")"
  pid=
}

# The build tree's module, as found beside gkcd.
if start beside env -u GKCD_CUDA_MODULE "$gkcd" --backend cuda; then
  grep -q '"backend": "cuda"' "$tmp/beside.ping" || fail "--backend cuda served" "$(cat "$tmp/beside.ping")"
  stop beside
  where="served from the GPU"
else
  grep -q "CUDA backend unavailable" "$tmp/beside.log" || fail "--backend cuda without a GPU" "$(cat "$tmp/beside.log")"
  where="no GPU here: stopped with $(sed -n 's/.*CUDA backend unavailable: //p' "$tmp/beside.log")"
fi
real=$(realpath "$module")
grep -qF "CUDA backend module $real loaded" "$tmp/beside.log" ||
  fail "gkcd did not load $real" "$(cat "$tmp/beside.log")"
ok "--backend cuda loads $real, every symbol resolved; $where"

# No module: a gkcd copied where none lies beside it, nor in ../lib*/gkc.
mkdir -p "$tmp/alone/sbin"
cp "$gkcd" "$tmp/alone/sbin/gkcd"
start alone env -u GKCD_CUDA_MODULE "$tmp/alone/sbin/gkcd" --backend auto ||
  fail "--backend auto without the module did not serve" "$(cat "$tmp/alone.log")"
grep -q '"backend": "cpu"' "$tmp/alone.ping" || fail "backend without the module" "$(cat "$tmp/alone.ping")"
grep -q "gkcd-cuda.so is in neither $tmp/alone/sbin nor" "$tmp/alone.log" ||
  fail "the log does not say where gkcd looked" "$(cat "$tmp/alone.log")"
stop alone
ok "--backend auto without the module serves from the CPU and says where it looked"
start alone_cuda env -u GKCD_CUDA_MODULE "$tmp/alone/sbin/gkcd" --backend cuda &&
  fail "--backend cuda without the module served" "$(cat "$tmp/alone_cuda.ping")"
[[ $(cat "$tmp/alone_cuda.rc") != 0 ]] && grep -q "CUDA backend unavailable: the CUDA backend module gkcd-cuda.so" \
  "$tmp/alone_cuda.log" && ok "--backend cuda without the module stops: $(tail -1 "$tmp/alone_cuda.log")" ||
  fail "--backend cuda without the module" "$(cat "$tmp/alone_cuda.log")"

# GKCD_CUDA_MODULE names the module, alone: a missing file is not looked
# for elsewhere.
start env_missing env GKCD_CUDA_MODULE="$tmp/nonexistent.so" "$gkcd" --backend cuda &&
  fail "--backend cuda with GKCD_CUDA_MODULE missing served" "$(cat "$tmp/env_missing.ping")"
grep -qF "cannot load the CUDA backend module $tmp/nonexistent.so" "$tmp/env_missing.log" &&
  ok "GKCD_CUDA_MODULE naming no file: --backend cuda stops, naming it" ||
  fail "GKCD_CUDA_MODULE missing" "$(cat "$tmp/env_missing.log")"

# A module whose CUDA library is missing (as on a machine without the CUDA
# runtime): its stand-in library is built, linked and removed.
cat >"$tmp/fakert.c" <<'C'
int fake_cudart_version(void) { return 13000; }
C
cat >"$tmp/fake.c" <<'C'
#include <stdio.h>
#include <stddef.h>
int fake_cudart_version(void);
static void abi(char *out, size_t len) { snprintf(out, len, "gkc 0.0.0 from another build"); }
static int create(void **out, int max, int *count, const void *cfg, char *msg, size_t msglen) {
  *count = 0;
  snprintf(msg, msglen, "fake module %d", fake_cudart_version());
  return -8;
}
const struct { void (*abi)(char *, size_t); void *create; } gkcd_cuda_module_v1 = {abi, (void *)create};
C
cc -shared -fPIC -o "$tmp/libgkc_fake_cudart.so.99" -Wl,-soname,libgkc_fake_cudart.so.99 "$tmp/fakert.c"
cc -shared -fPIC -o "$tmp/fake.so" "$tmp/fake.c" "$tmp/libgkc_fake_cudart.so.99"
rm "$tmp/libgkc_fake_cudart.so.99"
start nolib env GKCD_CUDA_MODULE="$tmp/fake.so" "$gkcd" --backend auto ||
  fail "--backend auto with the CUDA library missing did not serve" "$(cat "$tmp/nolib.log")"
grep -q '"backend": "cpu"' "$tmp/nolib.ping" || fail "backend with the CUDA library missing" "$(cat "$tmp/nolib.ping")"
grep -q "cannot load the CUDA backend module $tmp/fake.so: libgkc_fake_cudart.so.99" "$tmp/nolib.log" ||
  fail "the log does not name the missing library" "$(cat "$tmp/nolib.log")"
stop nolib
ok "--backend auto with a CUDA library missing serves from the CPU, naming the library"

# The same module with its library present: refused as from another build.
cc -shared -fPIC -o "$tmp/libgkc_fake_cudart.so.99" -Wl,-soname,libgkc_fake_cudart.so.99 "$tmp/fakert.c"
start other env LD_LIBRARY_PATH="$tmp" GKCD_CUDA_MODULE="$tmp/fake.so" "$gkcd" --backend cuda &&
  fail "a module from another build served" "$(cat "$tmp/other.ping")"
grep -q "fake.so comes from another build (gkc 0.0.0 from another build; this gkcd: gkc " "$tmp/other.log" &&
  ok "a module from another build is refused, naming both builds" ||
  fail "a module from another build" "$(cat "$tmp/other.log")"
echo "$pass passed, 0 failed"
