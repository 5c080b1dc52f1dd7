#!/usr/bin/env bash
# Installs the build into a temporary prefix (through DESTDIR, as packagers
# do), then builds examples/hello_gkc.c against it twice, as another project
# would: with find_package(gkc) and with pkg-config; both programs must talk
# to a real gkcd.   Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gkc-install-XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# A sanitizer build's libraries need the sanitizer runtime in whatever links them.
san=()
[ "${GKC_SANITIZE:-0}" = 1 ] && san=(-fsanitize=address,undefined)
prefix=/opt/gkc-test
DESTDIR=$tmp/root cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
root=$tmp/root$prefix
for f in sbin/gkcd bin/gkc include/gkc.h include/gkc_errors.h; do
  [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; cat "$tmp/install.log"; exit 1; }
done
libdir=$(cd "$root" && ls -d lib*/pkgconfig | head -1 | xargs dirname)
for f in "$libdir/libgkc.so" "$libdir/libgkc.a" "$libdir/pkgconfig/gkc.pc" \
         "$libdir/cmake/gkc/gkcConfig.cmake"; do
  [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done

# find_package(gkc) from an outside project.
cmake -S "$src/tests/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$root" \
  -DHELLO_SOURCE="$src/examples/hello_gkc.c" -DCMAKE_C_FLAGS="${san[*]}" >"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; exit 1; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; exit 1; }

# pkg-config, after pointing the .pc file's prefix at where DESTDIR put it.
sed "s|^prefix=.*|prefix=$root|" "$root/$libdir/pkgconfig/gkc.pc" >"$tmp/gkc.pc"
flags=$(PKG_CONFIG_PATH=$tmp pkg-config --cflags --libs gkc)
cc "${san[@]}" "$src/examples/hello_gkc.c" $flags -o "$tmp/hello_pc"

"$root/sbin/gkcd" --socket "$tmp/s.sock" --log-level warn 2>"$tmp/gkcd.log" &
pid=$!
for _ in $(seq 100); do "$root/bin/gkc" --socket "$tmp/s.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
pass=0
for prog in "$tmp/consumer/hello_shared" "$tmp/consumer/hello_static" "$tmp/hello_pc"; do
  out=$(LD_LIBRARY_PATH="$root/$libdir" "$prog" "$tmp/s.sock")
  if [[ "$out" == *"A*B = [[58, 64], [139, 154]]"* && "$out" == *"sum = 415"* ]]; then
    pass=$((pass + 1))
  else
    echo "FAIL: $prog printed: $out"; exit 1
  fi
done
echo "$pass passed, 0 failed"
