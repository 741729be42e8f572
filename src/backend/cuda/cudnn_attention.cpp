// Scaled dot-product attention through cuDNN's graph API (cudnn_attention.h).
//
// The operation graph is the one cuDNN's runtime fusion engine recognizes as
// flash attention (the cuDNN developer guide's "Fused Flash Attention fprop";
// the same graph cudnn-frontend's sdpa node lowers to):
//   S = Q K^T (float) -> S * scale -> [causal: row >= col ? S : -inf]
//   -> max over keys, exp(S - max), sum over keys, log(sum) + max (the
//   statistics, virtual here) -> exp / sum in the io dtype -> O = P V.
// Every intermediate is virtual: cuDNN keeps them on chip.
#include "backend/cuda/cudnn_attention.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/scratch.h"

#if SMELT_HAVE_CUDNN
#include <cudnn_graph.h>
#endif

namespace smelt::cuda::impl {

bool cudnn_version_usable(int64_t version) { return version >= 91002; }

#if !SMELT_HAVE_CUDNN

bool cudnn_attention(const AttentionArgs&, DType, bool, int, cudaStream_t) { return false; }
bool cudnn_attention_available() { return false; }
bool cudnn_attention_supported(DType, int64_t) { return false; }
int64_t cudnn_attention_launches() { return 0; }
std::string cudnn_attention_last_decline() { return "smelt was built without cuDNN's headers"; }
void set_cudnn_attention_enabled(bool) {}

#else

namespace {

/// The entry points smelt calls, from libcudnn.so.9 opened at run time.
struct CudnnApi {
  decltype(&::cudnnGetVersion) get_version = nullptr;
  decltype(&::cudnnGetErrorString) error_string = nullptr;
  decltype(&::cudnnGetLastErrorString) last_error = nullptr;
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnSetStream) set_stream = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&::cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&::cudnnBackendFinalize) finalize = nullptr;
  decltype(&::cudnnBackendExecute) execute = nullptr;
};

/// The loaded library, or null when it is absent, too old, or SMELT_CUDNN=0.
const CudnnApi* api() {
  static const CudnnApi* loaded = []() -> const CudnnApi* {
    const char* env = std::getenv("SMELT_CUDNN");
    if (env && std::strcmp(env, "0") == 0) return nullptr;
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    static CudnnApi a;
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)> >(dlsym(lib, name));
      ok = ok && fn != nullptr;
    };
    sym(a.get_version, "cudnnGetVersion");
    sym(a.error_string, "cudnnGetErrorString");
    sym(a.last_error, "cudnnGetLastErrorString");
    sym(a.create, "cudnnCreate");
    sym(a.set_stream, "cudnnSetStream");
    sym(a.create_descriptor, "cudnnBackendCreateDescriptor");
    sym(a.destroy_descriptor, "cudnnBackendDestroyDescriptor");
    sym(a.set_attribute, "cudnnBackendSetAttribute");
    sym(a.get_attribute, "cudnnBackendGetAttribute");
    sym(a.finalize, "cudnnBackendFinalize");
    sym(a.execute, "cudnnBackendExecute");
    if (!ok || !cudnn_version_usable(static_cast<int64_t>(a.get_version()))) {
      dlclose(lib);
      return nullptr;
    }
    return &a;
  }();
  return loaded;
}

std::atomic<bool> g_enabled{true};
/// Distinct problems one device keeps plans for; past it new problems go to
/// smelt's kernel (plans are never destroyed while a launch may use them).
constexpr size_t kMaxCudnnPlans = 1024;
std::atomic<int64_t> g_launches{0};
std::mutex g_why_mu;
std::string g_last_decline;  // guarded by g_why_mu

/// A failed cuDNN call while a plan is built: the plan is declined.
struct Declined {
  std::string why;
};

void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  api()->last_error(detail, sizeof detail);
  throw Declined{std::string(what) + ": " + api()->error_string(s) + (detail[0] ? " (" : "") +
                 detail + (detail[0] ? ")" : "")};
}

/// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check(api()->create_descriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() {
    if (d_) api()->destroy_descriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
            int64_t count = 1) {
    check(api()->set_attribute(d_, name, type, count, values), "cudnnBackendSetAttribute");
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &o);
  }
  void finalize(const char* what) { check(api()->finalize(d_), what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using DescPtr = std::unique_ptr<Desc>;

// The deprecated handle attributes are still how an operation graph and a
// plan learn their handle (cudnn-frontend sets them the same way).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

/// Unique ids of the tensors the caller binds (the rest are virtual).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kScale, kNegInf, kFirstVirtual = 100 };

using Dims = std::array<int64_t, 4>;

/// Builds one operation graph: tensors and operations in the order created.
class GraphBuilder {
 public:
  const Desc& tensor(int64_t uid, cudnnDataType_t dtype, const Dims& dims, const Dims& strides,
                     bool is_virtual, bool by_value = false) {
    auto d = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &dtype)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual)
        .set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    d->finalize("tensor descriptor");
    tensors_.push_back(std::move(d));
    return *tensors_.back();
  }
  /// A virtual tensor of `dims` (row-major strides).
  const Desc& temp(cudnnDataType_t dtype, const Dims& dims) {
    const Dims strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    return tensor(next_uid_++, dtype, dims, strides, true);
  }

  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    Desc m(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32);
    m.finalize("matmul descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
    op->finalize("matmul operation");
    ops_.push_back(std::move(op));
  }

  /// y = mode(x[, b[, t]]) computed in `compute`; GEN_INDEX along `axis`.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t compute, const Desc& x, const Desc* b,
                 const Desc* t, const Desc& y, int64_t axis = -1) {
    Desc p(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    p.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &compute);
    if (mode == CUDNN_POINTWISE_GEN_INDEX)
      p.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    p.finalize("pointwise descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, p)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    const float one = 1.f;
    op->set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one);
    op->finalize("pointwise operation");
    ops_.push_back(std::move(op));
  }

  void reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32);
    r.finalize("reduction descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    op->finalize("reduction operation");
    ops_.push_back(std::move(op));
  }

  /// The finalized operation graph of every operation added, for `handle`.
  DescPtr graph(cudnnHandle_t handle) {
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const auto& op : ops_) raw.push_back(op->get());
    auto g = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g->set(kGraphHandle, CUDNN_TYPE_HANDLE, &handle)
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
             static_cast<int64_t>(raw.size()));
    g->finalize("operation graph");
    return g;
  }

 private:
  int64_t next_uid_ = kFirstVirtual;
  std::vector<DescPtr> tensors_;
  std::vector<DescPtr> ops_;
};

/// What a plan depends on: the problem's shape, strides, dtype and masking.
using PlanKey = std::tuple<int, int, bool, int64_t, int64_t, int, int, int, std::vector<int64_t> >;

struct Plan {
  DescPtr plan;  // null: cuDNN declined this problem
  int64_t workspace = 0;
};

/// One cuDNN handle per device, created on first use and kept until exit;
/// `mu` serializes its stream binding and launches.
struct Handle {
  std::mutex mu;
  cudnnHandle_t h = nullptr;
  std::map<PlanKey, Plan> plans;
};

Handle& handle_for(int device) {
  // Never destroyed: at exit cuDNN's sub-libraries may be gone before a
  // static array's destructor would destroy the plans (blaslt.cpp keeps its
  // handles the same way).
  static auto* handles = new std::array<Handle, kMaxDevices>;
  return (*handles)[static_cast<size_t>(device)];
}

/// The execution plan of the flash-attention graph for `a`, or a Declined.
Plan build_plan(cudnnHandle_t handle, const AttentionArgs& a, cudnnDataType_t io, bool causal) {
  GraphBuilder g;
  const int64_t b = a.batch, h = a.heads, L = a.L, S = a.S, E = a.head_dim;
  const auto& q =
      g.tensor(kQ, io, {b, h, L, E}, {a.q_stride[0], a.q_stride[1], a.q_stride[2], 1}, false);
  // K^T: [b, h, E, S] over k's memory.
  const auto& kt =
      g.tensor(kK, io, {b, h, E, S}, {a.k_stride[0], a.k_stride[1], 1, a.k_stride[2]}, false);
  const auto& v =
      g.tensor(kV, io, {b, h, S, E}, {a.v_stride[0], a.v_stride[1], a.v_stride[2], 1}, false);
  const auto& o =
      g.tensor(kO, io, {b, h, L, E}, {a.o_stride[0], a.o_stride[1], a.o_stride[2], 1}, false);
  const Dims one = {1, 1, 1, 1};
  const auto& scale = g.tensor(kScale, CUDNN_DATA_FLOAT, one, one, false, true);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const Dims scores = {b, h, L, S}, rows = {b, h, L, 1};

  const auto& s = g.temp(f32, scores);
  g.matmul(q, kt, s);
  const Desc* last = &g.temp(f32, scores);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, s, &scale, nullptr, *last);
  if (causal) {
    const auto& neg_inf = g.tensor(kNegInf, CUDNN_DATA_FLOAT, one, one, false, true);
    const auto& row = g.temp(CUDNN_DATA_INT32, scores);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, *last, nullptr, nullptr, row, 2);
    const auto& col = g.temp(CUDNN_DATA_INT32, scores);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, *last, nullptr, nullptr, col, 3);
    const auto& keep = g.temp(CUDNN_DATA_BOOLEAN, scores);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, nullptr, keep);
    const auto& masked = g.temp(f32, scores);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, *last, &neg_inf, &keep, masked);
    last = &masked;
  }
  const auto& max = g.temp(f32, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, *last, max);
  const auto& shifted = g.temp(f32, scores);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, *last, &max, nullptr, shifted);
  const auto& e = g.temp(f32, scores);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, shifted, nullptr, nullptr, e);
  const auto& sum = g.temp(f32, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const auto& log_sum = g.temp(f32, rows);
  g.pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, log_sum);
  const auto& stats = g.temp(f32, rows);
  g.pointwise(CUDNN_POINTWISE_ADD, f32, max, &log_sum, nullptr, stats);
  const auto& p = g.temp(io, scores);
  g.pointwise(CUDNN_POINTWISE_DIV, f32, e, &sum, nullptr, p);
  g.matmul(p, v, o);
  DescPtr graph = g.graph(handle);

  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  heur.finalize("engine heuristics");
  int64_t count = 0;
  check(api()->get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "heuristics' result count");
  if (count <= 0) throw Declined{"no engine for this graph"};
  std::vector<DescPtr> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  int64_t got = 0;
  check(api()->get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
        "heuristics' results");
  std::string why = "no engine configuration finalized";
  for (int64_t i = 0; i < got; ++i) {
    try {
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(kPlanHandle, CUDNN_TYPE_HANDLE, &handle)
          .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[static_cast<size_t>(i)]);
      plan->finalize("execution plan");
      Plan out;
      int64_t n = 0;
      check(api()->get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &n, &out.workspace),
            "workspace size");
      out.plan = std::move(plan);
      return out;
    } catch (const Declined& d) {
      why = d.why;
    }
  }
  throw Declined{why};
}

}  // namespace

bool cudnn_attention(const AttentionArgs& a, DType dtype, bool causal, int device,
                     cudaStream_t stream) {
  // cuDNN's engine gives NaN for a scale <= 0 (it too must fold the scale
  // into the running max), as smelt's kernel would: those decompose.
  if (a.mask_kind != AttentionMask::None || !(a.scale > 0) ||
      !cudnn_attention_supported(dtype, a.head_dim))
    return false;
  const cudnnDataType_t io = dtype == DType::Float16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  std::vector<int64_t> strides;
  for (const int64_t* s : {a.q_stride, a.k_stride, a.v_stride, a.o_stride})
    strides.insert(strides.end(), s, s + 3);
  const PlanKey key{
      static_cast<int>(dtype), device, causal, a.batch, a.heads, a.L, a.S, a.head_dim, strides};
  Handle& hd = handle_for(device);
  std::lock_guard<std::mutex> lock(hd.mu);
  auto it = hd.plans.find(key);
  if (it == hd.plans.end()) {
    // No handle or plan is made while `stream` is being recorded into a CUDA
    // graph (their set-up may make calls a recording forbids); the call
    // declines, undecided, and a later one outside a recording builds them.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
        capture != cudaStreamCaptureStatusNone || hd.plans.size() >= kMaxCudnnPlans)
      return false;
    if (!hd.h) {
      const cudnnStatus_t s = api()->create(&hd.h);
      if (s != CUDNN_STATUS_SUCCESS) {
        hd.h = nullptr;
        std::lock_guard<std::mutex> why_lock(g_why_mu);
        g_last_decline = std::string("cudnnCreate: ") + api()->error_string(s);
        return false;
      }
    }
    Plan built;
    try {
      built = build_plan(hd.h, a, io, causal);
    } catch (const Declined& d) {
      std::lock_guard<std::mutex> why_lock(g_why_mu);
      g_last_decline = std::to_string(a.batch) + "x" + std::to_string(a.heads) + "x" +
                       std::to_string(a.L) + "x" + std::to_string(a.S) + "x" +
                       std::to_string(a.head_dim) + (causal ? " causal" : "") + ": " + d.why;
    }
    it = hd.plans.emplace(key, std::move(built)).first;
  }
  const Plan& plan = it->second;
  if (!plan.plan) return false;
  Scratch scratch(device, stream);
  void* workspace = plan.workspace > 0 ? scratch.get(static_cast<size_t>(plan.workspace),
                                                     "scaled_dot_product_attention")
                                       : nullptr;
  const float scale = a.scale;
  const float neg_inf = -INFINITY;
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kScale};
  std::vector<void*> ptrs = {const_cast<void*>(a.q), const_cast<void*>(a.k), const_cast<void*>(a.v),
                             a.out, const_cast<float*>(&scale)};
  if (causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(const_cast<float*>(&neg_inf));
  }
  try {
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
             static_cast<int64_t>(uids.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(),
             static_cast<int64_t>(ptrs.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace);
    pack.finalize("variant pack");
    check(api()->set_stream(hd.h, stream), "cudnnSetStream");
    check(api()->execute(hd.h, plan.plan->get(), pack.get()), "cudnnBackendExecute");
    ++g_launches;
  } catch (const Declined& d) {
    // A failed launch after a plan was built: smelt's own kernel runs instead
    // (nothing was written), and this problem is not offered to cuDNN again.
    {
      std::lock_guard<std::mutex> why_lock(g_why_mu);
      g_last_decline = "launch: " + d.why;
    }
    it->second.plan.reset();
    return false;
  }
  return true;
}

bool cudnn_attention_available() { return g_enabled.load() && api() != nullptr; }

bool cudnn_attention_supported(DType dtype, int64_t head_dim) {
  return (dtype == DType::Float16 || dtype == DType::BFloat16) && head_dim % 8 == 0 &&
         head_dim >= 8 && head_dim <= 128 && cudnn_attention_available();
}

void set_cudnn_attention_enabled(bool on) { g_enabled.store(on); }

int64_t cudnn_attention_launches() { return g_launches.load(); }

std::string cudnn_attention_last_decline() {
  std::lock_guard<std::mutex> lock(g_why_mu);
  return g_last_decline;
}

#endif  // SMELT_HAVE_CUDNN

}  // namespace smelt::cuda::impl
