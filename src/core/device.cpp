#include "smelt/device.h"

#include "smelt/error.h"

namespace smelt {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (spec.size() > 4) {
      SMELT_CHECK(spec[4] == ':' && spec.size() > 5 &&
                      spec.find_first_not_of("0123456789", 5) == std::string::npos,
                  "Device: cannot parse '{}'; expected 'cpu', 'cuda' or 'cuda:N'", spec);
      index = std::stoi(spec.substr(5));
    }
    return;
  }
  SMELT_CHECK(false, "Device: cannot parse '{}'; expected 'cpu', 'cuda' or 'cuda:N'", spec);
}

std::string Device::str() const {
  return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace smelt
