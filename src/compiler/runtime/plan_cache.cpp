// The on-disk plan cache (see plan_cache.h): keys, and the JSON form of a
// schedule.
#include "compiler/runtime/plan_cache.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "compiler/runtime/kernel_cache.h"
#include "smelt/error.h"

namespace smelt::compiler {

namespace {

using nlohmann::json;

/// This smelt build: its version and the file holding its code (the shared
/// library, or the program it is linked into) by path, size and modification
/// time, read once.
const std::string& build_identity() {
  static const std::string id = [] {
    std::string s = SMELT_VERSION;
    Dl_info info{};
    struct stat st {};
    if (dladdr(reinterpret_cast<void*>(&plan_key), &info) != 0 && info.dli_fname &&
        ::stat(info.dli_fname, &st) == 0)
      s += fmt::format("|{}|{}|{}.{}", info.dli_fname, st.st_size, st.st_mtim.tv_sec,
                       st.st_mtim.tv_nsec);
    else
      s += fmt::format("|process {}", ::getpid());  // unknown: plans last one process
    return s;
  }();
  return id;
}

std::string plan_path(const std::string& key) { return cache_dir() + "/" + key + ".plan"; }

json config_json(const KernelConfig& c) {
  return {{"target", static_cast<int>(c.target)},
          {"reduction", c.reduction},
          {"tile_rows", c.tile_rows},
          {"column_blocks", c.column_blocks},
          {"parallel", c.parallel},
          {"split", c.split},
          {"persistent", c.persistent},
          {"prefill", c.prefill},
          {"round_intermediates", c.round_intermediates},
          {"index_bits", c.index_bits},
          {"block_size", c.block_size},
          {"items_per_thread", c.items_per_thread},
          {"scan", c.scan},
          {"scan_lanes", c.scan_lanes},
          {"column_lanes", c.column_lanes},
          {"grid", c.grid},
          {"vec", c.vec},
          {"threads_per_row", c.threads_per_row},
          {"rows_per_block", c.rows_per_block},
          {"outer", c.outer},
          {"row_iters", c.row_iters}};
}

KernelConfig config_of(const json& j) {
  KernelConfig c;
  c.target = static_cast<Target>(j.at("target").get<int>());
  c.reduction = j.at("reduction").get<bool>();
  c.tile_rows = j.at("tile_rows").get<bool>();
  c.column_blocks = j.at("column_blocks").get<int64_t>();
  c.parallel = j.at("parallel").get<bool>();
  c.split = j.at("split").get<bool>();
  c.persistent = j.at("persistent").get<bool>();
  c.prefill = j.at("prefill").get<std::vector<int>>();
  c.round_intermediates = j.at("round_intermediates").get<bool>();
  c.index_bits = j.at("index_bits").get<int>();
  c.block_size = j.at("block_size").get<int>();
  c.items_per_thread = j.at("items_per_thread").get<int>();
  c.scan = j.at("scan").get<bool>();
  c.scan_lanes = j.at("scan_lanes").get<int64_t>();
  c.column_lanes = j.at("column_lanes").get<int64_t>();
  c.grid = j.at("grid").get<int64_t>();
  c.vec = j.at("vec").get<int>();
  c.threads_per_row = j.at("threads_per_row").get<int>();
  c.rows_per_block = j.at("rows_per_block").get<int>();
  c.outer = j.at("outer").get<bool>();
  c.row_iters = j.at("row_iters").get<int>();
  return c;
}

json step_json(const Step& st) {
  return {{"kind", static_cast<int>(st.kind)},
          {"name", st.name},
          {"kernel_kind", st.kernel_kind},
          {"reduction", st.group.reduction},
          {"scan", st.group.scan},
          {"shape", st.group.shape},
          {"rdims", st.group.rdims},
          {"reductions", st.group.reductions},
          {"stores", st.group.stores},
          {"node", st.node},
          {"epilogue", st.epilogue},
          {"activation", st.activation},
          {"bias", st.bias},
          {"residual", st.residual},
          {"cast_prologue", st.cast_prologue},
          {"out_buffer", st.out_buffer},
          {"out_strides", st.out_strides},
          {"gemm_algorithm", st.gemm_algorithm},
          {"in_place", st.in_place},
          {"reads", st.reads},
          {"writes", st.writes},
          {"config", config_json(st.config)},
          {"source_bytes", st.source.size()},
          {"error_ops", st.error_ops}};
}

Step step_of(const json& j) {
  Step st;
  st.kind = static_cast<Step::Kind>(j.at("kind").get<int>());
  st.name = j.at("name").get<std::string>();
  st.kernel_kind = j.at("kernel_kind").get<std::string>();
  st.group.reduction = j.at("reduction").get<bool>();
  st.group.scan = j.at("scan").get<bool>();
  st.group.shape = j.at("shape").get<Shape>();
  st.group.rdims = j.at("rdims").get<std::vector<int64_t>>();
  st.group.reductions = j.at("reductions").get<std::vector<int>>();
  st.group.stores = j.at("stores").get<std::vector<int>>();
  st.node = j.at("node").get<int>();
  st.epilogue = j.at("epilogue").get<std::vector<int>>();
  st.activation = j.at("activation").get<std::string>();
  st.bias = j.at("bias").get<int>();
  st.residual = j.at("residual").get<int>();
  st.cast_prologue = j.at("cast_prologue").get<bool>();
  st.out_buffer = j.at("out_buffer").get<int>();
  st.out_strides = j.at("out_strides").get<std::vector<int64_t>>();
  st.gemm_algorithm = j.at("gemm_algorithm").get<int>();
  st.in_place = j.at("in_place").get<std::vector<std::pair<int, int>>>();
  st.reads = j.at("reads").get<std::vector<int>>();
  st.writes = j.at("writes").get<std::vector<int>>();
  st.config = config_of(j.at("config"));
  st.error_ops = j.at("error_ops").get<std::string>();
  return st;
}

/// True when every buffer and node `s` names exists in `g`.
bool fits(const Schedule& s, const Graph& g) {
  const int nb = static_cast<int>(g.buffers.size()), nn = static_cast<int>(g.nodes.size());
  auto buffer_ok = [&](int b) { return b >= 0 && b < nb; };
  auto node_ok = [&](int n) { return n >= 0 && n < nn; };
  if (s.materialized.size() != g.buffers.size()) return false;
  for (auto& st : s.steps) {
    for (int b : st.reads)
      if (!buffer_ok(b)) return false;
    for (int b : st.writes)
      if (!buffer_ok(b)) return false;
    for (auto [r, w] : st.in_place)
      if (!buffer_ok(r) || !buffer_ok(w)) return false;
    for (int n : st.group.reductions)
      if (!node_ok(n)) return false;
    for (int n : st.group.stores)
      if (!node_ok(n)) return false;
    for (int n : st.epilogue)
      if (!node_ok(n)) return false;
    if (st.kind != Step::Kind::Kernel && !node_ok(st.node)) return false;
    if (st.out_buffer != -1 && !buffer_ok(st.out_buffer)) return false;
  }
  return true;
}

}  // namespace

std::string plan_key(const Graph& g, const std::string& options) {
  uint64_t h = fnv1a(options, g.hash());
  h = fnv1a(build_identity(), h);
  return fmt::format("{:016x}", h);
}

std::optional<CachedPlan> load_plan(const std::string& key, const Graph& g, bool with_decisions) {
  std::string text;
  try {
    std::ifstream f(plan_path(key), std::ios::binary | std::ios::ate);
    if (!f) return std::nullopt;
    text.resize(static_cast<size_t>(f.tellg()));
    f.seekg(0);
    if (!f.read(text.data(), static_cast<std::streamsize>(text.size()))) return std::nullopt;
  } catch (const backend::ToolchainUnavailable&) {
    return std::nullopt;  // no usable cache directory: the build says why
  }
  // "<header bytes>\n<JSON header><kernel sources, back to back>"
  const size_t eol = text.find('\n');
  if (eol == std::string::npos || eol > 20) return std::nullopt;
  try {
    const size_t header = std::stoull(text.substr(0, eol));
    if (eol + 1 + header > text.size()) return std::nullopt;
    json j = json::parse(text.begin() + static_cast<std::ptrdiff_t>(eol + 1),
                         text.begin() + static_cast<std::ptrdiff_t>(eol + 1 + header));
    if (j.at("key").get<std::string>() != key) return std::nullopt;
    CachedPlan p;
    for (char c : j.at("materialized").get<std::string>())
      p.schedule.materialized.push_back(c == '1');
    size_t at = eol + 1 + header;
    for (auto& sj : j.at("steps")) {
      p.schedule.steps.push_back(step_of(sj));
      const size_t n = sj.at("source_bytes").get<size_t>();
      if (at + n > text.size()) return std::nullopt;
      p.schedule.steps.back().source.assign(text, at, n);
      at += n;
    }
    // The fusion log, one decision per line.
    const size_t log_bytes = j.at("decisions_bytes").get<size_t>();
    if (at + log_bytes != text.size()) return std::nullopt;
    for (size_t b = at, e; with_decisions && b < text.size(); b = e + 1) {
      e = text.find('\n', b);
      if (e == std::string::npos) e = text.size();
      p.schedule.decisions.push_back(text.substr(b, e - b));
    }
    at += log_bytes;
    p.unit_kernels = j.at("unit_kernels").get<std::vector<size_t>>();
    size_t kernels = 0, in_units = 0;
    for (auto& st : p.schedule.steps) kernels += st.kind == Step::Kind::Kernel;
    for (size_t n : p.unit_kernels) {
      if (n == 0) return std::nullopt;
      in_units += n;
    }
    if (at != text.size() || in_units != kernels || !fits(p.schedule, g)) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;  // truncated or from another format: rewritten after this compile
  }
}

void store_plan(const std::string& key, const Schedule& s, const std::vector<KernelUnit>& units) {
  try {
    json j;
    j["key"] = key;
    std::string mat(s.materialized.size(), '0');
    for (size_t b = 0; b < s.materialized.size(); ++b)
      if (s.materialized[b]) mat[b] = '1';
    j["materialized"] = mat;
    json steps = json::array();
    for (auto& st : s.steps) steps.push_back(step_json(st));
    j["steps"] = std::move(steps);
    std::vector<size_t> per_unit;
    for (auto& u : units) per_unit.push_back(u.kernels.size());
    j["unit_kernels"] = per_unit;
    std::string log;
    for (size_t k = 0; k < s.decisions.size(); ++k) log += (k ? "\n" : "") + s.decisions[k];
    j["decisions_bytes"] = log.size();
    const std::string header = j.dump();
    const std::string path = plan_path(key);
    const std::string tmp = fmt::format("{}.tmp.{}.{}", path, getpid(),
                                        std::hash<std::thread::id>{}(std::this_thread::get_id()));
    {
      std::ofstream f(tmp, std::ios::binary);
      f << header.size() << '\n' << header;
      for (auto& st : s.steps) f << st.source;
      f << log;
      if (!f) {
        std::remove(tmp.c_str());
        return;
      }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
  } catch (const std::exception&) {
    // Only an optimization: the next compile of this graph plans it again.
  }
}

}  // namespace smelt::compiler
