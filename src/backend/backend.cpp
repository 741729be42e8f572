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

/// Calls `call(gemm)` for each Backend::gemm call gemm_over_batch makes, in
/// order, until it returns false.
template <class Call>
void for_each_gemm_call(Gemm g, const std::vector<GemmBatchDim>& dims, const Call& call) {
  // Dims of size 1 carry no index; the rest, outermost first.
  std::vector<GemmBatchDim> d;
  for (const GemmBatchDim& x : dims)
    if (x.size != 1) d.push_back(x);
  if (d.empty()) {
    g.batch = 1;
    call(g);
    return;
  }
  for (const GemmBatchDim& x : d)
    if (x.size == 0) return;
  // The innermost run of dims [first, end) whose strides combine: each dim's
  // stride is the next one's times its size, for every operand.
  size_t first = d.size() - 1;
  while (first > 0) {
    const GemmBatchDim &o = d[first - 1], &i = d[first];
    if (o.a != i.a * i.size || o.b != i.b * i.size || o.c != i.c * i.size ||
        o.residual != i.residual * i.size)
      break;
    --first;
  }
  int64_t inner = 1;
  for (size_t j = first; j < d.size(); ++j) inner *= d[j].size;
  const GemmBatchDim& in = d.back();
  const bool residual = g.epilogue.residual != nullptr;
  // B shared, A's and C's (and the residual's) batches stacked under their rows.
  if (first == 0 && in.b == 0 && in.a == g.m * g.a.row_stride && in.c == g.m * g.c_row_stride &&
      (!residual || in.residual == g.m * g.epilogue.residual_row_stride)) {
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
  int64_t outer = 1;
  for (size_t j = 0; j < first; ++j) outer *= d[j].size;
  for (int64_t o = 0; o < outer; ++o) {
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
