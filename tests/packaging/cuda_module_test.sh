#!/usr/bin/env bash
# cuda_module_test.sh: gkcd and its CUDA backend module (daemon/cuda_module.h).
#   - gkcd links no CUDA library; the module exports one symbol;
#   - gkcd asks the NVIDIA driver (libcuda.so.1) for a device before it loads
#     the module: with no driver, or a driver that sees no device, the module
#     and the CUDA libraries are never mapped;
#   - the build tree's gkcd finds the module beside it and loads it with every
#     symbol resolved (RTLD_NOW: daemon/gkcd.dynlist is complete), on any
#     machine, GPU or not: a stand-in driver that reports one device (or
#     none) is built here and put first on LD_LIBRARY_PATH;
#   - without the module, with a module whose CUDA library is missing, or
#     with one from another build, gkcd says why and serves from the CPU
#     backend (--backend auto) or stops, naming it (--backend cuda).
#   bash tests/packaging/cuda_module_test.sh GKCD GKC
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

# A stand-in NVIDIA driver: cuInit and cuDeviceGetCount alone, reporting
# FAKE_CUDA_DEVICES devices (1 when unset).  The CUDA runtime finds it too,
# and fails on it: a module loaded with it never serves.
mkdir -p "$tmp/driver"
cat >"$tmp/fakecuda.c" <<'C'
#include <stdlib.h>
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int *n) {
  const char *e = getenv("FAKE_CUDA_DEVICES");
  *n = e ? atoi(e) : 1;
  return 0;
}
C
cc -shared -fPIC -o "$tmp/driver/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$tmp/fakecuda.c"
driver="LD_LIBRARY_PATH=$tmp/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
real=$(realpath "$module")

# The module's libraries are in gkcd's memory map, or not: 0 when mapped.
mapped() { grep -qE 'gkcd-cuda\.so|libcublas|libcusparse|libcudart' "/proc/$pid/maps"; }

# A driver that sees no device: the module is not loaded (gkcd stays small).
start nodev env -u GKCD_CUDA_MODULE FAKE_CUDA_DEVICES=0 "$driver" "$gkcd" --backend auto ||
  fail "--backend auto with no device did not serve" "$(cat "$tmp/nodev.log")"
grep -q '"backend": "cpu"' "$tmp/nodev.ping" || fail "backend with no device" "$(cat "$tmp/nodev.ping")"
mapped && fail "the module was mapped with no device" "$(grep -E 'cuda|cublas|cusparse' /proc/$pid/maps)"
grep -q "the NVIDIA driver sees no device.*gkcd-cuda.so not loaded" "$tmp/nodev.log" ||
  fail "the log does not say why the module was not loaded" "$(cat "$tmp/nodev.log")"
stop nodev
ok "a driver that sees no device: --backend auto serves from the CPU without mapping the module"

# The real environment: a GPU serves; no driver stops before the module.
if start beside env -u GKCD_CUDA_MODULE "$gkcd" --backend cuda; then
  grep -q '"backend": "cuda"' "$tmp/beside.ping" || fail "--backend cuda served" "$(cat "$tmp/beside.ping")"
  grep -qF "CUDA backend module $real loaded" "$tmp/beside.log" ||
    fail "gkcd did not load $real" "$(cat "$tmp/beside.log")"
  stop beside
  ok "--backend cuda loads $real and serves from the GPU"
else
  grep -q "CUDA backend unavailable" "$tmp/beside.log" || fail "--backend cuda without a GPU" "$(cat "$tmp/beside.log")"
  ok "no GPU here: --backend cuda stopped with $(sed -n 's/.*CUDA backend unavailable: //p' "$tmp/beside.log")"
fi
if ! [[ -e /dev/nvidiactl ]] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  start nodriver env -u GKCD_CUDA_MODULE "$gkcd" --backend auto ||
    fail "--backend auto with no driver did not serve" "$(cat "$tmp/nodriver.log")"
  mapped && fail "the module was mapped with no driver" "$(grep -E 'cuda|cublas|cusparse' /proc/$pid/maps)"
  grep -q "no NVIDIA driver (.*libcuda.so.1.*); .*gkcd-cuda.so not loaded" "$tmp/nodriver.log" ||
    fail "the log does not say the driver is missing" "$(cat "$tmp/nodriver.log")"
  stop nodriver
  ok "no NVIDIA driver: --backend auto serves from the CPU without mapping the module"
fi

# With a device reported, the module is loaded with every symbol resolved,
# on any machine (here the stand-in driver's device, which the runtime then
# refuses).
start loads env -u GKCD_CUDA_MODULE "$driver" "$gkcd" --backend auto ||
  fail "--backend auto with the stand-in driver did not serve" "$(cat "$tmp/loads.log")"
grep -qF "CUDA backend module $real loaded" "$tmp/loads.log" ||
  fail "gkcd did not load $real" "$(cat "$tmp/loads.log")"
grep -q '"backend": "cpu"' "$tmp/loads.ping" || fail "backend on the stand-in driver" "$(cat "$tmp/loads.ping")"
stop loads
ok "--backend auto loads $real, every symbol resolved; the runtime said: $(sed -n 's/.*no usable GPU (\(.*\)); serving.*/\1/p' "$tmp/loads.log")"

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
start env_missing env "$driver" GKCD_CUDA_MODULE="$tmp/nonexistent.so" "$gkcd" --backend cuda &&
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
start nolib env "$driver" GKCD_CUDA_MODULE="$tmp/fake.so" "$gkcd" --backend auto ||
  fail "--backend auto with the CUDA library missing did not serve" "$(cat "$tmp/nolib.log")"
grep -q '"backend": "cpu"' "$tmp/nolib.ping" || fail "backend with the CUDA library missing" "$(cat "$tmp/nolib.ping")"
grep -q "cannot load the CUDA backend module $tmp/fake.so: libgkc_fake_cudart.so.99" "$tmp/nolib.log" ||
  fail "the log does not name the missing library" "$(cat "$tmp/nolib.log")"
stop nolib
ok "--backend auto with a CUDA library missing serves from the CPU, naming the library"

# The same module with its library present: refused as from another build.
cc -shared -fPIC -o "$tmp/libgkc_fake_cudart.so.99" -Wl,-soname,libgkc_fake_cudart.so.99 "$tmp/fakert.c"
start other env LD_LIBRARY_PATH="$tmp/driver:$tmp" GKCD_CUDA_MODULE="$tmp/fake.so" "$gkcd" --backend cuda &&
  fail "a module from another build served" "$(cat "$tmp/other.ping")"
grep -q "fake.so comes from another build (gkc 0.0.0 from another build; this gkcd: gkc " "$tmp/other.log" &&
  ok "a module from another build is refused, naming both builds" ||
  fail "a module from another build" "$(cat "$tmp/other.log")"
echo "$pass passed, 0 failed"
