// smelt/kernels/reduce_ops.h — accumulator combine rules of every reduction
// (sum, prod, NaN-propagating max/min, argmax/argmin, Welford mean/variance,
// any/all), written once. Included by the eager CPU kernels and embedded
// verbatim into JIT-generated C++ (and CUDA) code, so it may include only
// <cmath>, <cstdint>, <limits>, <type_traits> and "smelt/half.h".
//
// Every accumulator is a struct of static functions over an accumulator value
// `acc_t` and an element value `value_t` (the accumulate type A: the input is
// converted to A before step):
//   init()              the identity (the result of an empty reduction)
//   step(acc, x[, i])   folds one element (i: its linear index in the reduced
//                       dims, only for the indexed ones: kIndexed == true)
//   combine(a, b)       merges two partial accumulators (split / parallel
//                       reductions); for indexed ones commutative with ties
//                       broken by the lower index, so any split order is exact
//   finalize(acc)       the result (in A; the caller rounds to the out dtype)
//
// Accumulate type A (PyTorch's rules), written once at the end of this file
// (accumulate_t) and used by the eager kernels and, through the op table's
// accumulate_dtype(), by the compiler: sums, means and products accumulate
// the elements converted to the result dtype in float for float16 / bfloat16 /
// float32, double for float64, int64_t for integers and bool (integer overflow
// wraps around, two's complement, as in PyTorch); max / min and arg-reductions
// compare in the input type (float for float16 / bfloat16); var / std /
// var_mean accumulate in double for every floating input, as PyTorch's CPU
// kernel does (float32 elements of contiguous runs first go through float
// lanes of shifted sums, each lane turned into double once:
// welford_float_lanes); scans (cumsum) accumulate in PyTorch's CPU acc_type:
// as sums, except that float32 accumulates in double.
//
// The order a row's elements are combined in decides a float result bit for
// bit. The eager CPU kernels and the generated code reduce one row through the
// same order structs (InnerOrder, ColumnOrder below), so a row reduced by one
// thread gives the same bits either way; reduce_geom.h says which order a
// reduction takes and in which sequence it visits the elements.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "smelt/half.h"

namespace smelt::reduce {

/// True for a NaN value (always false for integers and bool). Written as x != x
/// so that it also compiles in device code without <cmath> overloads.
template <class A>
SMELT_HD bool is_nan(A x) {
  if constexpr (std::is_floating_point<A>::value) {
    return x != x;
  } else {
    return false;
  }
}

/// a + b, wrapping on integer overflow (signed overflow is undefined in C++).
template <class A>
SMELT_HD A wrap_add(A a, A b) {
  if constexpr (std::is_integral<A>::value && !std::is_same<A, bool>::value) {
    using U = typename std::make_unsigned<A>::type;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

/// a * b, wrapping on integer overflow.
template <class A>
SMELT_HD A wrap_mul(A a, A b) {
  if constexpr (std::is_integral<A>::value && !std::is_same<A, bool>::value) {
    using U = typename std::make_unsigned<A>::type;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

/// Lowest / highest value of A: -inf / +inf for floating types.
template <class A>
SMELT_HD A lowest() {
  if constexpr (std::is_floating_point<A>::value) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}
template <class A>
SMELT_HD A highest() {
  if constexpr (std::is_floating_point<A>::value) {
    return std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::max();
  }
}

/// Sum: acc + x; sum of nothing is 0. Float sums may be reassociated (combine).
template <class A>
struct Sum {
  using acc_t = A;
  using value_t = A;
  static constexpr bool kIndexed = false;
  static SMELT_HD A init() { return A(0); }
  static SMELT_HD A step(A acc, A x) { return wrap_add(acc, x); }
  static SMELT_HD A combine(A a, A b) { return wrap_add(a, b); }
  static SMELT_HD A finalize(A acc) { return acc; }
};

/// Mean = Sum finalized by the element count (NaN for an empty reduction: 0/0).
template <class A>
SMELT_HD A mean_finalize(A sum, int64_t count) {
  return sum / static_cast<A>(count);
}

/// Product: acc * x; product of nothing is 1.
template <class A>
struct Prod {
  using acc_t = A;
  using value_t = A;
  static constexpr bool kIndexed = false;
  static SMELT_HD A init() { return A(1); }
  static SMELT_HD A step(A acc, A x) { return wrap_mul(acc, x); }
  static SMELT_HD A combine(A a, A b) { return wrap_mul(a, b); }
  static SMELT_HD A finalize(A acc) { return acc; }
};

/// NaN-propagating maximum (amax): once NaN, stays NaN. init() is -inf (the
/// lowest integer), never returned: an empty amax is an error at the op level.
template <class A>
struct Max {
  using acc_t = A;
  using value_t = A;
  static constexpr bool kIndexed = false;
  static SMELT_HD A init() { return lowest<A>(); }
  static SMELT_HD A step(A acc, A x) {  // a select without branches: lanes of it vectorize
    const bool acc_is_number = !is_nan(acc);
    const bool take = acc_is_number & (is_nan(x) | (x > acc));
    return take ? x : acc;
  }
  static SMELT_HD A combine(A a, A b) { return step(a, b); }
  static SMELT_HD A finalize(A acc) { return acc; }
};

/// NaN-propagating minimum (amin).
template <class A>
struct Min {
  using acc_t = A;
  using value_t = A;
  static constexpr bool kIndexed = false;
  static SMELT_HD A init() { return highest<A>(); }
  static SMELT_HD A step(A acc, A x) {  // a select without branches: lanes of it vectorize
    const bool acc_is_number = !is_nan(acc);
    const bool take = acc_is_number & (is_nan(x) | (x < acc));
    return take ? x : acc;
  }
  static SMELT_HD A combine(A a, A b) { return step(a, b); }
  static SMELT_HD A finalize(A acc) { return acc; }
};

/// Step and combine of the accumulators that compilers leave out of line
/// (ArgMax / ArgMin, Welford) are always inlined on the host: GCC 13 left an
/// out-of-line Welford combine, GCC 12 an ArgMax / ArgMin combine, in the AVX
/// copies of the eager kernels (their calls only), a definition the baseline
/// library would share with them (tools/check_cpu_isa.py).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SMELT_HD_INLINE SMELT_HD
#else
#define SMELT_HD_INLINE inline __attribute__((always_inline))
#endif

/// Value and linear index of an arg reduction; index -1 means "no element yet".
template <class A>
struct ArgAcc {
  A value;
  int64_t index;
};

/// argmax / max(dim): the first maximum wins ties, the first NaN wins over
/// everything (PyTorch). step() must see elements in increasing index order;
/// combine() is commutative (lower index breaks ties).
template <class A>
struct ArgMax {
  using acc_t = ArgAcc<A>;
  using value_t = A;
  static constexpr bool kIndexed = true;
  static SMELT_HD acc_t init() { return acc_t{lowest<A>(), -1}; }
  static SMELT_HD_INLINE acc_t step(acc_t acc, A x, int64_t i) {
    if (acc.index < 0) return acc_t{x, i};
    if (is_nan(acc.value)) return acc;
    if (is_nan(x) || x > acc.value) return acc_t{x, i};
    return acc;
  }
  static SMELT_HD_INLINE acc_t combine(acc_t a, acc_t b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    bool an = is_nan(a.value), bn = is_nan(b.value);
    if (an || bn) {
      if (an && bn) return a.index <= b.index ? a : b;
      return an ? a : b;
    }
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index <= b.index ? a : b;
  }
  static SMELT_HD acc_t finalize(acc_t acc) { return acc; }
};

/// argmin / min(dim): the first minimum wins ties, the first NaN wins.
template <class A>
struct ArgMin {
  using acc_t = ArgAcc<A>;
  using value_t = A;
  static constexpr bool kIndexed = true;
  static SMELT_HD acc_t init() { return acc_t{highest<A>(), -1}; }
  static SMELT_HD_INLINE acc_t step(acc_t acc, A x, int64_t i) {
    if (acc.index < 0) return acc_t{x, i};
    if (is_nan(acc.value)) return acc;
    if (is_nan(x) || x < acc.value) return acc_t{x, i};
    return acc;
  }
  static SMELT_HD_INLINE acc_t combine(acc_t a, acc_t b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    bool an = is_nan(a.value), bn = is_nan(b.value);
    if (an || bn) {
      if (an && bn) return a.index <= b.index ? a : b;
      return an ? a : b;
    }
    if (a.value < b.value) return a;
    if (b.value < a.value) return b;
    return a.index <= b.index ? a : b;
  }
  static SMELT_HD acc_t finalize(acc_t acc) { return acc; }
};

/// Running count, mean and sum of squared deviations m2.
template <class A>
struct WelfordAcc {
  A mean;
  A m2;
  int64_t count;
};

/// One-pass mean / variance. step: Welford (1962), "Note on a method for
/// calculating corrected sums of squares and products", Technometrics 4(3):
///   n += 1; d = x - mean; mean += d / n; m2 += d * (x - mean).
/// combine: Chan, Golub & LeVeque (1979), "Updating formulae and a pairwise
/// algorithm for computing sample variances":
///   n = na + nb; d = mean_b - mean_a; mean = mean_a + d * nb / n;
///   m2 = m2_a + m2_b + d^2 * na * nb / n.
/// var = m2 / max(0, n - correction) (0/0 = NaN for an empty or too small
/// reduction, as PyTorch); mean of nothing is NaN.
template <class A>
struct Welford {
  using acc_t = WelfordAcc<A>;
  using value_t = A;
  static constexpr bool kIndexed = false;
  static SMELT_HD acc_t init() { return acc_t{A(0), A(0), 0}; }
  static SMELT_HD_INLINE acc_t step(acc_t acc, A x) {
    acc.count += 1;
    A d = x - acc.mean;
    acc.mean += d / static_cast<A>(acc.count);
    acc.m2 += d * (x - acc.mean);
    return acc;
  }
  static SMELT_HD_INLINE acc_t combine(acc_t a, acc_t b) {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    int64_t n = a.count + b.count;
    A d = b.mean - a.mean;
    // Equal counts (every level of a GPU row's combine tree but the last
    // thread's): nb / n is exactly 1/2, without a division (a double division
    // is a long instruction sequence on a GPU).
    A nb_over_n = a.count == b.count ? A(0.5) : static_cast<A>(b.count) / static_cast<A>(n);
    acc_t r;
    r.mean = a.mean + d * nb_over_n;
    r.m2 = a.m2 + b.m2 + d * d * static_cast<A>(a.count) * nb_over_n;
    r.count = n;
    return r;
  }
  static SMELT_HD acc_t finalize(acc_t acc) { return acc; }
  static SMELT_HD A var(acc_t acc, double correction) {
    double divisor = static_cast<double>(acc.count) - correction;
    if (divisor < 0) divisor = 0;
    return acc.m2 / static_cast<A>(divisor);
  }
  static SMELT_HD A mean(acc_t acc) {
    return acc.count == 0 ? std::numeric_limits<A>::quiet_NaN() : acc.mean;
  }
};

/// One thread's share of a Welford reduction on the GPU (generated kernels and
/// the eager CUDA reductions), without a division per element: the count n, a shift c (the
/// first element when it is finite, else 0) and the shifted sums s1 = sum(x - c), s2 = sum((x -
/// c)^2) ("shifted data" algorithm, Chan, Golub & LeVeque 1983, "Algorithms for computing the
/// sample variance: analysis and recommendations", The American Statistician 37(3)), turned into a
/// WelfordAcc once (welford()) and combined with Welford's combine across threads, or, in generated
/// CUDA kernels, moved to one shift per row (rebase()) and added (smelt::device::row_reduce). Steps
/// in any order; no combine of its own.
template <class A>
struct ShiftedSums {
  A shift;
  A s1;
  A s2;
  int64_t count;
};
template <class A>
struct ShiftedWelford {
  using acc_t = ShiftedSums<A>;
  using value_t = A;
  static constexpr bool kIndexed = false;
  static SMELT_HD acc_t init() { return acc_t{A(0), A(0), A(0), 0}; }
  static SMELT_HD acc_t step(acc_t acc, A x) {
    if (acc.count == 0 && x - x == A(0)) acc.shift = x;  // finite: inf and NaN keep 0
    const A d = x - acc.shift;
    acc.s1 += d;
    acc.s2 += d * d;
    acc.count += 1;
    return acc;
  }
  /// The same elements' sums around the shift c0, carried in B (a GPU row's
  /// threads move theirs to the row's first thread's shift and then only add
  /// them): d = c - c0, s1 + n d and s2 + d (2 s1 + n d). c0 and every shift
  /// are finite, so a thread with no elements stays (c0, 0, 0, 0).
  template <class B>
  static SMELT_HD ShiftedSums<B> rebase(acc_t acc, B c0) {
    const B n = static_cast<B>(acc.count);
    const B d = static_cast<B>(acc.shift) - c0;
    const B s1 = static_cast<B>(acc.s1);
    return ShiftedSums<B>{c0, s1 + n * d, static_cast<B>(acc.s2) + d * (B(2) * s1 + n * d),
                          acc.count};
  }
  /// The Welford accumulator of the same elements: mean = c + s1 / n,
  /// m2 = s2 - s1^2 / n (at least 0).
  static SMELT_HD WelfordAcc<A> welford(acc_t acc) {
    if (acc.count == 0) return WelfordAcc<A>{A(0), A(0), 0};
    const A n = static_cast<A>(acc.count);
    const A m2 = acc.s2 - acc.s1 * (acc.s1 / n);
    return WelfordAcc<A>{acc.shift + acc.s1 / n, m2 < A(0) ? A(0) : m2, acc.count};
  }
};

/// any: true when some element is nonzero (NaN counts as nonzero); empty -> false.
struct Any {
  using acc_t = bool;
  using value_t = bool;
  static constexpr bool kIndexed = false;
  static SMELT_HD bool init() { return false; }
  static SMELT_HD bool step(bool acc, bool x) { return acc || x; }
  static SMELT_HD bool combine(bool a, bool b) { return a || b; }
  static SMELT_HD bool finalize(bool acc) { return acc; }
};

/// all: true when every element is nonzero; empty -> true.
struct All {
  using acc_t = bool;
  using value_t = bool;
  static constexpr bool kIndexed = false;
  static SMELT_HD bool init() { return true; }
  static SMELT_HD bool step(bool acc, bool x) { return acc && x; }
  static SMELT_HD bool combine(bool a, bool b) { return a && b; }
  static SMELT_HD bool finalize(bool acc) { return acc; }
};

// ---- the order a row is combined in ------------------------------------------
//
// A row's elements are visited in the sequence reduce_geom.h defines (the
// reduced dims ordered by decreasing stride, row-major), which splits the row
// into *runs*: stretches along the innermost reduced dim. Two orders:
//
//  * InnerOrder (a reduced dim is innermost in memory): runs are folded in
//    chunks of chunk_size<Op>() elements (a run may span chunks, a chunk may
//    hold several runs); within a chunk, a run of a lane op that is contiguous
//    in memory and at least 2 * kLanes long goes into kLanes independent lanes
//    (element i into lane i % kLanes, the last n % kLanes elements into lane
//    0), combined as the tree ((0,1),(2,3)),((4,5),(6,7)), then into the chunk's
//    partial; shorter or strided runs step the partial one element at a time.
//    A row of more than one chunk adds each chunk's partial to a Cascade (a
//    16-ary tree of partials), so float sums err like a pairwise sum.
//  * ColumnOrder (a kept dim is innermost in memory: eager reduces
//    neighbouring outputs side by side): elements step the partial one at a
//    time; every kColumnChunk elements the partial goes into a Cascade; the
//    result is the last partial combined with each level, lowest first.

/// Eager reduces on several threads from this many elements (outputs times
/// reduced elements; the CPU backend's parallel grain).
inline constexpr int64_t kReduceParallelGrain = 32768;
/// ColumnOrder: neighbouring outputs eager accumulates side by side (one task).
inline constexpr int64_t kColumnBlock = 1024;

/// Rows are cut across threads only in reductions of fewer outputs than this
/// (with more, threads take whole outputs or blocks of them).
inline constexpr int64_t kSplitRowsBelow = 8;
/// Whether a reduction of n_out outputs of n_red elements each cuts its rows
/// into stretches across threads: fewer than kSplitRowsBelow outputs of at
/// least kReduceParallelGrain elements. Eager's schedule and the compiler's
/// (KernelConfig::split) both ask this, so that they cut the same rows.
SMELT_HD bool splits_rows(int64_t n_out, int64_t n_red) {
  return n_out < kSplitRowsBelow && n_red >= kReduceParallelGrain;
}
/// Into how many stretches eager and compiled reductions cut each row (one
/// thread each; the stretches' results combined in order, InnerOrder or
/// ColumnOrder alike): min(nthreads, n_red / 1024) where splits_rows(), else
/// 1. The stretches decide the bits, so both sides take them from here.
SMELT_HD int64_t row_splits(int64_t n_out, int64_t n_red, int64_t nthreads) {
  if (nthreads <= 1 || !splits_rows(n_out, n_red)) return 1;
  const int64_t by_length = n_red / 1024;
  const int64_t p = nthreads < by_length ? nthreads : by_length;
  return p > 1 ? p : 1;
}
/// The first element of stretch c of `splits` equal stretches over n_red
/// elements (stretch c is [stretch_begin(c), stretch_begin(c + 1))).
SMELT_HD int64_t stretch_begin(int64_t c, int64_t splits, int64_t n_red) {
  const int64_t len = (n_red + splits - 1) / splits;
  return c * len < n_red ? c * len : n_red;
}

/// Independent lanes of a contiguous run (vectorizable: one SIMD register of floats).
inline constexpr int kLanes = 8;
/// Cascade depth and fan-out.
inline constexpr int kCascadeLevels = 6;
inline constexpr int kCascadeFanout = 16;
/// ColumnOrder: elements per partial.
inline constexpr int64_t kColumnChunk = 128;

/// Accumulators whose contiguous runs use lanes (cheap, commutative steps).
template <class Op>
struct is_lane_op {
  static constexpr bool value = false;
};
template <class A>
struct is_lane_op<Sum<A>> {
  static constexpr bool value = true;
};
template <class A>
struct is_lane_op<Prod<A>> {
  static constexpr bool value = true;
};
template <class A>
struct is_lane_op<Max<A>> {
  static constexpr bool value = true;
};
template <class A>
struct is_lane_op<Min<A>> {
  static constexpr bool value = true;
};
template <class A>
struct is_lane_op<Welford<A>> {
  static constexpr bool value = true;
};

template <class Op>
struct is_welford {
  static constexpr bool value = false;
};
template <class A>
struct is_welford<Welford<A>> {
  static constexpr bool value = true;
};

/// InnerOrder: elements per chunk (8 lanes x 16 for the lane ops, so float sums
/// stay pairwise-accurate; 512 for Welford, whose lanes are accurate on their
/// own (two passes, or welford_float_lanes' shifted sums), so that a chunk's
/// lanes are combined once per 512 elements; longer for the others).
template <class Op>
SMELT_HD constexpr int64_t chunk_size() {
  return is_welford<Op>::value ? 512 : is_lane_op<Op>::value ? 128 : 4096;
}

/// One step; `i` (the element's linear index in the row) only for indexed ops.
template <class Op>
SMELT_HD typename Op::acc_t step_at(const typename Op::acc_t& acc, typename Op::value_t x,
                                    int64_t i) {
  if constexpr (Op::kIndexed) {
    return Op::step(acc, x, i);
  } else {
    (void)i;
    return Op::step(acc, x);
  }
}

/// A 16-ary tree of partial accumulators, kCascadeLevels deep.
template <class Op>
struct Cascade {
  using acc_t = typename Op::acc_t;
  acc_t lv[kCascadeLevels];
  int cnt[kCascadeLevels];
  SMELT_HD Cascade() {
    for (int l = 0; l < kCascadeLevels; ++l) {
      lv[l] = Op::init();
      cnt[l] = 0;
    }
  }
  /// Combines `a` into level 0; a level that has taken kCascadeFanout
  /// partials is combined into the next and restarts. (Always inlined on the
  /// host, as SMELT_HD_INLINE says why: GCC 12 left it out of line in the AVX
  /// copies of fold_contiguous_sum.)
  SMELT_HD_INLINE void add(const acc_t& a) {
    lv[0] = Op::combine(lv[0], a);
    for (int l = 0; l + 1 < kCascadeLevels && ++cnt[l] == kCascadeFanout; ++l) {
      lv[l + 1] = Op::combine(lv[l + 1], lv[l]);
      lv[l] = Op::init();
      cnt[l] = 0;
    }
  }
  /// add(Op::init()) k times, for accumulators whose combine(a, init()) is a
  /// (Max, Min): the counts and the partials carried up as those adds leave
  /// them. Level l takes k adds, of which only the first can carry a value
  /// (already combined into lv[l]: level l - 1's partial at its first
  /// promotion), so lv[l] goes up at level l's first promotion, init() after.
  SMELT_HD void add_inits(int64_t k) {
    for (int l = 0; l + 1 < kCascadeLevels && k > 0; ++l) {
      const int64_t total = cnt[l] + k;
      cnt[l] = static_cast<int>(total % kCascadeFanout);
      k = total / kCascadeFanout;  // promotions into level l + 1
      if (k > 0) {
        lv[l + 1] = Op::combine(lv[l + 1], lv[l]);
        lv[l] = Op::init();
      }
    }
  }
  /// Level 0 combined with each higher level (InnerOrder, after adding the last partial).
  SMELT_HD acc_t result() const {
    acc_t acc = lv[0];
    for (int l = 1; l < kCascadeLevels; ++l) acc = Op::combine(acc, lv[l]);
    return acc;
  }
  /// `part` combined with each level, lowest first (ColumnOrder).
  SMELT_HD acc_t result_after(acc_t part) const {
    for (int l = 0; l < kCascadeLevels; ++l) part = Op::combine(part, lv[l]);
    return part;
  }
};

/// The getter of a run contiguous in memory whose elements are already of the
/// accumulate type A: element k is p[k]. Passed for `get`, it lets the host
/// compiler's lanes load whole vectors (fold_lanes); any callable works too.
/// Tag: a type of the caller's own (code built once per CPU capability passes
/// a type of its translation unit, so that each copy has its own fold_lanes).
template <class A, class Tag>
struct ContiguousRun {
  const A* p;
  SMELT_HD A operator()(int64_t k) const { return p[k]; }
};
template <class G>
struct is_contiguous_run {
  static constexpr bool value = false;
};
template <class A, class Tag>
struct is_contiguous_run<ContiguousRun<A, Tag>> {
  static constexpr bool value = true;
};
/// Accumulators whose lanes fold_lanes runs on host vectors (elementwise steps).
template <class Op>
struct is_vector_lane_op {
  static constexpr bool value = false;
};
template <class A>
struct is_vector_lane_op<Sum<A>> {
  static constexpr bool value = std::is_floating_point<A>::value;
};
template <class A>
struct is_vector_lane_op<Max<A>> {
  static constexpr bool value = std::is_floating_point<A>::value;
};
template <class A>
struct is_vector_lane_op<Min<A>> {
  static constexpr bool value = std::is_floating_point<A>::value;
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SMELT_HOST_NOINLINE
#else
#define SMELT_HOST_NOINLINE __attribute__((noinline))
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX2__)
/// The host runs lanes of contiguous runs on GCC vectors (only with AVX2: SSE2
/// code for these 8-lane masks comes out scalar).
#define SMELT_HOST_VECTOR_LANES 1

/// kLanes lanes of A in one GCC vector.
template <class A>
struct LaneVector {
  typedef A type __attribute__((vector_size(sizeof(A) * kLanes)));
};

/// Shuffle masks of LaneVector<A> (integers of A's size).
template <class A>
struct LaneMask {
  typedef typename std::conditional<sizeof(A) == 8, int64_t, int32_t>::type I;
  typedef I type __attribute__((vector_size(sizeof(A) * kLanes)));
};

/// acc = Op::step(acc, x) on every lane (Sum, Max, Min of a floating A), by
/// reference (a 64-byte vector passed by value changes the ABI without
/// AVX-512). Always inlined: an out-of-line copy would be shared by the AVX2
/// and AVX-512 builds.
template <class Op, class V>
inline __attribute__((always_inline)) void vector_step(V& acc, const V& x) {
  using A = typename Op::value_t;
  if constexpr (std::is_same<Op, Sum<A>>::value) {
    acc = acc + x;
  } else if constexpr (std::is_same<Op, Max<A>>::value) {
    acc = ((acc == acc) & ((x != x) | (x > acc))) ? x : acc;
  } else {
    acc = ((acc == acc) & ((x != x) | (x < acc))) ? x : acc;
  }
}
#else
#define SMELT_HOST_VECTOR_LANES 0
#endif

/// welford_float_lanes: its float lanes per block, kFloatParts times kLanes.
inline constexpr int kFloatParts = 4;
inline constexpr int kFloatLanes = kFloatParts * kLanes;
/// welford_float_lanes and plain_extreme: how far ahead of their reads (in
/// elements: 4 KB of float) a run contiguous in memory is prefetched.
inline constexpr int64_t kPrefetchAhead = 1024;

#if SMELT_HOST_VECTOR_LANES
/// Welford::combine(a, b) on every lane of GCC vectors of means and m2s, the
/// counts na of a's lanes and nb of b's (both nonzero) alike in every lane:
/// its arithmetic, into (ma, va).
template <class V, class A>
inline __attribute__((always_inline)) void vector_welford_combine(V& ma, V& va, const V& mb,
                                                                  const V& vb, int64_t na,
                                                                  int64_t nb) {
  const A r = na == nb ? A(0.5) : static_cast<A>(nb) / static_cast<A>(na + nb);
  const V d = mb - ma;
  ma = ma + d * r;
  va = va + vb + d * d * static_cast<A>(na) * r;
}
#endif

/// welford_lanes' blocks (see there) of float elements (Welford<double> over
/// float32 data, as layer_norm and var of float32 fold it), in float: block
/// g's element j goes into float lane j % kFloatLanes; float lanes k + p *
/// kLanes (parts p = 0..3, count / 4 elements each, one more in parts
/// p < count % 4) make up welford_lanes' lane k. Each float lane is kept as
/// shifted sums (ShiftedSums, one pass, no division): the shift c is the
/// lane's first element, s1 = sum(x - c) and s2 = sum((x - c)^2) over its
/// other elements; then, in double, with its count m and q = s1 * (1 / m):
/// mean = c + q and m2 = s2 - s1 * q (at least 0); the parts are combined
/// (Welford::combine) as ((0, 1), (2, 3)). A float lane costs a quarter of a
/// double one (no conversion, half the width). As accurate: c is one of the
/// lane's elements, so (c - mean)^2 <= m2 and s2 <= (m + 1) m2 (the
/// subtraction loses at most log2(m + 1) of float's 24 bits: about 4 for a
/// chunk's 16 elements per float lane), whatever the mean (x = 1e4 + N(0, 1)
/// keeps its variance to about 1e-6 relative); a constant lane has
/// s1 = s2 = 0 exactly: mean c, variance 0. Returns false, the arrays unset,
/// where count < kFloatParts or some lane is out of that range: c or s2 not
/// finite (an inf or NaN element, or deviations beyond about 1e19, whose
/// squares overflow float), or s2 below 2^-60 with |c| below 2^-39
/// (deviations so small that their squares may have lost bits to underflow;
/// with |c| >= 2^-39 every nonzero deviation exceeds 2^-63 and its square is
/// a normal float); the caller then folds the blocks in double.
template <int kGroup, int64_t kStride, class Get>
SMELT_HD bool welford_float_lanes(const Get& get, int64_t at, int64_t count, double (*mean)[kLanes],
                                  double (*m2)[kLanes]) {
  constexpr float kTinySum = 0x1p-60f, kSmallShift = 0x1p-39f;
  const int64_t rows = count / kFloatParts;  // whole rows of kFloatLanes elements
  if (rows < 1) return false;
  const int rem = static_cast<int>(count % kFloatParts);  // a last row's elements / kLanes
  int64_t cnt[kFloatParts];
  double inv[kFloatParts];
  for (int p = 0; p < kFloatParts; ++p) {
    cnt[p] = rows + (p < rem ? 1 : 0);
    inv[p] = 1.0 / static_cast<double>(cnt[p]);
  }
  const int last = rem * kLanes;  // elements in the last row
#if SMELT_HOST_VECTOR_LANES
  // The same arithmetic on GCC vectors of the lanes: kVecs vectors of 16
  // floats per row, each of two parts.
  typedef float V __attribute__((vector_size(64)));
  constexpr int kWidth = 16, kVecs = kFloatLanes / kWidth;
  using H = typename LaneVector<float>::type;
  using D = typename LaneVector<double>::type;
  V c[kGroup][kVecs], s1[kGroup][kVecs], s2[kGroup][kVecs];
  // x = the lanes' elements from j (by reference: a 64-byte vector returned
  // by value changes the ABI without AVX-512). A run in memory is read
  // kPrefetchAhead elements ahead too (the next row of a layer_norm, whose
  // first lines the hardware prefetcher, which stops at pages, does not fetch).
  auto load = [&](int64_t j, V& x) {
    if constexpr (is_contiguous_run<Get>::value) __builtin_prefetch(get.p + j + kPrefetchAhead);
    float e[kWidth];
    for (int k = 0; k < kWidth; ++k) e[k] = get(j + k);
    __builtin_memcpy(&x, e, sizeof x);
  };
  auto add = [](const V& x, const V& shift, V& t1, V& t2) {
    const V d = x - shift;
    t1 += d;
    t2 += d * d;
  };
  // Block by block (read in sequence; a block's 2 * kVecs chains of
  // additions are enough for the processor to overlap).
  for (int g = 0; g < kGroup; ++g) {
    V cg[kVecs], t1[kVecs], t2[kVecs];
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) {
      load(at + g * kStride + v * kWidth, cg[v]);
      t1[v] = t2[v] = V{};
    }
    for (int64_t i = 1; i < rows; ++i) {
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) {
        V x;
        load(at + g * kStride + i * kFloatLanes + v * kWidth, x);
        add(x, cg[v], t1[v], t2[v]);
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      c[g][v] = cg[v];
      s1[g][v] = t1[v];
      s2[g][v] = t2[v];
    }
  }
  // The last row's elements, into the first lanes (the others take their
  // own shift: d = +0, which changes no sum).
  for (int g = 0; g < kGroup; ++g) {
    for (int v = 0; v * kWidth < last; ++v) {
      float e[kWidth];
      __builtin_memcpy(e, &c[g][v], sizeof e);
      for (int k = 0; k < kWidth && v * kWidth + k < last; ++k)
        e[k] = get(at + g * kStride + rows * kFloatLanes + v * kWidth + k);
      V x;
      __builtin_memcpy(&x, e, sizeof x);
      add(x, c[g][v], s1[g][v], s2[g][v]);
    }
  }
  const V tiny = V{} + kTinySum, small = V{} + kSmallShift;
  auto ok = c[0][0] == c[0][0];
  for (int g = 0; g < kGroup; ++g)
    for (int v = 0; v < kVecs; ++v)
      ok &= (c[g][v] - c[g][v] == V{}) & (s2[g][v] - s2[g][v] == V{}) &
            ((s2[g][v] >= tiny) | (c[g][v] >= small) | (c[g][v] <= -small));
  for (int k = 0; k < kWidth; ++k)
    if (!ok[k]) return false;
  for (int g = 0; g < kGroup; ++g) {
    H cs[kFloatParts], t1s[kFloatParts], t2s[kFloatParts];  // part p's lanes
    __builtin_memcpy(cs, c[g], sizeof cs);
    __builtin_memcpy(t1s, s1[g], sizeof t1s);
    __builtin_memcpy(t2s, s2[g], sizeof t2s);
    D dm[kFloatParts], dv[kFloatParts];
    for (int p = 0; p < kFloatParts; ++p) {
      const D t1 = __builtin_convertvector(t1s[p], D);
      const D q = t1 * inv[p];
      dm[p] = __builtin_convertvector(cs[p], D) + q;
      const D v = __builtin_convertvector(t2s[p], D) - t1 * q;
      dv[p] = v < D{} ? D{} : v;
    }
    vector_welford_combine<D, double>(dm[0], dv[0], dm[1], dv[1], cnt[0], cnt[1]);
    vector_welford_combine<D, double>(dm[2], dv[2], dm[3], dv[3], cnt[2], cnt[3]);
    vector_welford_combine<D, double>(dm[0], dv[0], dm[2], dv[2], cnt[0] + cnt[1], cnt[2] + cnt[3]);
    __builtin_memcpy(mean[g], &dm[0], sizeof dm[0]);
    __builtin_memcpy(m2[g], &dv[0], sizeof dv[0]);
  }
  return true;
#else
  float c[kGroup][kFloatLanes], s1[kGroup][kFloatLanes], s2[kGroup][kFloatLanes];
  for (int g = 0; g < kGroup; ++g)
    for (int k = 0; k < kFloatLanes; ++k) {
      c[g][k] = get(at + g * kStride + k);
      s1[g][k] = s2[g][k] = 0.0f;
    }
  // The elements, and those of a last row (the first lanes).
  for (int64_t i = 1; i < rows + (last > 0 ? 1 : 0); ++i) {
    const int w = i < rows ? kFloatLanes : last;
    for (int g = 0; g < kGroup; ++g) {
      for (int k = 0; k < w; ++k) {
        const float d = get(at + g * kStride + i * kFloatLanes + k) - c[g][k];
        s1[g][k] += d;
        s2[g][k] += d * d;
      }
    }
  }
  for (int g = 0; g < kGroup; ++g)
    for (int k = 0; k < kFloatLanes; ++k) {
      const float cv = c[g][k], s = s2[g][k];
      if (!(cv - cv == 0.0f) || !(s - s == 0.0f) ||
          !(s >= kTinySum || cv >= kSmallShift || cv <= -kSmallShift))
        return false;
    }
  for (int g = 0; g < kGroup; ++g) {
    for (int k = 0; k < kLanes; ++k) {
      WelfordAcc<double> part[kFloatParts];
      for (int p = 0; p < kFloatParts; ++p) {
        const int l = p * kLanes + k;
        const double t1 = static_cast<double>(s1[g][l]);
        const double q = t1 * inv[p];
        const double v = static_cast<double>(s2[g][l]) - t1 * q;
        part[p] = WelfordAcc<double>{static_cast<double>(c[g][l]) + q, v < 0.0 ? 0.0 : v, cnt[p]};
      }
      const WelfordAcc<double> a = Welford<double>::combine(
          Welford<double>::combine(part[0], part[1]), Welford<double>::combine(part[2], part[3]));
      mean[g][k] = a.mean;
      m2[g][k] = a.m2;
    }
  }
  return true;
#endif
}

/// Welford accumulators of kGroup blocks side by side: block g is the
/// `count` * kLanes elements get(at + g * kStride + j), its lane k those with
/// j % kLanes == k. Each lane's mean and m2 come from two passes over its
/// elements (the mean as the lane's sum times 1 / count, then the sum of
/// squared deviations from it): one multiplication per lane where Welford's
/// steps divide per element (the lanes of one block all have the same count),
/// and a variance at least as accurate. A lane whose sum is not finite takes
/// c + sum(x * (1 / count) - c * (1 / count)) instead, c its first element
/// (0 if that is not finite): a sum of elements near the type's largest value
/// overflows where their mean does not, and the shift keeps the mean of
/// equal elements exact (with an inf or NaN element the mean is not finite
/// either way). float elements of Welford<double> (`get` returns float) take
/// welford_float_lanes where it is in range, and this fold (elements widened
/// to double) where it is not.
/// mean[g][k], m2[g][k]: block g's lane k (whose count is `count`).
template <class Op, int kGroup, int64_t kStride, class Get>
SMELT_HD void welford_lanes(const Get& get, int64_t at, int64_t count,
                            typename Op::value_t (*mean)[kLanes],
                            typename Op::value_t (*m2)[kLanes]) {
  using A = typename Op::value_t;
  if constexpr (std::is_same<A, double>::value &&
                std::is_same<decltype(get(int64_t{0})), float>::value) {
    if (count >= 2 && welford_float_lanes<kGroup, kStride>(get, at, count, mean, m2)) return;
  }
  const A inv = A(1) / static_cast<A>(count > 0 ? count : 1);
#if SMELT_HOST_VECTOR_LANES
  if constexpr (std::is_floating_point<A>::value) {
    // The same arithmetic on GCC vectors of the lanes (GCC leaves the arrays'
    // reductions below scalar).
    using V = typename LaneVector<A>::type;
    V vmean[kGroup], vm2[kGroup];
    for (int g = 0; g < kGroup; ++g) vmean[g] = vm2[g] = V{};
    // x = the lanes' elements from j (by reference: a 64-byte vector
    // returned by value changes the ABI without AVX-512).
    auto load = [&](int64_t j, V& x) {
      A e[kLanes];
      for (int k = 0; k < kLanes; ++k) e[k] = get(j + k);
      __builtin_memcpy(&x, e, sizeof x);
    };
    for (int64_t i = 0; i < count; ++i) {
      for (int g = 0; g < kGroup; ++g) {
        V x;
        load(at + g * kStride + i * kLanes, x);
        vmean[g] += x;
      }
    }
    // Any lane sum not finite (0 in every lane, else NaN: the lanes added
    // pairwise): those lanes alone take c + sum(x * inv - c * inv), lane by
    // lane, so that a lane's mean does not depend on the blocks grouped with it.
    V zero = vmean[0] - vmean[0];
    for (int g = 1; g < kGroup; ++g) zero += vmean[g] - vmean[g];
    A half[kLanes];
    __builtin_memcpy(half, &zero, sizeof zero);
    for (int w = kLanes / 2; w >= 1; w /= 2)
      for (int k = 0; k < w; ++k) half[k] += half[k + w];
    if (half[0] == A(0)) {
      for (int g = 0; g < kGroup; ++g) vmean[g] *= inv;
    } else {
      for (int g = 0; g < kGroup; ++g) {
        V c;
        load(at + g * kStride, c);
        c = c - c == V{} ? c : V{};
        const V ci = c * inv;
        V scaled = V{};
        for (int64_t i = 0; i < count; ++i) {
          V x;
          load(at + g * kStride + i * kLanes, x);
          scaled += x * inv - ci;
        }
        vmean[g] = vmean[g] - vmean[g] == V{} ? vmean[g] * inv : c + scaled;
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      for (int g = 0; g < kGroup; ++g) {
        V x;
        load(at + g * kStride + i * kLanes, x);
        const V d = x - vmean[g];
        vm2[g] += d * d;
      }
    }
    for (int g = 0; g < kGroup; ++g) {
      __builtin_memcpy(mean[g], &vmean[g], sizeof vmean[g]);
      __builtin_memcpy(m2[g], &vm2[g], sizeof vm2[g]);
    }
    return;
  }
#endif
  for (int g = 0; g < kGroup; ++g)
    for (int k = 0; k < kLanes; ++k) mean[g][k] = m2[g][k] = A(0);
  for (int64_t i = 0; i < count; ++i) {
    for (int g = 0; g < kGroup; ++g) {
      for (int k = 0; k < kLanes; ++k) mean[g][k] += get(at + g * kStride + i * kLanes + k);
    }
  }
  for (int g = 0; g < kGroup; ++g)
    for (int k = 0; k < kLanes; ++k) {
      if (mean[g][k] - mean[g][k] == A(0)) {  // finite
        mean[g][k] *= inv;
        continue;
      }
      A c = get(at + g * kStride + k);
      c = c - c == A(0) ? c : A(0);
      const A ci = c * inv;
      A scaled = A(0);
      for (int64_t i = 0; i < count; ++i)
        scaled += get(at + g * kStride + i * kLanes + k) * inv - ci;
      mean[g][k] = c + scaled;
    }
  for (int64_t i = 0; i < count; ++i) {
    for (int g = 0; g < kGroup; ++g) {
      for (int k = 0; k < kLanes; ++k) {
        const A d = get(at + g * kStride + i * kLanes + k) - mean[g][k];
        m2[g][k] += d * d;
      }
    }
  }
}

/// The lanes of a contiguous run (see InnerOrder): element i into lane
/// i % kLanes, every lane from init(), for the first n - n % kLanes elements,
/// into l; returns how many it took. Not inlined: GCC vectorizes the lanes of
/// this loop alone, not always once it is inlined into a caller. Welford's
/// lanes (every lane has the same count) come from welford_lanes: over arrays,
/// so that they vectorize, and without a division per element.
template <class Op, class Get>
SMELT_HD SMELT_HOST_NOINLINE int64_t fold_lanes(const Get& get, int64_t n, typename Op::acc_t* l) {
  int64_t i = 0;
#if SMELT_HOST_VECTOR_LANES
  if constexpr (is_contiguous_run<Get>::value && is_vector_lane_op<Op>::value) {
    // The lanes as one GCC vector (GCC does not vectorize the select of max /
    // min across loop iterations).
    using A = typename Op::value_t;
    using V = typename LaneVector<A>::type;
    A init[kLanes];
    for (int k = 0; k < kLanes; ++k) init[k] = Op::init();
    V acc;
    __builtin_memcpy(&acc, init, sizeof acc);
    for (; i + kLanes <= n; i += kLanes) {
      V x;
      __builtin_memcpy(&x, get.p + i, sizeof x);
      vector_step<Op>(acc, x);
    }
    for (int k = 0; k < kLanes; ++k) l[k] = acc[k];
    return i;
  }
#endif
  if constexpr (is_welford<Op>::value) {
    typename Op::value_t mean[1][kLanes], m2[1][kLanes];
    welford_lanes<Op, 1, 0>(get, 0, n / kLanes, mean, m2);
    for (int k = 0; k < kLanes; ++k) l[k] = typename Op::acc_t{mean[0][k], m2[0][k], n / kLanes};
    i = n - n % kLanes;
  } else {
    typename Op::acc_t lanes[kLanes];
    for (int k = 0; k < kLanes; ++k) lanes[k] = Op::init();
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) lanes[k] = Op::step(lanes[k], get(i + k));
    for (int k = 0; k < kLanes; ++k) l[k] = lanes[k];
  }
  return i;
}

template <class Op>
SMELT_HD typename Op::acc_t welford_tree(const typename Op::value_t* mean,
                                         const typename Op::value_t* m2, int64_t count);

#if SMELT_HOST_VECTOR_LANES
/// lanes_tree on the lanes of one vector (Sum, Max, Min of a floating A, whose
/// combine is step): step s combines lane k with lane k ^ s, shuffled into
/// place, for s = 1, 2, 4; lane 0 holds the tree's result. (By reference:
/// a 64-byte vector passed by value changes the ABI without AVX-512.)
template <class Op, class V>
inline __attribute__((always_inline)) typename Op::value_t vector_lanes_tree(const V& lanes) {
  V t = lanes;
  using M = typename LaneMask<typename Op::value_t>::type;
  vector_step<Op>(t, __builtin_shuffle(t, M{1, 0, 3, 2, 5, 4, 7, 6}));
  vector_step<Op>(t, __builtin_shuffle(t, M{2, 3, 0, 1, 6, 7, 4, 5}));
  vector_step<Op>(t, __builtin_shuffle(t, M{4, 5, 6, 7, 0, 1, 2, 3}));
  return t[0];
}
#endif

/// lanes_tree's combines one pair at a time, in its order; clobbers l.
template <class Op>
SMELT_HD typename Op::acc_t pairwise_lanes(typename Op::acc_t* l) {
  for (int s = 1; s < kLanes; s *= 2)
    for (int k = 0; k < kLanes; k += 2 * s) l[k] = Op::combine(l[k], l[k + s]);
  return l[0];
}

/// The lanes combined as the tree ((0,1),(2,3)),((4,5),(6,7)); clobbers l.
/// On host vectors where they vectorize: Sum, Max and Min of a floating type
/// (combine is step for them) as three steps on every lane at once, lane k
/// with lane k ^ s shuffled into place, and Welford lanes of one count
/// through welford_tree; the same operations on the same values, so the same
/// bits. GCC leaves the loop below scalar, and its Max / Min selects as
/// branches that random data mispredicts (softmax over 4096 rows of 64
/// floats, one thread of a 2-core AVX-512 Xeon: 386 -> 239 us; layer_norm
/// of the same: 330 -> 249 us).
template <class Op>
SMELT_HD typename Op::acc_t lanes_tree(typename Op::acc_t* l) {
#if SMELT_HOST_VECTOR_LANES
  using A = typename Op::value_t;
  if constexpr (is_vector_lane_op<Op>::value) {
    typename LaneVector<A>::type t;
    __builtin_memcpy(&t, l, sizeof t);
    return vector_lanes_tree<Op>(t);
  }
  if constexpr (is_welford<Op>::value && std::is_floating_point<A>::value) {
    bool one_count = l[0].count > 0;
    A mean[kLanes], m2[kLanes];
    for (int k = 0; k < kLanes; ++k) {
      one_count &= l[k].count == l[0].count;
      mean[k] = l[k].mean;
      m2[k] = l[k].m2;
    }
    if (one_count) return welford_tree<Op>(mean, m2, l[0].count);
  }
#endif
  return pairwise_lanes<Op>(l);
}

/// lanes_tree of Welford lanes of one count (lane k: mean[k], m2[k], `count`),
/// bit for bit.
template <class Op>
SMELT_HD typename Op::acc_t welford_tree(const typename Op::value_t* mean,
                                         const typename Op::value_t* m2, int64_t count) {
#if SMELT_HOST_VECTOR_LANES
  using A = typename Op::value_t;
  if constexpr (std::is_floating_point<A>::value) {
    if (count > 0) {
      // Each step of the tree on every lane at once (lane k with lane k + s,
      // shuffled into place); lane 0 holds the tree's result.
      using V = typename LaneVector<A>::type;
      using M = typename LaneMask<A>::type;
      const M kSteps[3] = {
          {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5}, {4, 5, 6, 7, 0, 1, 2, 3}};
      V m, v;
      __builtin_memcpy(&m, mean, sizeof m);
      __builtin_memcpy(&v, m2, sizeof v);
      int64_t c = count;
      for (const M& s : kSteps) {
        vector_welford_combine<V, A>(m, v, __builtin_shuffle(m, s), __builtin_shuffle(v, s), c, c);
        c *= 2;
      }
      return typename Op::acc_t{m[0], v[0], c};
    }
  }
#endif
  typename Op::acc_t l[kLanes];
  for (int k = 0; k < kLanes; ++k) l[k] = typename Op::acc_t{mean[k], m2[k], count};
  return pairwise_lanes<Op>(l);
}

/// kGroup whole chunks of a Welford row side by side: parts[g] = the partial
/// InnerOrder folds chunk g (elements get(at + g * kChunk + j)) into, bit for
/// bit: fold_lanes' lanes (welford_lanes) on each chunk, then lanes_tree. The
/// chunks are independent chains of additions, which the processor overlaps.
template <class Op, int kGroup, class Get>
SMELT_HD void welford_chunks(const Get& get, int64_t at, typename Op::acc_t* parts) {
  constexpr int64_t kChunk = chunk_size<Op>();
  typename Op::value_t mean[kGroup][kLanes], m2[kGroup][kLanes];
  welford_lanes<Op, kGroup, kChunk>(get, at, kChunk / kLanes, mean, m2);
  for (int g = 0; g < kGroup; ++g)
    parts[g] = Op::combine(Op::init(), welford_tree<Op>(mean[g], m2[g], kChunk / kLanes));
}

/// Folds the n elements get(0), ..., get(n - 1) of one run into `acc` (see
/// InnerOrder); `index0` is the linear index of get(0). kContiguous: the run
/// is contiguous in memory (lanes are used only then, where they vectorize).
template <class Op, bool kContiguous, class Get>
SMELT_HD typename Op::acc_t fold_run(typename Op::acc_t acc, const Get& get, int64_t n,
                                     int64_t index0) {
  using acc_t = typename Op::acc_t;
  if constexpr (is_lane_op<Op>::value && kContiguous) {
    if (n >= 2 * kLanes) {
      acc_t l[kLanes];
      int64_t i = fold_lanes<Op>(get, n, l);
      for (; i < n; ++i) l[0] = Op::step(l[0], get(i));
      return Op::combine(acc, lanes_tree<Op>(l));
    }
  }
  for (int64_t i = 0; i < n; ++i) acc = step_at<Op>(acc, get(i), index0 + i);
  return acc;
}

#if SMELT_HOST_VECTOR_LANES
/// kGroup contiguous runs of n elements each (n a multiple of kLanes, at
/// least 2 * kLanes), runs[g].p to runs[g].p + n, with their lanes side by
/// side: independent chains of vector steps. trees[g] = run g's lanes_tree,
/// what fold_run<Op, true>(acc, run g) combines into acc. (The
/// ContiguousRun's tag gives each kernel build its own instantiation.)
template <class Op, int kGroup, class Run>
inline void fold_runs(const Run (&runs)[kGroup], int64_t n, typename Op::acc_t* trees) {
  using A = typename Op::value_t;
  using V = typename LaneVector<A>::type;
  A init[kLanes];
  for (int k = 0; k < kLanes; ++k) init[k] = Op::init();
  V acc[kGroup];
  for (int g = 0; g < kGroup; ++g) __builtin_memcpy(&acc[g], init, sizeof(V));
  bool stepped = false;
  if constexpr (!std::is_same<Op, Sum<A>>::value) {
    // Max / Min: while no element is NaN, step's select is x > acc ? x : acc
    // (x < acc ? x : acc), one maxps (minps) instruction. A NaN is only noted
    // (the elements' sum is NaN; so it is for +inf and -inf too, rarely), and
    // a group of runs with one is folded again by step: the same bits either
    // way.
    V sum[kGroup];
    for (int g = 0; g < kGroup; ++g) sum[g] = V{};
    for (int64_t j = 0; j < n; j += kLanes) {
      for (int g = 0; g < kGroup; ++g) {
        V x;
        __builtin_memcpy(&x, runs[g].p + j, sizeof x);
        if constexpr (std::is_same<Op, Max<A>>::value) {
          acc[g] = x > acc[g] ? x : acc[g];
        } else {
          acc[g] = x < acc[g] ? x : acc[g];
        }
        sum[g] += x;
      }
    }
    for (int g = 1; g < kGroup; ++g) sum[0] += sum[g];
    bool any_nan = false;
    for (int k = 0; k < kLanes; ++k) any_nan |= sum[0][k] != sum[0][k];
    stepped = !any_nan;
    if (any_nan)
      for (int g = 0; g < kGroup; ++g) __builtin_memcpy(&acc[g], init, sizeof(V));
  }
  if (!stepped) {
    for (int64_t j = 0; j < n; j += kLanes) {
      for (int g = 0; g < kGroup; ++g) {
        V x;
        __builtin_memcpy(&x, runs[g].p + j, sizeof x);
        vector_step<Op>(acc[g], x);
      }
    }
  }
  for (int g = 0; g < kGroup; ++g) trees[g] = vector_lanes_tree<Op>(acc[g]);
}

/// kGroup whole chunks from run.p, each folded as InnerOrder folds a chunk
/// into a fresh partial (parts[g] = fold_run<Op, true>(init, chunk g)):
/// fold_runs over the chunks.
template <class Op, int kGroup, class Run>
inline void fold_chunks(const Run& run, typename Op::acc_t* parts) {
  constexpr int64_t kChunk = chunk_size<Op>();
  Run runs[kGroup];
  for (int g = 0; g < kGroup; ++g) runs[g] = Run{run.p + g * kChunk};
  fold_runs<Op, kGroup>(runs, kChunk, parts);
  for (int g = 0; g < kGroup; ++g) parts[g] = Op::combine(Op::init(), parts[g]);
}
#endif

#if SMELT_HOST_VECTOR_LANES
/// Max and Min of a floating A (the vector-lane accumulators but Sum): the
/// accumulators whose contiguous runs plain_extreme may fold.
template <class Op>
struct is_extreme_op {
  static constexpr bool value =
      is_vector_lane_op<Op>::value && !std::is_same<Op, Sum<typename Op::value_t>>::value;
};

/// Elements plain_extreme takes per step: four 64-byte vectors.
template <class A>
constexpr int64_t plain_extreme_step() {
  return 4 * static_cast<int64_t>(64 / sizeof(A));
}

/// The maximum (Max) or minimum (Min) of the n elements from p (n a multiple
/// of plain_extreme_step<A>()) into m, where that value alone decides the bits of
/// folding them in any order: true when no element is NaN and m is not zero.
/// Then every element equal to m has m's bits, and a fold (a tree of
/// Op::combine / step whatever its shape, InnerOrder's lanes, lane trees and
/// cascade with any other elements of the row) ends at an element of the
/// highest class (any NaN, else the elements equal to the extreme), choosing
/// among that class's elements by the tree alone: so these elements may go
/// in as one partial m (the others init(): no value changes, the cascade
/// counts as before), the bits unchanged. Where it returns false (a NaN, or
/// a zero extreme: which NaN or which signed zero comes out depends on the
/// order), InnerOrder folds them as it would. One 64-byte vector per step
/// (AVX-512; two 32-byte ones with AVX2), four side by side; a lane's NaN is
/// noted by its running sum (NaN also for +inf and -inf in one lane, rarely:
/// a false alarm only sends the elements to InnerOrder's fold). Reads
/// kPrefetchAhead elements ahead too (the next row, whose first lines the
/// hardware prefetcher, which stops at pages, does not fetch).
template <class Op, class A>
inline __attribute__((always_inline)) bool plain_extreme(const A* p, int64_t n, A& m) {
  typedef A W __attribute__((vector_size(64)));
  typedef typename LaneMask<A>::I I;
  typedef I WI __attribute__((vector_size(64)));
  constexpr int kW = static_cast<int>(64 / sizeof(A)), kAcc = 4;
  static_assert(kW * kAcc == plain_extreme_step<A>() && chunk_size<Op>() % (kW * kAcc) == 0,
                "whole steps per chunk");
  constexpr bool kMax = std::is_same<Op, Max<A>>::value;
  W acc[kAcc], sum[kAcc];
  for (int g = 0; g < kAcc; ++g) {
    acc[g] = W{} + Op::init();
    sum[g] = W{};
  }
  for (int64_t j = 0; j < n; j += kW * kAcc) {
    for (int g = 0; g < kAcc; ++g) {
      W x;
      __builtin_prefetch(p + j + g * kW + kPrefetchAhead);
      __builtin_memcpy(&x, p + j + g * kW, sizeof x);
      acc[g] = (kMax ? x > acc[g] : x < acc[g]) ? x : acc[g];
      sum[g] += x;
    }
  }
  for (int g = 1; g < kAcc; ++g) {
    acc[0] = (kMax ? acc[g] > acc[0] : acc[g] < acc[0]) ? acc[g] : acc[0];
    sum[0] += sum[g];
  }
  // Lanes folded pairwise (lane k with lane k ^ s, s = kW / 2 down to 1)
  // until lane 0 holds them all.
  auto fold = [&](const WI& mask) {
    const W a = __builtin_shuffle(acc[0], mask);
    acc[0] = (kMax ? a > acc[0] : a < acc[0]) ? a : acc[0];
    sum[0] += __builtin_shuffle(sum[0], mask);
  };
  if constexpr (kW == 16) {
    fold(WI{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
    fold(WI{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
    fold(WI{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
    fold(WI{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  } else {
    static_assert(kW == 8, "float or double lanes");
    fold(WI{4, 5, 6, 7, 0, 1, 2, 3});
    fold(WI{2, 3, 0, 1, 6, 7, 4, 5});
    fold(WI{1, 0, 3, 2, 5, 4, 7, 6});
  }
  m = acc[0][0];
  return sum[0][0] == sum[0][0] && m != A(0);
}
#endif

/// Whether InnerOrder folds the last two or three whole chunks of a Welford
/// run two at a time (independent chains the processor overlaps: the same
/// partials, the same cascade, the same bits as one at a time), besides four
/// at a time. Eager kernels do; JIT code does not (CppDialect's preamble sets
/// 0): each reduction element of a generated kernel is a lambda of its own,
/// and the pair's instantiation for it cost g++ about 0.1 s per reduction.
#ifndef SMELT_REDUCE_CHUNK_PAIRS
#define SMELT_REDUCE_CHUNK_PAIRS 1
#endif

/// InnerOrder over one row (or a stretch of it): feed the runs in sequence
/// with run(), then take result().
template <class Op>
struct InnerOrder {
  using acc_t = typename Op::acc_t;
  Cascade<Op> cas;
  acc_t part = Op::init();
  int64_t in_part = 0;
  int64_t index = 0;  // linear index of the next element
  bool cascaded = false;
  InnerOrder() = default;
  /// Starts at linear index `first` (a row split into stretches).
  SMELT_HD explicit InnerOrder(int64_t first) : index(first) {}
  /// Folds the run get(first), ..., get(first + n - 1).
  template <bool kContiguous, class Get>
  SMELT_HD void run(int64_t first, int64_t n, const Get& get) {
    constexpr int64_t kChunk = chunk_size<Op>();
    int64_t i = 0;
    // Whenever a chunk begins (also within a run, after the chunk the
    // previous run left open is completed), whole chunks go in groups.
#if SMELT_HOST_VECTOR_LANES
    bool tried_plain = false;  // plain_extreme, once a call
#endif
    for (;;) {
#if SMELT_HOST_VECTOR_LANES
      if constexpr (kContiguous && is_contiguous_run<Get>::value && is_extreme_op<Op>::value) {
        // Max / Min: the whole chunks at once where their extreme alone
        // decides the bits (plain_extreme): one partial, then init()s.
        if (!tried_plain && in_part == 0 && n - i >= kChunk) {
          tried_plain = true;
          const int64_t whole = (n - i) / kChunk;
          typename Op::value_t m;
          if (plain_extreme<Op>(get.p + first + i, whole * kChunk, m)) {
            cas.add(m);
            cas.add_inits(whole - 1);
            cascaded = true;
            i += whole * kChunk;
            index += whole * kChunk;
          }
        }
      }
      if constexpr (kContiguous && is_contiguous_run<Get>::value && is_vector_lane_op<Op>::value) {
        // Whole chunks four at a time (the same partials, the same cascade).
        constexpr int kGroup = 4;
        while (in_part == 0 && n - i >= kGroup * kChunk) {
          acc_t parts[kGroup];
          fold_chunks<Op, kGroup>(Get{get.p + first + i}, parts);
          for (int g = 0; g < kGroup; ++g) cas.add(parts[g]);
          cascaded = true;
          i += kGroup * kChunk;
          index += kGroup * kChunk;
        }
      }
#endif
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
      if constexpr (kContiguous && is_welford<Op>::value) {
        // Whole chunks four (then two) at a time (the same partials, the same cascade).
        while (in_part == 0 && n - i >= (SMELT_REDUCE_CHUNK_PAIRS ? 2 : 4) * kChunk) {
          acc_t parts[4];
          const int group = n - i >= 4 * kChunk ? 4 : 2;
          if (group == 4) {
            welford_chunks<Op, 4>(get, first + i, parts);
          } else {
#if SMELT_REDUCE_CHUNK_PAIRS
            welford_chunks<Op, 2>(get, first + i, parts);
#endif
          }
          for (int g = 0; g < group; ++g) cas.add(parts[g]);
          cascaded = true;
          i += group * kChunk;
          index += group * kChunk;
        }
      }
#endif
      if (i >= n) break;
      {  // one chunk, or what is left of it
        const int64_t take = n - i < kChunk - in_part ? n - i : kChunk - in_part;
        const int64_t at = first + i;
        if constexpr (is_contiguous_run<Get>::value) {
          part = fold_run<Op, kContiguous>(part, Get{get.p + at}, take, index);
        } else {
          part = fold_run<Op, kContiguous>(
              part, [&](int64_t k) { return get(at + k); }, take, index);
        }
        i += take;
        advance(take);
      }
    }
  }
  /// Folds a contiguous run of n elements (n >= 2 * kLanes, a multiple of
  /// kLanes) that ends at or before the end of the open chunk, given its
  /// lanes' tree (fold_runs): what run<true> does with it.
  SMELT_HD_INLINE void add_run_tree(const acc_t& tree, int64_t n) {
    part = Op::combine(part, tree);
    advance(n);
  }
  /// n more elements are in `part`: into the cascade when that fills the
  /// chunk. Always inlined on the host (SMELT_HD_INLINE says why).
  SMELT_HD_INLINE void advance(int64_t n) {
    index += n;
    in_part += n;
    if (in_part == chunk_size<Op>()) {
      cas.add(part);
      cascaded = true;
      part = Op::init();
      in_part = 0;
    }
  }
  /// Folds the elements [r0, r1) of a row whose runs are `run` elements long
  /// (a stretch may begin and end inside a run).
  template <bool kContiguous, class Get>
  SMELT_HD void stretch(int64_t r0, int64_t r1, int64_t run, const Get& get) {
    for (int64_t s = r0; s < r1;) {
      int64_t e = (s / run + 1) * run;
      if (e > r1) e = r1;
      this->template run<kContiguous>(s, e - s, get);
      s = e;
    }
  }
  /// Always inlined on the host (SMELT_HD_INLINE says why): GCC 12 left it
  /// out of line in the AVX copies of the eager reductions.
  SMELT_HD_INLINE acc_t result() const {
    if (!cascaded) return part;
    Cascade<Op> c = cas;
    c.add(part);
    return c.result();
  }
};

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
/// InnerOrder over one contiguous run of a Sum, from a chunk boundary (a
/// whole row, or a stretch of one): what InnerOrder(first).run<true>(0, n,
/// run) then result() give, bit for bit, written as straight loops (whole
/// chunks four at a time, the cascade a local) without InnerOrder's state.
template <class Op, class Run>
inline typename Op::acc_t fold_contiguous_sum(const Run& run, int64_t n) {
  static_assert(std::is_same<Op, Sum<typename Op::value_t>>::value, "Sum only");
  constexpr int64_t kChunk = chunk_size<Op>();
  if (n < kChunk) return fold_run<Op, true>(Op::init(), Run{run.p}, n, 0);
  Cascade<Op> cas;
  int64_t i = 0;
#if SMELT_HOST_VECTOR_LANES
  if constexpr (is_vector_lane_op<Op>::value) {
    constexpr int kGroup = 4;
    for (; n - i >= kGroup * kChunk; i += kGroup * kChunk) {
      typename Op::acc_t parts[kGroup];
      fold_chunks<Op, kGroup>(Run{run.p + i}, parts);
      for (int g = 0; g < kGroup; ++g) cas.add(parts[g]);
    }
  }
#endif
  for (; n - i >= kChunk; i += kChunk)
    cas.add(fold_run<Op, true>(Op::init(), Run{run.p + i}, kChunk, i));
  cas.add(n > i ? fold_run<Op, true>(Op::init(), Run{run.p + i}, n - i, i) : Op::init());
  return cas.result();
}
#endif

/// One row of n elements get(0), ..., get(n - 1), contiguous in memory,
/// folded as eager's reduce kernels fold a contiguous row: one run, InnerOrder
/// from index 0 (fused eager kernels use it to reduce exactly as the ops they
/// fuse).
template <class Op, class Get>
SMELT_HD typename Op::acc_t fold_contiguous_row(int64_t n, const Get& get) {
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
  if constexpr (is_contiguous_run<Get>::value && std::is_same<Op, Sum<typename Op::value_t>>::value)
    return fold_contiguous_sum<Op>(get, n);
#endif
#if SMELT_HOST_VECTOR_LANES
  if constexpr (is_contiguous_run<Get>::value && is_extreme_op<Op>::value) {
    // Where the extreme decides the bits (plain_extreme), it is what
    // InnerOrder's result() gives for any length (whole chunks through the
    // cascade, a last partial chunk through its lanes and their tree: every
    // combine a select of the highest class), without that fold (512 x 1024
    // float32 amax over dim -1, one thread: 34.3 -> 26.9 us, PyTorch 25.9;
    // softmax of 4096 rows of 64 floats: 239 -> 166 us, PyTorch 179). Rows
    // of whole plain_extreme steps.
    typename Op::value_t m;
    if (n > 0 && n % plain_extreme_step<typename Op::value_t>() == 0 &&
        plain_extreme<Op>(get.p, n, m))
      return m;
  }
#endif
  if constexpr (is_welford<Op>::value) {
    // A row shorter than a chunk whose lanes all take one count: InnerOrder's
    // one partial, combine(init(), lanes_tree of fold_lanes' lanes), taken
    // from welford_lanes and welford_tree directly, without InnerOrder's
    // cascade or the lanes' round trip through an array of accumulators
    // (layer_norm over 4096 rows of 64 floats, one thread of a 2-core
    // AVX-512 Xeon: 249 -> 205 us; PyTorch 154).
    if (n >= 2 * kLanes && n < chunk_size<Op>() && n % kLanes == 0) {
      typename Op::value_t mean[1][kLanes], m2[1][kLanes];
      welford_lanes<Op, 1, 0>(get, 0, n / kLanes, mean, m2);
      return Op::combine(Op::init(), welford_tree<Op>(mean[0], m2[0], n / kLanes));
    }
  }
  InnerOrder<Op> order(0);
  order.template run<true>(0, n, get);
  return order.result();
}

/// ColumnOrder over one row: step() each element in sequence, then result().
template <class Op>
struct ColumnOrder {
  using acc_t = typename Op::acc_t;
  Cascade<Op> cas;
  acc_t part = Op::init();
  int64_t rows = 0;
  int64_t index = 0;
  ColumnOrder() = default;
  SMELT_HD explicit ColumnOrder(int64_t first) : index(first) {}
  SMELT_HD void step(typename Op::value_t x) {
    part = step_at<Op>(part, x, index++);
    if (++rows == kColumnChunk) push();
  }
  /// Adds the partial to the cascade (every kColumnChunk elements).
  SMELT_HD void push() {
    cas.add(part);
    part = Op::init();
    rows = 0;
  }
  /// Steps the elements [r0, r1) (the same call as InnerOrder's; runs do not
  /// matter here).
  template <bool kContiguous, class Get>
  SMELT_HD void stretch(int64_t r0, int64_t r1, int64_t run, const Get& get) {
    (void)run;
    for (int64_t r = r0; r < r1; ++r) step(get(r));
  }
  SMELT_HD acc_t result() const { return cas.result_after(part); }
};

/// ColumnOrder over L rows side by side (generated column reductions: lane q
/// is one output of a block of neighbouring outputs). For each element in
/// sequence: step(q, x) on every lane, then next(); result(q) equals
/// ColumnOrder's result of lane q's elements (the same steps, the same
/// partials, the same cascade). The partials are an array over the lanes, so
/// a loop stepping every lane vectorizes. Not for indexed ops.
template <class Op, int64_t L>
struct ColumnLanes {
  using acc_t = typename Op::acc_t;
  acc_t part[L];
  Cascade<Op> cas[L];
  int64_t rows = 0;
  SMELT_HD ColumnLanes() {
    for (int64_t q = 0; q < L; ++q) part[q] = Op::init();
  }
  SMELT_HD void step(int64_t q, typename Op::value_t x) { part[q] = Op::step(part[q], x); }
  /// Ends one element of every lane (each partial into its cascade every
  /// kColumnChunk elements, as ColumnOrder::push).
  SMELT_HD void next() {
    if (++rows < kColumnChunk) return;
    for (int64_t q = 0; q < L; ++q) {
      cas[q].add(part[q]);
      part[q] = Op::init();
    }
    rows = 0;
  }
  SMELT_HD acc_t result(int64_t q) const { return cas[q].result_after(part[q]); }
};

// ---- accumulate types ---------------------------------------------------------

/// The accumulate type of sums/products over elements of type T: float for
/// Half / BFloat16 / float, double for double, int64_t for integers and bool.
template <class T>
struct acc_type {
  using type = typename std::conditional<std::is_floating_point<T>::value, T, int64_t>::type;
};
template <>
struct acc_type<Half> {
  using type = float;
};
template <>
struct acc_type<BFloat16> {
  using type = float;
};

/// The type max/min compare in: T itself (exact), float for Half / BFloat16.
template <class T>
struct compare_type {
  using type = T;
};
template <>
struct compare_type<Half> {
  using type = float;
};
template <>
struct compare_type<BFloat16> {
  using type = float;
};

/// Which accumulate-type rule an accumulator follows (the op table maps its
/// Accumulator onto one of these).
enum class AccRule {
  Sum,      // Sum, Prod (sum, mean, prod): acc_type of the *result* dtype, the
            // elements converted (rounded) to the result dtype first
  Compare,  // Max, Min, ArgMax, ArgMin: compare_type of the input dtype
  Welford,  // var, std, var_mean: double (PyTorch's CPU kernel)
  Bool,     // any, all: truthiness
  Scan,     // cumsum: PyTorch's CPU acc_type (at::acc_type<T, /*is_cuda=*/false>) of the
            // result dtype, the elements converted to the result dtype first: as Sum,
            // but float accumulates in double
};

/// The accumulate type of rule R over elements of type T (for AccRule::Sum, T
/// is the result dtype). The one definition both eager kernels and generated
/// code take their accumulate type from.
template <AccRule R, class T>
struct accumulate {
  using type = typename acc_type<T>::type;
};
template <class T>
struct accumulate<AccRule::Compare, T> {
  using type = typename compare_type<T>::type;
};
template <class T>
struct accumulate<AccRule::Welford, T> {
  using type = double;
};
template <class T>
struct accumulate<AccRule::Bool, T> {
  using type = bool;
};
template <class T>
struct accumulate<AccRule::Scan, T> {
  using type = typename std::conditional<std::is_same<T, float>::value, double,
                                         typename acc_type<T>::type>::type;
};
template <AccRule R, class T>
using accumulate_t = typename accumulate<R, T>::type;

/// Converts an element to the accumulate type (Half / BFloat16 through float).
template <class A, class T>
SMELT_HD A to_acc(T x) {
  if constexpr (std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value) {
    return static_cast<A>(static_cast<float>(x));
  } else {
    return static_cast<A>(x);
  }
}

}  // namespace smelt::reduce
