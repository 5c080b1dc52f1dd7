#!/bin/bash
# round_run.sh: this round's GPU figures in one call of a lent machine with
# one or more GPUs (issues #25 data path, #26 every GPU of a host, #29 MPI):
#
#   STAGES="topo tests datapath inline fair small multigpu mpi" bash bench/gpu/round_run.sh
#
# Build on the workstation as rows_run.sh says (build/rel, Release,
# -DGKC_STATIC_DEPS=ON -DGKC_FAULT_INJECTION=ON -DGKC_METRICS_HTTP=OFF
# -DGKC_MPI=ON), pack it into .carry/rel.tar.xz, the matrices into
# .carry/bm.tar.xz, Debian 12's Open MPI runtime (docs/CLUSTER.md) into
# .carry/ompi.tar.xz, and carry .carry.  Stages, each under its own timeout,
# skipped once DEADLINE seconds have passed:
#   topo      nvidia-smi topo -m and p2p_bw (GPU pairs' copy bandwidth)
#   tests     ctest -L gpu with every GPU visible
#   datapath  datapath_vs_cupy.py on GPU 0: Python and C (bench_byvalue) by
#             value against CuPy in-process, first and repeated calls, and
#             8 connections at once
#   firsttrace bench_byvalue --trace on GPU 0 (issue #25): where each first
#             call's time goes (libgkc's arena lines, gkcd's share of each
#             call, the pinner's registrations on the same clock)
#   inline    bench_inline: inline bytes (no shared memory) on 1 and 8
#             connections, GPU 0
#   fair      bench_fair: a newcomer behind a 60-deep queue, on GPU 0 (4 and
#             2 streams) and on every GPU
#   small     bench_small_jobs: 16 C connections looping resident sgemm
#             1024^3, GPU 0 against every GPU
#   multigpu  bench/gpu/multigpu.sh: sgemm 16384^3 split, 256 x 4096^3 from
#             8 connections, the 101M-nonzero stencil's spmv and CG
#   copythreads bench_byvalue's reduce with GKC_COPY_THREADS 4, 8, 16
#   restart   bench_restart: 8 GiB of shared resident arrays through a planned
#             restart (the stand-in descriptor store), back and checked
#   mpi       bench/gpu/mpi_scaling_gpu.sh: mpi_cg strong and weak scaling on
#             256^3, both CG variants, against gkcd's own solve
#   amg       bench/gpu/amg_solve.py: CG with precond none/jacobi/amg on the
#             2-D 2048^2 and 3-D 160^3 Laplacians, float64, against CuPy's cg
#   f64       bench/gpu/bench_f64 (float64 kernels beside float32 and the
#             vendor's float64) and f64_solve.py (2048^2 against CuPy's cg)
# Logs in $OUT/round_logs.tgz; a summary last.
set -u
OUT=${OUT:-/tmp/gkc-out}
mkdir -p "$OUT"
ROOT=$(pwd -P)
L=$(mktemp -d /tmp/round-logs.XXXXXX)
STAGES=${STAGES:-"topo tests datapath fair small multigpu mpi inline"}
DEADLINE=${DEADLINE:-540}
has() {
  case " $STAGES " in *" $1 "*) ;; *) return 1;; esac
  if [ "$SECONDS" -ge "$DEADLINE" ]; then echo "skipped $1: past ${DEADLINE}s"; return 1; fi
}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
[ -d build/rel ] || { mkdir -p build && tar xJf .carry/rel.tar.xz -C build; }
[ -f .carry/bm.tar.xz ] && [ ! -d .carry/matrices ] && tar xJf .carry/bm.tar.xz -C .carry
[ -f .carry/ompi.tar.xz ] && [ ! -d .carry/ompi ] && tar xJf .carry/ompi.tar.xz -C .carry
B=$ROOT/build/rel
# A binary rebuilt after the pack (a fix): .carry/fix/NAME replaces daemon/NAME.
for f in .carry/fix/*; do [ -f "$f" ] && cp "$f" "$B/daemon/"; done
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
if [ -n "$SRC" ] && [ "$(readlink -f "$SRC" 2>/dev/null)" != "$ROOT" ]; then
  mkdir -p "$(dirname "$SRC")"; [ -e "$SRC" ] && mv "$SRC" "$SRC.moved.$$"; ln -s "$ROOT" "$SRC"
fi
SH=$(dirname "$SRC")/shared
mkdir -p "$SH"; [ -e "$SH/matrices" ] || ln -s "$ROOT/.carry/matrices" "$SH/matrices"
export GKC_GPU_MATRICES=$ROOT/.carry/matrices
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
summary=("GPUs: $NGPU")
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -8
date -u
# What fresh shared pages cost depends on these (first calls into a new arena region).
echo "kernel $(uname -r); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1);" \
  "shmem THP $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>&1); nproc $(nproc)"

# A gkcd of our own on $L/NAME.sock with the given arguments; its pid in $gpid.
start_gkcd() {
  local name=$1; shift
  rm -f "$L/$name.sock"
  "$B/daemon/gkcd" --backend cuda --socket "$L/$name.sock" "$@" > "$L/gkcd-$name.log" 2>&1 &
  gpid=$!
  for _ in $(seq 300); do [ -S "$L/$name.sock" ] && break; sleep 0.1; done
}
stop_gkcd() { kill -TERM "$gpid" 2>/dev/null; wait "$gpid" 2>/dev/null; }

if has topo; then
  nvidia-smi topo -m > "$L/topo.txt" 2>&1; head -8 "$L/topo.txt"
  [ "$NGPU" -gt 1 ] && timeout 40 "$B/bench/gpu/p2p_bw" > "$L/p2p.txt" 2>&1; tail -8 "$L/p2p.txt" 2>/dev/null
fi

if has tests; then
  S=$SECONDS
  (cd "$B" && timeout ${TESTS_TIMEOUT:-200} ctest -L gpu --output-on-failure --timeout 150) > "$L/ctest_gpu.log" 2>&1
  summary+=("ctest -L gpu ($NGPU GPUs) rc=$? ($((SECONDS - S)) s): $(grep -E 'tests passed' "$L/ctest_gpu.log")")
  grep -E "Test +#" "$L/ctest_gpu.log" | sed 's/  */ /g'
  grep -E "CHECK FAILED|FAIL" "$L/ctest_gpu.log" | head -20
fi

if has datapath; then
  S=$SECONDS
  timeout 240 python3 bench/gpu/datapath_vs_cupy.py --gkcd "$B/daemon/gkcd" --repeat 3 \
    --gkcd-arg=--devices --gkcd-arg=0 --c-bench "$B/bench/bench_byvalue" \
    --json "$OUT/datapath.json" > "$L/datapath.md" 2> "$L/datapath.log"
  summary+=("datapath rc=$? ($((SECONDS - S)) s)")
  cat "$L/datapath.md"
  grep -E "registered a" "$L"/*.log 2>/dev/null | head -5
fi

if has firsttrace; then
  S=$SECONDS
  CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/bench/bench_byvalue" --gkcd "$B/daemon/gkcd" --backend cuda \
    --sizes sgemm:2048,sgemm:4096,sgemm:8192,reduce:64,reduce:256 --repeat 5 --conns 1 --trace \
    > "$L/firsttrace.md" 2> "$L/firsttrace.log"
  summary+=("firsttrace rc=$? ($((SECONDS - S)) s)")
  cat "$L/firsttrace.md"
  grep -E "^trace|gkc shm|registered a" "$L/firsttrace.log" | head -90
fi


# one GPU as configured by default (4 streams), one GPU with 2 streams (a
# newcomer's kernel queues behind at most the other streams' kernels: does
# a shallower GPU queue bound its wait, and what does it cost the deep
# client?), every GPU.
if has fair; then
  for d in one one-s2 all; do
    case $d in
      one) start_gkcd fair-$d --devices 0 ;;
      one-s2) start_gkcd fair-$d --devices 0 --streams 2 ;;
      all) [ "$NGPU" -gt 1 ] || continue; start_gkcd fair-$d ;;
    esac
    echo "== $d" | tee -a "$L/fair.md"
    timeout 40 "$B/bench/bench_fair" --socket "$L/fair-$d.sock" --n 1024 --depth 60 --probes 60 \
      --json "$OUT/fair_$d.json" >> "$L/fair.md" 2>&1
    summary+=("fair $d rc=$?")
    stop_gkcd
  done
  cat "$L/fair.md"
fi


if has multigpu && [ "$NGPU" -gt 1 ]; then
  S=$SECONDS
  BUILD=build/rel timeout 130 bash bench/gpu/multigpu.sh "$L/multigpu" > "$L/multigpu.md" 2>&1
  summary+=("multigpu rc=$? ($((SECONDS - S)) s)")
  tail -30 "$L/multigpu.md"
  cp "$L/multigpu/multigpu.json" "$OUT/" 2>/dev/null
fi

if has mpi && [ -d .carry/ompi ]; then
  S=$SECONDS
  mkdir -p "$L/mpi"
  cp "$B/daemon/gkcd" "$B/daemon/gkcd-cuda.so" "$B/examples/mpi_cg" "$L/mpi/" 2>/dev/null &&
    ln -s "$ROOT/.carry/ompi" "$L/mpi/ompi"
  g=4; [ "$NGPU" -lt 4 ] && g=2
  GPUS=$g OUT=$L/mpi-out timeout 130 bash bench/gpu/mpi_scaling_gpu.sh "$L/mpi" 256 2 > "$L/mpi.log" 2>&1
  summary+=("mpi rc=$? ($((SECONDS - S)) s)")
  cat "$L/mpi-out/mpi_scaling_gpu.md" 2>/dev/null || tail -20 "$L/mpi.log"
  cp "$L"/mpi-out/mpi_scaling_gpu.* "$OUT/" 2>/dev/null
fi

if has small; then
  for d in one all; do
    if [ $d = one ]; then start_gkcd small-$d --devices 0; else [ "$NGPU" -gt 1 ] || continue; start_gkcd small-$d; fi
    for c in 8 16; do
      echo "== $d conns=$c" >> "$L/small.md"
      timeout 30 "$B/bench/bench_small_jobs" --socket "$L/small-$d.sock" --conns $c --n 1024 --secs 3 \
        --json "$OUT/small_${d}_$c.json" >> "$L/small.md" 2>&1
    done
    stop_gkcd
  done
  cat "$L/small.md"
fi

if has restart && [ -x "$B/bench/bench_restart" ]; then
  S=$SECONDS
  timeout 150 "$B/bench/bench_restart" --gkcd "$B/daemon/gkcd" --backend cuda \
    --gib "${RESTART_GIB:-8}" --objects 16 --json "$OUT/restart.json" > "$L/restart.md" 2> "$L/restart.log" &
  rpid=$!
  # Stuck past 120 s: where gkcd is, before the timeout takes it.
  for _ in $(seq 120); do kill -0 $rpid 2>/dev/null || break; sleep 1; done
  if kill -0 $rpid 2>/dev/null; then
    for p in $(pgrep -f "gkcd --socket /tmp/gkc-restart"); do
      echo "--- gkcd $p, 120 s in:"; tail -5 /tmp/gkc-restart-*/gkcd.log
      gdb -p "$p" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E "^#|^Thread" | head -60 ||
        cat /proc/$p/task/*/stack 2>/dev/null | head -40
    done > "$L/restart-stuck.log" 2>&1
    cat "$L/restart-stuck.log" | head -80
  fi
  wait $rpid
  summary+=("restart rc=$? ($((SECONDS - S)) s)")
  cat "$L/restart.md"; grep -v "^.uploaded" "$L/restart.log" | tail -12
fi

if has copythreads; then
  # The caller's copy into the arena is most of a big reduce by value: how
  # many threads it wants (GKC_COPY_THREADS; libgkc's default: up to 8).
  start_gkcd copy --devices 0
  for t in 4 8 16; do
    echo "GKC_COPY_THREADS=$t"
    GKC_COPY_THREADS=$t timeout 60 "$B/bench/bench_byvalue" --socket "$L/copy.sock" \
      --sizes reduce:64,reduce:256 --repeat 7 --conns 1 2>&1 | grep -E "arena|reserved"
  done | tee "$L/copythreads.md"
  stop_gkcd
  summary+=("copythreads done")
fi

if has inline && [ -x "$B/bench/bench_inline" ]; then
  start_gkcd inline --devices 0
  GKC_NO_SHM=1 timeout 60 "$B/bench/bench_inline" --socket "$L/inline.sock" --min 4194304 \
    --max 268435456 --time 400 --csv "$OUT/inline.csv" > "$L/inline.md" 2>&1
  summary+=("inline rc=$?")
  stop_gkcd
  cat "$L/inline.md"
fi

if has amg; then
  S=$SECONDS
  timeout 240 python3 bench/gpu/amg_solve.py --build "$B" --gkcd-args "--devices 0" \
    --json "$OUT/amg.json" > "$L/amg.md" 2> "$L/amg.log"
  summary+=("amg rc=$? ($((SECONDS - S)) s)")
  cat "$L/amg.md"; tail -5 "$L/amg.log"
fi

if has f64; then
  S=$SECONDS
  [ -x "$B/bench/gpu/bench_f64" ] && timeout 90 "$B/bench/gpu/bench_f64" --reps 30 > "$L/bench_f64.md" 2>&1
  summary+=("bench_f64 rc=$? ($((SECONDS - S)) s)")
  cat "$L/bench_f64.md"
fi

printf '%s\n' "${summary[@]}"
tar czf "$OUT/round_logs.tgz" -C "$L" . && echo "logs: $OUT/round_logs.tgz ($SECONDS s)"
