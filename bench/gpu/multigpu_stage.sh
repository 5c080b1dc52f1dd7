#!/bin/bash
# multigpu_stage.sh: copies what multigpu.sh and test_gpu_multidev need from a
# build folder into DEST, in the build folder's layout (a few MB, to carry to a
# GPU machine), after building those targets.
#
#   bash bench/gpu/multigpu_stage.sh build/gpu build-mg
#   (then, there, from the repository root)
#   BUILD=build-mg bash bench/gpu/multigpu.sh OUTDIR
#   build-mg/tests/gpu/test_gpu_multidev
#
# Configure BUILD for the GPU machine first (static libuv and msgpack-c,
# fault injection for stage (e)):
#   cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKC_STATIC_DEPS=ON \
#     -DGKC_MPI=OFF -DGKC_METRICS_HTTP=OFF -DGKC_FAULT_INJECTION=ON
set -eu
BUILD=${1:?usage: multigpu_stage.sh BUILD DEST}
DEST=${2:?usage: multigpu_stage.sh BUILD DEST}
cmake --build "$BUILD" -j2 --target gkcd gkc bench_multi p2p_bw test_gpu_multidev bench_split
rm -rf "$DEST"
mkdir -p "$DEST/daemon" "$DEST/client" "$DEST/bench/gpu" "$DEST/tests/gpu"
cp "$BUILD/daemon/gkcd" "$DEST/daemon/"
cp "$BUILD/client/gkc" "$DEST/client/"
cp "$BUILD/bench/bench_multi" "$DEST/bench/"
cp "$BUILD/bench/gpu/p2p_bw" "$BUILD/bench/gpu/bench_split" "$DEST/bench/gpu/"
cp "$BUILD/tests/gpu/test_gpu_multidev" "$DEST/tests/gpu/"
du -sh "$DEST"
