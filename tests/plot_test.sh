#!/bin/sh
# plot_test.sh: bench/results_csv.py reads every table it expects from bench/RESULTS.md, and
# bench/plot.sh turns the CSVs into five PNG files.  Skips (77) without gnuplot or python3.
# Checks that each output exists, is a PNG (its 8-byte signature) and is not empty; what the
# charts look like is for a person to judge.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
command -v gnuplot >/dev/null 2>&1 || { echo "skip: no gnuplot (gnuplot-nox)"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 "$src/bench/results_csv.py" --results "$src/bench/RESULTS.md" --out "$tmp/data" >/dev/null
for f in sgemm reduce spmv roundtrip lanes; do
  # a comment naming the source, a header, then at least one row
  head -1 "$tmp/data/$f.csv" | grep -q '^# from bench/RESULTS.md, section' || { echo "FAIL: $f.csv has no source line"; exit 1; }
  [ "$(grep -vc '^#' "$tmp/data/$f.csv")" -ge 2 ] || { echo "FAIL: $f.csv has no rows"; exit 1; }
done
sh "$src/bench/plot.sh" --data "$tmp/data" --out "$tmp/plots" >/dev/null
png=$(printf '\211PNG\r\n\032\n' | od -An -tx1 | tr -d ' \n')
for f in sgemm reduce spmv roundtrip lanes; do
  p=$tmp/plots/$f.png
  [ -s "$p" ] || { echo "FAIL: $f.png missing or empty"; exit 1; }
  [ "$(head -c 8 "$p" | od -An -tx1 | tr -d ' \n')" = "$png" ] || { echo "FAIL: $f.png is not a PNG"; exit 1; }
done
# a table the script needs, missing, is an error naming it (not a chart silently dropped)
grep -v '^| lanes (default' "$src/bench/RESULTS.md" > "$tmp/broken.md"
if python3 "$src/bench/results_csv.py" --results "$tmp/broken.md" --out "$tmp/d2" 2>"$tmp/err" >/dev/null; then
  echo "FAIL: results_csv.py accepted RESULTS.md without the lanes row"; exit 1
fi
grep -q 'lanes' "$tmp/err" || { echo "FAIL: the error does not name the lanes table: $(cat "$tmp/err")"; exit 1; }
echo "ok: 5 CSV files and 5 PNG charts"
