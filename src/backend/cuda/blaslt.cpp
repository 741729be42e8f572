// GEMM through cuBLASLt (blaslt.h): descriptors, the heuristic's algorithm
// cache and the Gemm -> one-call mapping.
#include "backend/cuda/blaslt.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/graphs.h"
#include "backend/cuda/scratch.h"
#include "core/tensor_impl.h"

namespace smelt::cuda::impl {

namespace {

/// Entries of the algorithm cache before it is emptied (a workload with more
/// distinct GEMM problems than this pays a heuristic query again).
constexpr size_t kMaxCachedKeys = 4096;

std::atomic<int64_t> g_matmuls{0}, g_queries{0}, g_no_algorithm{0};

/// One cuBLASLt handle per device, created on first use (never destroyed:
/// used until exit). cuBLASLt handles hold no stream and may be shared by threads.
cublasLtHandle_t lt_handle(int device) {
  static std::mutex mu;
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  std::lock_guard<std::mutex> lock(mu);
  cublasLtHandle_t& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) {
    DeviceGuard guard(device);
    SMELT_CUBLAS_CHECK(cublasLtCreate(&h));
  }
  return h;
}

/// Checks a cuBLASLt call whose text names an attribute: "call(ATTRIBUTE)".
void check_attr(cublasStatus_t status, const char* call, const char* attr, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw_cublas_error(status, fmt::format("{}({})", call, attr).c_str(), __FILE__, line);
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v,
              const char* name, int line) {
  check_attr(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)),
             "cublasLtMatmulDescSetAttribute", name, line);
}
template <class T>
void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& v,
                const char* name, int line) {
  check_attr(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof(v)),
             "cublasLtMatrixLayoutSetAttribute", name, line);
}
template <class T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v,
              const char* name, int line) {
  check_attr(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)),
             "cublasLtMatmulPreferenceSetAttribute", name, line);
}
#define SMELT_LT_SET(fn, obj, attr, value) fn(obj, attr, value, #attr, __LINE__)

/// The descriptors of one problem (destroyed with it).
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {  // destroy calls only free host memory; their status is ignored
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

/// A column-major rows x cols layout with leading dim ld, batched when batch > 1.
void make_layout(cublasLtMatrixLayout_t* l, DType t, int64_t rows, int64_t cols, int64_t ld,
                 int64_t batch, int64_t stride) {
  SMELT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, cuda_data_type(t), static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    SMELT_LT_SET(set_layout, *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
    SMELT_LT_SET(set_layout, *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  }
}

void describe(const CublasGemm& p, Descriptors* ds) {
  SMELT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&ds->op, p.compute, CUDA_R_32F));
  const int32_t ta = p.op_a, tb = p.op_b;
  SMELT_LT_SET(set_desc, ds->op, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  SMELT_LT_SET(set_desc, ds->op, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    const uint32_t epi = p.epilogue;
    SMELT_LT_SET(set_desc, ds->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
  }
  if (p.bias != nullptr) {
    SMELT_LT_SET(set_desc, ds->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    const int32_t bias_type = cuda_data_type(p.dtype);
    SMELT_LT_SET(set_desc, ds->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
  }
  const bool ta_n = p.op_a == CUBLAS_OP_N, tb_n = p.op_b == CUBLAS_OP_N;
  make_layout(&ds->a, p.dtype, ta_n ? p.m : p.k, ta_n ? p.k : p.m, p.lda, p.batch, p.stride_a);
  make_layout(&ds->b, p.dtype, tb_n ? p.k : p.n, tb_n ? p.n : p.k, p.ldb, p.batch, p.stride_b);
  make_layout(&ds->d, p.d_dtype, p.m, p.n, p.ldd, p.batch, p.stride_d);
  if (p.c != nullptr) make_layout(&ds->c, p.d_dtype, p.m, p.n, p.ldc, p.batch, p.stride_c);
}

/// The heuristic's algorithms for `p` (described by `ds`), best first.
std::vector<LtAlgorithm> query(const CublasGemm& p, int device, const Descriptors& ds,
                               int max_count) {
  ++g_queries;
  cublasLtMatmulPreference_t pref = nullptr;
  SMELT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct Release {
    cublasLtMatmulPreference_t p;
    ~Release() { (void)cublasLtMatmulPreferenceDestroy(p); }
  } release{pref};
  const uint64_t workspace = kLtMaxWorkspaceBytes;
  SMELT_LT_SET(set_pref, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
  const uint32_t aa = alignment_bytes(p.a), ab = alignment_bytes(p.b), ad = alignment_bytes(p.d);
  SMELT_LT_SET(set_pref, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, aa);
  SMELT_LT_SET(set_pref, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, ab);
  const uint32_t ac = p.c != nullptr ? alignment_bytes(p.c) : ad;
  SMELT_LT_SET(set_pref, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, ac);
  SMELT_LT_SET(set_pref, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, ad);
  if (p.d_dtype == DType::Float16 || p.d_dtype == DType::BFloat16) {
    // Split-K partial sums in float32, never in the half output type.
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    SMELT_LT_SET(set_pref, pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, mask);
  }
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(std::max(max_count, 1)));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(device), ds.op, ds.a, ds.b, ds.c ? ds.c : ds.d, ds.d,
                                     pref, static_cast<int>(res.size()), res.data(), &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return {};  // no algorithm for this configuration
  SMELT_CUBLAS_CHECK(st);
  std::vector<LtAlgorithm> out;
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulHeuristicResult_t& r = res[static_cast<size_t>(i)];
    if (r.state != CUBLAS_STATUS_SUCCESS) continue;
    out.push_back({r.algo, r.workspaceSize, r.wavesCount});
  }
  return out;
}

/// One problem's descriptors and the heuristic's best algorithm for it
/// (nullopt: none), made on its first call and kept: a cached call sets only
/// its pointers (the bias's is a descriptor attribute).
struct Problem {
  std::unique_ptr<Descriptors> ds;
  std::optional<LtAlgorithm> best;
  /// The heuristic's proposals (up to kLtTuneCandidates), queried when an
  /// autotuned algorithm index first asks for them.
  std::optional<std::vector<LtAlgorithm>> candidates;
};

/// `pr`'s proposals, queried on first use. Caller holds g_cache_mu.
const std::vector<LtAlgorithm>& candidates_of(Problem& pr, const CublasGemm& p, int device) {
  if (!pr.candidates) pr.candidates = query(p, device, *pr.ds, kLtTuneCandidates);
  return *pr.candidates;
}

std::mutex g_cache_mu;
std::map<LtKey, Problem>& cache() {
  static std::map<LtKey, Problem> c;
  return c;
}

/// The cached Problem of `p` on `device`, made on a miss. Caller holds g_cache_mu.
Problem& problem(const CublasGemm& p, int device) {
  const LtKey key = lt_key(p, device);
  auto& c = cache();
  if (auto it = c.find(key); it != c.end()) return it->second;
  Problem made;
  made.ds = std::make_unique<Descriptors>();
  describe(p, made.ds.get());
  std::vector<LtAlgorithm> found = query(p, device, *made.ds, 1);
  if (!found.empty()) made.best = found.front();
  if (c.size() >= kMaxCachedKeys) c.clear();
  return c.emplace(key, std::move(made)).first->second;
}

/// cuBLASLt's workspace for work queued on `stream` of `device` outside a
/// CUDA graph recording (graphs.h's capturing()): one block of kLtMaxWorkspaceBytes per stream,
/// allocated on first use and kept to the end of the process, as PyTorch
/// keeps one per cuBLAS handle and stream. The GEMMs of one stream run in
/// order, so they share it, and a call allocates nothing for it (its peak
/// memory is its result's). (A recording takes scratch of its own instead,
/// which the recording keeps: its replays may run on any stream.) Caller
/// holds g_cache_mu.
void* lt_workspace(int device, cudaStream_t stream) {
  // Never destroyed: the blocks are in use until exit, when the CUDA runtime
  // may already be gone.
  static auto* blocks = new std::map<std::pair<int, cudaStream_t>, Tensor>();
  Tensor& block = (*blocks)[{device, stream}];
  if (!block.defined())
    block = detail::make_empty({static_cast<int64_t>(kLtMaxWorkspaceBytes)}, DType::UInt8,
                               Device(DeviceType::CUDA, device), "matmul workspace");
  return block.data_ptr();
}

/// cuBLASLt's batch offsets: operands >= 0 (0 broadcasts), D (and C) > 0.
bool lt_batch_strides_ok(const CublasGemm& p) {
  return p.batch <= 1 || (p.stride_a >= 0 && p.stride_b >= 0 && p.stride_d > 0 &&
                          (p.c == nullptr || p.stride_c > 0));
}

/// The bytes [first, last) a column-major rows x cols matrix (leading dim ld,
/// `batch` of them `stride` elements apart) of `elem`-byte elements spans.
std::pair<uintptr_t, uintptr_t> span_of(const void* p, int64_t rows, int64_t cols, int64_t ld,
                                        int64_t batch, int64_t stride, int64_t elem) {
  const auto first = reinterpret_cast<uintptr_t>(p);
  const int64_t last = (batch - 1) * stride + (cols - 1) * ld + rows;
  return {first, first + static_cast<uintptr_t>(last * elem)};
}

}  // namespace

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    case DType::Float64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

bool cublas_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, cublasOperation_t* op,
                    int64_t* ld) {
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols))) {
    *op = CUBLAS_OP_N;
    *ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    return *ld <= INT_MAX;
  }
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows))) {
    *op = CUBLAS_OP_T;
    *ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    return *ld <= INT_MAX;
  }
  return false;
}

cublasComputeType_t gemm_compute_type(DType dtype, const std::string& precision) {
  if (dtype == DType::Float64) return CUBLAS_COMPUTE_64F;
  if (dtype == DType::Float32 && precision != "highest") return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

bool lt_supports_dtype(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
}

std::optional<cublasLtEpilogue_t> lt_epilogue(DType dtype, bool has_bias, EpilogueActivation act,
                                              bool has_residual) {
  if (has_residual && act != EpilogueActivation::None) return std::nullopt;
  switch (act) {
    case EpilogueActivation::None:
      return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case EpilogueActivation::Relu:
      return has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case EpilogueActivation::GeluTanh:
      if (dtype != DType::Float16 && dtype != DType::BFloat16) return std::nullopt;
      return has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default:
      return std::nullopt;
  }
}

std::optional<CublasGemm> lt_gemm_of(const backend::Gemm& g, std::string* why) {
  auto fail = [why](std::string reason) -> std::optional<CublasGemm> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (!lt_supports_dtype(g.dtype))
    return fail(
        fmt::format("dtype {} (cuBLASLt runs float32, float16 and bfloat16)", dtype_name(g.dtype)));
  if (g.batch < 1 || g.m < 1 || g.n < 1 || g.k < 1) return fail("an empty product");
  if (g.batch > INT_MAX) return fail(fmt::format("batch {} exceeds int32", g.batch));
  const backend::GemmEpilogue& e = g.epilogue;
  const std::optional<EpilogueActivation> act = parse_epilogue_activation(e.activation);
  if (!act) return fail(fmt::format("unknown activation \"{}\"", e.activation));
  const std::optional<cublasLtEpilogue_t> epi =
      lt_epilogue(g.dtype, e.bias != nullptr, *act, e.residual != nullptr);
  if (!epi)
    return fail(e.residual != nullptr && *act != EpilogueActivation::None
                    ? fmt::format("a residual add after activation \"{}\" (cuBLASLt adds C "
                                  "before its activation)",
                                  e.activation)
                    : fmt::format("activation \"{}\" on {} (cuBLASLt has no epilogue for it)",
                                  e.activation, dtype_name(g.dtype)));
  CublasGemm p;
  // Row-major C = A @ B is column-major C^T = B^T @ A^T (file comment of blaslt.h).
  if (!cublas_operand(g.k, g.n, g.b.row_stride, g.b.col_stride, &p.op_a, &p.lda))
    return fail("B must be packed (neither of its dims has stride 1)");
  if (!cublas_operand(g.m, g.k, g.a.row_stride, g.a.col_stride, &p.op_b, &p.ldb))
    return fail("A must be packed (neither of its dims has stride 1)");
  cublasOperation_t op_c;
  if (!cublas_operand(g.m, g.n, g.c_row_stride, g.c_col_stride, &op_c, &p.ldd) ||
      op_c != CUBLAS_OP_N)
    return fail("C is not row-major with column stride 1");
  p.dtype = g.dtype;
  p.d_dtype = g.c_dtype();
  p.m = g.n;
  p.n = g.m;
  p.k = g.k;
  p.batch = g.batch;
  p.a = g.b.data;
  p.stride_a = g.batch > 1 ? g.b.batch_stride : 0;
  p.b = g.a.data;
  p.stride_b = g.batch > 1 ? g.a.batch_stride : 0;
  p.d = g.c;
  p.stride_d = g.batch > 1 ? g.c_batch_stride : 0;
  p.alpha = g.alpha;
  p.compute = gemm_compute_type(g.dtype, backend::float32_matmul_precision());
  p.epilogue = *epi;
  p.bias = e.bias;
  if (e.residual != nullptr) {
    // The residual as cuBLASLt's C (beta = 1), read in place: row-major with
    // column stride 1, apart from D (backend.h: a residual never overlaps C).
    if (!cublas_operand(g.m, g.n, e.residual_row_stride, e.residual_col_stride, &op_c, &p.ldc) ||
        op_c != CUBLAS_OP_N)
      return fail("the residual is not row-major with column stride 1");
    p.c = e.residual;
    p.stride_c = g.batch > 1 ? e.residual_batch_stride : 0;
    const auto elem = static_cast<int64_t>(itemsize(p.d_dtype));
    const auto [c0, c1] = span_of(p.c, p.m, p.n, p.ldc, p.batch, p.stride_c, elem);
    const auto [d0, d1] = span_of(p.d, p.m, p.n, p.ldd, p.batch, p.stride_d, elem);
    if (c0 < d1 && d0 < c1) return fail("the residual overlaps C");
  }
  if (!lt_batch_strides_ok(p))
    return fail("a negative batch stride (or C's or the residual's not positive)");
  return p;
}

uint32_t alignment_bytes(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 1;
  while (align < 256 && (a & align) == 0) align <<= 1;
  return align;
}

LtKey lt_key(const CublasGemm& p, int device) {
  LtKey k;
  k.device = device;
  k.dtype = p.dtype;
  k.d_dtype = p.d_dtype;
  k.compute = static_cast<int>(p.compute);
  k.epilogue = static_cast<int>(p.epilogue);
  k.op_a = static_cast<int>(p.op_a);
  k.op_b = static_cast<int>(p.op_b);
  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.batch = p.batch;
  k.lda = p.lda;
  k.ldb = p.ldb;
  k.ldd = p.ldd;
  k.stride_a = p.stride_a;
  k.stride_b = p.stride_b;
  k.stride_d = p.stride_d;
  k.align_a = alignment_bytes(p.a);
  k.align_b = alignment_bytes(p.b);
  k.align_d = alignment_bytes(p.d);
  k.align_bias = p.bias ? alignment_bytes(p.bias) : 0;
  k.has_c = p.c != nullptr;
  if (k.has_c) {
    k.ldc = p.ldc;
    k.stride_c = p.stride_c;
    k.align_c = alignment_bytes(p.c);
  }
  return k;
}

bool lt_matmul(const CublasGemm& p, int device, cudaStream_t stream, const LtAlgorithm* algo) {
  if (!lt_supports_dtype(p.dtype) || !lt_batch_strides_ok(p)) return false;
  DeviceGuard guard(device);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  const Problem& pr = problem(p, device);
  const std::optional<LtAlgorithm> chosen = algo ? std::optional<LtAlgorithm>(*algo) : pr.best;
  if (!chosen) {
    ++g_no_algorithm;
    return false;
  }
  const Descriptors& ds = *pr.ds;
  if (p.bias != nullptr) SMELT_LT_SET(set_desc, ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  SMELT_INTERNAL_ASSERT(chosen->workspace_bytes <= kLtMaxWorkspaceBytes,
                        "cuBLASLt algorithm asks for {} bytes of workspace, above the {} asked for",
                        chosen->workspace_bytes, kLtMaxWorkspaceBytes);
  Scratch scratch(device, stream);
  void* workspace = chosen->workspace_bytes == 0 ? nullptr
                    : capturing()                ? scratch.get(chosen->workspace_bytes, "matmul")
                                                 : lt_workspace(device, stream);
  const float alpha = static_cast<float>(p.alpha), beta = p.c != nullptr ? 1.0f : 0.0f;
  SMELT_CUBLAS_CHECK(cublasLtMatmul(lt_handle(device), ds.op, &alpha, p.a, ds.a, p.b, ds.b, &beta,
                                    p.c ? p.c : p.d, p.c ? ds.c : ds.d, p.d, ds.d, &chosen->algo,
                                    workspace, chosen->workspace_bytes, stream));
  ++g_matmuls;
  return true;
}

std::vector<LtAlgorithm> lt_algorithms(const CublasGemm& p, int device, int max_count) {
  if (!lt_supports_dtype(p.dtype) || !lt_batch_strides_ok(p)) return {};
  DeviceGuard guard(device);
  Descriptors ds;
  describe(p, &ds);
  return query(p, device, ds, max_count);
}

int gemm_candidate_count(const backend::Gemm& g, int most) {
  const std::optional<CublasGemm> p = lt_gemm_of(g);
  if (!p || !lt_supports_dtype(p->dtype) || !lt_batch_strides_ok(*p)) return 0;
  const int device = g.device.index;
  DeviceGuard guard(device);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  const auto n = static_cast<int>(candidates_of(problem(*p, device), *p, device).size());
  return std::min(n, most);
}

bool lt_matmul_candidate(const CublasGemm& p, int device, cudaStream_t stream, int index) {
  if (index < 0 || !lt_supports_dtype(p.dtype) || !lt_batch_strides_ok(p)) return false;
  LtAlgorithm algo;
  {
    DeviceGuard guard(device);
    std::lock_guard<std::mutex> lock(g_cache_mu);
    const std::vector<LtAlgorithm>& c = candidates_of(problem(p, device), p, device);
    if (static_cast<size_t>(index) >= c.size()) return false;
    algo = c[static_cast<size_t>(index)];
  }
  return lt_matmul(p, device, stream, &algo);
}

std::vector<LtAlgorithm> gemm_algorithms(const backend::Gemm& g, int max_count) {
  const std::optional<CublasGemm> p = lt_gemm_of(g);
  if (!p) return {};
  return lt_algorithms(*p, g.device.index, max_count);
}

void gemm_with_algorithm(const backend::Gemm& g, const LtAlgorithm& algo, cudaStream_t stream) {
  std::string why;
  const std::optional<CublasGemm> p = lt_gemm_of(g, &why);
  SMELT_CHECK(p.has_value(),
              "gemm_with_algorithm: cuBLASLt cannot run this {} GEMM (m={} n={} k={} batch={}) as "
              "one call: {}; run it through Backend::gemm",
              dtype_name(g.dtype), g.m, g.n, g.k, g.batch, why);
  SMELT_INTERNAL_ASSERT(lt_matmul(*p, g.device.index, stream, &algo),
                        "gemm_with_algorithm: lt_matmul refused an explicit algorithm");
}

LtStats lt_stats() {
  LtStats s;
  s.matmuls = g_matmuls.load();
  s.heuristic_queries = g_queries.load();
  s.no_algorithm = g_no_algorithm.load();
  std::lock_guard<std::mutex> lock(g_cache_mu);
  s.cached_keys = static_cast<int64_t>(cache().size());
  return s;
}

}  // namespace smelt::cuda::impl
