#!/usr/bin/env bash
# deb_test.sh: builds the Debian packages (cpack -G DEB) with prefix /usr
# (with the CUDA backend module when nvcc is there), installs them with dpkg
# -i, runs `gkc ping` against the installed gkcd (started by hand on a
# temporary socket: no systemd in CI), checks the man pages, pkg-config and
# the Python package as installed, then removes and purges them and checks
# that no file of theirs is left.  gkcd must name no CUDA library among its
# dependencies and serve from the CPU without gkcd-cuda; gkcd-cuda, when
# built, must hold the module where the installed gkcd finds it.  Skips (77)
# when not root or without dpkg/cpack.
#   bash tests/packaging/deb_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
[[ $(id -u) == 0 ]] || { echo "skip: not root (dpkg -i needs root)"; exit 77; }
for t in dpkg dpkg-deb dpkg-shlibdeps cpack; do
  command -v $t >/dev/null || { echo "skip: $t not found"; exit 77; }
done
pkgs=(gkcd libgkc3 libgkc-dev python3-gkc)
for p in "${pkgs[@]}" gkcd-cuda; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    echo "skip: $p is already installed on this machine; not touching it"; exit 77
  fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gkc-deb-XXXXXX")
pid= installed=0
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  ((installed)) && dpkg --purge gkcd-cuda "${pkgs[@]}" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
fail() { echo "FAIL $1"; [[ -z ${2-} ]] || sed 's/^/     | /' <<<"$2" | head -30; exit 1; }

b=$tmp/build
cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGKC_MPI=OFF \
  -DGKC_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr >"$tmp/configure.log" 2>&1 ||
  fail "configure" "$(tail -30 "$tmp/configure.log")"
nice cmake --build "$b" -j"$(nproc)" >"$tmp/build.log" 2>&1 || fail "build" "$(tail -30 "$tmp/build.log")"
(cd "$b" && cpack -G DEB >"$tmp/cpack.log" 2>&1) || fail "cpack" "$(tail -30 "$tmp/cpack.log")"
debs=()
for p in "${pkgs[@]}"; do
  f=$(ls "$b"/${p}_*.deb 2>/dev/null | head -1)
  [[ -n $f ]] || fail "no $p .deb" "$(ls "$b")"
  debs+=("$f")
done
cuda_deb=$(ls "$b"/gkcd-cuda_*.deb 2>/dev/null | head -1 || true)
ok "cpack made ${pkgs[*]}${cuda_deb:+ gkcd-cuda}"
deps=$(dpkg-deb -f "$b"/gkcd_*.deb Depends)
[[ $deps == *libuv1* && $deps == *libc6* ]] || fail "gkcd Depends lacks libuv1 or libc6: $deps"
! grep -qiE 'cuda|cublas|cusparse|nvidia' <<<"$(dpkg-deb -f "$b"/gkcd_*.deb Depends Pre-Depends Recommends)" &&
  ok "gkcd Depends from shlibdeps, no CUDA library: $deps" || fail "gkcd depends on CUDA: $deps"
# (Contents into a variable first: grep -q on a pipe ends it early, and
# pipefail then takes dpkg-deb's SIGPIPE for a failure.)
contents=$(dpkg-deb -c "$b"/gkcd_*.deb)
grep -q 'gkcd-cuda\.so' <<<"$contents" && fail "gkcd holds the CUDA module" "$contents"
[[ $(dpkg-deb -f "$b"/libgkc-dev_*.deb Depends) == *"libgkc3 (="* ]] && ok "libgkc-dev depends on libgkc3" ||
  fail "libgkc-dev Depends"
contents=$(dpkg-deb -c "$b"/libgkc3_*.deb)
grep -q '/libgkc\.so\.3 -> ' <<<"$contents" && ok "libgkc3 holds libgkc.so.3" || fail "libgkc3 contents" "$contents"
module=
if [[ -n $cuda_deb ]]; then
  cdeps=$(dpkg-deb -f "$cuda_deb" Depends)
  [[ $cdeps == *"gkcd (= $(dpkg-deb -f "$b"/gkcd_*.deb Version))"* && $cdeps == *cudart* && $cdeps == *cublas* &&
     $cdeps == *cusparse* ]] && ok "gkcd-cuda depends on this gkcd and the CUDA runtime: $cdeps" ||
    fail "gkcd-cuda Depends: $cdeps"
  [[ $(dpkg-deb -f "$b"/gkcd_*.deb Suggests) == *gkcd-cuda* ]] && ok "gkcd suggests gkcd-cuda" ||
    fail "gkcd Suggests: $(dpkg-deb -f "$b"/gkcd_*.deb Suggests)"
  contents=$(dpkg-deb -c "$cuda_deb")
  module=$(grep -o '/usr/lib/[^ ]*/gkc/gkcd-cuda\.so$' <<<"$contents" || true)
  [[ -n $module ]] && ok "gkcd-cuda holds $module" || fail "gkcd-cuda contents" "$contents"
else
  echo "note: no gkcd-cuda package (a build without CUDA): its checks are not run"
fi
[[ $(dpkg-deb -f "$b"/python3-gkc_*.deb Architecture) == all ]] && ok "python3-gkc is Architecture: all" ||
  fail "python3-gkc Architecture"

# Missing dependencies (a fresh CI machine has the -dev packages, hence the
# runtime libraries, from install-deps.sh) make dpkg -i fail: say which.
out=$(dpkg -i "${debs[@]}" 2>&1) || fail "dpkg -i" "$out"
installed=1
ok "dpkg -i installed the four packages (not gkcd-cuda)"
for f in /usr/sbin/gkcd /usr/bin/gkc /usr/include/gkc.h /usr/include/gkc_solve.h /usr/lib/systemd/system/gkcd.socket \
         /usr/share/man/man8/gkcd.8.gz /usr/share/man/man1/gkc.1.gz /usr/share/man/man3/gkc.h.3.gz \
         /usr/share/bash-completion/completions/gkc /etc/gkcd/gkcd.conf.example /etc/gkcd/gkcd.conf; do
  [[ -e $f || -e ${f%.gz} ]] || fail "$f not installed"
done
ok "files in place (binaries, units, headers, man pages, completion, /etc/gkcd)"
getent passwd gkcd >/dev/null && ok "postinst made the gkcd system user" || fail "no gkcd user"
grep -q '^ExecStart=/usr/sbin/gkcd' /usr/lib/systemd/system/gkcd.service && ok "gkcd.service runs /usr/sbin/gkcd" ||
  fail "gkcd.service ExecStart" "$(grep ExecStart /usr/lib/systemd/system/gkcd.service)"

/usr/sbin/gkcd --socket "$tmp/gkcd.sock" --log-level warn 2>"$tmp/gkcd.log" &
pid=$!
for ((i = 0; i < 100; i++)); do /usr/bin/gkc --socket "$tmp/gkcd.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
out=$(/usr/bin/gkc --socket "$tmp/gkcd.sock" ping --json 2>&1) || fail "gkc ping against the installed gkcd" "$out $(cat "$tmp/gkcd.log")"
[[ $out == *'"backend": "cpu"'* ]] && ok "installed gkc pings installed gkcd: $out" || fail "ping reply" "$out"
if [[ -n $cuda_deb ]]; then
  grep -q "no usable GPU (the CUDA backend module gkcd-cuda.so is in neither /usr/sbin nor" "$tmp/gkcd.log" &&
    ok "without gkcd-cuda, gkcd serves from the CPU and says why" || fail "gkcd's log without gkcd-cuda" "$(cat "$tmp/gkcd.log")"
fi
out=$(/usr/bin/python3 -c '
import sys, numpy as np, gkc
with gkc.connect(sys.argv[1]) as c:
    x = np.arange(1, 101, dtype=np.float32)
    assert c.reduce(x) == 5050.0
    assert "gkcd_requests_total" in c.metrics()
print(gkc.__file__)' "$tmp/gkcd.sock" 2>&1) || fail "python3-gkc against the installed gkcd" "$out"
[[ $out == /usr/lib/python3/dist-packages/gkc/* ]] && ok "python3-gkc imports from dist-packages and computes" ||
  fail "python3-gkc imported from $out"
cat >"$tmp/hello.c" <<'C'
#include <gkc.h>
#include <stdio.h>
int main(int argc, char **argv) {
  gkc_conn *c;
  float x[3] = {1, 2, 3};
  double s = 0;
  if (gkc_connect(&c, argv[1]) || gkc_reduce(c, x, 3, GKC_SUM, &s, NULL, NULL)) return 1;
  gkc_close(c);
  printf("%g\n", s);
  return s == 6 ? 0 : 1;
}
C
out=$(cc "$tmp/hello.c" -o "$tmp/hello" $(pkg-config --cflags --libs gkc) 2>&1 && "$tmp/hello" "$tmp/gkcd.sock" 2>&1) &&
  ok "a program built with pkg-config gkc links /usr's libgkc.so.3 and computes" ||
  fail "pkg-config build against libgkc-dev" "$out"
# ldd's output first, then grep: under pipefail `ldd | grep -q` fails when
# grep, done at its first match, leaves ldd writing into a closed pipe.
libs=$(ldd "$tmp/hello")
grep -Eq "libgkc.so.3 => (/usr)?/lib/" <<<"$libs" || fail "hello does not use the packaged libgkc.so.3" "$libs"
kill "$pid"; wait "$pid" || fail "gkcd exit status"
pid=
out=$(timeout 30 /usr/sbin/gkcd --socket "$tmp/cuda.sock" --backend cuda 2>&1) && fail "--backend cuda without gkcd-cuda ran" "$out"
[[ $out == *"CUDA backend unavailable"* ]] && ok "--backend cuda without gkcd-cuda stops: ${out##*>}" ||
  fail "--backend cuda without gkcd-cuda" "$out"

# gkcd-cuda as installed, when this machine has its CUDA libraries (by
# ldconfig): they come from NVIDIA's runfile here, known to no package, hence
# --force-depends.  gkcd must load the module from ${libdir}/gkc; without a
# GPU it then stops on the GPU, not on the module.
cache=$(ldconfig -p)
if [[ -n $cuda_deb ]] && grep -q 'libcudart\.so' <<<"$cache" && grep -q 'libcublas\.so' <<<"$cache" &&
   grep -q 'libcusparse\.so' <<<"$cache"; then
  out=$(dpkg -i --force-depends "$cuda_deb" 2>&1) || fail "dpkg -i gkcd-cuda" "$out"
  [[ -f $module ]] || fail "$module not installed"
  /usr/sbin/gkcd --socket "$tmp/cuda.sock" --backend cuda --log-level info 2>"$tmp/cuda.log" &
  pid=$!
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    /usr/bin/gkc --socket "$tmp/cuda.sock" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; wait "$pid" || fail "gkcd (CUDA) exit status" "$(cat "$tmp/cuda.log")"
  else
    wait "$pid" || true
  fi
  pid=
  # Loaded where a driver sees a device; else found, and left unloaded.
  { grep -qF "CUDA backend module $module loaded" "$tmp/cuda.log" || grep -qF "; $module not loaded" "$tmp/cuda.log"; } &&
    ok "the installed gkcd finds the installed $module: $(grep -oE "CUDA backend (module .* loaded|unavailable: .*)" "$tmp/cuda.log" | tail -1)" ||
    fail "gkcd with gkcd-cuda" "$(cat "$tmp/cuda.log")"
  pkgs+=(gkcd-cuda)
elif [[ -n $cuda_deb ]]; then
  echo "note: no CUDA libraries on this machine: gkcd-cuda is not installed"
fi

lists=$(for p in "${pkgs[@]}"; do dpkg -L "$p"; done | sort -u)
dpkg -r "${pkgs[@]}" >"$tmp/remove.log" 2>&1 || fail "dpkg -r" "$(cat "$tmp/remove.log")"
[[ -e /etc/gkcd/gkcd.conf.example ]] && ok "dpkg -r keeps the conffile" || fail "dpkg -r removed the conffile"
dpkg --purge "${pkgs[@]}" >"$tmp/purge.log" 2>&1 || fail "dpkg --purge" "$(cat "$tmp/purge.log")"
installed=0
left=()
while IFS= read -r f; do
  [[ -z $f || -d $f ]] && continue
  [[ -e $f || -L $f ]] && left+=("$f")
done <<<"$lists"
[[ ${#left[@]} == 0 && ! -e /etc/gkcd ]] && ok "purged: no file of the packages is left, /etc/gkcd gone" ||
  fail "left after purge" "$(printf '%s\n' "${left[@]}"; ls -la /etc/gkcd 2>&1)"
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed" && fail "$p still known to dpkg"
done
ok "dpkg no longer knows the packages (the gkcd user stays, as Debian policy asks)"
echo "$pass passed, 0 failed"
