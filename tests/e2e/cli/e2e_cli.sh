#!/usr/bin/env bash
# e2e_cli.sh: the gkc command-line client against a real gkcd.
#
#   bash tests/e2e/cli/e2e_cli.sh GKCD_BINARY GKC_BINARY
#
# Environment and helpers: cli_test_lib.sh; gkc batch has its own script,
# e2e_cli_batch.sh.  Prints one line per check and ends with "N passed, M
# failed".
TEST_NAME=e2e_cli
# shellcheck source=cli_test_lib.sh
source "$(dirname "$0")/cli_test_lib.sh"

T0=$SECONDS
start_daemon "$sock" "$dir/gkcd.log"

# --- help, version, ping, status ------------------------------------------------
run_raw --help
expect "gkc --help lists the commands" 0 ping status sgemm reduce dot nrm2 axpby spmv solve --socket --json --version
run_raw --version
expect "gkc --version" 0 '^gkc [0-9]+\.[0-9]+'
declare -A HELP_OPTS=(
  [ping]="--socket --json"
  [status]="--socket --json"
  [sgemm]="--a --b --c --alpha --beta --trans-a --trans-b --algo --out --random --seed --check --json"
  [reduce]="--x --random --seed --op --algo --check --json"
  [dot]="--x --y --random --seed --device --check --json"
  [axpby]="--x --y --alpha --beta --out --random --seed --device --check --json"
  [nrm2]="--x --random --seed --device --check --json"
  [spmv]="--matrix --random --density --x --y --alpha --beta --seed --algo --out --check --devices --json"
  [solve]="--matrix --b --x0 --method --rtol --atol --max-iter --precision --history --out --devices --json"
)
for cmd in ping status sgemm reduce dot nrm2 axpby spmv solve; do
  run_raw "$cmd" --help
  pats=("Usage: gkc $cmd")
  for opt in ${HELP_OPTS[$cmd]}; do pats+=("$opt\\b"); done
  expect "gkc $cmd --help mentions its options" 0 "${pats[@]}"
done

run ping
expect "ping (text)" 0 'version: +[0-9]' 'protocol: +[0-9]' 'backend: +[a-z]' 'round trip: +[0-9.]+ (us|ms|s)'
run ping --json
expect_json "ping --json (global option after the command)" \
  'num(d["protocol"]) and d["backend"] and d["version"] and num(d["round_trip_us"])'
run_raw --json --socket "$sock" ping
expect_json "gkc --json --socket S ping (global options first)" '"backend" in d'
run status
expect "status (text)" 0 'backend:' 'uptime:' 'in flight:' 'connections:' 'device 0:' 'sgemm +[0-9]+ +[0-9]+'
run status --json
expect_json "status --json has backend/devices/uptime_s/in_flight/methods" \
  'd["backend"] and isinstance(d["devices"], list) and num(d["uptime_s"]) and num(d["in_flight"]) and isinstance(d["methods"], dict)'

# --- sgemm on random data ------------------------------------------------------
run sgemm --random 256x256x256 --check
expect "sgemm --random 256^3 --check" 0 'check: +passed' 'GFLOP/s: +[0-9]' 'checksum:' 'algo:' 'seed:'
for ta in "" --trans-a; do
  for tb in "" --trans-b; do
    run sgemm --random 96x80x72 $ta $tb --alpha 1.5 --beta -0.5 --seed 7 --check --json
    expect_json "sgemm --random 96x80x72 ${ta:-(A)} ${tb:-(B)} alpha/beta --check --json" \
      'd["check"] == "passed" and (d["m"], d["n"], d["k"]) == (96, 80, 72) and d["shape"] == [96, 80] and d["seed"] == 7 and all(num(d[k]) for k in ("kernel_us", "round_trip_us", "gflops", "checksum", "max_rel_err"))'
  done
done
run sgemm --random 64 --seed 42 --json
sum1=$(field checksum 2>/dev/null || echo x)
run sgemm --random 64 --seed 42 --json
sum2=$(field checksum 2>/dev/null || echo y)
if [[ $sum1 == "$sum2" ]]; then ok "sgemm --seed is reproducible"; else bad "sgemm --seed is reproducible ($sum1 vs $sum2)"; fi

# --- sgemm on .npy files (made by gkc itself: no numpy needed) -------------------
run sgemm --random 40x30x5 --seed 1 --out "$dir/A.npy"   # A: 40 x 30
expect "sgemm --out writes A.npy" 0 "wrote: +$dir/A.npy"
run sgemm --random 30x25x5 --seed 2 --out "$dir/B.npy"   # B: 30 x 25
run sgemm --random 40x20x5 --seed 3 --out "$dir/B2.npy"  # 40 x 20, B for A^T
run sgemm --random 40x25x5 --seed 4 --out "$dir/C0.npy"  # C: 40 x 25
if info=$(npy_info "$dir/A.npy" 2>&1) && [[ $info == "<f4 40x30 "* ]]; then
  ok "--out wrote a valid float32 .npy (40x30)"
else
  bad "--out wrote a valid float32 .npy (40x30)" "$info"
fi
run sgemm --a "$dir/A.npy" --b "$dir/B.npy" --check --out "$dir/C.npy" --json
expect_json "sgemm --a A.npy --b B.npy --check --out C.npy" \
  'd["check"] == "passed" and d["shape"] == [40, 25] and d["k"] == 30 and "seed" not in d'
want_sum=$(field checksum 2>/dev/null || echo none)
if info=$(npy_info "$dir/C.npy" 2>&1) && python3 -c '
import sys
descr, shape, s = sys.argv[1].split()
want = float(sys.argv[2])
sys.exit(not (descr == "<f4" and shape == "40x25" and abs(float(s) - want) <= 1e-6 * max(1.0, abs(want))))
' "$info" "$want_sum"; then
  ok "C.npy is (40, 25) float32 and sums to the printed checksum"
else
  bad "C.npy is (40, 25) float32 and sums to the printed checksum" "npy: $info; checksum: $want_sum"
fi
run sgemm --a "$dir/A.npy" --trans-a --b "$dir/B2.npy" --check --json
expect_json "sgemm --a A.npy --trans-a --b B2.npy --check (30x20 from files)" \
  'd["check"] == "passed" and d["shape"] == [30, 20] and d["k"] == 40 and d["trans_a"] is True'
run sgemm --a "$dir/A.npy" --b "$dir/B.npy" --c "$dir/C0.npy" --alpha 2 --beta 0.5 --check
expect "sgemm with --c C0.npy --beta 0.5 --alpha 2 --check" 0 'check: +passed' 'C = 2 \* A \* B \+ 0.5 \* C'
run reduce --x "$dir/C.npy" --op max --check --json
expect_json "reduce reads sgemm's --out back (2-D, flattened)" \
  'd["n"] == 1000 and d["shape"] == [40, 25] and d["check"] == "passed"'

if [[ $HAVE_NUMPY == 1 ]]; then
  python3 -c '
import numpy as np, sys
r = np.random.default_rng(5)
np.save(sys.argv[1] + "/nA.npy", r.uniform(-1, 1, (33, 17)).astype(np.float32))
np.save(sys.argv[1] + "/nB.npy", r.uniform(-1, 1, (21, 17)).astype(np.float32))
np.save(sys.argv[1] + "/f64.npy", np.ones((4, 4)))
' "$dir"
  run sgemm --a "$dir/nA.npy" --b "$dir/nB.npy" --trans-b --alpha 0.5 --out "$dir/nC.npy" --check
  expect "sgemm on numpy-made files, --trans-b" 0 'check: +passed'
  if python3 -c '
import numpy as np, sys
d = sys.argv[1]
a, b, c = np.load(d + "/nA.npy"), np.load(d + "/nB.npy"), np.load(d + "/nC.npy")
ref = 0.5 * a.astype(np.float64) @ b.astype(np.float64).T
assert c.dtype == np.float32 and c.shape == (33, 21), (c.dtype, c.shape)
assert np.allclose(c, ref, rtol=1e-4, atol=1e-5), np.abs(c - ref).max()
' "$dir" 2>"$dir/np.err"; then
    ok "numpy reads --out and agrees with its own product"
  else
    bad "numpy reads --out and agrees with its own product" "$(cat "$dir/np.err")"
  fi
else
  skip "numpy is not importable: the numpy-made file checks"
fi

# --- reduce ------------------------------------------------------------------------
for op in sum min max; do
  run reduce --random 1000003 --op "$op" --check --json
  expect_json "reduce --random 1000003 --op $op --check" \
    "d['check'] == 'passed' and d['op'] == '$op' and d['n'] == 1000003 and num(d['value']) and num(d['kernel_us']) and d['algo']"
done
run reduce --random 1000 --seed 9 --op max
expect "reduce (text): value, n, algo, kernel time" 0 'value: +0\.[0-9]' 'n: +1000$' 'algo:' 'kernel time:'

# --- dot and axpby ------------------------------------------------------------------
run dot --random 100003 --check --json
expect_json "dot --random 100003 --check" \
  "d['check'] == 'passed' and d['n'] == 100003 and num(d['value']) and num(d['kernel_us']) and d['algo']"
run axpby --random 1001 --alpha 2 --beta -0.5 --seed 3 --check --json
expect_json "axpby --random 1001 --alpha 2 --beta -0.5 --check" \
  "d['check'] == 'passed' and d['n'] == 1001 and d['alpha'] == 2 and d['beta'] == -0.5 and d['seed'] == 3"
run dot --random 1000 --seed 9
expect "dot (text): value, n, algo, kernel time" 0 'value: +-?[0-9]' 'n: +1000$' 'algo:' 'kernel time:'
if [[ $HAVE_NUMPY == 1 ]]; then
  python3 -c '
import numpy as np, sys
r = np.random.default_rng(8)
np.save(sys.argv[1] + "/vx.npy", r.uniform(-1, 1, (7, 11)).astype(np.float32))
np.save(sys.argv[1] + "/vy.npy", r.uniform(-1, 1, 77).astype(np.float32))
np.save(sys.argv[1] + "/vz.npy", np.ones(76, np.float32))
' "$dir"
  run dot --x "$dir/vx.npy" --y "$dir/vy.npy" --json
  dotv=$(field value 2>/dev/null || echo x)
  run axpby --x "$dir/vx.npy" --y "$dir/vy.npy" --alpha 1.5 --beta -2 --out "$dir/vo.npy"
  expect "axpby on numpy-made files, --out" 0 "written to: +$dir/vo.npy"
  if python3 -c '
import numpy as np, sys
d, dotv = sys.argv[1], float(sys.argv[2])
x = np.load(d + "/vx.npy").astype(np.float64).ravel()
y = np.load(d + "/vy.npy").astype(np.float64)
o = np.load(d + "/vo.npy")
ref = x @ y
assert abs(dotv - ref) <= 1e-6 * np.abs(x * y).sum(), (dotv, ref)
assert o.dtype == np.float32 and o.shape == (77,), (o.dtype, o.shape)
assert np.allclose(o, 1.5 * x - 2 * y, rtol=1e-6, atol=1e-6), np.abs(o - (1.5 * x - 2 * y)).max()
' "$dir" "$dotv" 2>"$dir/np.err"; then
    ok "dot and axpby agree with numpy in float64 (a 7x11 x against a 77-long y)"
  else
    bad "dot and axpby agree with numpy in float64 (a 7x11 x against a 77-long y)" "$(cat "$dir/np.err")"
  fi
  run dot --x "$dir/vx.npy" --y "$dir/vz.npy"
  expect "dot of 77 against 76 values: exit 2 naming both files" 2 "vx.npy has 77 values" "vz.npy 76" "one length"
else
  skip "numpy is not importable: dot/axpby on numpy-made files"
fi

# --- nrm2 --------------------------------------------------------------------------
for n in 1 1001 1000003; do
  run nrm2 --random "$n" --check --json
  expect_json "nrm2 --random $n --check --json: value, n, algo, timings" \
    "d['check'] == 'passed' and d['n'] == $n and num(d['value']) and d['value'] > 0 and d['max_rel_err'] <= 1e-6 and num(d['kernel_us']) and num(d['round_trip_us']) and d['algo'] and 'seed' in d"
done
run --no-shm nrm2 --random 300007 --check
expect "nrm2 --no-shm --random 300007 --check (through the socket)" 0 'check: +passed'
run nrm2 --random 1000 --seed 9
expect "nrm2 (text): value, n, algo, kernel time, seed" 0 'value: +[0-9]' 'n: +1000$' 'algo:' 'kernel time:' 'seed: +9$'
nv1=$(grep '^value:' "$dir/out" || echo x)
run nrm2 --random 1000 --seed 9
nv2=$(grep '^value:' "$dir/out" || echo y)
if [[ $nv1 == "$nv2" ]]; then ok "nrm2 --seed is reproducible"; else bad "nrm2 --seed is reproducible ($nv1 vs $nv2)"; fi
# A 3x5 .npy written with python3's standard library, and its norm in float64
# (fsum); values near 1e20, whose squares overflow float32 but not float64.
nref=$(python3 -c '
import math, random, struct, sys
r = random.Random(11)
v = [struct.unpack("<f", struct.pack("<f", r.uniform(-4, 4) * 1e20))[0] for _ in range(15)]
hdr = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (3, 5), }"
hdr += " " * (117 - len(hdr)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00\x76\x00" + hdr.encode() + struct.pack("<15f", *v))
print(repr(math.sqrt(math.fsum(x * x for x in v))))
' "$dir/n35.npy")
run nrm2 --x "$dir/n35.npy" --check --json
expect_json "nrm2 --x (3x5, values near 1e20) --check --json: the float64 norm, its shape" \
  "d['n'] == 15 and d['shape'] == [3, 5] and abs(d['value'] - $nref) <= 1e-9 * $nref and d['check'] == 'passed' and 'seed' not in d"
run nrm2 --random 10 --x "$dir/n35.npy"
expect "nrm2 --random with --x: exit 2" 2 "^gkc: --random and --x cannot be combined" "^Try 'gkc nrm2 --help'\.\$"
run nrm2
expect "nrm2 without --x or --random: exit 2" 2 "^gkc: missing --x X.npy \(or --random N" "^Try 'gkc nrm2 --help'\.\$"
run nrm2 --x "$dir/nonexistent.npy"
expect "nrm2 --x nonexistent: exit 2, names it" 2 "nonexistent.npy" "No such file"
run nrm2 --random 10 --device 7
expect "nrm2 --device 7 (no such device): refused by gkcd, exit 1, names 'device'" 1 \
  "^gkc: invalid_argument: argument 'device': 7 is not a device"
if [[ $HAVE_NUMPY == 1 ]]; then
  python3 -c '
import numpy as np, sys
r = np.random.default_rng(12)
np.save(sys.argv[1] + "/nx.npy", (r.standard_normal((6, 7, 9)) * 1e3).astype(np.float32))
np.save(sys.argv[1] + "/nbig.npy", r.uniform(-1, 1, 1000003).astype(np.float32))
np.save(sys.argv[1] + "/nempty.npy", np.zeros(0, np.float32))
' "$dir"
  for f in nx nbig; do
    run nrm2 --x "$dir/$f.npy" --json
    if [[ $rc == 0 ]] && python3 -c '
import json, numpy as np, sys
got = json.load(open(sys.argv[1]))
x = np.load(sys.argv[2])
ref = float(np.linalg.norm(x.astype(np.float64).ravel()))
assert got["n"] == x.size and got["shape"] == list(x.shape), (got["n"], got["shape"], x.shape)
assert abs(got["value"] - ref) <= 1e-9 * ref, (got["value"], ref)
' "$dir/out" "$dir/$f.npy" 2>"$dir/np.err"; then
      ok "nrm2 --x $f.npy agrees with numpy's float64 norm"
    else
      bad "nrm2 --x $f.npy agrees with numpy's float64 norm" "$(output; cat "$dir/np.err")"
    fi
  done
  run nrm2 --x "$dir/nempty.npy"
  expect "nrm2 of an empty .npy: exit 2" 2 "nempty.npy is empty"
else
  skip "numpy is not importable: nrm2 on numpy-made files"
fi

# --- spmv --------------------------------------------------------------------------
declare -A MTX_SHAPE=([west0067]="67 67 294" [lp_ship04l]="402 2166 6380")
for m in west0067 lp_ship04l; do
  read -r r c z <<<"${MTX_SHAPE[$m]}"
  run spmv --matrix "$DATA/$m.mtx" --check --json --seed 11
  expect_json "spmv --matrix $m.mtx --check" \
    "d['check'] == 'passed' and (d['rows'], d['cols'], d['nnz']) == ($r, $c, $z) and all(num(d[k]) for k in ('kernel_us', 'round_trip_us', 'gbps', 'checksum'))"
done
run spmv --matrix "$DATA/lp_ship04l.mtx" --check
expect "spmv (text): rows, cols, nnz, GB/s, checksum" 0 'rows: +402' 'cols: +2166' 'nnz: +6380' 'GB/s:' 'checksum:' 'check: +passed'

gzip -c "$DATA/lp_ship04l.mtx" >"$dir/lp_ship04l.mtx.gz"
run spmv --matrix "$DATA/lp_ship04l.mtx" --seed 3 --json
plain=$(field checksum 2>/dev/null || echo none)
run spmv --matrix "$dir/lp_ship04l.mtx.gz" --seed 3 --check --json
expect_json "spmv --matrix lp_ship04l.mtx.gz --check" "d['check'] == 'passed' and d['nnz'] == 6380"
gz=$(field checksum 2>/dev/null || echo none-gz)
if [[ $plain == "$gz" ]]; then ok ".mtx.gz gives the same y as .mtx"; else bad ".mtx.gz gives the same y as .mtx ($plain vs $gz)"; fi

# x and y from .npy files: spmv's own --out makes 1-D vectors of length rows.
run spmv --matrix "$DATA/west0067.mtx" --seed 1 --out "$dir/x67.npy"
run spmv --matrix "$DATA/west0067.mtx" --seed 2 --out "$dir/y67.npy"
if info=$(npy_info "$dir/x67.npy" 2>&1) && [[ $info == "<f4 67 "* ]]; then
  ok "spmv --out wrote a 1-D float32 .npy of length rows"
else
  bad "spmv --out wrote a 1-D float32 .npy of length rows" "$info"
fi
run spmv --matrix "$DATA/west0067.mtx" --x "$dir/x67.npy" --y "$dir/y67.npy" --alpha -1.5 --beta 2 --check --json
expect_json "spmv --x X.npy --y Y.npy --alpha --beta --check" "d['check'] == 'passed' and 'seed' not in d"
run spmv --random 2000x3000 --density 0.02 --seed 5 --check --json
expect_json "spmv --random 2000x3000 --density 0.02 --check" \
  "d['check'] == 'passed' and (d['rows'], d['cols']) == (2000, 3000) and 100000 < d['nnz'] < 140000 and d['seed'] == 5"

if [[ -n $SHARED && -d $SHARED ]]; then
  shopt -s nullglob
  files=("$SHARED"/*.mtx "$SHARED"/*.mtx.gz)
  shopt -u nullglob
  for f in "${files[@]}"; do
    name=$(basename "$f")
    run spmv --matrix "$f" --check --json
    if [[ $rc == 0 ]]; then
      summary=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%dx%d nnz %d, %s %.1f us, err %.2g" % (d["rows"], d["cols"], d["nnz"], d["algo"], d["kernel_us"], d["max_rel_err"]))
' "$dir/out" 2>/dev/null || echo "?")
    fi
    expect_json "spmv --check on shared $name${summary:+ ($summary)}" "d['check'] == 'passed'"
    summary=
  done
else
  skip "GKC_SHARED_MATRICES not set or missing: the shared matrices"
fi

# --- solve ---------------------------------------------------------------------------
# A 2-D Laplacian (SPD) on a 24 x 24 grid, written here; b from spmv --out (a
# vector of length n).  Each x is checked by its residual recomputed here in
# float64 from the .mtx and the .npy files (python3's standard library only).
write_laplacian "$dir/lap.mtx" 24
# residual A.mtx x.npy [b.npy]: ||b - A x|| / ||b|| in float64 (b = A * ones when absent).
residual() {
  python3 - "$@" <<'PY'
import ast, math, struct, sys
def npy(p):
    b = open(p, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    h = ast.literal_eval(b[10:10 + hl].decode("latin1"))
    n = h["shape"][0]
    return list(struct.unpack("<%df" % n, b[10 + hl:10 + hl + 4 * n]))
lines = [l for l in open(sys.argv[1]) if not l.startswith("%")]
n = int(lines[0].split()[0])
rows = [[] for _ in range(n)]
for l in lines[1:]:
    i, j, v = l.split()
    rows[int(i) - 1].append((int(j) - 1, float(v)))
x = npy(sys.argv[2])
b = npy(sys.argv[3]) if len(sys.argv) > 3 else [float(struct.unpack("<f", struct.pack("<f", sum(v for _, v in r)))[0]) for r in rows]
rr = sum((b[i] - sum(v * x[j] for j, v in rows[i])) ** 2 for i in range(n))
print("%.6e" % math.sqrt(rr / sum(t * t for t in b)))
PY
}
run spmv --matrix "$dir/lap.mtx" --seed 4 --out "$dir/b576.npy"
for method in cg pcg bicgstab; do
  run solve --matrix "$dir/lap.mtx" --b "$dir/b576.npy" --method $method --rtol 1e-6 --out "$dir/x_$method.npy" --json
  expect_json "solve --method $method --json: converged, fields" \
    "d['converged'] is True and d['reason'] == 'converged' and d['method'] == '$method' and d['n'] == 576 and 0 < d['iterations'] < 576 and num(d['residual']) and num(d['round_trip_us']) and num(d['iterations_per_s'])"
  rjson=$(field residual 2>/dev/null || echo nan)
  rhere=$(residual "$dir/lap.mtx" "$dir/x_$method.npy" "$dir/b576.npy" 2>&1 || true)
  if python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (abs(a - b) <= 1e-6 * b and b <= 2e-6))' "$rjson" "$rhere" 2>/dev/null; then
    ok "solve --method $method: x's residual recomputed here in float64 ($rhere) is gkcd's ($rjson)"
  else
    bad "solve --method $method: x's residual recomputed here ($rhere) vs gkcd's ($rjson), rtol 1e-6"
  fi
done
# --devices all: A partitioned by rows over gkcd's devices (here the one it has; the
# split over several is tests/python/test_partition.py's): the same answer.
run solve --matrix "$dir/lap.mtx" --b "$dir/b576.npy" --devices all --rtol 1e-6 --out "$dir/x_part.npy" --json
expect_json "solve --devices all --json: converged, partitioned" \
  "d['converged'] is True and d['algo'] == 'partitioned' and 0 < d['iterations'] < 576"
rhere=$(residual "$dir/lap.mtx" "$dir/x_part.npy" "$dir/b576.npy" 2>&1 || true)
if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) <= 2e-6)' "$rhere" 2>/dev/null; then
  ok "solve --devices all: residual here $rhere"; else bad "solve --devices all: residual here $rhere"; fi
run spmv --matrix "$dir/lap.mtx" --devices all --check --json --seed 4
expect_json "spmv --devices all --check: resident, partitioned, checked" \
  "d['check'] == 'passed' and d['repeat'] == 1"
run solve --matrix "$dir/lap.mtx" --devices all --method bicgstab
expect "solve --devices all --method bicgstab: refused, says why" 1 "bicgstab does not run on a partitioned matrix"
# --precision fp32: float32 vectors; the same answer to a looser tolerance.
run solve --matrix "$dir/lap.mtx" --b "$dir/b576.npy" --precision fp32 --rtol 1e-5 --out "$dir/x_fp32.npy" --json
expect_json "solve --precision fp32 --json: converged" "d['converged'] is True and 0 < d['iterations'] < 576"
rhere=$(residual "$dir/lap.mtx" "$dir/x_fp32.npy" "$dir/b576.npy" 2>&1 || true)
if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) <= 2e-5)' "$rhere" 2>/dev/null; then
  ok "solve --precision fp32: residual here $rhere"; else bad "solve --precision fp32: residual here $rhere"; fi
run solve --matrix "$dir/lap.mtx" --precision fp16
expect "solve --precision fp16: exit 2, names --precision" 2 "^gkc: invalid --precision 'fp16'"
run solve --matrix "$dir/lap.mtx" --devices 0,0
expect "solve --devices 0,0: exit 2, names --devices" 2 "^gkc: invalid --devices '0,0': expected all, or distinct"
run spmv --matrix "$dir/lap.mtx" --devices 7
expect "spmv --devices 7 (no such device): refused by gkcd, names 'devices'" 1 "argument 'devices': 7 is not a device"
# Without --b: b = A * ones, and the error against ones is reported.
run solve --matrix "$dir/lap.mtx" --rtol 1e-7 --out "$dir/x_ones.npy" --json
expect_json "solve without --b: b = A * ones, error vs ones small" \
  "d['converged'] and d['b'] == 'A * ones' and d['error_vs_ones'] < 1e-4"
rhere=$(residual "$dir/lap.mtx" "$dir/x_ones.npy" 2>&1 || true)
if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) <= 2e-7)' "$rhere" 2>/dev/null; then
  ok "solve without --b: residual here $rhere"; else bad "solve without --b: residual here $rhere"; fi
run solve --matrix "$dir/lap.mtx" --method pcg --rtol 1e-8
expect "solve (text): iterations, residual, time, error vs ones" 0 'iterations: +[0-9]+$' \
  'converged: +yes' 'residual: +[0-9.]+e[-+][0-9]+$' 'solve time: +[0-9.]+ (us|ms|s)' 'error vs ones:' 'iterations/s:'
# --history: one entry per iteration, the curve and its plot; --x0 starts at the answer.
run solve --matrix "$dir/lap.mtx" --history --json
expect_json "solve --history --json: one entry per iteration, decreasing to rtol" \
  "len(d['history']) == d['iterations'] > 5 and d['history'][-1] <= 1e-6 and d['history'][-1] < d['history'][0]"
run solve --matrix "$dir/lap.mtx" --history
expect "solve --history (text): the table and the plot" 0 'history: +iteration' \
  'log10\(\|\|r\|\| / \|\|b\|\|\) against the iteration' '^ +\| *\*' '^ +\+-+$'
run solve --matrix "$dir/lap.mtx" --x0 "$dir/x_ones.npy" --rtol 1e-5 --json
expect_json "solve --x0 at the answer: (almost) no iterations" "d['converged'] and d['iterations'] <= 2"
# Not converged: still printed, exit 1 with the reason.
run solve --matrix "$dir/lap.mtx" --max-iter 3 --rtol 1e-12
expect "solve --max-iter 3: exit 1, printed, says why" 1 'iterations: +3$' 'reason: +max_iter' \
  '^gkc: solve did not converge: .*max_iter.* 3 iterations'
# Bad arguments: exit 2 before any work, each naming the argument.
run solve --matrix "$DATA/lp_ship04l.mtx"
expect "solve on a non-square matrix: exit 2, names it and its shape" 2 \
  '^gkc: --matrix .*lp_ship04l.mtx is 402 x 2166: solve needs a square matrix' "^Try 'gkc solve --help'"
run solve --matrix "$dir/lap.mtx" --b "$dir/x67.npy"
expect "solve --b of the wrong length: exit 2, names --b, both lengths" 2 \
  '^gkc: shape mismatch: --b .*x67.npy has shape \(67,\), expected \(576,\)'
run solve --matrix "$dir/lap.mtx" --x0 "$dir/x67.npy"
expect "solve --x0 of the wrong length: exit 2" 2 '^gkc: shape mismatch: --x0 .*\(67,\).*\(576,\)'
run solve --matrix "$dir/lap.mtx" --rtol -1e-3
expect "solve --rtol negative: exit 2, names --rtol" 2 "^gkc: invalid --rtol '-1e-3': expected a finite number >= 0"
run solve --matrix "$dir/lap.mtx" --method gmres
expect "solve --method unknown: exit 2" 2 "^gkc: invalid --method 'gmres': expected cg, pcg or bicgstab"
run solve --b "$dir/b576.npy"
expect "solve without --matrix: exit 2" 2 "^gkc: missing --matrix"
# pcg on a zero diagonal: gkcd's refusal names the row, exit 1.
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 2\n1 2 1\n2 1 1\n3 3 2\n' >"$dir/zdiag.mtx"
run solve --matrix "$dir/zdiag.mtx" --method pcg
expect "solve --method pcg on a zero diagonal: exit 1, gkcd names the row" 1 \
  '^gkc: invalid_argument: .*row 1'

# --- usage errors: exit 2 -------------------------------------------------------------
run sgemm --bogus
expect "unknown option: exit 2, named, with a hint" 2 "'--bogus'" "Try 'gkc sgemm --help'"
run --bogus ping
expect "unknown global option: exit 2" 2 "'--bogus'" "Try 'gkc --help'"
run frobnicate
expect "unknown command: exit 2" 2 "frobnicate"
run sgemm --b "$dir/B.npy"
expect "sgemm without --a: exit 2" 2 "missing --a" "Try 'gkc sgemm --help'"
run sgemm --random 8 --alpha
expect "option without its value: exit 2" 2 "'--alpha' needs an argument"
run sgemm --random 8 --alpha abc
expect "bad number: exit 2" 2 "--alpha 'abc'"
run sgemm --random 8x0x4
expect "bad --random: exit 2" 2 "--random '8x0x4'"
run reduce --random 10 --op avg
expect "bad --op: exit 2" 2 "--op 'avg'"
run sgemm --a "$dir/A.npy" --b "$dir/B.npy" --beta 1
expect "--beta without --c: exit 2" 2 "--c"

# A float64 .npy, written byte by byte: the v1.0 header padded to 128 bytes.
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf '%-117s\n' "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"
  head -c 32 /dev/zero
} >"$dir/f64_hand.npy"
run sgemm --a "$dir/f64_hand.npy" --b "$dir/B.npy"
expect "float64 .npy (hand-made): exit 2, says float64" 2 "f64_hand.npy" "float64|<f8" "Try 'gkc sgemm --help'"
if [[ $HAVE_NUMPY == 1 ]]; then
  run reduce --x "$dir/f64.npy"
  expect "float64 .npy (numpy-made): exit 2" 2 "float64"
fi
run sgemm --a "$dir/A.npy" --b "$dir/A.npy"
expect "sgemm shape mismatch: exit 2, names file and shapes" 2 "shape mismatch" "A.npy" '\(40, 30\)' "k = 30"
run sgemm --a "$dir/A.npy" --b "$dir/B.npy" --c "$dir/A.npy" --beta 1
expect "sgemm --c of the wrong shape: exit 2" 2 "shape mismatch" '\(40, 25\)'
run sgemm --a "$dir/x67.npy" --b "$dir/B.npy"
expect "sgemm with a 1-D A: exit 2" 2 "2-D" '\(67,\)'
run spmv --matrix "$DATA/lp_ship04l.mtx" --x "$dir/x67.npy"
expect "spmv --x of the wrong length: exit 2" 2 "shape mismatch" "x67.npy" "2166"
run sgemm --a "$dir/nonexistent.npy" --b "$dir/B.npy"
expect "nonexistent .npy: exit 2" 2 "nonexistent.npy" "No such file"
run spmv --matrix "$dir/nonexistent.mtx"
expect "nonexistent .mtx: exit 2" 2 "nonexistent.mtx" "No such file"
printf '%%%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n' >"$dir/array.mtx"
run spmv --matrix "$dir/array.mtx"
expect "unsupported .mtx: exit 2" 2 "array.mtx"
run sgemm --random 8 --out "$dir/no/such/dir/c.npy"
expect "--out into a missing folder: exit 2 before any work" 2 "no/such/dir"

# Every command: an unknown option and each kind of bad value exit 2, name
# the culprit and point at the command's --help, like gkcd --bogus.
declare -A BAD_VALUES=(
  [ping]="extra|--json=1|--socket"
  [status]="extra|--json=1|--socket"
  [sgemm]="--random 8 --alpha abc|--random 8x0x4|--random 8 --precision fp16|--random 8 --seed -1|--random 8 -x|--random 8 --beta"
  [reduce]="--random 0|--random 10 --op avg|--random 10 --seed x|--random 10 --check=1"
  [dot]="--random 0|--random 10 --seed x|--random 10 --x"
  [axpby]="--random 10 --alpha abc|--random 10 --beta nan|--random -3"
  [nrm2]="--random 0|--random 10 --seed x|--random 10 --x|--random 10 --y|--random 10 --device x|--random 10 --alpha"
  [spmv]="--random 10 --density 2|--random 10 --repeat 0|--random 0x5|--random 10 --beta x|--random 10 --alpha inf"
  [solve]="--matrix $dir/lap.mtx --rtol -1|--matrix $dir/lap.mtx --atol x|--matrix $dir/lap.mtx --max-iter 0|--matrix $dir/lap.mtx --method sor|--matrix $dir/lap.mtx --rtol nan"
)
for cmd in ping status sgemm reduce dot nrm2 axpby spmv solve; do
  run "$cmd" --bogus
  expect "gkc $cmd --bogus: exit 2, named, with the hint" 2 "^gkc: unknown option '--bogus'" "^Try 'gkc $cmd --help'\.\$"
  IFS='|' read -r -a cases <<<"${BAD_VALUES[$cmd]}"
  for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    run "$cmd" $c
    culprit=${c##* }
    expect "gkc $cmd $c: exit 2, names '${culprit%%=*}', with the hint" 2       "^gkc: .*${culprit%%=*}" "^Try 'gkc $cmd --help'\.\$"
  done
done

# --- sizes over the limits: refused before anything is allocated, exit 1 -----------
# The brief's case: C alone would be 40 GB, over the default --max-request-bytes.
run status --json
maxreq=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["limits"]["max_request_bytes"])' "$dir/out")
run sgemm --random 100000x100000x1
expect "sgemm --random 100000x100000x1: exit 1 before allocating 40 GB, names the limit" 1 \
  "^gkc: sgemm 100000x100000x1: the result C would be 40000000000 bytes" "limit of $maxreq bytes" \
  "gkcd --max-request-bytes"
# A gkcd with small limits: 1 MiB a request, 1 MiB of memory budget.
lsock=$dir/l.sock
start_daemon "$lsock" "$dir/gkcd_limits.log" --max-request-bytes 1M --memory-budget 1M
lrun() { run_raw --socket "$lsock" "$@"; }
lrun sgemm --random 1000x1000x1
expect "sgemm, result over --max-request-bytes: exit 1, both sizes" 1 \
  "the result C would be 4000000 bytes" "limit of 1048576 bytes" "gkcd --max-request-bytes"
lrun sgemm --random 1x1x300000
expect "sgemm, A and B over --max-request-bytes: exit 1, both sizes" 1 \
  "the request would carry 2400000 bytes .* of A and B" "limit of 1048576 bytes" "gkcd --max-request-bytes"
lrun sgemm --random 400x400x300
expect "sgemm, request and result over --memory-budget: exit 1, both sizes" 1 \
  "would take 1600000 bytes .*in gkcd" "memory budget of 1048576 bytes" "gkcd --memory-budget"
lrun reduce --random 300000
expect "reduce --random over --max-request-bytes: exit 1" 1 \
  "reduce --random 300000: the request would carry 1200000 bytes" "gkcd --max-request-bytes"
lrun nrm2 --random 300000
expect "nrm2 --random over --max-request-bytes: exit 1" 1 \
  "nrm2 --random 300000: the request would carry 1200000 bytes .* of x" "gkcd --max-request-bytes"
lrun spmv --random 1000x1000 --density 0.2
expect "spmv --random over --max-request-bytes: exit 1" 1 \
  "spmv --random 1000x1000 .*the request would carry [0-9]+ bytes" "limit of 1048576 bytes" "gkcd --max-request-bytes"
# Files whose headers declare more than the limit: refused after the header.
python3 -c '
import sys
hdr = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (2000, 2000), }"
hdr += " " * (117 - len(hdr)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00\x76\x00" + hdr.encode())
    f.truncate(128 + 4 * 2000 * 2000)
' "$dir/big.npy"
lrun sgemm --a "$dir/big.npy" --b "$dir/big.npy"
expect "sgemm --a with a 16 MB header: exit 1, names the file and the limit" 1 \
  "--a .*big.npy of shape \(2000, 2000\)" "16000000 bytes" "gkcd --max-request-bytes"
lrun reduce --x "$dir/big.npy"
expect "reduce --x with a 16 MB header: exit 1" 1 "--x .*big.npy" "gkcd --max-request-bytes"
printf '%%%%MatrixMarket matrix coordinate real general\n1000 1000 500000\n1 1 1\n' >"$dir/big.mtx"
lrun spmv --matrix "$dir/big.mtx"
expect "spmv --matrix declaring 500000 entries: exit 1 before reading them" 1 \
  "big.mtx \(1000 x 1000, 500000 entries\)" "gkcd --max-request-bytes"
lrun sgemm --random 100x100x100 --check
expect "within the limits the same gkcd computes" 0 "check: +passed"
# This machine's memory, checked even when gkcd cannot be reached (its
# limits unknown): 8 TB for A, B, C and the reply.
run_raw --socket "$dir/nobody.sock" sgemm --random 1000000x1000000x1
expect "sgemm larger than this machine's memory: exit 1, names MemAvailable" 1 \
  "needs about 8000008000000 bytes" "MemAvailable in /proc/meminfo"

# --- server and connection errors: exit 1 ------------------------------------------
for cmd in "sgemm --random 16" "reduce --random 100" "spmv --random 100"; do
  # shellcheck disable=SC2086
  run $cmd --algo nonexistent
  expect "${cmd%% *} --algo nonexistent: exit 1 with the server's message" 1 \
    "^gkc: invalid_argument: .*'nonexistent'"
done
run_raw --socket "$dir/nobody.sock" ping
expect "no daemon on the socket: exit 1, names it, hints at gkcd" 1 \
  "^gkc: connect: " "nobody.sock" "is gkcd running\\?" "gkcd --socket $dir/nobody.sock"
run_raw --socket "$dir/nobody.sock" sgemm --random 8
expect "no daemon, sgemm: exit 1" 1 "nobody.sock"
# A socket file nobody listens on any more (a gkcd that died without cleaning up).
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$dir/stale.sock"
run_raw --socket "$dir/stale.sock" status
expect "stale socket file: exit 1, connection refused, hint" 1 "stale.sock" "is gkcd running\\?"

# With fault injection built in, a second gkcd fails every sgemm on purpose.
fsock=$dir/f.sock
if GKCD_FAULT=sgemm:device_error start_daemon "$fsock" "$dir/gkcd_fault.log" 2>/dev/null; then
  run_raw --socket "$fsock" sgemm --random 8 --json
  if grep -q "injected fault" "$dir/err"; then
    expect "server error in a compute call: exit 1, 'gkc: device_error: ...', no stdout" 1 \
      "^gkc: device_error: injected fault"
    if [[ -s $dir/out ]]; then bad "a failed call printed on stdout" "$(output)"; fi
  else
    skip "gkcd built without GKC_FAULT_INJECTION: the injected server error"
  fi
fi

run status --json
expect_json "status counts the requests and the errors" \
  'd["methods"]["sgemm"]["requests"] >= 10 and d["methods"]["sgemm"]["errors"] >= 1 and d["methods"]["spmv"]["requests"] >= 5'

# gkc metrics: the Prometheus text (e2e_metrics.sh checks it in depth).
run metrics
expect "metrics prints the exposition" 0 '^# TYPE gkcd_requests_total counter' \
  'gkcd_requests_total\{method="sgemm",code="ok"\} [1-9]'
run metrics --json
expect_json "metrics --json holds the text" '"gkcd_request_duration_seconds_bucket" in d["metrics"]'
run metrics extra
expect "metrics with an operand: usage error" 2 "unexpected argument 'extra'"

# gkc top: frames while a background client keeps gkcd busy; --json lines
# whose requests_per_s sees that load.
( for i in $(seq 40); do "$GKC" --socket "$sock" sgemm --random 64 >/dev/null 2>&1 || break; done ) &
load_pid=$!
run top --iterations 3 --interval 0.3
n=$(grep -c '^gkc top - ' "$dir/out" || true)
if [[ $rc == 0 && $n == 3 ]] && grep -Eq '^LANE +WORKERS' "$dir/out" && grep -Eq '^CLIENT +PID' "$dir/out" &&
   grep -Eq '^0 +\S' <(sed -n '/^DEV /,/^$/p' "$dir/out" | tail -n +2); then
  ok "top --iterations 3 prints 3 frames with lanes, devices, clients"
else
  bad "top --iterations 3 ($n frames, exit $rc)" "$(output)"
fi
run top --json --iterations 4 --interval 0.25
wait "$load_pid" || true
if [[ $rc == 0 ]] && why=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4, "%d lines" % len(rows)
assert rows[0]["requests_per_s"] is None, "first line has a rate"
for r in rows:
    for k in ("queued", "in_flight", "connections", "lanes", "clients", "devices"):
        assert k in r, "no " + k
    assert r["devices"] and r["devices"][0]["memory_total"] > 0, "no device memory"
    assert all("wait_p50_us" in l and "wait_p99_us" in l for l in r["lanes"]), "lane percentiles"
    assert any(c["pid"] > 0 for c in r["clients"]), "no client listed"
assert rows[-1]["requests"] > rows[0]["requests"], "requests did not move"
assert all(r["requests_per_s"] >= 0 for r in rows[1:])
' "$dir/out" 2>&1); then
  ok "top --json: one object per refresh, rates after the first, lanes/clients/devices"
else
  bad "top --json (${why:-exit $rc})" "$(output)"
fi
run top --iterations 0
expect "top --iterations 0: usage error naming the option" 2 "--iterations"
run top --interval 0.01 --iterations 1
expect "top --interval too short: usage error" 2 "--interval"

finish
