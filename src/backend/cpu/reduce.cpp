#include "backend/cpu/reduce.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <type_traits>

#include "backend/cpu/loops.h"
#include "kernels/reduce_ops.h"

namespace smelt::cpu {

namespace r = ::smelt::reduce;

namespace {
/// Merges each pair of neighbouring dims over which `strides` is contiguous
/// (stride[d - 1] == stride[d] * size[d]) into one dim, innermost first.
void merge_contiguous_dims(Shape& sizes, Shape& strides) {
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d > 0; --d) {
    if (strides[d - 1] != strides[d] * sizes[d]) continue;
    sizes[d - 1] *= sizes[d];
    strides[d - 1] = strides[d];
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
  }
}
}  // namespace

ReduceGeom make_reduce_geom(const Shape& sizes, const Shape& strides,
                            const std::vector<int64_t>& dims, bool keep_order) {
  const size_t nd = sizes.size();
  std::vector<bool> is_red(nd, false);
  for (int64_t d : dims) is_red[static_cast<size_t>(d)] = true;
  ReduceGeom g;
  for (size_t d = 0; d < nd; ++d) {
    if (is_red[d]) {
      g.n_red *= sizes[d];
      if (sizes[d] != 1) {
        g.red_sizes.push_back(sizes[d]);
        g.red_strides.push_back(strides[d]);
      }
    } else {
      g.n_out *= sizes[d];
      if (sizes[d] != 1) {
        g.out_sizes.push_back(sizes[d]);
        g.out_in_strides.push_back(strides[d]);
      }
    }
  }
  // Kept dims: the output is contiguous over them, so two neighbours merge when
  // the input is contiguous over them too.
  merge_contiguous_dims(g.out_sizes, g.out_in_strides);
  g.out_out_strides.assign(g.out_sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(g.out_sizes.size()) - 2; d >= 0; --d)
    g.out_out_strides[d] = g.out_out_strides[d + 1] * g.out_sizes[d + 1];
  // Reduced dims: innermost = smallest stride, unless the index order matters.
  if (!keep_order && g.red_sizes.size() > 1) {
    std::vector<size_t> perm(g.red_sizes.size());
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
      return std::llabs(g.red_strides[a]) > std::llabs(g.red_strides[b]);
    });
    Shape s, st;
    for (size_t p : perm) {
      s.push_back(g.red_sizes[p]);
      st.push_back(g.red_strides[p]);
    }
    g.red_sizes = std::move(s);
    g.red_strides = std::move(st);
  }
  merge_contiguous_dims(g.red_sizes, g.red_strides);
  return g;
}

namespace {

/// Reduced rows accumulated by the outer schedule before combining.
constexpr int64_t kRowChunk = 128;
/// Outputs accumulated side by side by the outer schedule (one row of up to
/// kBlock columns per reduced element: long contiguous reads).
constexpr int64_t kBlock = 1024;

template <class Op>
struct is_lane_op : std::false_type {};
template <class A>
struct is_lane_op<r::Sum<A>> : std::true_type {};
template <class A>
struct is_lane_op<r::Prod<A>> : std::true_type {};
template <class A>
struct is_lane_op<r::Max<A>> : std::true_type {};
template <class A>
struct is_lane_op<r::Min<A>> : std::true_type {};
template <class A>
struct is_lane_op<r::Welford<A>> : std::true_type {};

/// A heap array of accumulators (not std::vector: vector<bool> packs bits, so
/// threads writing neighbouring elements would race).
template <class Acc>
struct AccBuf {
  std::unique_ptr<Acc[]> p;
  explicit AccBuf(int64_t n) : p(new Acc[static_cast<size_t>(std::max<int64_t>(n, 1))]) {}
  Acc& operator[](int64_t i) { return p[static_cast<size_t>(i)]; }
  Acc* data() { return p.get(); }
};

/// A 16-ary tree of partial accumulators (sums err like a pairwise sum).
template <class Op>
struct Cascade {
  using Acc = typename Op::acc_t;
  static constexpr int kLevels = 6;
  Acc lv[kLevels];
  int cnt[kLevels];
  Cascade() {
    for (int l = 0; l < kLevels; ++l) {
      lv[l] = Op::init();
      cnt[l] = 0;
    }
  }
  void add(const Acc& a) {
    lv[0] = Op::combine(lv[0], a);
    for (int l = 0; l + 1 < kLevels && ++cnt[l] == 16; ++l) {
      lv[l + 1] = Op::combine(lv[l + 1], lv[l]);
      lv[l] = Op::init();
      cnt[l] = 0;
    }
  }
  Acc result() const {
    Acc acc = lv[0];
    for (int l = 1; l < kLevels; ++l) acc = Op::combine(acc, lv[l]);
    return acc;
  }
};

/// Elements accumulated before a partial goes into the cascade: short for the
/// lane ops (8 lanes x 16 elements, so float sums stay pairwise-accurate),
/// longer for the others.
template <class Op>
constexpr int64_t chunk_size() {
  return is_lane_op<Op>::value ? 128 : 4096;
}

template <class Op, class T>
inline typename Op::acc_t step1(const typename Op::acc_t& acc, T v, int64_t i) {
  using A = typename Op::value_t;
  if constexpr (Op::kIndexed) {
    return Op::step(acc, r::to_acc<A>(v), i);
  } else {
    return Op::step(acc, r::to_acc<A>(v));
  }
}

/// Folds n elements p[0], p[s], ... (linear indices idx0, idx0 + 1, ...).
template <class Op, class T>
inline typename Op::acc_t run(typename Op::acc_t acc, const T* p, int64_t n, int64_t s,
                              int64_t idx0) {
  using A = typename Op::value_t;
  if constexpr (is_lane_op<Op>::value) {
    if (s == 1 && n >= 16) {
      typename Op::acc_t l[8];
      for (int k = 0; k < 8; ++k) l[k] = Op::init();
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) l[k] = Op::step(l[k], r::to_acc<A>(p[i + k]));
      for (; i < n; ++i) l[0] = Op::step(l[0], r::to_acc<A>(p[i]));
      typename Op::acc_t a =
          Op::combine(Op::combine(Op::combine(l[0], l[1]), Op::combine(l[2], l[3])),
                      Op::combine(Op::combine(l[4], l[5]), Op::combine(l[6], l[7])));
      return Op::combine(acc, a);
    }
  }
  for (int64_t i = 0; i < n; ++i) acc = step1<Op>(acc, p[i * s], idx0 + i);
  return acc;
}

/// Multi-index counter over dims [0, nd) of (sizes, strides): offset of the
/// current element, advanced in row-major order.
struct Counter {
  const int64_t* sizes;
  const int64_t* strides;
  int64_t nd;
  int64_t idx[64];
  int64_t off = 0;
  Counter(const Shape& sz, const Shape& st, int64_t n, int64_t linear)
      : sizes(sz.data()), strides(st.data()), nd(n) {
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = linear % sizes[d];
      linear /= sizes[d];
      off += idx[d] * strides[d];
    }
  }
  void next() {
    for (int64_t d = nd - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < sizes[d]) return;
      off -= strides[d] * sizes[d];
      idx[d] = 0;
    }
  }
};

/// Accumulates the reduced elements [r0, r1) (linear reduced index) of the
/// output whose first input element is `base`.
template <class Op, class T>
typename Op::acc_t accumulate_range(const T* base, const ReduceGeom& g, int64_t r0, int64_t r1) {
  using Acc = typename Op::acc_t;
  constexpr int64_t kChunk = chunk_size<Op>();
  const int64_t nd = static_cast<int64_t>(g.red_sizes.size());
  if (r0 >= r1) return Op::init();
  if (nd == 0) return step1<Op>(Op::init(), base[0], 0);
  const int64_t n_in = g.red_sizes[nd - 1], s_in = g.red_strides[nd - 1];
  Counter c(g.red_sizes, g.red_strides, nd - 1, r0 / n_in);
  int64_t i_in = r0 % n_in;
  Cascade<Op> cas;
  bool cascaded = false;
  Acc part = Op::init();
  int64_t in_part = 0;
  int64_t rr = r0;
  while (rr < r1) {
    int64_t len = std::min(n_in - i_in, r1 - rr);
    const T* p = base + c.off + i_in * s_in;
    while (len > 0) {
      int64_t take = std::min(len, kChunk - in_part);
      part = run<Op>(part, p, take, s_in, rr);
      p += take * s_in;
      rr += take;
      len -= take;
      in_part += take;
      if (in_part == kChunk) {
        cas.add(part);
        cascaded = true;
        part = Op::init();
        in_part = 0;
      }
    }
    i_in = 0;
    c.next();
  }
  if (!cascaded) return part;
  cas.add(part);
  return cas.result();
}

/// Outer schedule: outputs j0 .. j0 + jn along kept dim v (input stride sv)
/// accumulated side by side over reduced elements [r0, r1); results in `res`.
/// Every column is added to its cascade at the same time, so the cascade
/// levels are arrays over the columns sharing one set of counters.
template <class Op, class T>
void accumulate_block(const T* base, const ReduceGeom& g, int64_t sv, int64_t jn, int64_t r0,
                      int64_t r1, typename Op::acc_t* res) {
  using Acc = typename Op::acc_t;
  using A = typename Op::value_t;
  constexpr int kLevels = 6;
  AccBuf<Acc> buf((kLevels + 1) * jn);
  for (int64_t j = 0; j < (kLevels + 1) * jn; ++j) buf[j] = Op::init();
  Acc* __restrict part = buf.data();
  auto level = [&](int l) { return buf.data() + (l + 1) * jn; };
  int cnt[kLevels] = {};
  auto push = [&] {
    Acc* __restrict l0 = level(0);
    for (int64_t j = 0; j < jn; ++j) {
      l0[j] = Op::combine(l0[j], part[j]);
      part[j] = Op::init();
    }
    for (int l = 0; l + 1 < kLevels && ++cnt[l] == 16; ++l) {
      Acc* __restrict a = level(l);
      Acc* __restrict b = level(l + 1);
      for (int64_t j = 0; j < jn; ++j) {
        b[j] = Op::combine(b[j], a[j]);
        a[j] = Op::init();
      }
      cnt[l] = 0;
    }
  };
  const int64_t nd = static_cast<int64_t>(g.red_sizes.size());
  Counter c(g.red_sizes, g.red_strides, nd, r0);
  int64_t rows = 0;
  for (int64_t rr = r0; rr < r1; ++rr) {
    const T* __restrict p = base + c.off;
    if constexpr (Op::kIndexed) {
      for (int64_t j = 0; j < jn; ++j) part[j] = Op::step(part[j], r::to_acc<A>(p[j * sv]), rr);
    } else {
      if (sv == 1) {
        for (int64_t j = 0; j < jn; ++j) part[j] = Op::step(part[j], r::to_acc<A>(p[j]));
      } else {
        for (int64_t j = 0; j < jn; ++j) part[j] = Op::step(part[j], r::to_acc<A>(p[j * sv]));
      }
    }
    c.next();
    if (++rows == kRowChunk) {
      push();
      rows = 0;
    }
  }
  for (int64_t j = 0; j < jn; ++j) {
    Acc acc = part[j];
    for (int l = 0; l < kLevels; ++l) acc = Op::combine(acc, level(l)[j]);
    res[j] = acc;
  }
}

/// Input offset of output `o` (row-major over the kept dims).
inline int64_t out_input_offset(const ReduceGeom& g, int64_t o) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(g.out_sizes.size()) - 1; d >= 0; --d) {
    off += (o % g.out_sizes[d]) * g.out_in_strides[d];
    o /= g.out_sizes[d];
  }
  return off;
}

/// The generic reduction: calls emit(o, acc) once for every output element o
/// (row-major linear index into the contiguous output).
template <class Op, class T, class Emit>
void reduce_loop(const Tensor& x, const std::vector<int64_t>& dims, const Emit& emit) {
  using Acc = typename Op::acc_t;
  const ReduceGeom g = make_reduce_geom(x.sizes(), x.strides(), dims, Op::kIndexed);
  SMELT_INTERNAL_ASSERT(g.red_sizes.size() < 64 && g.out_sizes.size() < 64,
                        "reduction: too many dims");
  if (g.n_out == 0) return;
  const T* base = static_cast<const T*>(x.data_ptr());
  const int64_t nthreads = omp_get_max_threads();
  const bool parallel = g.n_out * std::max<int64_t>(g.n_red, 1) >= kParallelGrain && nthreads > 1;
  if (g.n_red == 0) {
    for (int64_t o = 0; o < g.n_out; ++o) emit(o, Op::init());
    return;
  }

  // Outer schedule when a kept dim is innermost in memory.
  int64_t v = -1;
  int64_t min_red = INT64_MAX;
  for (int64_t s : g.red_strides) min_red = std::min<int64_t>(min_red, std::llabs(s));
  if (!g.red_sizes.empty()) {
    for (size_t d = 0; d < g.out_sizes.size(); ++d) {
      int64_t s = std::llabs(g.out_in_strides[d]);
      if (s < min_red && (v < 0 || s < std::llabs(g.out_in_strides[v])))
        v = static_cast<int64_t>(d);
    }
  }

  if (v >= 0) {
    const int64_t V = g.out_sizes[v], sv = g.out_in_strides[v], ov = g.out_out_strides[v];
    const int64_t nblk = (V + kBlock - 1) / kBlock;
    const int64_t n_rows = g.n_out / V;
    const int64_t tasks = n_rows * nblk;
    // Row r of the kept dims other than v: input / output offsets.
    Shape rs, ris, ros;
    for (size_t d = 0; d < g.out_sizes.size(); ++d) {
      if (static_cast<int64_t>(d) == v) continue;
      rs.push_back(g.out_sizes[d]);
      ris.push_back(g.out_in_strides[d]);
      ros.push_back(g.out_out_strides[d]);
    }
    auto row_offsets = [&](int64_t row, int64_t& in_off, int64_t& out_off) {
      in_off = 0;
      out_off = 0;
      for (int64_t d = static_cast<int64_t>(rs.size()) - 1; d >= 0; --d) {
        int64_t i = row % rs[d];
        row /= rs[d];
        in_off += i * ris[d];
        out_off += i * ros[d];
      }
    };
    int64_t P = 1;  // splits of the reduced range
    if (parallel && tasks < nthreads)
      P = std::max<int64_t>(1, std::min<int64_t>((nthreads + tasks - 1) / tasks, g.n_red / 64));
    const int64_t rlen = (g.n_red + P - 1) / P;
    AccBuf<Acc> partial(P > 1 ? g.n_out * P : 0);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks * P; ++t) {
      const int64_t task = t / P, cidx = t % P;
      const int64_t row = task / nblk, blk = task % nblk;
      int64_t in_off, out_off;
      row_offsets(row, in_off, out_off);
      const int64_t j0 = blk * kBlock, jn = std::min(kBlock, V - j0);
      AccBuf<Acc> res(jn);
      const int64_t r0 = cidx * rlen, r1 = std::min(g.n_red, r0 + rlen);
      accumulate_block<Op>(base + in_off + j0 * sv, g, sv, jn, r0, r1, res.data());
      for (int64_t j = 0; j < jn; ++j) {
        const int64_t o = out_off + (j0 + j) * ov;
        if (P == 1) {
          emit(o, res[j]);
        } else {
          partial[o * P + cidx] = res[j];
        }
      }
    }
    if (P > 1) {
      for (int64_t o = 0; o < g.n_out; ++o) {
        Acc acc = partial[o * P];
        for (int64_t c = 1; c < P; ++c) acc = Op::combine(acc, partial[o * P + c]);
        emit(o, acc);
      }
    }
    return;
  }

  // Inner schedule.
  if (parallel && g.n_out < nthreads) {
    // Few outputs, long reductions: per-thread partials merged with combine().
    const int64_t P =
        std::max<int64_t>(1, std::min<int64_t>((nthreads + g.n_out - 1) / g.n_out, g.n_red / 1024));
    const int64_t rlen = (g.n_red + P - 1) / P;
    AccBuf<Acc> partial(g.n_out * P);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < g.n_out * P; ++t) {
      const int64_t o = t / P, cidx = t % P;
      const int64_t r0 = cidx * rlen, r1 = std::min(g.n_red, r0 + rlen);
      partial[t] = accumulate_range<Op>(base + out_input_offset(g, o), g, r0, r1);
    }
    for (int64_t o = 0; o < g.n_out; ++o) {
      Acc acc = partial[o * P];
      for (int64_t c = 1; c < P; ++c) acc = Op::combine(acc, partial[o * P + c]);
      emit(o, acc);
    }
    return;
  }
#pragma omp parallel if (parallel)
  {
    const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t per = (g.n_out + nt - 1) / nt;
    const int64_t o0 = tid * per, o1 = std::min(g.n_out, o0 + per);
    if (o0 < o1) {
      Counter c(g.out_sizes, g.out_in_strides, static_cast<int64_t>(g.out_sizes.size()), o0);
      for (int64_t o = o0; o < o1; ++o) {
        emit(o, accumulate_range<Op>(base + c.off, g, 0, g.n_red));
        c.next();
      }
    }
  }
}

/// Converts an accumulator value to the stored output type.
template <class D, class A>
inline D from_acc(A a) {
  if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(a));
  } else if constexpr (std::is_same_v<D, bool>) {
    return a != A(0);
  } else {
    return static_cast<D>(a);
  }
}

template <class T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// Sum-like (Sum, Prod) of T accumulated in acc_type<T>, stored as T or int64.
template <template <class> class OpT>
void sumlike(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
             const char* name) {
  SMELT_DISPATCH_ALL(x.dtype(), name, [&] {
    using A = typename r::acc_type<T>::type;
    using Op = OpT<A>;
    if (out.dtype() == x.dtype()) {
      T* o = static_cast<T*>(out.data_ptr());
      reduce_loop<Op, T>(x, dims, [&](int64_t i, A acc) { o[i] = from_acc<T>(acc); });
    } else {
      SMELT_INTERNAL_ASSERT(out.dtype() == DType::Int64 && std::is_integral_v<T>,
                            "{}: unexpected dtypes {} -> {}", name, dtype_name(x.dtype()),
                            dtype_name(out.dtype()));
      int64_t* o = static_cast<int64_t*>(out.data_ptr());
      reduce_loop<Op, T>(x, dims, [&](int64_t i, A acc) { o[i] = from_acc<int64_t>(acc); });
    }
  });
}

}  // namespace

void sum_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  sumlike<r::Sum>(x, dims, out, "sum");
}

void prod_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  sumlike<r::Prod>(x, dims, out, "prod");
}

void mean_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  SMELT_INTERNAL_ASSERT(is_floating(x.dtype()) && out.dtype() == x.dtype(),
                        "mean: unexpected dtypes");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.sizes()[static_cast<size_t>(d)];
  SMELT_DISPATCH_ALL(x.dtype(), "mean", [&] {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using A = typename r::acc_type<T>::type;
      T* o = static_cast<T*>(out.data_ptr());
      reduce_loop<r::Sum<A>, T>(
          x, dims, [&](int64_t i, A acc) { o[i] = from_acc<T>(r::mean_finalize(acc, count)); });
    }
  });
}

void minmax_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                   bool is_max) {
  SMELT_DISPATCH_ALL(x.dtype(), is_max ? "amax" : "amin", [&] {
    using A = typename r::compare_type<T>::type;
    T* o = static_cast<T*>(out.data_ptr());
    auto emit = [&](int64_t i, A acc) { o[i] = from_acc<T>(acc); };
    if (is_max) {
      reduce_loop<r::Max<A>, T>(x, dims, emit);
    } else {
      reduce_loop<r::Min<A>, T>(x, dims, emit);
    }
  });
}

void arg_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                const Tensor& indices, bool is_max) {
  SMELT_DISPATCH_ALL(x.dtype(), is_max ? "argmax" : "argmin", [&] {
    using A = typename r::compare_type<T>::type;
    T* vo = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
    int64_t* io = static_cast<int64_t*>(indices.data_ptr());
    auto emit = [&](int64_t i, const r::ArgAcc<A>& acc) {
      if (vo) vo[i] = from_acc<T>(acc.value);
      io[i] = acc.index;
    };
    if (is_max) {
      reduce_loop<r::ArgMax<A>, T>(x, dims, emit);
    } else {
      reduce_loop<r::ArgMin<A>, T>(x, dims, emit);
    }
  });
}

void var_kernel(const Tensor& x, const std::vector<int64_t>& dims, double correction,
                bool take_sqrt, const Tensor& var, const Tensor& mean) {
  SMELT_DISPATCH_ALL(x.dtype(), "var", [&] {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using W = r::Welford<double>;
      T* vo = static_cast<T*>(var.data_ptr());
      T* mo = mean.defined() ? static_cast<T*>(mean.data_ptr()) : nullptr;
      reduce_loop<W, T>(x, dims, [&](int64_t i, const W::acc_t& acc) {
        double v = W::var(acc, correction);
        vo[i] = from_acc<T>(take_sqrt ? std::sqrt(v) : v);
        if (mo) mo[i] = from_acc<T>(W::mean(acc));
      });
    } else {
      SMELT_INTERNAL_ASSERT(false, "var: floating input expected");
    }
  });
}

void anyall_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                   bool is_any) {
  SMELT_INTERNAL_ASSERT(out.dtype() == DType::Bool || out.dtype() == DType::UInt8,
                        "any/all: unexpected output dtype");
  uint8_t* o = static_cast<uint8_t*>(out.data_ptr());
  auto emit = [&](int64_t i, bool acc) { o[i] = acc ? 1 : 0; };
  SMELT_DISPATCH_ALL(x.dtype(), is_any ? "any" : "all", [&] {
    if (is_any) {
      reduce_loop<r::Any, T>(x, dims, emit);
    } else {
      reduce_loop<r::All, T>(x, dims, emit);
    }
  });
}

namespace {
/// cumsum's accumulate type: PyTorch's CPU acc_type, i.e. reduce_ops.h's
/// acc_type except that float32 accumulates in double.
template <class D>
using cum_acc_t =
    std::conditional_t<std::is_same_v<D, float>, double, typename r::acc_type<D>::type>;

template <class T, class D>
void cumsum_typed(const Tensor& x, int64_t dim, const Tensor& out) {
  using A = cum_acc_t<D>;
  const Shape& sizes = x.sizes();
  const int64_t nd = x.dim();
  const int64_t numel = x.numel();
  if (numel == 0) return;
  if (nd == 0) {
    static_cast<D*>(out.data_ptr())[0] =
        from_acc<D>(r::to_acc<A>(static_cast<const T*>(x.data_ptr())[0]));
    return;
  }
  const int64_t L = sizes[static_cast<size_t>(dim)];
  const int64_t sx = x.strides()[static_cast<size_t>(dim)];
  const Shape ostr = detail::contiguous_strides(sizes);
  const int64_t so = ostr[static_cast<size_t>(dim)];
  Shape ls, lis, los;  // the other dims
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    ls.push_back(sizes[static_cast<size_t>(d)]);
    lis.push_back(x.strides()[static_cast<size_t>(d)]);
    los.push_back(ostr[static_cast<size_t>(d)]);
  }
  const int64_t lines = numel / L;
  const T* xp = static_cast<const T*>(x.data_ptr());
  D* op = static_cast<D*>(out.data_ptr());
  const bool parallel = numel >= kParallelGrain && omp_get_max_threads() > 1 && lines > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t line = 0; line < lines; ++line) {
    int64_t rem = line, io = 0, oo = 0;
    for (int64_t d = static_cast<int64_t>(ls.size()) - 1; d >= 0; --d) {
      int64_t i = rem % ls[d];
      rem /= ls[d];
      io += i * lis[d];
      oo += i * los[d];
    }
    A acc = A(0);
    for (int64_t k = 0; k < L; ++k) {
      acc = r::wrap_add(acc, r::to_acc<A>(xp[io + k * sx]));
      op[oo + k * so] = from_acc<D>(acc);
    }
  }
}
}  // namespace

void cumsum_kernel(const Tensor& x, int64_t dim, const Tensor& out) {
  SMELT_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    if (out.dtype() == x.dtype()) {
      cumsum_typed<T, T>(x, dim, out);
    } else {
      SMELT_INTERNAL_ASSERT(out.dtype() == DType::Int64 && std::is_integral_v<T>,
                            "cumsum: unexpected dtypes {} -> {}", dtype_name(x.dtype()),
                            dtype_name(out.dtype()));
      if constexpr (std::is_integral_v<T>) cumsum_typed<T, int64_t>(x, dim, out);
    }
  });
}

}  // namespace smelt::cpu
