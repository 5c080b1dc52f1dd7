#!/usr/bin/env bash
# e2e_cli_batch.sh: gkc batch against a real gkcd: steps on named resident
# arrays in one request, checked against float64 references
# (cli_batch_ref.py), every usage error, gkcd's own errors, and gkcd's
# limits checked before anything is read.
#
#   bash tests/e2e/cli/e2e_cli_batch.sh GKCD_BINARY GKC_BINARY
#
# Environment and helpers: cli_test_lib.sh.  Prints one line per check and
# ends with "N passed, M failed".
TEST_NAME=e2e_cli_batch
# shellcheck source=cli_test_lib.sh
source "$(dirname "$0")/cli_test_lib.sh"
REF=$(cd "$(dirname "$0")" && pwd)/cli_batch_ref.py

T0=$SECONDS
start_daemon "$sock" "$dir/gkcd.log"
write_laplacian "$dir/lap.mtx" 24

# --- batch: steps on named resident arrays in one request ------------------------------
# Inputs are float32 .npy files written here; every result is checked against a
# float64 reference from the same float32 inputs (cli_batch_ref.py).
# bcheck NAME CHECK [ARGS]: the last run exited 0 and cli_batch_ref.py's CHECK holds.
bcheck() {
  local name=$1 why
  shift
  if [[ $rc != 0 ]]; then bad "$name (exit $rc)" "$(output)"; return 0; fi
  if why=$(python3 "$REF" "$dir" "$@" 2>&1); then ok "$name"; else bad "$name" "$why"; fi
}
python3 "$REF" "$dir" make 1000 21 bx by
python3 "$REF" "$dir" make 999 22 bz
run batch --array x="$dir/bx.npy" --array y="$dir/by.npy" --step 'dot x y' --step 'axpby $0 x 1 y' \
  --save y="$dir/by2.npy" --json
bcheck "batch dot then axpby \$0 --save: value and y against float64" dot_axpby
expect_json "batch --json: steps, algo, times, saved" \
  "[s['op'] for s in d['steps']] == ['dot', 'axpby'] and num(d['steps'][0]['value']) and d['algo'] and num(d['kernel_us']) and num(d['round_trip_us']) and d['saved'] == [{'name': 'y', 'path': '$dir/by2.npy'}]"
run batch --array x="$dir/bx.npy" --array y="$dir/by.npy" --step 'dot x y' --step 'axpby $0 x 1 y'
expect "batch (text): each step, its value, the times" 0 '^step 0: +dot x y = -?[0-9.]+' \
  '^step 1: +axpby \$0 x 1 y -> y$' 'algo:' 'kernel time:' 'round trip:'
run batch --array x="$dir/bx.npy" --step 'reduce x min' --step 'reduce x max' --step 'reduce x' --json
bcheck "batch reduce min, max (exact) and sum" minmax
expect_json "batch reduce --json names fn" "[s['fn'] for s in d['steps']] == ['min', 'max', 'sum']"
python3 "$REF" "$dir" make 2166 23 sx
python3 "$REF" "$dir" make 402 24 sy
run batch --matrix A="$DATA/lp_ship04l.mtx" --array x="$dir/sx.npy" --array y="$dir/sy.npy" \
  --step 'spmv A 1.5 x -0.5 y y' --step 'dot y y' --save y="$dir/sy2.npy" --json
bcheck "batch spmv (lp_ship04l, alpha, beta, in place) against float64" spmv "$DATA/lp_ship04l.mtx"
# --in-region: an spmv step's x read from, and its out written into, a shared-memory region.
rm -f "$dir/sy2.npy"
run batch --matrix A="$DATA/lp_ship04l.mtx" --array x="$dir/sx.npy" --array y0="$dir/sy.npy" \
  --zeros w=402 --zeros v=402 --in-region x --in-region v \
  --step 'spmv A 1.5 x -0.5 y0 w' --step 'dot w w' --step 'spmv A 1.5 x -0.5 y0 v' \
  --save v="$dir/sy2.npy" --json
bcheck "batch --in-region: spmv x from the region, out into it, against float64" spmv "$DATA/lp_ship04l.mtx"
run batch --array x="$dir/sx.npy" --in-region x --step 'dot x x'
expect "batch: an --in-region array in a dot: exit 2" 2 \
  "^gkc: --step 0 'dot x x': 'x' is --in-region: only an spmv step's x and out"
run batch --array x="$dir/sx.npy" --in-region nosuch --step 'dot x x'
expect "batch: --in-region of an undefined name: exit 2" 2 "^gkc: --in-region nosuch: 'nosuch' is not defined"
python3 "$REF" "$dir" make 576 25 cb
run batch --matrix A="$dir/lap.mtx" --array r="$dir/cb.npy" --array p="$dir/cb.npy" \
  --zeros x=576 --zeros q=576 \
  --step 'dot r r' --step 'spmv A 1 p 0 - q' --step 'dot p q' \
  --step 'axpby $0/$2 p 1 x' --step 'axpby -$0/$2 q 1 r' \
  --step 'dot r r' --step 'axpby 1 r $5/$0 p' \
  --save x="$dir/cx2.npy" --save r="$dir/cr2.npy" --save p="$dir/cp2.npy" --json
bcheck "batch: one CG iteration (--help's example) against float64" cg "$dir/lap.mtx"
run batch --random a=6 --random b=12 --random c=8 --seed 5 --step 'sgemm 2 4 3 -2 a b^T 0.5 c c' \
  --save a="$dir/ga.npy" --save b="$dir/gb.npy" --save c="$dir/gc.npy" --json
expect_json "batch sgemm with ^T and --random: one step, seed printed" \
  "d['steps'] == [{'op': 'sgemm', 'array': 'c', 'text': 'sgemm 2 4 3 -2 a b^T 0.5 c c'}] and d['seed'] == 5"
run batch --random a=6 --random b=12 --random c=8 --seed 5 --step 'dot c c' --save c="$dir/gc0.npy" --json
bcheck "batch sgemm 2x4x3, B^T, alpha -2, beta 0.5, C in place, against float64" sgemm
run_raw batch --help
expect "gkc batch --help mentions its options, the step forms and an example" 0 "Usage: gkc batch" \
  --array --zeros --random --matrix --step --save --seed --json 'axpby ALPHA X BETA Y \[OUT\]' \
  'spmv A ALPHA X BETA Y\|- OUT' 'sgemm M N K' 'S\*\$i/\$j' "--step 'dot r r'"
# Usage errors: exit 2 before gkcd is reached, naming the step and the word.
run batch --bogus
expect "gkc batch --bogus: exit 2, named, with the hint" 2 "^gkc: unknown option '--bogus'" "^Try 'gkc batch --help'\.\$"
bx=(--array x="$dir/bx.npy")
run batch "${bx[@]}" --step 'dot x y'
expect "batch: undefined name: exit 2, names step and word" 2 "^gkc: --step 0 'dot x y': 'y' is not defined" \
  "^Try 'gkc batch --help'\.\$"
run batch "${bx[@]}" --step 'dot x x' --step 'axpby $3 x 1 x'
expect "batch: forward reference \$3: exit 2" 2 \
  "^gkc: --step 1 'axpby \\\$3 x 1 x': \\\$3 is not an earlier dot or reduce step"
run batch "${bx[@]}" --step 'dot x x' --step 'axpby 1 x 1 x' --step 'axpby 2*$1 x 1 x'
expect "batch: reference to a step without a value: exit 2" 2 \
  "^gkc: --step 2 .*\\\$1 is not an earlier dot or reduce step \(step 1 is axpby"
run batch "${bx[@]}" --step 'dot x x' --step 'axpy 1 x 1 x'
expect "batch: unknown op: exit 2" 2 "^gkc: --step 1 'axpy 1 x 1 x': unknown op 'axpy'"
run batch "${bx[@]}" --step 'axpby 1 x 1'
expect "batch: too few words: exit 2" 2 "^gkc: --step 0 'axpby 1 x 1': only 4 words, expected 'axpby ALPHA X BETA Y \[OUT\]'"
run batch "${bx[@]}" --step 'axpby two x 1 x'
expect "batch: bad number: exit 2" 2 "^gkc: --step 0 'axpby two x 1 x': ALPHA 'two': expected a number"
run batch "${bx[@]}" --step 'dot x x' --save w="$dir/w.npy"
expect "batch: --save of an unknown name: exit 2" 2 "^gkc: --save w=.*: 'w' is not defined"
run batch "${bx[@]}" --zeros x=3 --step 'dot x x'
expect "batch: a name defined twice: exit 2" 2 "^gkc: --zeros x=3: 'x' is already defined by --array x"
run batch --matrix A="$DATA/west0067.mtx" "${bx[@]}" --step 'spmv A 1 x 2 - x'
expect "batch: spmv without y and beta != 0: exit 2" 2 "^gkc: --step 0 .*: Y is '-' \(none\), so BETA must be 0"
run batch --matrix A="$DATA/west0067.mtx" "${bx[@]}" --step 'dot x A'
expect "batch: a matrix where an array goes: exit 2" 2 "^gkc: --step 0 'dot x A': 'A' is a matrix, not an array"
run batch "${bx[@]}"
expect "batch without --step: exit 2" 2 "^gkc: missing --step"
# A daemon-side error: lengths are gkcd's to check; its message names the step.
run batch "${bx[@]}" --array z="$dir/bz.npy" --step 'dot x x' --step 'dot x z'
expect "batch: length mismatch: exit 1 with gkcd's message naming the step" 1 \
  "^gkc: invalid_argument: steps\[1\] \(dot\): .*999"
if [[ -s $dir/out ]]; then bad "a failed batch printed on stdout" "$(output)"; fi
run batch --zeros z=4 --step 'dot z z' --step 'axpby 1/$0 z 1 z'
expect "batch: 1/\$0 with a zero dot: exit 1, gkcd names the step that failed running" 1 \
  "^gkc: invalid_argument: step 1 \(axpby\): argument 'alpha' came out as inf"

# --- gkcd's limits, checked before anything is read: exit 1 -------------------------
# A gkcd with small limits: 1 MiB a request, 1 MiB of memory budget.
lsock=$dir/l.sock
start_daemon "$lsock" "$dir/gkcd_limits.log" --max-request-bytes 1M --memory-budget 1M
lrun() { run_raw --socket "$lsock" "$@"; }
printf '%%%%MatrixMarket matrix coordinate real general\n1000 1000 500000\n1 1 1\n' >"$dir/big.mtx"
lrun batch --matrix "A=$dir/big.mtx" --zeros x=1000 --zeros y=1000 --step 'spmv A 1 x 0 - y'
expect "batch --matrix declaring 500000 entries: exit 1 before reading them" 1 \
  "batch --matrix A=.*big.mtx \(1000 x 1000, 500000 entries\)" "gkcd --max-request-bytes"
lrun batch --zeros x=300000 --step 'reduce x'
expect "batch --zeros over --max-request-bytes: exit 1" 1 "batch --zeros x=300000" "gkcd --max-request-bytes"

finish
