// BLAS bridge: oneDNN matmul primitives (cached by shape) for float32
// products, with or without a fused epilogue (cpu_gemm_library(): plain ones
// through cblas on request), cblas (OpenBLAS) for float64 and for layouts
// oneDNN refuses, float32 compute for float16/bfloat16, and a blocked loop for
// integers.
#include "backend/cpu/blas.h"
#include "kernels/gemm_epilogue.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "backend/cpu/loops.h"
#include "smelt/error.h"

namespace smelt::cpu {

namespace {

// ---------------------------------------------------------------- helpers ---

template <class T>
const T* elem(const MatrixRef& r, int64_t b) {
  return static_cast<const T*>(r.data) + b * r.batch_stride;
}

/// Copies a rows x cols strided matrix into a dense row-major buffer, converting.
template <class Src, class Dst>
void pack(const Src* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, Dst* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[i * cols + j] = static_cast<Dst>(static_cast<float>(p[i * rs + j * cs]));
}
template <class T>
void pack_same(const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, T* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = p[i * rs + j * cs];
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/// Can cblas read this rows x cols operand in place? Gives the transpose flag and
/// leading dimension when it can.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, CBLAS_TRANSPOSE* trans,
                 int64_t* ld) {
  // Row-major: unit column stride, row stride >= cols.
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols))) {
    *trans = CblasNoTrans;
    *ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    return fits_int(*ld);
  }
  // Column-major storage (a transposed row-major matrix).
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows))) {
    *trans = CblasTrans;
    *ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    return fits_int(*ld);
  }
  return false;
}

void xgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, double beta, float* c,
           int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              static_cast<float>(alpha), a, static_cast<int>(lda), b, static_cast<int>(ldb),
              static_cast<float>(beta), c, static_cast<int>(ldc));
}
void xgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha,
           const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
           int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

/// One float/double product C = alpha A B + beta C through cblas, packing any
/// operand whose layout cblas cannot take. m, n, k > 0.
template <class T>
void blas_one(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b,
              int64_t brs, int64_t bcs, T* c, int64_t crs, int64_t ccs, double alpha, double beta) {
  SMELT_CHECK(fits_int(m) && fits_int(n) && fits_int(k),
              "matmul: matrix dims {}x{} @ {}x{} exceed the BLAS 32-bit size limit", m, k, k, n);
  // C must be row-major; a column-major C is computed as C^T = B^T A^T.
  bool c_row = (n == 1 || ccs == 1) && (m == 1 || crs >= std::max<int64_t>(1, n)) &&
               fits_int(m == 1 ? n : crs);
  bool c_col = !c_row && (m == 1 || crs == 1) && (n == 1 || ccs >= std::max<int64_t>(1, m)) &&
               fits_int(n == 1 ? m : ccs);
  if (c_col) {
    blas_one<T>(n, m, k, b, bcs, brs, a, acs, ars, c, ccs, crs, alpha, beta);
    return;
  }
  std::vector<T> a_buf, b_buf, c_buf;
  CBLAS_TRANSPOSE ta, tb;
  int64_t lda, ldb;
  if (!blas_layout(m, k, ars, acs, &ta, &lda)) {
    a_buf.resize(m * k);
    pack_same(a, m, k, ars, acs, a_buf.data());
    a = a_buf.data();
    ta = CblasNoTrans;
    lda = k;
  }
  if (!blas_layout(k, n, brs, bcs, &tb, &ldb)) {
    b_buf.resize(k * n);
    pack_same(b, k, n, brs, bcs, b_buf.data());
    b = b_buf.data();
    tb = CblasNoTrans;
    ldb = n;
  }
  if (c_row) {
    xgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, m == 1 ? n : crs);
    return;
  }
  c_buf.assign(m * n, T(0));
  if (beta != 0) pack_same(static_cast<const T*>(c), m, n, crs, ccs, c_buf.data());
  xgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c_buf.data(), n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * crs + j * ccs] = c_buf[i * n + j];
}

/// C = beta * C (k == 0: the product is an empty sum). beta == 0 writes zeros.
template <class T>
void scale_c(int64_t batch, int64_t m, int64_t n, T* c, int64_t cbs, int64_t crs, int64_t ccs,
             double beta) {
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T& v = c[bi * cbs + i * crs + j * ccs];
        if (beta == 0) {
          v = T(0);
        } else if constexpr (std::is_integral_v<T>) {
          v = static_cast<T>(static_cast<uint64_t>(v) * static_cast<uint64_t>(beta));
        } else {
          v = static_cast<T>(static_cast<double>(static_cast<float>(v)) * beta);
        }
      }
}

template <class T>
void gemm_float(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
                const MatrixRef& b, T* c, int64_t cbs, int64_t crs, int64_t ccs, double alpha,
                double beta) {
  for (int64_t bi = 0; bi < batch; ++bi)
    blas_one<T>(m, n, k, elem<T>(a, bi), a.row_stride, a.col_stride, elem<T>(b, bi), b.row_stride,
                b.col_stride, c + bi * cbs, crs, ccs, alpha, beta);
}

bool dnnl_fused_f32(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
                    const MatrixRef& b, float* c, int64_t cbs, int64_t crs, int64_t ccs,
                    const GemmEpilogue& e, EpilogueActivation act,
                    const OperandIdentity& b_id = {});
bool plain_f32_through_dnnl(int64_t batch);

/// C = alpha A B + beta C for dense row-major float32 scratch (m x k, k x n,
/// m x n; float16 / bfloat16 operands converted): oneDNN, as every other
/// float32 product, when cpu_gemm_library() says so and alpha is 1, beta 0;
/// cblas otherwise.
void gemm_f32_dense(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c,
                    double alpha, double beta) {
  if (alpha == 1.0 && beta == 0.0 && plain_f32_through_dnnl(1) &&
      dnnl_fused_f32(1, m, n, k, MatrixRef{a, 0, k, 1}, MatrixRef{b, 0, n, 1}, c, 0, n, 1,
                     GemmEpilogue{}, EpilogueActivation::None))
    return;
  blas_one<float>(m, n, k, a, k, 1, b, n, 1, c, n, 1, alpha, beta);
}

/// float16 / bfloat16: convert to float32, multiply, round once on store.
template <class T>
void gemm_half(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
               const MatrixRef& b, T* c, int64_t cbs, int64_t crs, int64_t ccs, double alpha,
               double beta) {
  std::vector<float> af(m * k), bf(k * n), cf(m * n);
  for (int64_t bi = 0; bi < batch; ++bi) {
    if (bi == 0 || a.batch_stride != 0)
      pack(elem<T>(a, bi), m, k, a.row_stride, a.col_stride, af.data());
    if (bi == 0 || b.batch_stride != 0)
      pack(elem<T>(b, bi), k, n, b.row_stride, b.col_stride, bf.data());
    T* cb = c + bi * cbs;
    if (beta != 0) pack(cb, m, n, crs, ccs, cf.data());
    gemm_f32_dense(m, n, k, af.data(), bf.data(), cf.data(), alpha, beta);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) cb[i * crs + j * ccs] = T(cf[i * n + j]);
  }
}

/// Integers: products and sums wrap in the element type (computed modulo 2^64
/// in uint64, which truncates to the same value), cache-blocked over k.
template <class T>
void gemm_int(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
              const MatrixRef& b, T* c, int64_t cbs, int64_t crs, int64_t ccs, double alpha,
              double beta) {
  const uint64_t ualpha = static_cast<uint64_t>(static_cast<int64_t>(alpha));
  const uint64_t ubeta = static_cast<uint64_t>(static_cast<int64_t>(beta));
  const int64_t rows = batch * m;
  // The grain: 8 * kParallelGrain multiply-adds.
  parallel_for(0, rows, grain_for(std::max<int64_t>(1, n * k / 8)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / m, i = r % m;
      std::vector<uint64_t> acc(n, 0);
      const T* ap = elem<T>(a, bi) + i * a.row_stride;
      const T* bp = elem<T>(b, bi);
      constexpr int64_t kBlock = 256;
      for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
        const int64_t p1 = std::min(k, p0 + kBlock);
        for (int64_t p = p0; p < p1; ++p) {
          const uint64_t av = static_cast<uint64_t>(static_cast<int64_t>(ap[p * a.col_stride]));
          const T* brow = bp + p * b.row_stride;
          if (b.col_stride == 1) {
            for (int64_t j = 0; j < n; ++j)
              acc[j] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j]));
          } else {
            for (int64_t j = 0; j < n; ++j)
              acc[j] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j * b.col_stride]));
          }
        }
      }
      T* cp = c + bi * cbs + i * crs;
      for (int64_t j = 0; j < n; ++j) {
        uint64_t v = acc[j] * ualpha;
        if (beta != 0) v += ubeta * static_cast<uint64_t>(static_cast<int64_t>(cp[j * ccs]));
        cp[j * ccs] = static_cast<T>(v);
      }
    }
  });
}

// ------------------------------------------------------------- epilogue ----

/// C = act(C + bias) + residual, computing in Acc (float for half types).
template <class T, class Acc>
void epilogue_loop(int64_t batch, int64_t m, int64_t n, T* c, int64_t cbs, int64_t crs, int64_t ccs,
                   const GemmEpilogue& e, EpilogueActivation act) {
  const T* bias = static_cast<const T*>(e.bias);
  const T* res = static_cast<const T*>(e.residual);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T& out = c[bi * cbs + i * crs + j * ccs];
        const T* r = res ? res + bi * e.residual_batch_stride + i * e.residual_row_stride +
                               j * e.residual_col_stride
                         : nullptr;
        out = static_cast<T>(
            apply_epilogue<Acc>(static_cast<Acc>(out), bias ? bias + j : nullptr, act, r));
      }
}

// --------------------------------------------------------------- oneDNN ----

struct DnnlKey {
  int64_t ba, bb, batch, m, n, k;
  int64_t as[3], bs[3], cs[3];
  bool bias;
  EpilogueActivation act;
  bool residual;
  int64_t rd[3], rs[3];
  bool packed_b;  // B in the layout oneDNN prefers (format_tag::any), not as strided
  auto tie() const {
    return std::tie(ba, bb, batch, m, n, k, as[0], as[1], as[2], bs[0], bs[1], bs[2], cs[0], cs[1],
                    cs[2], bias, act, residual, rd[0], rd[1], rd[2], rs[0], rs[1], rs[2], packed_b);
  }
  bool operator<(const DnnlKey& o) const { return tie() < o.tie(); }
};

/// A cached primitive and the weights layout it reads.
struct DnnlPrimitive {
  std::shared_ptr<dnnl::matmul> prim;
  dnnl::memory::desc weights;
};

/// One weight matrix repacked into a primitive's weights layout (gemm_fused's
/// b_identity): B's address and strided layout, the storage and version it
/// was copied from, and the copy.
struct PackedWeight {
  uint64_t serial = 0;
  uint32_t version = 0;
  const void* data = nullptr;
  dnnl::memory::desc plain, packed;
  dnnl::memory mem;
  size_t bytes = 0;
};

struct DnnlState {
  std::mutex mu;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<DnnlKey, DnnlPrimitive> cache;
  std::map<DnnlKey, bool> refused;  // layouts oneDNN has no implementation for
  std::list<PackedWeight> packed;   // most recently used first
  size_t packed_bytes = 0;
  int64_t packs = 0;
};
/// One state per thread: a oneDNN primitive's library-managed scratchpad must
/// not be used by two executions at once, so threads do not share primitives.
DnnlState& dnnl_state() {
  static thread_local DnnlState s;
  return s;
}

/// A memory::desc for a [d0, d1, d2] operand whose size-1 / broadcast dims get a
/// harmless stride; false when a stride is negative.
bool strides_ok(const int64_t* st) { return st[0] >= 0 && st[1] >= 0 && st[2] >= 0; }

/// oneDNN's eltwise post-op (algorithm, alpha) for each epilogue activation; nullopt for None.
std::optional<std::pair<dnnl::algorithm, float>> dnnl_eltwise(EpilogueActivation act) {
  using alg = dnnl::algorithm;
  switch (act) {
    case EpilogueActivation::None:
      return std::nullopt;
    case EpilogueActivation::Relu:
      return std::pair{alg::eltwise_relu, 0.f};
    case EpilogueActivation::GeluErf:
      return std::pair{alg::eltwise_gelu_erf, 0.f};
    case EpilogueActivation::GeluTanh:
      return std::pair{alg::eltwise_gelu_tanh, 0.f};
    case EpilogueActivation::Sigmoid:
      return std::pair{alg::eltwise_logistic, 0.f};
    case EpilogueActivation::Silu:
      return std::pair{alg::eltwise_swish, 1.f};  // x * sigmoid(alpha x), alpha = 1
    case EpilogueActivation::Tanh:
      return std::pair{alg::eltwise_tanh, 0.f};
  }
  return std::nullopt;
}

/// The memory::desc of a [d0, d1, d2] operand of `key` with strides `st`:
/// two-dimensional [d1, d2] for a product whose B is repacked and which has
/// no batch (oneDNN proposes its blocked weights layout, BA16a64b, only for
/// 2-D matmuls), else three-dimensional.
dnnl::memory::desc operand_md(const DnnlKey& key, int64_t d0, int64_t d1, int64_t d2,
                              const int64_t* st) {
  using dt = dnnl::memory::data_type;
  if (key.packed_b && key.batch == 1) return {{d1, d2}, dt::f32, {st[1], st[2]}};
  return {{d0, d1, d2}, dt::f32, {st[0], st[1], st[2]}};
}

/// The cached primitive of `key` (st.mu held), made on first use; nullopt
/// when oneDNN has no implementation for it.
std::optional<DnnlPrimitive> dnnl_primitive(DnnlState& st, const DnnlKey& key,
                                            EpilogueActivation act) {
  using dt = dnnl::memory::data_type;
  using md = dnnl::memory::desc;
  const int64_t m = key.m, n = key.n, k = key.k, batch = key.batch;
  if (st.refused.count(key)) return std::nullopt;
  auto it = st.cache.find(key);
  if (it != st.cache.end()) return it->second;
  DnnlPrimitive prim;
  try {
    const int64_t bias_st[3] = {n, n, 1};
    md src_md = operand_md(key, key.ba, m, k, key.as);
    md wei_md = operand_md(key, key.bb, k, n, key.bs);
    if (key.packed_b)
      wei_md = batch == 1 ? md({k, n}, dt::f32, dnnl::memory::format_tag::any)
                          : md({key.bb, k, n}, dt::f32, dnnl::memory::format_tag::any);
    md dst_md = operand_md(key, batch, m, n, key.cs);
    md bias_md = key.bias ? operand_md(key, 1, 1, n, bias_st) : md();
    dnnl::post_ops ops;
    if (auto eltwise = dnnl_eltwise(act))
      ops.append_eltwise(1.f, eltwise->first, eltwise->second, 0.f);
    if (key.residual)
      ops.append_binary(dnnl::algorithm::binary_add,
                        operand_md(key, key.rd[0], key.rd[1], key.rd[2], key.rs));
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::matmul::desc desc = key.bias ? dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md)
                                       : dnnl::matmul::desc(src_md, wei_md, dst_md);
    dnnl::matmul::primitive_desc pd(desc, attr, st.engine);
    prim.prim = std::make_shared<dnnl::matmul>(pd);
    prim.weights = pd.weights_desc();
  } catch (const dnnl::error&) {
    st.refused[key] = true;
    return std::nullopt;
  }
  if (st.cache.size() >= 512) st.cache.clear();
  st.cache[key] = prim;
  return prim;
}

/// `plain` (B as the caller holds it, identified by `id`) in layout `packed`:
/// the thread's cached copy, repacked when new or when its storage's version
/// moved on; the least recently used copies go past kPackedWeightCacheBytes.
dnnl::memory packed_weight(DnnlState& st, dnnl::stream& stream, const dnnl::memory& plain,
                           const dnnl::memory::desc& packed, const OperandIdentity& id) {
  const void* data = plain.get_data_handle();
  const dnnl::memory::desc plain_md = plain.get_desc();
  auto it = std::find_if(st.packed.begin(), st.packed.end(), [&](const PackedWeight& w) {
    return w.serial == id.serial && w.data == data && w.plain == plain_md && w.packed == packed;
  });
  if (it == st.packed.end()) {
    PackedWeight w;
    w.serial = id.serial;
    w.version = id.version + 1;  // differs: packed below
    w.data = data;
    w.plain = plain_md;
    w.packed = packed;
    w.mem = dnnl::memory(packed, st.engine);
    w.bytes = packed.get_size();
    st.packed_bytes += w.bytes;
    st.packed.push_front(std::move(w));
    it = st.packed.begin();
    while (st.packed_bytes > kPackedWeightCacheBytes && st.packed.size() > 1) {
      st.packed_bytes -= st.packed.back().bytes;
      st.packed.pop_back();
    }
  } else if (it != st.packed.begin()) {
    st.packed.splice(st.packed.begin(), st.packed, it);
  }
  if (it->version != id.version) {
    dnnl::memory src = plain;
    dnnl::reorder(src, it->mem).execute(stream, src, it->mem);
    stream.wait();
    it->version = id.version;
    ++st.packs;
  }
  return it->mem;
}

/// Runs the whole fused product through one oneDNN primitive; false when oneDNN
/// does not take this layout (the caller then falls back).
bool dnnl_fused_f32(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
                    const MatrixRef& b, float* c, int64_t cbs, int64_t crs, int64_t ccs,
                    const GemmEpilogue& e, EpilogueActivation act, const OperandIdentity& b_id) {
  DnnlKey key{};
  key.ba = (a.batch_stride == 0) ? 1 : batch;
  key.bb = (b.batch_stride == 0) ? 1 : batch;
  key.batch = batch;
  key.m = m;
  key.n = n;
  key.k = k;
  auto fix = [](int64_t* st, int64_t d0, int64_t s0, int64_t d1, int64_t s1, int64_t d2,
                int64_t s2) {
    // Strides of size-1 dims do not matter; give them dense values so oneDNN sees a plain layout.
    st[2] = d2 == 1 ? 1 : s2;
    st[1] = d1 == 1 ? d2 * st[2] : s1;
    st[0] = d0 == 1 ? std::max(d1 * st[1], d2 * st[2]) : s0;
    if (d1 == 1 && d2 == 1) st[1] = 1;
    (void)d0;
  };
  fix(key.as, key.ba, a.batch_stride, m, a.row_stride, k, a.col_stride);
  fix(key.bs, key.bb, b.batch_stride, k, b.row_stride, n, b.col_stride);
  fix(key.cs, batch, cbs, m, crs, n, ccs);
  key.bias = e.bias != nullptr;
  key.act = act;
  key.residual = e.residual != nullptr;
  if (key.residual) {
    key.rd[0] = (e.residual_batch_stride == 0) ? 1 : batch;
    key.rd[1] = (e.residual_row_stride == 0) ? 1 : m;
    key.rd[2] = (e.residual_col_stride == 0) ? 1 : n;
    fix(key.rs, key.rd[0], e.residual_batch_stride, key.rd[1], e.residual_row_stride, key.rd[2],
        e.residual_col_stride);
    if (!strides_ok(key.rs)) return false;
  }
  if (!strides_ok(key.as) || !strides_ok(key.bs) || !strides_ok(key.cs)) return false;
  // A stride 0 along a dim of size > 1 within a matrix is a broadcast oneDNN cannot read.
  if ((m > 1 && key.as[1] == 0) || (k > 1 && (key.as[2] == 0 || key.bs[1] == 0)) ||
      (n > 1 && key.bs[2] == 0) || (m > 1 && key.cs[1] == 0) || (n > 1 && key.cs[2] == 0) ||
      (batch > 1 && key.cs[0] == 0))
    return false;

  DnnlState& st = dnnl_state();
  std::lock_guard<std::mutex> lock(st.mu);
  // A known, batch-shared B reads a repacked copy when oneDNN prefers another layout.
  key.packed_b = b_id.known() && key.bb == 1;
  std::optional<DnnlPrimitive> prim = dnnl_primitive(st, key, act);
  if (!prim && key.packed_b) {
    key.packed_b = false;
    prim = dnnl_primitive(st, key, act);
  }
  if (!prim) return false;
  auto mem = [&](const std::vector<int64_t>& dims, const int64_t* strides, const void* p) {
    return dnnl::memory(operand_md(key, dims[0], dims[1], dims[2], strides), st.engine,
                        const_cast<void*>(p));
  };
  dnnl::stream stream(st.engine);
  dnnl::memory weights = mem({key.bb, k, n}, key.bs, b.data);
  if (key.packed_b && prim->weights != weights.get_desc())
    weights = packed_weight(st, stream, weights, prim->weights, b_id);
  std::unordered_map<int, dnnl::memory> args;
  args.emplace(DNNL_ARG_SRC, mem({key.ba, m, k}, key.as, a.data));
  args.emplace(DNNL_ARG_WEIGHTS, weights);
  args.emplace(DNNL_ARG_DST, mem({batch, m, n}, key.cs, c));
  if (key.bias) {
    const int64_t bst[3] = {n, n, 1};
    args.emplace(DNNL_ARG_BIAS, mem({1, 1, n}, bst, e.bias));
  }
  if (key.residual) {
    const int post_index = act == EpilogueActivation::None ? 0 : 1;
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_index) | DNNL_ARG_SRC_1,
                 mem({key.rd[0], key.rd[1], key.rd[2]}, key.rs, e.residual));
  }
  prim->prim->execute(stream, args);
  stream.wait();
  return true;
}

bool overlaps_c(const void* p, const void* c) { return p != nullptr && p == c; }

/// cpu_gemm_library() as an int, -1 until $SMELT_CPU_GEMM is read.
std::atomic<int> g_gemm_library{-1};

/// Whether a float32 product without an epilogue goes to oneDNN.
bool plain_f32_through_dnnl(int64_t batch) {
  return batch > 1 || cpu_gemm_library() == CpuGemmLibrary::OneDnn;
}

void check_dtype(DType dtype, const char* fn) {
  SMELT_CHECK(dtype != DType::Bool,
              "{}: bool matrices are not supported (as in PyTorch); convert the operands to an "
              "integer or floating dtype first",
              fn);
}

}  // namespace

CpuGemmLibrary parse_cpu_gemm_library(const char* value) {
  if (value == nullptr || *value == '\0') return CpuGemmLibrary::OneDnn;
  const std::string v = value;
  if (v == "onednn") return CpuGemmLibrary::OneDnn;
  if (v == "openblas") return CpuGemmLibrary::OpenBlas;
  SMELT_CHECK(false,
              "SMELT_CPU_GEMM={} is not a CPU GEMM library; use onednn (the default) or openblas "
              "(or unset it)",
              v);
  return CpuGemmLibrary::OneDnn;
}

CpuGemmLibrary cpu_gemm_library() {
  int lib = g_gemm_library.load(std::memory_order_relaxed);
  if (lib < 0) {
    lib = static_cast<int>(parse_cpu_gemm_library(std::getenv("SMELT_CPU_GEMM")));
    g_gemm_library.store(lib, std::memory_order_relaxed);
  }
  return static_cast<CpuGemmLibrary>(lib);
}

CpuGemmLibrary set_cpu_gemm_library(CpuGemmLibrary lib) {
  const CpuGemmLibrary before = cpu_gemm_library();
  g_gemm_library.store(static_cast<int>(lib), std::memory_order_relaxed);
  return before;
}

const char* cpu_gemm_library_name(CpuGemmLibrary lib) {
  return lib == CpuGemmLibrary::OpenBlas ? "openblas" : "onednn";
}

void gemm_strided_batched(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
                          const MatrixRef& a, const MatrixRef& b, void* c, int64_t cbs, int64_t crs,
                          int64_t ccs, double alpha, double beta) {
  check_dtype(dtype, "matmul");
  if (batch <= 0 || m <= 0 || n <= 0) return;
  // Batched float32 products (attention's) run as one oneDNN primitive,
  // threaded over the batch: one cblas call per matrix pays OpenBLAS's thread
  // start-up for every small matrix.
  if (dtype == DType::Float32 && batch > 1 && k > 0 && alpha == 1.0 && beta == 0.0 &&
      dnnl_fused_f32(batch, m, n, k, a, b, static_cast<float*>(c), cbs, crs, ccs, GemmEpilogue{},
                     EpilogueActivation::None))
    return;
  SMELT_DISPATCH_ALL(dtype, "matmul", [&] {
    if constexpr (!std::is_same_v<T, bool>) {
      T* cp = static_cast<T*>(c);
      if (k <= 0) {
        scale_c<T>(batch, m, n, cp, cbs, crs, ccs, beta);
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        gemm_float<T>(batch, m, n, k, a, b, cp, cbs, crs, ccs, alpha, beta);
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        gemm_half<T>(batch, m, n, k, a, b, cp, cbs, crs, ccs, alpha, beta);
      } else {
        gemm_int<T>(batch, m, n, k, a, b, cp, cbs, crs, ccs, alpha, beta);
      }
    }
  });
}

PackedWeightStats packed_weight_stats() {
  DnnlState& st = dnnl_state();
  std::lock_guard<std::mutex> lock(st.mu);
  return {st.packed.size(), st.packed_bytes, st.packs};
}

void clear_packed_weights() {
  DnnlState& st = dnnl_state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.packed.clear();
  st.packed_bytes = 0;
}

bool gemm_epilogue_activation_supported(const std::string& act) {
  return parse_epilogue_activation(act).has_value();
}

void gemm_fused(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
                const MatrixRef& b, void* c, int64_t cbs, int64_t crs, int64_t ccs,
                const GemmEpilogue& e, double alpha, const OperandIdentity& b_identity) {
  check_dtype(dtype, "gemm_fused");
  std::optional<EpilogueActivation> parsed = parse_epilogue_activation(e.activation);
  if (!parsed) {
    std::vector<std::string_view> names;
    for (EpilogueActivation x : kEpilogueActivations)
      if (x != EpilogueActivation::None) names.push_back(epilogue_activation_name(x));
    SMELT_CHECK(false, "gemm_fused: unknown activation \"{}\"; use \"\" (none) or one of {}",
                e.activation, fmt::join(names, ", "));
  }
  const EpilogueActivation act = *parsed;
  SMELT_CHECK(
      is_floating(dtype) || act == EpilogueActivation::None || act == EpilogueActivation::Relu,
      "gemm_fused: activation \"{}\" needs a floating dtype, got {}", e.activation,
      dtype_name(dtype));
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (dtype == DType::Float32 && k > 0 && alpha == 1.0 && !overlaps_c(e.residual, c) &&
      (!e.empty() || plain_f32_through_dnnl(batch)) &&
      dnnl_fused_f32(batch, m, n, k, a, b, static_cast<float*>(c), cbs, crs, ccs, e, act,
                     b_identity))
    return;
  if (dtype == DType::Float16 || dtype == DType::BFloat16) {
    // Product in float32 scratch, epilogue in float32, one rounding on store.
    std::vector<float> cf(batch * m * n);
    SMELT_DISPATCH_ALL(dtype, "gemm_fused", [&] {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        std::vector<float> af(m * k), bf(k * n);
        for (int64_t bi = 0; bi < batch; ++bi) {
          if (k > 0) {
            pack(elem<T>(a, bi), m, k, a.row_stride, a.col_stride, af.data());
            pack(elem<T>(b, bi), k, n, b.row_stride, b.col_stride, bf.data());
            gemm_f32_dense(m, n, k, af.data(), bf.data(), cf.data() + bi * m * n, alpha, 0.0);
          }
        }
        const T* bias = static_cast<const T*>(e.bias);
        const T* res = static_cast<const T*>(e.residual);
        T* cp = static_cast<T*>(c);
        for (int64_t bi = 0; bi < batch; ++bi)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              const T* r = res ? res + bi * e.residual_batch_stride + i * e.residual_row_stride +
                                     j * e.residual_col_stride
                               : nullptr;
              cp[bi * cbs + i * crs + j * ccs] = T(apply_epilogue<float>(
                  cf[(bi * m + i) * n + j], bias ? bias + j : nullptr, act, r));
            }
      }
    });
    return;
  }
  gemm_strided_batched(dtype, batch, m, n, k, a, b, c, cbs, crs, ccs, alpha, 0.0);
  if (e.empty()) return;
  SMELT_DISPATCH_ALL(dtype, "gemm_fused", [&] {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      epilogue_loop<T, T>(batch, m, n, static_cast<T*>(c), cbs, crs, ccs, e, act);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      epilogue_loop<T, int64_t>(batch, m, n, static_cast<T*>(c), cbs, crs, ccs, e, act);
    }
  });
}

}  // namespace smelt::cpu
