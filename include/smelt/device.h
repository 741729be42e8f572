// smelt/device.h — where a tensor's memory lives.
#pragma once
#include <cstdint>
#include <string>

namespace smelt {

enum class DeviceType : uint8_t { CPU, CUDA };

/// A device: type plus index ("cpu", "cuda:0"). Every tensor carries one; ops
/// run on the device of their tensors (CUDA when smelt is built with it and a
/// GPU is present, see smelt/cuda.h; otherwise using one raises an Error).
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  /// Parses "cpu", "cuda", "cuda:1"; throws Error otherwise.
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};

inline const Device kCPU{DeviceType::CPU, 0};

}  // namespace smelt
