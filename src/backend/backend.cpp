// The backend registry (one slot per DeviceType) and the device-neutral
// contracts of backend.h that every backend shares, and the float32 matmul
// precision setting GEMM backends read.
#include "backend/backend.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

namespace smelt::backend {

namespace {
constexpr size_t kDeviceTypes = 2;  // CPU, CUDA
std::array<std::atomic<Backend*>, kDeviceTypes>& slots() {
  static std::array<std::atomic<Backend*>, kDeviceTypes> s{};
  return s;
}
}  // namespace

void register_backend(Backend* b) {
  slots()[static_cast<size_t>(b->type())].store(b);
  register_allocator(b->type(), &b->allocator());
}

Backend* find_backend(DeviceType type) { return slots()[static_cast<size_t>(type)].load(); }

namespace {
std::mutex g_precision_mu;
std::string& precision_slot() {
  static std::string p = "highest";
  return p;
}
}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  SMELT_CHECK(precision == "highest" || precision == "high" || precision == "medium",
              "set_float32_matmul_precision: unknown precision '{}'; use \"highest\", \"high\" "
              "or \"medium\"",
              precision);
  std::lock_guard<std::mutex> lock(g_precision_mu);
  precision_slot() = precision;
}

std::string float32_matmul_precision() {
  std::lock_guard<std::mutex> lock(g_precision_mu);
  return precision_slot();
}

Backend& backend_for(DeviceType type) {
  Backend* b = slots()[static_cast<size_t>(type)].load();
  if (b == nullptr) {
    SMELT_CHECK(type != DeviceType::CUDA,
                "no backend for device cuda: smelt was built without CUDA; move the tensors to "
                "'cpu'");
    SMELT_CHECK(false, "no backend for device {}; move the tensors to 'cpu'", Device(type).str());
  }
  return *b;
}

uint64_t random_blocks(RandomFill::Kind kind, DType dtype, int64_t numel) {
  const uint64_t n = static_cast<uint64_t>(numel);
  switch (kind) {
    case RandomFill::Kind::Uniform:
      return dtype == DType::Float64 ? (n + 1) / 2 : (n + 3) / 4;
    case RandomFill::Kind::Normal:
    case RandomFill::Kind::Integer:
    case RandomFill::Kind::Bernoulli:
      return (n + 1) / 2;
  }
  return 0;
}

namespace {

/// How gemm_over_batch splits a batch: the dims of size other than 1
/// (outermost first), the first of the innermost run of them whose strides
/// combine (each dim's stride the next one's times its size, for every
/// operand), the product of that run's sizes (one batched call) and of the
/// dims outside it (a loop of calls); `stacked`: B shared and A's and C's (and
/// the residual's) batches stacked under their rows, so that the whole batch
/// is one (batch * m) x k product.
struct BatchSplit {
  std::vector<GemmBatchDim> d;
  size_t first = 0;
  int64_t inner = 1, outer = 1;
  bool empty = false, stacked = false;
};
BatchSplit split_batch(const Gemm& g, const std::vector<GemmBatchDim>& dims) {
  BatchSplit sp;
  for (const GemmBatchDim& x : dims) {
    if (x.size == 0) sp.empty = true;
    if (x.size != 1) sp.d.push_back(x);
  }
  if (sp.empty || sp.d.empty()) return sp;
  const std::vector<GemmBatchDim>& d = sp.d;
  sp.first = d.size() - 1;
  while (sp.first > 0) {
    const GemmBatchDim &o = d[sp.first - 1], &i = d[sp.first];
    if (o.a != i.a * i.size || o.b != i.b * i.size || o.c != i.c * i.size ||
        o.residual != i.residual * i.size)
      break;
    --sp.first;
  }
  for (size_t j = sp.first; j < d.size(); ++j) sp.inner *= d[j].size;
  for (size_t j = 0; j < sp.first; ++j) sp.outer *= d[j].size;
  const GemmBatchDim& in = d.back();
  const bool residual = g.epilogue.residual != nullptr;
  sp.stacked = sp.first == 0 && in.b == 0 && in.a == g.m * g.a.row_stride &&
               in.c == g.m * g.c_row_stride &&
               (!residual || in.residual == g.m * g.epilogue.residual_row_stride);
  return sp;
}

/// Calls `call(gemm)` for each Backend::gemm call gemm_over_batch makes, in
/// order, until it returns false.
template <class Call>
void for_each_gemm_call(Gemm g, const std::vector<GemmBatchDim>& dims, const Call& call) {
  const BatchSplit sp = split_batch(g, dims);
  if (sp.empty) return;
  if (sp.d.empty()) {
    g.batch = 1;
    call(g);
    return;
  }
  const std::vector<GemmBatchDim>& d = sp.d;
  const size_t first = sp.first;
  const int64_t inner = sp.inner;
  const GemmBatchDim& in = d.back();
  const bool residual = g.epilogue.residual != nullptr;
  if (sp.stacked) {
    g.m *= inner;
    g.batch = 1;
    call(g);
    return;
  }
  g.batch = inner;
  g.a.batch_stride = in.a;
  g.b.batch_stride = in.b;
  g.c_batch_stride = in.c;
  g.epilogue.residual_batch_stride = in.residual;
  const int64_t isz = static_cast<int64_t>(itemsize(g.dtype));
  const int64_t csz = static_cast<int64_t>(itemsize(g.c_dtype()));
  const char* a0 = static_cast<const char*>(g.a.data);
  const char* b0 = static_cast<const char*>(g.b.data);
  char* c0 = static_cast<char*>(g.c);
  const char* r0 = static_cast<const char*>(g.epilogue.residual);
  for (int64_t o = 0; o < sp.outer; ++o) {
    int64_t rest = o, ao = 0, bo = 0, co = 0, ro = 0;
    for (size_t j = first; j-- > 0;) {
      const int64_t idx = rest % d[j].size;
      rest /= d[j].size;
      ao += idx * d[j].a;
      bo += idx * d[j].b;
      co += idx * d[j].c;
      ro += idx * d[j].residual;
    }
    Gemm gi = g;
    gi.a.data = a0 + ao * isz;
    gi.b.data = b0 + bo * isz;
    gi.c = c0 + co * csz;
    if (residual) gi.epilogue.residual = r0 + ro * isz;
    if (!call(gi)) return;
  }
}

}  // namespace

void gemm_over_batch(Backend& be, Gemm g, const std::vector<GemmBatchDim>& dims, Stream stream) {
  for_each_gemm_call(std::move(g), dims, [&](const Gemm& c) {
    be.gemm(c, stream);
    return true;
  });
}

std::optional<Gemm> first_gemm_over_batch(Gemm g, const std::vector<GemmBatchDim>& dims) {
  std::optional<Gemm> first;
  for_each_gemm_call(std::move(g), dims, [&](const Gemm& c) {
    first = c;
    return false;
  });
  return first;
}

int64_t gemm_calls_over_batch(const Gemm& g, const std::vector<GemmBatchDim>& dims) {
  const BatchSplit sp = split_batch(g, dims);
  if (sp.empty) return 0;
  return sp.d.empty() || sp.stacked ? 1 : sp.outer;
}

int uniform_bits(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return 11;
    case DType::BFloat16:
      return 8;
    case DType::Float32:
      return 24;
    default:
      return 53;
  }
}

}  // namespace smelt::backend
