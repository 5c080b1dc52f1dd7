#!/bin/sh
# plot.sh: draw bench/RESULTS.md's figures as PNG charts.
#
# Reads the CSV files of bench/data (written by bench/results_csv.py from RESULTS.md's
# tables) and writes one PNG per chart into bench/plots with gnuplot (Debian package
# gnuplot-nox, terminal pngcairo).  Each chart names the device and date its CSV names.
# With --bench-gpu FILE the sgemm, reduce and spmv charts are drawn from the CSV of a
# bench_gpu run (`bench_gpu --csv FILE`) directly, the others from RESULTS.md.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
data=$here/data
out=$here/plots

usage() {
  cat <<EOF
usage: bench/plot.sh [--data DIR] [--out DIR] [--csv]
       bench/plot.sh --bench-gpu FILE.csv --out DIR [--data DIR]

Draws the PNG charts of bench/RESULTS.md from the CSV files in DIR.
  --data DIR  the CSV files (default: bench/data)
  --out DIR   where the PNGs go (default: bench/plots)
  --csv       first regenerate the CSV files from bench/RESULTS.md
              (bench/results_csv.py --out DIR of --data)
  --bench-gpu FILE.csv
              draw the sgemm, reduce and spmv charts from this CSV of
              `bench_gpu --csv` (the other two from RESULTS.md); the CSV
              files go to --data (default: a temporary directory), the
              charts to --out, which must be given (the charts in
              bench/plots are RESULTS.md's)
  --help      this text
Charts: sgemm.png, reduce.png, spmv.png, roundtrip.png, lanes.png.
EOF
}

regen=0 bench_gpu= data_given= out_given=
while [ $# -gt 0 ]; do
  case $1 in
    --data) [ $# -ge 2 ] || { echo "plot.sh: --data needs a directory" >&2; exit 2; }; data=$2; data_given=1; shift 2 ;;
    --out) [ $# -ge 2 ] || { echo "plot.sh: --out needs a directory" >&2; exit 2; }; out=$2; out_given=1; shift 2 ;;
    --bench-gpu) [ $# -ge 2 ] || { echo "plot.sh: --bench-gpu needs a file" >&2; exit 2; }; bench_gpu=$2; shift 2 ;;
    --csv) regen=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "plot.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
if [ -n "$bench_gpu" ]; then
  [ -n "$out_given" ] || { echo "plot.sh: --bench-gpu needs --out DIR (bench/plots holds RESULTS.md's charts)" >&2; exit 2; }
  if [ -z "$data_given" ]; then
    data=$(mktemp -d)
    trap 'rm -rf "$data"' EXIT
  fi
  python3 "$here/results_csv.py" --out "$data" >/dev/null
  python3 "$here/results_csv.py" --bench-gpu "$bench_gpu" --out "$data" >/dev/null
elif [ $regen = 1 ]; then
  python3 "$here/results_csv.py" --out "$data" >/dev/null
fi
for f in sgemm reduce spmv roundtrip lanes; do
  [ -r "$data/$f.csv" ] || { echo "plot.sh: --data $data: no $f.csv (run bench/results_csv.py)" >&2; exit 1; }
done
mkdir -p "$out"

# "NVIDIA H200, 2026-11-22 00:25 UTC" from a CSV's comment lines (each distinct one, joined):
# those results_csv.py writes from RESULTS.md, and from a bench_gpu CSV (--bench-gpu).
source_of() {
  sed -n -e 's/^# from bench\/RESULTS.md, section "[^"]*"; \([^;]*\); \([^;]*\).*/\1, \2/p' \
         -e 's/^# from [^;]* (bench_gpu --csv); \([^;]*\); \([^;]*\).*/\1, \2/p' "$1" |
    awk -F', ' '!seen[$0]++ { if (!(($1) in d)) { d[$1] = 1; devs = devs (devs ? " and " : "") $1 }
                 dates = dates (dates ? " and " : "") $2 } END { printf "%s, %s", devs, dates }'
}

# tf32x3 (our tensor-core sgemm at float32 accuracy, auto on compute
# capability 9.0) only where the data has it: RESULTS.md's ladder predates it
tf32x3_line=
if awk -F, '!/^#/ && NR > 2 && $8 != "" { found = 1 } END { exit !found }' "$data/sgemm.csv"; then
  tf32x3_line=', "" using 1:($8/1000) with linespoints lw 3 pt 15 lc rgb "#1f77b4" title "tf32x3 (tensor cores at FP32 accuracy; auto)"'
fi

gnuplot <<EOF
set terminal pngcairo size 1100,650 font "DejaVu Sans,11" noenhanced
set datafile separator comma
set datafile missing ""
set key autotitle columnhead
set grid ytics mytics xtics lc rgb "#dddddd"
set key top left box opaque

# (a) sgemm ladder against cuBLAS
set output "$out/sgemm.png"
set title "sgemm n x n x n (FP32, row-major): our ladder against cuBLAS\n$(source_of "$data/sgemm.csv"), median of 20 calls"
set logscale x 2
set logscale y 10
set xlabel "n (matrix side; m = n = k)"
set ylabel "TFLOP/s (log scale)"
set xtics (256, 512, 1024, 2048, 4096, 8192)
set xrange [200:10000]
set key top left
plot "$data/sgemm.csv" using 1:(\$2/1000) with linespoints lw 3 pt 7 lc rgb "#000000" title "cuBLAS FP32 (vendor)", \
     "" using 1:(\$5/1000) with linespoints lw 2 pt 5 lc rgb "#d62728" title "regblock", \
     "" using 1:(\$4/1000) with linespoints lw 2 pt 9 lc rgb "#ff7f0e" title "smem", \
     "" using 1:(\$3/1000) with linespoints lw 2 pt 11 lc rgb "#8c564b" title "naive", \
     "" using 1:(\$7/1000) with linespoints lw 2 dt 2 pt 13 lc rgb "#7f7f7f" title "cuBLAS TF32 (tensor cores, ~1e-3 rel. error)"$tf32x3_line

# (b) reduce ladder against CUB
set output "$out/reduce.png"
set title "reduce (sum of float32, double accumulator): our ladder against CUB\n$(source_of "$data/reduce.csv"), median of 40 calls; min and max are in reduce.csv"
set logscale x 2
unset logscale y
set xlabel "input size (floats)"
set ylabel "GB/s read"
set xtics ("2^20" 1048576, "2^24" 16777216, "2^28" 268435456)
set xrange [700000:400000000]
set yrange [0:*]
sum(c) = strcol(1) eq "sum" ? column(c) : NaN
plot "$data/reduce.csv" using 2:(sum(3)) with linespoints lw 3 pt 7 lc rgb "#000000" title "CUB (vendor)", \
     "" using 2:(sum(5)) with linespoints lw 2 pt 5 lc rgb "#d62728" title "shfl (= auto)", \
     "" using 2:(sum(4)) with linespoints lw 2 pt 9 lc rgb "#ff7f0e" title "smem"
set xrange [*:*]
set yrange [*:*]

# (c) spmv algos against cuSPARSE, per matrix
set output "$out/spmv.png"
set terminal pngcairo size 1400,700 font "DejaVu Sans,11" noenhanced
set title "spmv CSR: speed relative to cuSPARSE per matrix (above 1 = faster than cuSPARSE)\n$(source_of "$data/spmv.csv"), median of 20 calls; auto+maxrow is the daemon's rule"
unset logscale x
set logscale y 10
set yrange [0.01:10]
set xlabel "matrix (SuiteSparse, then generated)"
set ylabel "cuSPARSE time / algo time (log scale)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border -1
set boxwidth 0.9
set xtics rotate by 30 right
set xtics auto
set key top right
set bmargin 10
set lmargin 14
plot "$data/spmv.csv" using (\$2/\$3):xtic(1) lc rgb "#1f77b4" title "scalar", \
     "" using (\$2/\$4) lc rgb "#2ca02c" title "vector", \
     "" using (\$2/\$5) lc rgb "#d62728" title "balanced", \
     "" using (\$2/\$7) lc rgb "#000000" title "auto+maxrow", \
     1 with lines lw 2 dt 2 lc rgb "#7f7f7f" title "cuSPARSE = 1"
set bmargin
set lmargin
set xtics norotate center
set yrange [*:*]

# (d) round trip by size: socket, regions, handles
set output "$out/roundtrip.png"
set terminal pngcairo size 1100,650 font "DejaVu Sans,11" noenhanced
set title "Round trip through gkcd by operand size: data through the socket, shared-memory regions, or device handles\n$(source_of "$data/roundtrip.csv"); CUDA backend, medians"
set style data points
set logscale x 10
set logscale y 10
set xrange [100:2000]
set yrange [0.1:2000]
set xlabel "operands the request computes on (MB: inputs + outputs, wherever they live)"
set ylabel "round trip (ms, log scale)"
set key top left
path(p, c) = strcol(1) eq p ? column(c) : NaN
MB(c) = column(c) / 1e6
# labels above their point, but the socket spmv's below it: it sits just under sgemm 4096^3
laby(c) = column(c) * ((strcol(1) eq "socket" && strcol(2) eq "spmv 2048^2 Laplacian") ? 0.72 : 1.4)
plot "$data/roundtrip.csv" using (MB(3)):(path("socket", 4)) with points pt 7 ps 2 lc rgb "#d62728" title "socket (operands as bins)", \
     "" using (MB(3)):(path("regions", 4)) with points pt 5 ps 2 lc rgb "#1f77b4" title "regions (shared memory)", \
     "" using (MB(3)):(path("handle x; y returned", 4)) with points pt 9 ps 2 lc rgb "#ff7f0e" title "resident matrix and x, y returned (16 MiB)", \
     "" using (MB(3)):(path("handles", 4)) with points pt 11 ps 2 lc rgb "#2ca02c" title "resident matrix, x and y (handles)", \
     "" using (MB(3)):(laby(4)):2 with labels notitle
set xrange [*:*]
set yrange [*:*]

# (e) latency of tiny requests under load
set output "$out/lanes.png"
set title "Tiny requests beside two clients of sgemm 8192^3: round trip idle and loaded\n$(source_of "$data/lanes.csv"); 2000 requests, p50 and p99"
unset logscale x
set logscale y 10
set yrange [10:100000]
set xlabel "gkcd configuration"
set ylabel "round trip (µs, log scale)"
# bars placed by hand (row i, four bars around x = i) under labels at x = i; the rows are
# lanes, off, fallback in that order (results_csv.py writes them so)
set style fill solid 0.9 border -1
set boxwidth 0.19
set xrange [-0.6:2.6]
set key top right
set xtics ("lanes (green contexts, the default)" 0, "lanes off (--latency-sms 0)" 1, "fallback (stream priorities + 100 us slices)" 2)
plot "$data/lanes.csv" using (\$0 - 0.3):2 with boxes lc rgb "#9ecae1" title "idle p50", \
     "" using (\$0 - 0.1):3 with boxes lc rgb "#3182bd" title "idle p99", \
     "" using (\$0 + 0.1):4 with boxes lc rgb "#fdae6b" title "loaded p50", \
     "" using (\$0 + 0.3):5 with boxes lc rgb "#e6550d" title "loaded p99"
EOF

for f in sgemm reduce spmv roundtrip lanes; do echo "$out/$f.png"; done
