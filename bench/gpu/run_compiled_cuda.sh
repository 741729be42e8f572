#!/usr/bin/env bash
# The GPU checks and benchmarks of smelt::compile on CUDA, in one run of 6 to 12
# minutes on one H200 with 16 cores, in this order:
#   1. the CUDA compiler tests (device-free NVRTC compiles of every fusion
#      pattern and op-table op, and every pattern compiled on the GPU against
#      CUDA eager and CPU eager, error flags, alignment guard, disk cache...);
#   2. `smelt bench --device cuda`: pointwise sigmoid(x*w+b) 2^26 f32, manual
#      softmax 8192x8192 f32, layer_norm 16384x4096 bf16, seed MLP f32 / bf16
#      at batch 256, training-mode batch_norm + relu 64x256x56x56 f32, a GPT-2
#      block 8x1024x768 bf16 (times, achieved GB/s or TFLOP/s and their share
#      of the H200's peak, errors, cold and warm compile), and
#      the 8192^3 bf16 GEMMs (gemm, linear-gelu, linear-gelu-erf: TFLOP/s and
#      the epilogue's cost over the GEMM alone), with and without rounding
#      intermediates (without: bias + tanh-GELU in cuBLASLt's epilogue); then
#      modes reduce-overhead and max-autotune (CUDA graphs replayed, their
#      static memory, what a copy of the results would cost, autotuning
#      time cold and its disk-cache hits warm);
#   3. `smelt golden --compiled --device cuda` on the shared golden files;
#   4. a CUDA fuzz campaign (`smelt fuzz --device cuda`: compiled on the GPU vs
#      eager on the GPU and on the CPU), 8 processes with their own seeds;
#   5. bench/torch_compare.py --workload compiled-cuda (PyTorch eager,
#      torch.compile default / reduce-overhead, smelt eager, smelt::compile
#      default / reduce-overhead / max-autotune on identical inputs: times,
#      cold and warm compiles, peak memory, agreement) where PyTorch is
#      installed; TORCH_COMPARE_ARGS adds options (--modes, --workloads).
#      This stage alone takes minutes (every torch.compile is timed cold and
#      warm): SKIP_TORCH_COMPARE=1 leaves it out.
# Every stage has a time limit; logs go to $OUT (default ./out): tests.log,
# golden.log, fuzz.log, bench.log, torch_compare.log and summary.txt.
#
# Usage: bench/gpu/run_compiled_cuda.sh BUILD_DIR [SHARED_DIR]
#   BUILD_DIR   a build with -DSMELT_CUDA=ON (smelt, smelt_tests)
#   SHARED_DIR  the folder holding golden/ (default: ./shared, then ../shared)
set -u
BUILD=$(cd "${1:?usage: run_compiled_cuda.sh BUILD_DIR [SHARED_DIR]}" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${2:-}
if [ -z "$SHARED" ]; then
  for d in "$REPO/shared" "$REPO/../shared"; do [ -d "$d/golden" ] && SHARED=$d && break; done
fi
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
export SMELT_CACHE_DIR=${SMELT_CACHE_DIR:-/tmp/smelt-gpu-run-cache}
JOBS=$(nproc)
# shellcheck source=stages.sh
source "$(dirname "$0")/stages.sh"

note "smelt compiled-CUDA run: $(date -u +%FT%TZ), build $BUILD, $JOBS cores"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

# 1. tests (ctest runs each gtest case as its own process, JOBS at a time)
stage "tests" 180 "$OUT/tests.log" \
  ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 110 \
  -R 'CudaCompile|CudaCodegen|CudaOpTable|CublasLt|CudaModes'
grep -E "tests passed|tests failed|\((Failed|Timeout|SEGFAULT|Subprocess aborted)\)" "$OUT/tests.log" \
  | tail -40 >> "$SUMMARY"

# 2. benchmarks
for w in "pointwise float32" "softmax float32" "layernorm bfloat16" "mlp float32" \
         "mlp bfloat16" "batchnorm-relu float32" "gpt2-block bfloat16"; do
  set -- $w
  echo "=== smelt bench $1 --device cuda --dtype $2" >> "$OUT/bench.log"
  stage "bench $1 $2" 60 "$OUT/bench.log" "$BUILD/smelt" bench "$1" --device cuda --dtype "$2"
done
for extra in "" --no-round-intermediates; do
  echo "=== smelt bench gemm,linear-gelu,linear-gelu-erf --device cuda $extra" >> "$OUT/bench.log"
  stage "bench gemms bfloat16 $extra" 90 "$OUT/bench.log" \
    "$BUILD/smelt" bench gemm,linear-gelu,linear-gelu-erf --device cuda $extra
done
grep -E "^(pointwise|softmax|layernorm|mlp|batchnorm-relu|gpt2-block|gemm|linear-gelu) \
|GB/s compiled|TFLOP/s|running stats|shared GPT-2 block" "$OUT/bench.log" >> "$SUMMARY"
# The compile modes: reduce-overhead (CUDA graphs), then max-autotune twice on
# one kernel cache (the second run's autotuning comes from the disk cache).
for m in reduce-overhead max-autotune max-autotune; do
  stage "bench modes $m" 120 "$OUT/modes.log" "$BUILD/smelt" bench \
    softmax,mlp,train-mlp --device cuda --mode "$m" --json \
    --cache-dir "$OUT/modes-cache"
done
grep '^{' "$OUT/modes.log" | while read -r line; do
  echo "$line" | grep -oE '"(workload|mode|speedup|compiled_ms|max_rel_err|cudagraph_replays|cudagraph_static_bytes|cudagraph_skip_reason|clone_results_ms|autotune_ms_cold|autotune_tuned_cold|autotune_changed_cold|autotune_cache_hits_warm)":("[^"]*"|[-0-9.e+]+)' \
    | tr '\n' ' '
  echo
done >> "$SUMMARY"

# 3. golden cases compiled on the GPU
if [ -n "$SHARED" ]; then
  for f in golden golden_scalars; do
    [ -f "$SHARED/golden/$f.json" ] || continue
    echo "=== $f.json --compiled --device cuda" >> "$OUT/golden.log"
    stage "golden $f" 90 "$OUT/golden.log" \
      "$BUILD/smelt" golden "$SHARED/golden/$f.json" --compiled --device cuda
    tail -3 "$OUT/golden.log" >> "$SUMMARY"
  done
else
  note "golden: no shared/golden folder found (pass SHARED_DIR)"
fi

# 4. fuzz: 8 processes, seeds 9001-9008, 120 cases each (80 s at most; a
# process stopped by the limit prints its failures but not its summary)
t0=$SECONDS
for s in 1 2 3 4 5 6 7 8; do
  timeout 80 "$BUILD/smelt" fuzz --device cuda --cases 120 --seed $((9000 + s)) \
    > "$OUT/fuzz.$s.tmp" 2>&1 &
done
wait
for s in 1 2 3 4 5 6 7 8; do
  echo "=== seed $((9000 + s))" >> "$OUT/fuzz.log"
  cat "$OUT/fuzz.$s.tmp" >> "$OUT/fuzz.log"
  grep -E "^[0-9]+ cases" "$OUT/fuzz.$s.tmp" | sed "s/^/  seed $((9000 + s)): /" >> "$SUMMARY"
  rm -f "$OUT/fuzz.$s.tmp"
done
note "$(printf '%-28s %4ss, FAIL lines: %s' "fuzz (8 x 120 cases)" "$((SECONDS - t0))" \
  "$(grep -c '^FAIL' "$OUT/fuzz.log")")"
grep '^FAIL' "$OUT/fuzz.log" | head -20 >> "$SUMMARY"

# 5. PyTorch side by side
if [ -n "${SKIP_TORCH_COMPARE:-}" ]; then
  note "torch_compare: skipped (SKIP_TORCH_COMPARE)"
elif python3 -c 'import torch, safetensors' 2>/dev/null; then
  # shellcheck disable=SC2086  # TORCH_COMPARE_ARGS is a list of options
  stage "torch_compare compiled-cuda" 540 "$OUT/torch_compare.log" \
    python3 "$REPO/bench/torch_compare.py" --workload compiled-cuda --smelt "$BUILD/smelt" \
    ${TORCH_COMPARE_ARGS:-}
  tail -60 "$OUT/torch_compare.log" >> "$SUMMARY"
else
  note "torch_compare: PyTorch (with safetensors) is not installed here; skipped"
fi
note "total ${SECONDS}s"
