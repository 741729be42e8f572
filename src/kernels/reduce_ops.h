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
// Accumulate type A (PyTorch's rules): float for float16 / bfloat16 / float32
// inputs, double for float64, int64_t for integer and bool sums / products
// (integer overflow wraps around, two's complement, as in PyTorch). The eager
// CPU variance accumulates in double for every floating input, as PyTorch's CPU
// kernel does; cumsum of float32 likewise accumulates in double (acc_type on CPU).
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
  static SMELT_HD A step(A acc, A x) {
    if (is_nan(acc)) return acc;
    return (is_nan(x) || x > acc) ? x : acc;
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
  static SMELT_HD A step(A acc, A x) {
    if (is_nan(acc)) return acc;
    return (is_nan(x) || x < acc) ? x : acc;
  }
  static SMELT_HD A combine(A a, A b) { return step(a, b); }
  static SMELT_HD A finalize(A acc) { return acc; }
};

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
  static SMELT_HD acc_t step(acc_t acc, A x, int64_t i) {
    if (acc.index < 0) return acc_t{x, i};
    if (is_nan(acc.value)) return acc;
    if (is_nan(x) || x > acc.value) return acc_t{x, i};
    return acc;
  }
  static SMELT_HD acc_t combine(acc_t a, acc_t b) {
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
  static SMELT_HD acc_t step(acc_t acc, A x, int64_t i) {
    if (acc.index < 0) return acc_t{x, i};
    if (is_nan(acc.value)) return acc;
    if (is_nan(x) || x < acc.value) return acc_t{x, i};
    return acc;
  }
  static SMELT_HD acc_t combine(acc_t a, acc_t b) {
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
  static SMELT_HD acc_t step(acc_t acc, A x) {
    acc.count += 1;
    A d = x - acc.mean;
    acc.mean += d / static_cast<A>(acc.count);
    acc.m2 += d * (x - acc.mean);
    return acc;
  }
  static SMELT_HD acc_t combine(acc_t a, acc_t b) {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    int64_t n = a.count + b.count;
    A d = b.mean - a.mean;
    A nb_over_n = static_cast<A>(b.count) / static_cast<A>(n);
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
