// The table of eager CPU pointwise kernels by functor name (pointwise_table.h):
// one map per CPU capability, built on first use from the kernel sources' lists.
#include "backend/cpu/pointwise_table.h"

#include <array>
#include <mutex>
#include <unordered_map>

namespace smelt::cpu {

namespace pw {

const PointwiseKernel* find_pointwise(const std::string& functor) {
  using Map = std::unordered_map<std::string, PointwiseKernel>;
  static std::array<Map, 3> maps;
  static std::array<std::once_flag, 3> built;
  const int c = static_cast<int>(cpu_capability());
  std::call_once(built[c], [c] {
    for (PointwiseTableFn list : {unary_pointwise_stub.pick(), binary_pointwise_stub.pick()})
      for (auto& [name, k] : list()) maps[c].emplace(name, k);
  });
  auto it = maps[c].find(functor);
  return it == maps[c].end() ? nullptr : &it->second;
}

}  // namespace pw
}  // namespace smelt::cpu
