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
