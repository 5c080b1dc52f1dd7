#!/bin/sh
# plot_test.sh: bench/results_csv.py reads every table it expects from bench/RESULTS.md (and the
# kernel tables from a `bench_gpu --csv` file), and bench/plot.sh turns the CSVs into five PNG files.  Skips (77) without gnuplot or python3.
# Checks that each output exists, is a PNG (its 8-byte signature) and is not empty; what the
# charts look like is for a person to judge.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
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

# --bench-gpu: a CSV as `bench_gpu --csv` writes it (its header taken from bench_gpu.c, random
# figures, a note with a comma, lab rungs that must stay out) pivoted into the chart files: every
# figure in its (case, algo) cell, the device and the file named, then the five charts drawn.
header=$(sed -n 's/.*bench_csv_open(&csv, csv_path, "\([^"]*\)").*/\1/p' "$src/bench/gpu/bench_gpu.c")
[ -n "$header" ] || { echo "FAIL: no bench_csv_open header found in bench_gpu.c"; exit 1; }
python3 - "$tmp/gpu.csv" "$header" <<'PY'
import csv, random, sys
path, header = sys.argv[1], sys.argv[2].split(",")
rnd = random.Random()
rows = []
def row(op, case, algo, note=""):
    rows.append(dict(op=op, case=case, algo=algo, median_ms=f"{rnd.uniform(0.001, 50):.6f}",
                     min_ms="0.001", rate=f"{rnd.uniform(1, 60000):.3f}", unit="x", vs_vendor="1",
                     note=note, device="Test GPU, 7 SMs"))
for n in (256, 1024, 4096):
    for a in ("cublas", "naive", "smem", "regblock", "auto", "cublas_tf32"):
        row("sgemm", f"{n}x{n}x{n}", a, "tile 128x128, k split 2" if a == "regblock" else "")
    row("sgemm", f"{n}x{n}x{n}", "rb/128x64/k1", "lab")
row("sgemm", "4096x64x4096", "auto")  # a thin shape: not on the chart
for op in ("sum", "max"):
    for e in (20, 24):
        for a in ("cub", "smem", "shfl", "auto"):
            row("reduce", f"{op} 2^{e} floats", a)
for m in ("1138_bus", "laplace2d_512"):
    for a in ("cusparse", "scalar", "vector", "balanced", "auto", "auto+maxrow"):
        row("spmv", m, a)
    row("spmv", m, "vector/w4", "lab")
with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=header)
    w.writeheader()
    w.writerows(rows)
PY
python3 "$src/bench/results_csv.py" --bench-gpu "$tmp/gpu.csv" --out "$tmp/gdata" >/dev/null
python3 - "$tmp/gpu.csv" "$tmp/gdata" <<'PY' || exit 1
import csv, sys
src, out = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(src)))
def table(name):
    lines = open(f"{out}/{name}.csv").read().splitlines()
    assert lines[0].startswith("# from gpu.csv (bench_gpu --csv); Test GPU, 7 SMs; "), lines[0]
    return list(csv.DictReader(lines[1:]))
checked = 0
sg = {r["n"]: r for r in table("sgemm")}
assert sorted(sg, key=int) == ["256", "1024", "4096"], sorted(sg)
re_ = {(r["op"], r["floats"]): r for r in table("reduce")}
sp = {r["matrix"]: r for r in table("spmv")}
for r in rows:
    if r["note"] == "lab":
        continue
    if r["op"] == "sgemm":
        m, n, k = r["case"].split("x")
        if not m == n == k:
            continue
        got = sg[n][r["algo"]]
        want = r["rate"]
    elif r["op"] == "reduce":
        op, size = r["case"].split()[:2]
        got = re_[(op, str(2 ** int(size.split("^")[1])))][r["algo"]]
        want = r["rate"]
    else:
        got = sp[r["case"]][r["algo"].replace("+", "_") + "_ms"]
        want = r["median_ms"]
    assert float(got) == float(want), (r, got)
    checked += 1
for t in (sg, re_, sp):
    for r in t.values():
        assert not any("/" in k for k in r), r  # no lab column
print(f"bench-gpu pivot: {checked} figures in place")
PY
sh "$src/bench/plot.sh" --bench-gpu "$tmp/gpu.csv" --out "$tmp/gplots" >/dev/null
for f in sgemm reduce spmv roundtrip lanes; do
  p=$tmp/gplots/$f.png
  [ "$(head -c 8 "$p" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "$png" ] || { echo "FAIL: --bench-gpu: $f.png"; exit 1; }
done
if sh "$src/bench/plot.sh" --bench-gpu "$tmp/gpu.csv" 2>"$tmp/err" >/dev/null; then
  echo "FAIL: plot.sh --bench-gpu without --out would overwrite bench/plots"; exit 1
fi
echo "ok: 5 CSV files and 5 PNG charts, from RESULTS.md and from a bench_gpu CSV"
