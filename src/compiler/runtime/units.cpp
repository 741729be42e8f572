// Translation units of a graph's kernels and their parallel build (see units.h).
#include "compiler/runtime/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <thread>

#include "smelt/error.h"

namespace smelt::compiler {

namespace {

int64_t count_lines(const std::string& s) {
  return static_cast<int64_t>(std::count(s.begin(), s.end(), '\n')) + 1;
}

/// The units' modules behind one Module: each kernel is looked up in its unit.
class UnitModules final : public backend::Module {
 public:
  UnitModules(std::vector<std::shared_ptr<backend::Module>> modules,
              std::map<std::string, size_t> unit_of)
      : modules_(std::move(modules)), unit_of_(std::move(unit_of)) {
    for (auto& m : modules_) path_ += (path_.empty() ? "" : ", ") + m->path();
  }
  backend::KernelHandle function(const std::string& name) const override {
    auto it = unit_of_.find(name);
    SMELT_INTERNAL_ASSERT(it != unit_of_.end(), "kernel {} is in none of the units {}", name,
                          path_);
    return modules_[it->second]->function(name);
  }
  const std::string& path() const override { return path_; }
  size_t static_shared_bytes(const std::string& name) const override {
    auto it = unit_of_.find(name);
    return it == unit_of_.end() ? 0 : modules_[it->second]->static_shared_bytes(name);
  }

 private:
  std::vector<std::shared_ptr<backend::Module>> modules_;
  std::map<std::string, size_t> unit_of_;
  std::string path_;
};

}  // namespace

int build_parallelism() {
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

std::vector<KernelUnit> split_units(const Schedule& s, const std::string& preamble, int parallel,
                                    int64_t unit_lines) {
  std::vector<int64_t> lines;
  int64_t total = 0;
  for (auto& st : s.steps)
    if (st.kind == Step::Kind::Kernel) {
      lines.push_back(count_lines(st.source));
      total += lines.back();
    }
  if (lines.empty()) return {};
  const int64_t count =
      std::clamp<int64_t>(total / std::max<int64_t>(1, unit_lines), 1, std::max(1, parallel));
  // Unit u takes the kernels that start within the u-th of `count` equal shares.
  std::vector<size_t> per_unit;
  int64_t done = 0;
  for (int64_t l : lines) {
    const size_t unit = static_cast<size_t>(std::min<int64_t>(count - 1, done * count / total));
    if (per_unit.size() <= unit) per_unit.resize(unit + 1, 0);
    ++per_unit[unit];
    done += l;
  }
  std::erase(per_unit, size_t{0});
  return join_units(s, preamble, per_unit);
}

std::vector<KernelUnit> join_units(const Schedule& s, const std::string& preamble,
                                   const std::vector<size_t>& kernels_per_unit) {
  std::vector<KernelUnit> units;
  size_t unit = 0, taken = 0;
  for (auto& st : s.steps) {
    if (st.kind != Step::Kind::Kernel) continue;
    while (unit < kernels_per_unit.size() && taken == kernels_per_unit[unit]) ++unit, taken = 0;
    SMELT_INTERNAL_ASSERT(unit < kernels_per_unit.size(), "more kernels than the units hold");
    if (units.size() <= unit) units.push_back(KernelUnit{preamble, {}});
    units.back().source += "\n" + st.source;
    units.back().kernels.push_back(st.name);
    ++taken;
  }
  return units;
}

std::shared_ptr<backend::Module> build_units(const std::vector<KernelUnit>& units,
                                             backend::Backend& be, Device device,
                                             backend::ModuleCache& cache,
                                             backend::BuildInfo* info) {
  const size_t n = units.size();
  std::vector<std::shared_ptr<backend::Module>> modules(n);
  std::vector<backend::BuildInfo> infos(n);
  std::vector<std::exception_ptr> errors(n);
  auto build_one = [&](size_t u) {
    try {
      backend::DeviceGuard on_device(device);
      modules[u] = be.build(units[u].source, cache, &infos[u]);
    } catch (...) {
      errors[u] = std::current_exception();
    }
  };
  {
    std::vector<std::thread> others;
    for (size_t u = 1; u < n; ++u) others.emplace_back(build_one, u);
    if (n > 0) build_one(0);
    for (auto& t : others) t.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  backend::BuildInfo sum;
  sum.cache_hit = true;
  for (auto& bi : infos) {
    sum.cache_hit = sum.cache_hit && bi.cache_hit;
    sum.build_ms = std::max(sum.build_ms, bi.build_ms);
    sum.key += (sum.key.empty() ? "" : ", ") + bi.key;
    sum.source_path += (sum.source_path.empty() ? "" : ", ") + bi.source_path;
  }
  if (info) *info = sum;
  if (n == 1) return modules[0];
  std::map<std::string, size_t> unit_of;
  for (size_t u = 0; u < n; ++u)
    for (auto& k : units[u].kernels) unit_of[k] = u;
  return std::make_shared<UnitModules>(std::move(modules), std::move(unit_of));
}

}  // namespace smelt::compiler
