#!/usr/bin/env bash
# The whole test suite: installs what is missing, then builds and runs ctest
# as released (with the CUDA backend when a CUDA Toolkit is installed; GPU
# tests report "skipped" without a GPU), under AddressSanitizer +
# UndefinedBehaviorSanitizer (CPU only: the sanitizers do not see device
# code), the threaded end-to-end tests under ThreadSanitizer, and the fuzzer.
#
#   tests/run.sh            everything
#   tests/run.sh -L e2e     extra arguments go to ctest (e.g. one label)
set -euo pipefail
cd "$(dirname "$0")/.."
tests/install-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
status=0
# Configures build/test-NAME with the given cmake arguments and builds it
# (only the targets in $targets when that is set).
build_variant() {
  local name=$1; shift
  local dir=build/test-$name
  echo "=== $name: configure and build ($dir)"
  cmake -S . -B "$dir" -G Ninja "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
  grep '^-- gkc:' "$dir.configure.log" || true
  # shellcheck disable=SC2086 # $targets is a list of names
  cmake --build "$dir" -j "$jobs" ${targets:+--target $targets}
}

run_variant() {
  local name=$1; shift
  build_variant "$name" -DGKC_FAULT_INJECTION=ON "$@" || return 1
  echo "=== $name: ctest"
  ctest --test-dir "build/test-$name" --output-on-failure -j "$jobs" "${ctest_args[@]}"
}

ctest_args=("$@")
mkdir -p build
run_variant release -DCMAKE_BUILD_TYPE=RelWithDebInfo || status=1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  run_variant asan -DCMAKE_BUILD_TYPE=Debug -DGKC_SANITIZE=ON -DGKC_CUDA=OFF || status=1

# ThreadSanitizer over the end-to-end tests that drive the daemon's threads
# hardest (pipelining, many connections, shutdown with work in flight,
# resident objects freed while in use, big frames received by reader
# threads).  Left out: e2e_errors_*, e2e_service_* and
# e2e_soak, which assert RSS and address-space figures that TSan's shadow
# memory inflates.  OpenMP and OpenBLAS run one thread each: their own thread
# pools are not instrumented, so TSan cannot see their barriers and would
# report their hand-offs as races.
# Runs with no arguments only.  Some kernels map memory where TSan cannot
# work ("unexpected memory mapping"): then it says so and skips.
run_tsan() {
  local dir=build/test-tsan
  build_variant tsan -DGKC_FAULT_INJECTION=ON -DCMAKE_BUILD_TYPE=Debug -DGKC_TSAN=ON -DGKC_CUDA=OFF ||
    return 1
  if ! "$dir/daemon/gkcd" --version >/dev/null 2>"$dir.probe.log"; then
    if grep -q ThreadSanitizer "$dir.probe.log"; then
      echo "=== tsan: skipped: ThreadSanitizer cannot run on this machine: $(head -1 "$dir.probe.log")"
      return 0
    fi
    cat "$dir.probe.log"
    return 1
  fi
  echo "=== tsan: ctest (threaded end-to-end tests)"
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=second_deadlock_stack=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" -R '^(e2e_(lib|pipeline|lifecycle|resident_[a-z]+|async|cli|cli_batch|python|devices|partition|readers)|test_reader)$'
}
if [ ${#ctest_args[@]} -eq 0 ]; then
  run_tsan || status=1
fi

# Last variant: the libFuzzer target over the request decoding path
# (tests/fuzz), built with clang; only the fuzz targets are built and only
# ctest -L fuzz runs (a fixed 200000 executions from the seed corpus, at
# most two minutes).  Runs with no arguments or when they mention "fuzz"
# (tests/run.sh -L fuzz); skipped for other selections (e.g. -L e2e).
run_fuzz() {
  CC=clang targets="fuzz_request fuzz_ring make_corpus" build_variant fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGKC_CUDA=OFF -DGKC_FUZZ=ON || return 1
  echo "=== fuzz: ctest -L fuzz"
  ctest --test-dir build/test-fuzz --output-on-failure -j "$jobs" -L fuzz
}
if [ ${#ctest_args[@]} -eq 0 ] || [[ " ${ctest_args[*]} " == *" fuzz "* ]]; then
  run_fuzz || status=1
fi
exit $status
