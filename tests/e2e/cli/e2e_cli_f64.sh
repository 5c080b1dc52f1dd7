#!/usr/bin/env bash
# e2e_cli_f64.sh: the gkc CLI on float64 .npy files (issue 27): dot, nrm2,
# axpby and solve send them as float64 and write float64 results, checked
# against float64 references here; solve to rtol 1e-10 whose x meets it by
# its true residual; mixed dtypes and float64 to reduce refused naming the
# files; --dtype converting.
#
#   bash tests/e2e/cli/e2e_cli_f64.sh GKCD_BINARY GKC_BINARY
#
# Environment and helpers: cli_test_lib.sh.  Needs numpy (skipped without).
TEST_NAME=e2e_cli_f64
# shellcheck source=cli_test_lib.sh
source "$(dirname "$0")/cli_test_lib.sh"
[[ $HAVE_NUMPY == 1 ]] || { echo "$TEST_NAME: numpy is needed" >&2; exit 77; }

T0=$SECONDS
start_daemon "$sock" "$dir/gkcd.log"
write_laplacian "$dir/lap.mtx" 32

# py NAME CODE: the Python check CODE (with numpy as np, d the scratch dir)
# holds after the last run exited 0.
py() {
  local name=$1 why
  if [[ $rc != 0 ]]; then bad "$name (exit $rc)" "$(output)"; return 0; fi
  if why=$(python3 -c "
import json, sys, numpy as np
d = sys.argv[1]
$2
" "$dir" 2>&1); then ok "$name"; else bad "$name" "$why"; fi
}

python3 -c "
import numpy as np, sys
rng = np.random.default_rng(27)
d = sys.argv[1]
np.save(d + '/x.npy', rng.standard_normal(5000) + 1e-9 * rng.standard_normal(5000))
np.save(d + '/y.npy', rng.standard_normal(5000))
np.save(d + '/y32.npy', rng.standard_normal(5000).astype(np.float32))
np.save(d + '/b.npy', rng.standard_normal(32 * 32))
" "$dir"

run dot --x "$dir/x.npy" --y "$dir/y.npy" --json
py "dot of float64 files: float64 value" "
r = json.load(open(d + '/out')); x = np.load(d + '/x.npy'); y = np.load(d + '/y.npy')
assert r['dtype'] == 'float64', r
assert abs(r['value'] - x @ y) <= 5002 * 2**-53 * (abs(x) @ abs(y)), (r['value'], x @ y)"

run nrm2 --x "$dir/x.npy" --json
py "nrm2 of a float64 file" "
r = json.load(open(d + '/out')); x = np.load(d + '/x.npy')
assert abs(r['value'] - np.linalg.norm(x)) <= 1e-14 * np.linalg.norm(x), r"

run axpby --x "$dir/x.npy" --y "$dir/y.npy" --alpha 0.1 --beta -0.3 --out "$dir/z.npy" --check --json
py "axpby of float64 files writes a float64 .npy (alpha 0.1 kept in double)" "
z = np.load(d + '/z.npy'); x = np.load(d + '/x.npy'); y = np.load(d + '/y.npy')
assert z.dtype == np.float64, z.dtype
assert np.max(np.abs(z - (0.1 * x - 0.3 * y))) <= 4 * 2**-53 * np.max(np.abs(x) + np.abs(y))"

run dot --x "$dir/x.npy" --y "$dir/y32.npy"
expect "dot of float64 and float32 files: usage error naming both" 2 "x.npy holds float64" \
  "y32.npy float32" "--dtype"
run dot --x "$dir/x.npy" --y "$dir/y32.npy" --dtype f64 --json
expect_json "dot --dtype f64 converts the float32 file" "d['dtype'] == 'float64' and num(d['value'])"
run reduce --x "$dir/x.npy"
expect "reduce of a float64 file: refused, naming --x" 2 "--x" "float64" "float32"
run dot --random 1000 --dtype f64 --check --json
expect_json "dot --random --dtype f64" "d['dtype'] == 'float64' and d['check'] == 'passed'"

run solve --matrix "$dir/lap.mtx" --b "$dir/b.npy" --rtol 1e-10 --out "$dir/xs.npy" --json
py "solve with a float64 b to rtol 1e-10: x float64, true residual <= 1e-10" "
import scipy.io
r = json.load(open(d + '/out'))
A = scipy.io.mmread(d + '/lap.mtx').tocsr().astype(np.float32).astype(np.float64)
b = np.load(d + '/b.npy'); x = np.load(d + '/xs.npy')
assert r['converged'] and r['dtype'] == 'float64' and x.dtype == np.float64, r
res = np.linalg.norm(b - A @ x) / np.linalg.norm(b)
assert res <= 1e-10, res
assert abs(res - r['residual']) <= 1e-6 * res, (res, r['residual'])" 
run solve --matrix "$dir/lap.mtx" --rtol 1e-6 --json
expect_json "solve without a b: float32 as before" "d['dtype'] == 'float32' and d['converged']"

finish
