#!/usr/bin/env bash
# Installs the build into two temporary prefixes, both given at install time
# (`cmake --install BUILD --prefix P`, unlike the configured prefix), and
# checks each as installed, without rewriting any file:
#   - gkc.pc, through PKG_CONFIG_PATH, names P and builds examples/hello_gkc.c,
#   - find_package(gkc) with CMAKE_PREFIX_PATH=P builds it (shared and static),
#   - gkcd.service's ExecStart= is P's gkcd, and every other absolute path in
#     the unit is below P too; that command is the gkcd the programs talk to,
#   - no installed text file names the configured prefix or the other prefix.
# Then a DESTDIR install (as packagers do) must name the final prefix, not
# DESTDIR.   Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gkc-install-XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A sanitizer build's libraries need the sanitizer runtime in whatever links them.
san=()
[ "${GKC_SANITIZE:-0}" = 1 ] && san=(-fsanitize=address,undefined)
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt")
prefixes=("$tmp/one" "$tmp/two/usr-like")
pass=0

# Text files that name installed paths.
text_files() {
  find "$1" -type f \( -name '*.pc' -o -name '*.cmake' -o -name '*.service' -o -name '*.socket' \
                       -o -name '*.conf' -o -name '*.example' \)
}

check_prefix() {
  local prefix=$1 other=$2 log=$tmp/$(basename "$1").log
  cmake --install "$build" --prefix "$prefix" >"$log" || { cat "$log"; fail "install to $prefix"; }
  for f in sbin/gkcd bin/gkc include/gkc.h include/gkc_solve.h include/gkc_errors.h lib/systemd/system/gkcd.service \
           lib/systemd/system/gkcd.socket lib/sysusers.d/gkcd.conf lib/tmpfiles.d/gkcd.conf \
           etc/gkcd/gkcd.conf.example; do
    [ -e "$prefix/$f" ] || { cat "$log"; fail "$prefix/$f not installed"; }
  done
  local libdir
  libdir=$(cd "$prefix" && find . -path '*/pkgconfig/gkc.pc' | head -1)
  libdir=${libdir#./} libdir=${libdir%/pkgconfig/gkc.pc}
  for f in "$libdir/libgkc.so" "$libdir/libgkc.a" "$libdir/pkgconfig/gkc.pc" \
           "$libdir/cmake/gkc/gkcConfig.cmake"; do
    [ -e "$prefix/$f" ] || fail "$prefix/$f not installed"
  done

  # libgkc's SONAME (the Debian package libgkc3 is named after it).
  local soname
  soname=$(readelf -d "$prefix/$libdir/libgkc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = libgkc.so.3 ] && [ -e "$prefix/$libdir/libgkc.so.3" ] ||
    fail "libgkc.so's SONAME is '$soname' (libgkc.so.3 expected), or no $prefix/$libdir/libgkc.so.3"

  # The CUDA backend module (a build with CUDA): installed in $libdir/gkc,
  # where the installed gkcd finds it relative to itself, whatever the prefix.
  # gkcd loads it (and, without a GPU, then stops on the GPU), or names it in
  # its complaint: where the CUDA libraries are not in ld.so's cache, or
  # where no NVIDIA driver sees a device (then it is found, not loaded).
  if [ -e "$build/daemon/gkcd-cuda.so" ]; then
    local module=$prefix/$libdir/gkc/gkcd-cuda.so
    [ -e "$module" ] || fail "$module not installed"
    module=$(realpath "$module")
    timeout 10 env -u GKCD_CUDA_MODULE "$prefix/sbin/gkcd" --socket "$tmp/m.sock" --backend cuda \
      --log-level info >"$tmp/module.log" 2>&1 || true
    grep -qE "CUDA backend module $module loaded|cannot load the CUDA backend module $module:|; $module not loaded" "$tmp/module.log" ||
      { cat "$tmp/module.log"; fail "$prefix/sbin/gkcd does not find $module"; }
    rm -f "$tmp/m.sock"
  fi

  # No stale paths: neither the configured prefix nor the other install's.
  local stale
  stale=$(text_files "$prefix" | xargs -r grep -lF -e "$configured/" -e "$other" || true)
  [ -z "$stale" ] || fail "installed files name $configured or $other: $stale"

  # pkg-config on the .pc file as installed.
  local pc=(env PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" PKG_CONFIG_LIBDIR=/nonexistent pkg-config)
  [ "$("${pc[@]}" --variable=prefix gkc)" = "$prefix" ] || fail "gkc.pc: prefix is not $prefix"
  [ "$("${pc[@]}" --variable=libdir gkc)" = "$prefix/$libdir" ] || fail "gkc.pc: libdir is not $prefix/$libdir"
  [ "$("${pc[@]}" --variable=includedir gkc)" = "$prefix/include" ] || fail "gkc.pc: includedir is not $prefix/include"
  local flags
  flags=$("${pc[@]}" --cflags --libs gkc)
  cc "${san[@]}" "$src/examples/hello_gkc.c" $flags -o "$prefix.hello_pc" 2>"$log" || { cat "$log"; fail "pkg-config build"; }
  # gkc.h includes gkc_solve.h (the solve and batch calls): both from the
  # installed tree, in C and C++.
  printf '#include <gkc.h>\nint main(void) {\n  gkc_solve_args a = GKC_SOLVE_ARGS_INIT;\n  return a.method == GKC_SOLVE_CG && gkc_batch != 0 ? 0 : 1;\n}\n' >"$tmp/solve_api.c"
  cc -fsyntax-only $("${pc[@]}" --cflags gkc) "$tmp/solve_api.c" 2>"$log" || { cat "$log"; fail "gkc_solve.h through gkc.h"; }
  if command -v c++ >/dev/null; then
    c++ -x c++ -fsyntax-only $("${pc[@]}" --cflags gkc) "$tmp/solve_api.c" 2>"$log" || { cat "$log"; fail "gkc_solve.h through gkc.h (C++)"; }
  fi

  # find_package(gkc) from an outside project.
  local consumer=$prefix.consumer
  cmake -S "$src/tests/consumer" -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" \
    -DHELLO_SOURCE="$src/examples/hello_gkc.c" -DCMAKE_C_FLAGS="${san[*]}" >"$log" 2>&1 ||
    { cat "$log"; fail "find_package(gkc) in $prefix"; }
  grep -q "gkc_DIR:PATH=$prefix/$libdir/cmake/gkc" "$consumer/CMakeCache.txt" ||
    fail "find_package(gkc) did not find $prefix: $(grep gkc_DIR "$consumer/CMakeCache.txt")"
  cmake --build "$consumer" >>"$log" 2>&1 || { cat "$log"; fail "consumer build"; }

  # gkcd.service: ExecStart= names this prefix's gkcd, and so does every
  # other absolute path set in it (the only other paths allowed are those
  # of the system: /run, /etc, /dev, /proc).
  local unit=$prefix/lib/systemd/system/gkcd.service exec
  [ "$(grep -c '^ExecStart=' "$unit")" = 1 ] || fail "$unit: not one ExecStart="
  exec=$(sed -n 's/^ExecStart=//p' "$unit")
  [ "$exec" = "$prefix/sbin/gkcd" ] || fail "$unit: ExecStart=$exec, not $prefix/sbin/gkcd"
  [ -x "${exec%% *}" ] || fail "$unit: ExecStart=$exec is not an executable"
  local bad
  bad=$(grep -v '^#' "$unit" | grep -oE '(=|[[:space:]])/[^[:space:]]*' | sed 's/^.//' |
        grep -vE "^($prefix/|/run/|/etc/|/dev/|/proc/)" || true)
  [ -z "$bad" ] || fail "$unit names paths outside $prefix: $bad"

  # The three programs talk to the gkcd that ExecStart= names.
  $exec --socket "$tmp/s.sock" --log-level warn 2>"$tmp/gkcd.log" &
  pid=$!
  for _ in $(seq 100); do "$prefix/bin/gkc" --socket "$tmp/s.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
  local prog out
  for prog in "$consumer/hello_shared" "$consumer/hello_static" "$prefix.hello_pc"; do
    out=$(LD_LIBRARY_PATH="$prefix/$libdir" "$prog" "$tmp/s.sock")
    [[ "$out" == *"A*B = [[58, 64], [139, 154]]"* && "$out" == *"sum = 415"* ]] ||
      fail "$prog printed: $out"
    pass=$((pass + 1))
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=
  rm -f "$tmp/s.sock"
  echo "PASS: prefix $prefix: gkc.pc, find_package(gkc) and gkcd.service name it; 3 programs ran"
}

check_prefix "${prefixes[0]}" "${prefixes[1]}"
check_prefix "${prefixes[1]}" "${prefixes[0]}"

# DESTDIR: files name the final prefix; GNUInstallDirs puts /opt/X's
# configuration in /etc/opt/X.
final=/opt/gkc-install-test
DESTDIR=$tmp/root cmake --install "$build" --prefix "$final" >"$tmp/destdir.log"
root=$tmp/root
[ "$(sed -n 's/^ExecStart=//p' "$root$final/lib/systemd/system/gkcd.service")" = "$final/sbin/gkcd" ] ||
  fail "DESTDIR install: ExecStart= is not $final/sbin/gkcd"
pcfile=$(find "$root$final" -name gkc.pc)
grep -qx "prefix=$final" "$pcfile" || fail "DESTDIR install: $pcfile does not say prefix=$final"
! text_files "$root" | xargs -r grep -lF "$root" || fail "DESTDIR install: files name DESTDIR"
[ -e "$root/etc/opt/gkc-install-test/gkcd/gkcd.conf.example" ] || fail "DESTDIR install: no /etc/opt/... example"
echo "PASS: DESTDIR install names $final"
echo "$((pass + 1)) passed, 0 failed"
