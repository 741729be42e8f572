#!/usr/bin/env bash
# Issue 11's CPU tables on the GPU machine's host CPU (16 cores), side by side
# with the PyTorch installed there, in one run of about 7 minutes (406 s on
# 2026-12-05: the build 171 s, the tables the rest):
#   1. a CPU-only Release build (-DSMELT_CUDA=OFF: the CPU kernels do not
#      depend on it), unless BUILD_DIR already holds a `smelt` binary;
#   2. bench/torch_compare.py --workload ops at 1 and 16 threads (sin, cos,
#      pow_scalar first: the rows whose kernels are smelt's own, 3 rounds),
#      then the whole per-op table at 16 threads twice (5 rounds each: single
#      rows move by up to 20% between runs on that machine), the second run
#      after stage 3 (a run cut short loses it first);
#   3. --workload compiled at 16 threads (PyTorch eager, torch.compile, smelt
#      eager and compiled on the CPU workloads);
#   4. --workload op-shapes at 1 and 16 threads (the other shapes and dtypes).
# Every stage has a time limit; logs go to $OUT (default ./out): build.log,
# ops.log, compiled.log, op-shapes.log and summary.txt (each table's lines).
#
# Usage: bench/gpu/run_cpu_tables.sh [BUILD_DIR]   (default: build-cpu)
# The host needs smelt's Debian packages and PyTorch. Through the device
# tool: here, `../shared/gpu-host/fetch-debs.sh .gpu-debs libicu-dev libicu72
# libsleef3 libsleef-dev` (ICU and SLEEF are not in its default list) and
# `cp ../shared/gpu-host/install-debs.sh .gpu-debs/` (.gpu-debs in
# .git/info/exclude); the compiled table's mlp and gpt2-block also read
# ../shared/data (seed_mlp.safetensors, gpt2_block.safetensors): copy them
# into .gpu-shared/data (excluded too). Then run with carry [".gpu-debs",
# ".gpu-shared"]:
#   bash .gpu-debs/install-debs.sh .gpu-debs && bench/gpu/run_cpu_tables.sh
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$REPO/build-cpu}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
JOBS=$(nproc)
# shellcheck source=stages.sh
source "$(dirname "$0")/stages.sh"
note "smelt CPU tables: $(date -u +%FT%TZ), $JOBS cores, $(lscpu | sed -n 's/^Model name: *//p')"

# smelt looks for the shared data beside the checkout (SMELT_SHARED_DIR).
if [ -d "$REPO/.gpu-shared/data" ] && [ ! -d "$REPO/../shared/data" ]; then
  mkdir -p "$REPO/../shared" && cp -r "$REPO/.gpu-shared/data" "$REPO/../shared/"
fi
if [ ! -x "$BUILD/smelt" ]; then
  stage "configure" 120 "$OUT/build.log" cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DSMELT_CUDA=OFF -DSMELT_BUILD_TESTS=OFF -DSMELT_BUILD_BENCHMARKS=OFF -DSMELT_BUILD_EXAMPLES=OFF
  stage "build" 420 "$OUT/build.log" cmake --build "$BUILD" -j "$JOBS" --target smelt_cli
fi
if [ ! -x "$BUILD/smelt" ]; then
  tail -30 "$OUT/build.log" >> "$SUMMARY"
  note "no smelt binary in $BUILD: stopped"
  exit 1
fi
if ! python3 -c 'import torch' 2>/dev/null; then
  note "PyTorch is not installed here: stopped"
  exit 1
fi
TC=("python3" "$REPO/bench/torch_compare.py" --smelt "$BUILD/smelt")
table() {  # table LOG N: the last N lines of LOG (the table just printed) into the summary
  tail -n "$2" "$1" >> "$SUMMARY"
}
echo "=== ops sin,cos,pow at 1,16 threads" >> "$OUT/ops.log"
for f in sin cos pow_scalar; do
  stage "ops $f 1,16" 60 "$OUT/ops.log" "${TC[@]}" --workload ops --filter "$f" --threads 1,16
done
table "$OUT/ops.log" 15
ops_all() {  # ops_all RUN: the whole per-op table at 16 threads
  echo "=== ops, all, 16 threads, run $1" >> "$OUT/ops.log"
  stage "ops all 16 (run $1)" 150 "$OUT/ops.log" "${TC[@]}" --workload ops --threads 16 --rounds 5
  table "$OUT/ops.log" 52
}
# The second table after the compiled one: what a cut-short run loses first.
ops_all 1
stage "compiled 16" 240 "$OUT/compiled.log" "${TC[@]}" --workload compiled --threads 16
tail -40 "$OUT/compiled.log" >> "$SUMMARY"
ops_all 2
stage "op-shapes 1,16" 240 "$OUT/op-shapes.log" "${TC[@]}" --workload op-shapes --threads 1,16
table "$OUT/op-shapes.log" 44
note "total ${SECONDS}s"
