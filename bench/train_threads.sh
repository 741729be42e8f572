#!/usr/bin/env bash
# One training step of the seed MLP (`smelt bench train-mlp`: Linear(1024,1024)
# - GELU - Linear(1024,512) - GELU - Linear(512,10), batch 256, float32:
# forward, cross_entropy, backward, SGD), eager against compiled, at a given
# number of OpenMP threads, under several run-time settings, on a build that
# already exists (this script builds nothing):
#
#   default   the library's defaults (every float32 product through oneDNN on
#             OpenMP's threads; OpenBLAS, whose pthread pool is idle, not called)
#   openblas  SMELT_CPU_GEMM=openblas: the float32 products without an epilogue
#             (most of the backward) through OpenBLAS's cblas_sgemm, whose own
#             pthread pool then runs beside OpenMP's
#   bind      OMP_PROC_BIND=close OMP_PLACES=cores: OpenMP threads pinned to cores
#   active    OMP_WAIT_POLICY=active: idle OpenMP threads spin instead of sleeping
#   passive   OMP_WAIT_POLICY=passive: idle OpenMP threads sleep at once
#   ob1       OPENBLAS_NUM_THREADS=1: OpenBLAS without a pool (a no-op for
#             float32 unless combined with openblas, e.g. "openblas+ob1")
# A variant may join several with '+' ("openblas+ob1", "bind+active").
#
# Runs ROUNDS rounds; each round runs every variant once, in turn (A B C A B C
# ...), so drift on the machine spreads over all of them. Each run is one
# process timing eager and then compiled (medians over ITERS calls). Then, per
# variant, one run with SMELT_LOGS=perf (median time of every compiled step),
# and for `default` one run with ONEDNN_VERBOSE=1 (oneDNN's own execution
# time per product, to set beside the extern_matmul / cpp_tem steps: the
# difference is time spent outside the library's kernel).
#
# Usage: bench/train_threads.sh [BUILD_DIR]            (default ./build)
# Environment: THREADS (16), ROUNDS (5), ITERS (200), VARIANTS
#   ("default openblas bind active"), OUT (./out/train_threads).
# Results: $OUT/summary.txt (also printed), runs.tsv, perf_<variant>.log,
# onednn_verbose.log. The kernel cache is $OUT/kcache (compiled once, reused).
set -u
BUILD=$(cd "${1:-build}" && pwd) || exit 1
SMELT=$BUILD/smelt
[ -x "$SMELT" ] || { echo "no smelt binary in $BUILD" >&2; exit 1; }
THREADS=${THREADS:-16}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-200}
VARIANTS=${VARIANTS:-default openblas bind active}
OUT=${OUT:-./out/train_threads}
mkdir -p "$OUT/kcache"
OUT=$(cd "$OUT" && pwd)

# The environment assignments of one variant, one per line.
variant_env() {
  local part
  for part in ${1//+/ }; do
    case $part in
      default) ;;
      openblas) echo SMELT_CPU_GEMM=openblas ;;
      bind) echo OMP_PROC_BIND=close; echo OMP_PLACES=cores ;;
      active) echo OMP_WAIT_POLICY=active ;;
      passive) echo OMP_WAIT_POLICY=passive ;;
      ob1) echo OPENBLAS_NUM_THREADS=1 ;;
      *) echo "unknown variant part '$part'" >&2; return 1 ;;
    esac
  done
}
run_variant() {  # variant, then smelt arguments
  local v=$1; shift
  local envs
  envs=$(variant_env "$v") || exit 1
  # shellcheck disable=SC2086
  env $envs OMP_NUM_THREADS="$THREADS" "$SMELT" bench train-mlp --cache-dir "$OUT/kcache" "$@"
}

{
  echo "machine: $(nproc) CPUs; $(lscpu 2>/dev/null | grep -m1 'Model name' | sed 's/ \+/ /g')"
  lscpu 2>/dev/null | grep -E '^NUMA node\(s\)|^Thread\(s\) per core' | sed 's/ \+/ /g'
  echo "OMP_NUM_THREADS=$THREADS, $ROUNDS rounds, $ITERS iterations per timing; smelt $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null)"
} > "$OUT/summary.txt"

# Warm the kernel cache once (the first compile builds the toolchain's shared files).
run_variant default --iters 2 > /dev/null 2>&1

printf 'round\tvariant\teager_ms\tcompiled_ms\n' > "$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
  for v in $VARIANTS; do
    line=$(run_variant "$v" --iters "$ITERS" --json 2> "$OUT/stderr_last.log" | head -1)
    ms=$(printf '%s' "$line" | python3 -c "import json, sys
j = json.loads(sys.stdin.read()); print('%.3f\t%.3f' % (j['eager_ms'], j['compiled_ms']))" \
      2> /dev/null)
    [ -n "$ms" ] || ms=$'nan\tnan'
    printf '%s\t%s\t%s\n' "$r" "$v" "$ms" >> "$OUT/runs.tsv"
    echo "round $r $v: $ms" >&2
  done
done

for v in $VARIANTS; do
  SMELT_LOGS=perf run_variant "$v" --iters 50 > /dev/null 2> "$OUT/perf_$v.log"
done
ONEDNN_VERBOSE=1 run_variant default --iters 50 2>&1 | grep '^onednn_verbose,exec' \
  > "$OUT/onednn_verbose.log"

# shellcheck disable=SC2086  # one argument per variant
python3 - "$OUT" $VARIANTS >> "$OUT/summary.txt" <<'EOF'
import collections, re, statistics, sys
out, variants = sys.argv[1], sys.argv[2:]
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/runs.tsv")][1:]
print("\nwall time of one step, over the rounds (ms): median [min, max]")
print(f"  {'variant':<16} {'eager':>22} {'compiled':>22} {'speedup (medians)':>18}")
for v in variants:
    e = [float(r[2]) for r in rows if r[1] == v and r[2] != "nan"]
    c = [float(r[3]) for r in rows if r[1] == v and r[3] != "nan"]
    if not e or not c:
        print(f"  {v:<16} (no result: see stderr_last.log)")
        continue
    me, mc = statistics.median(e), statistics.median(c)
    print(f"  {v:<16} {me:7.3f} [{min(e):6.3f}, {max(e):6.3f}] {mc:7.3f} [{min(c):6.3f}, {max(c):6.3f}]"
          f" {me / mc:17.2f}x")

def steps(path):
    """Median ms of every compiled step over the [smelt:perf] blocks of a log."""
    blocks, cur = [], None
    for line in open(path, errors="replace"):
        if "per-kernel time and bytes moved" in line:
            cur = []
            blocks.append(cur)
            continue
        m = re.match(r"\s+(\S+)\s+([\d.]+) ms\s+(\d+) bytes", line)
        if m and cur is not None:
            cur.append((m.group(1), float(m.group(2))))
    blocks = [b for b in blocks if len(b) > 1]
    if not blocks:
        return []
    n = max(len(b) for b in blocks)
    blocks = [b for b in blocks if len(b) == n]
    return [(blocks[0][i][0], statistics.median(b[i][1] for b in blocks),
             min(b[i][1] for b in blocks)) for i in range(n)] + \
           [("sum of steps", statistics.median(sum(x[1] for x in b) for b in blocks),
             min(sum(x[1] for x in b) for b in blocks))]

table = {v: steps(f"{out}/perf_{v}.log") for v in variants}
ref = next((t for t in table.values() if t), [])
print("\ncompiled steps (SMELT_LOGS=perf, median ms over the calls of one run)")
print(f"  {'step':<50}" + "".join(f" {v:>12}" for v in variants))
for i, (name, _, _) in enumerate(ref):
    cells = "".join(f" {table[v][i][1]:12.3f}" if len(table[v]) == len(ref) else f" {'-':>12}"
                    for v in variants)
    print(f"  {i:2d} {name:<47}{cells}")

print("\noneDNN's own execution time per product (default, ONEDNN_VERBOSE=1; ms)")
d = collections.defaultdict(list)
for line in open(f"{out}/onednn_verbose.log", errors="replace"):
    f = line.strip().split(",")
    if len(f) >= 11:
        d[(f[4], f[6].replace("::blocked:", ":").replace(":f0", ""), f[9])].append(float(f[10]))
for (impl, mds, shape), v in sorted(d.items(), key=lambda kv: -statistics.median(kv[1])):
    print(f"  {shape:<40} med {statistics.median(v):7.3f} min {min(v):7.3f} n {len(v):4d}  "
          f"{impl} {mds}")
EOF
cat "$OUT/summary.txt"
