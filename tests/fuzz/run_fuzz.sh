#!/bin/sh
# run_fuzz.sh FUZZER CORPUS WORKDIR [libFuzzer options...]
# Runs FUZZER over a fresh copy of CORPUS in WORKDIR (so the seed corpus is
# never modified); crash, leak and timeout reproducers are written to WORKDIR.
set -eu
fuzzer=$1 corpus=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work/corpus"
cp "$corpus"/* "$work/corpus/"
exec "$fuzzer" -artifact_prefix="$work/" "$@" "$work/corpus"
