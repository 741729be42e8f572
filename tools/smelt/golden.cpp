// `smelt golden <manifest.json>`: runs every case of a golden manifest (format in
// shared/golden/README.md) through detail::call_op, on the CPU or (--device cuda)
// on a GPU, and compares with what PyTorch (on the CPU) returned or raised. A
// gradient manifest (cases with "grads", grad_golden.json) also runs autograd: the
// gradients with respect to the stored input tensors, for the case's upstream
// gradients, against PyTorch autograd's (with --compiled, the op and its
// backward pass as one compiled graph).
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "commands.h"
#include "golden_compare.h"
#include "ops/op_call.h"
#include "progress.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/cuda.h"
#include "smelt/io.h"
#include "smelt/ops.h"

namespace smelt::cli {

namespace {

using nlohmann::json;
using Runner = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

/// Cases where smelt deliberately differs from PyTorch, with the reason. Each
/// is reported as DEVIATION (not counted as a failure) only while it differs.
const std::map<std::string, const char*> kDeliberateDeviations = {
    {"layer_norm_offset",
     "rows of ~1000 +- 0.02: PyTorch's CPU kernel forms x*rstd - mean*rstd (~58000) in float32 and "
     "loses ~4e-3 to cancellation; smelt computes (x - mean)*rstd, ~10x closer to the exact "
     "float64 result"},
};

/// Ops whose cases may legitimately graph-break under compile (random ops).
const std::set<std::string> kMayBreakGraph = {"dropout"};

// Ops whose Python signature takes a Tensor (not a Number) as second argument: PyTorch raises
// TypeError when a Python scalar is passed there, so the golden runner does too.
const std::set<std::string> kTensorOnlyOther = {
    "maximum", "minimum", "fmax", "fmin", "atan2", "logical_and", "logical_or", "logical_xor"};

std::vector<int64_t> parse_ints(const std::string& s) {
  std::vector<int64_t> v;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    v.push_back(std::stoll(s.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return v;
}

Tensor apply_view(const Tensor& x, const std::string& view) {
  if (view == "t") return x.t();
  auto colon = view.find(':');
  SMELT_CHECK(colon != std::string::npos, "golden: unknown input view '{}'", view);
  std::string kind = view.substr(0, colon);
  std::vector<int64_t> args = parse_ints(view.substr(colon + 1));
  if (kind == "permute") return x.permute(args);
  if (kind == "expand") return x.expand(args);
  if (kind == "slice") {
    SMELT_CHECK(args.size() == 4, "golden: view '{}' needs dim,start,end,step", view);
    return x.slice(args[0], args[1], args[2], args[3]);
  }
  SMELT_CHECK(false, "golden: unknown input view '{}'", view);
}

/// A Python number of a manifest: JSON bool or number, or (JSON has no literal for
/// them) the strings "inf", "-inf" and "nan".
Scalar json_scalar(const json& v) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_number_integer()) return Scalar(v.get<int64_t>());
  if (v.is_number()) return Scalar(v.get<double>());
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return Scalar(std::numeric_limits<double>::infinity());
    if (s == "-inf") return Scalar(-std::numeric_limits<double>::infinity());
    if (s == "nan") return Scalar(std::numeric_limits<double>::quiet_NaN());
  }
  SMELT_CHECK(false, "golden: scalar input {} is not a number", v.dump());
}

detail::Attrs json_attrs(const std::string& op, const json& kwargs, size_t n_inputs) {
  detail::Attrs attrs;
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (v.is_null()) continue;  // None: the argument's default
    if (op == "scaled_dot_product_attention" && k == "attn_mask") {
      // "in3": the fourth positional input is the mask
      attrs.set("has_attn_mask", n_inputs > 3);
      continue;
    }
    if (v.is_boolean()) {
      attrs.set(k, v.get<bool>());
    } else if (v.is_number_integer()) {
      attrs.set(k, v.get<int64_t>());
    } else if (v.is_number()) {
      attrs.set(k, v.get<double>());
    } else if (v.is_string()) {
      if (k == "dtype")
        attrs.set(k, dtype_from_name(v.get<std::string>()));
      else
        attrs.set(k, v.get<std::string>());
    } else if (v.is_array()) {
      std::vector<int64_t> l;
      for (const auto& e : v) {
        SMELT_CHECK(e.is_number_integer(), "golden: kwarg '{}' = {} is not a list of integers", k,
                    v.dump());
        l.push_back(e.get<int64_t>());
      }
      attrs.set(k, l);
    } else {
      SMELT_CHECK(false, "golden: kwarg '{}' = {} has an unsupported type", k, v.dump());
    }
  }
  return attrs;
}

struct CaseResult {
  bool pass = false;
  std::string reason;
};

/// The case's positional inputs: wrapped numbers, or stored tensors with their view
/// applied. Each stored tensor whose index is in `leaves` is instead copied into a
/// leaf that requires grad, as the gradient cases differentiate with respect to
/// the stored tensor; its view, if any, is returned in `leaf_views` (by input
/// index), for the case's function to apply. `fresh`: every stored tensor is
/// copied (a case that writes its inputs in place can run again on the stored
/// values). Stored tensors are moved to `device` first. An error message, or "".
std::string load_inputs(const json& c, const std::map<std::string, Tensor>& tensors,
                        const std::set<size_t>& leaves, Device device, std::vector<Tensor>& inputs,
                        std::map<size_t, std::string>& leaf_views, bool fresh) {
  for (const json& in : c.at("inputs")) {
    if (in.contains("scalar")) {
      inputs.push_back(detail::wrapped_scalar(json_scalar(in.at("scalar"))));
      continue;
    }
    const std::string key = in.at("key").get<std::string>();
    auto it = tensors.find(key);
    if (it == tensors.end()) return fmt::format("tensor '{}' missing from the file", key);
    Tensor x = it->second.to(device);
    if (dtype_name(x.dtype()) != in.at("dtype").get<std::string>() ||
        x.sizes() != in.at("shape").get<Shape>())
      return fmt::format("tensor '{}' in the file is {} {}, manifest says {} {}", key,
                         dtype_name(x.dtype()), detail::shape_str(x.sizes()),
                         in.at("dtype").get<std::string>(), in.at("shape").dump());
    if (fresh && x.storage() == it->second.storage()) x = x.clone();
    if (leaves.count(inputs.size())) {
      x = x.clone().requires_grad_(true);
      if (in.contains("view") && in.at("view").is_string())
        leaf_views[inputs.size()] = in.at("view").get<std::string>();
    } else if (in.contains("view") && in.at("view").is_string()) {
      try {
        x = apply_view(x, in.at("view").get<std::string>());
      } catch (const std::exception& e) {
        return fmt::format("cannot apply input view: {}", e.what());
      }
    }
    inputs.push_back(x);
  }
  return "";
}

/// The gradient part of a case of grad_golden.json: which outputs are roots of
/// the backward pass (with their upstream gradients, on the case's device), and
/// which inputs get a gradient compared with PyTorch's.
struct GradSpec {
  std::vector<size_t> roots;     // output indices
  std::vector<Tensor> upstream;  // their upstream gradients
  std::vector<size_t> inputs;    // input indices whose gradient is compared
  std::vector<Tensor> want;      // PyTorch's gradients of those
};

GradSpec grad_spec(const json& c, const std::map<std::string, Tensor>& tensors, Device device) {
  auto tensor_of = [&](const json& ref) -> Tensor {
    auto it = tensors.find(ref.at("key").get<std::string>());
    SMELT_CHECK(it != tensors.end(), "golden: tensor '{}' missing from the file",
                ref.at("key").get<std::string>());
    return it->second;
  };
  GradSpec g;
  const json& gouts = c.at("grad_outputs");
  for (size_t i = 0; i < gouts.size(); ++i) {
    if (gouts[i].is_null()) continue;
    g.roots.push_back(i);
    g.upstream.push_back(tensor_of(gouts[i]).to(device));
  }
  for (const json& w : c.at("grads")) {
    if (w.at("key").is_null()) continue;
    g.inputs.push_back(w.at("input").get<size_t>());
    g.want.push_back(tensor_of(w));
  }
  return g;
}

/// The gradients of `spec`'s inputs (of `leaves`, the function's inputs) for
/// the op's outputs `out`, by autograd::grad; Error when one gets none.
std::vector<Tensor> gradients(const GradSpec& spec, const std::vector<Tensor>& leaves,
                              const std::vector<Tensor>& out) {
  std::vector<Tensor> roots, wrt;
  for (size_t r : spec.roots) roots.push_back(out.at(r));
  for (size_t i : spec.inputs) wrt.push_back(leaves.at(i));
  std::vector<Tensor> got =
      autograd::grad(roots, wrt, spec.upstream, std::nullopt, false, /*allow_unused=*/true);
  for (size_t k = 0; k < got.size(); ++k)
    SMELT_CHECK(got[k].defined(), "no gradient for input {}", spec.inputs[k]);
  return got;
}

CaseResult check_grads(const GradSpec& spec, const std::string& op,
                       const std::vector<Tensor>& got) {
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    std::string why =
        compare_tensors(got.at(k), spec.want[k], golden_tolerance(op, spec.want[k].dtype()));
    if (!why.empty()) return {false, fmt::format("gradient of input {}: {}", spec.inputs[k], why)};
  }
  return {true, ""};
}

/// Waits for `device`'s queued work: on CUDA an error a kernel flagged (integer
/// division by zero) is raised at this synchronization point, so the case that
/// caused it reports it rather than a later one.
void synchronize(Device device) {
  if (device.is_cuda()) cuda::synchronize();
}

/// A case ready to run: its op, inputs and eager computation.
struct PreparedCase {
  std::string op;
  std::vector<Tensor> inputs;  // on the case's device (a gradient case: its leaves)
  /// The case's computation, a function of its inputs: the op's outputs and,
  /// for a gradient case, then the gradients of its inputs (compiled: the op
  /// and its backward pass in one graph).
  Runner eager;
  std::shared_ptr<size_t> n_out = std::make_shared<size_t>(0);  // the op's outputs (last run)
  GradSpec grads;     // a gradient case's roots, inputs and PyTorch's gradients
  std::string error;  // why the inputs could not be loaded, or ""
  Device device;
};

PreparedCase prepare_case(const json& c, const std::map<std::string, Tensor>& tensors, bool fresh,
                          Device device) {
  PreparedCase p;
  p.device = device;
  p.op = c.at("op").get<std::string>();
  // Leaves that require grad for the inputs a gradient case differentiates.
  std::set<size_t> leaves;
  if (c.contains("grads"))
    for (const json& g : c.at("grads"))
      if (!g.at("key").is_null()) leaves.insert(g.at("input").get<size_t>());
  std::map<size_t, std::string> leaf_views;
  p.error = load_inputs(c, tensors, leaves, device, p.inputs, leaf_views, fresh);
  if (!p.error.empty()) return p;
  const bool grads = c.contains("grads");
  if (grads) p.grads = grad_spec(c, tensors, device);
  detail::Attrs attrs = json_attrs(p.op, c.value("kwargs", json::object()), p.inputs.size());
  p.eager = [op = p.op, attrs, leaf_views, grads, spec = p.grads,
             n_out = p.n_out](const std::vector<Tensor>& leaves) -> std::vector<Tensor> {
    std::vector<Tensor> in = leaves;
    for (const auto& [i, view] : leaf_views) in[i] = apply_view(in[i], view);
    if (kTensorOnlyOther.count(op) && in.size() > 1 && in[1].is_wrapped_number())
      detail::throw_error(
          fmt::format("{}: argument 'other' (position 2) must be a Tensor, not a number", op));
    std::vector<Tensor> out = detail::call_op(op, in, attrs);
    *n_out = out.size();
    if (grads)
      for (Tensor& g : gradients(spec, leaves, out)) out.push_back(g);
    return out;
  };
  return p;
}

/// Compares the outputs `out` of a value case with PyTorch's (and its gradients,
/// for a gradient case).
CaseResult check_outputs(const json& c, const std::map<std::string, Tensor>& tensors,
                         const PreparedCase& p, std::vector<Tensor> out) {
  std::vector<Tensor> got_grads;
  if (c.contains("grads")) {
    got_grads.assign(out.begin() + static_cast<int64_t>(*p.n_out), out.end());
    out.resize(*p.n_out);
  }
  const json& outs = c.at("outputs");
  // batch_norm in training mode: PyTorch's outputs 2 and 3 are the running stats it updated.
  if (p.op == "batch_norm" && outs.size() == 3 && p.inputs.size() >= 3) {
    out.resize(1);
    out.push_back(p.inputs[1]);
    out.push_back(p.inputs[2]);
  }
  if (out.size() != outs.size())
    return {false, fmt::format("{} outputs but PyTorch gives {}", out.size(), outs.size())};
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string key = outs[i].at("key").get<std::string>();
    auto it = tensors.find(key);
    if (it == tensors.end()) return {false, fmt::format("tensor '{}' missing from the file", key)};
    std::string why;
    try {
      why = compare_tensors(out[i], it->second, golden_tolerance(p.op, it->second.dtype()));
    } catch (const std::exception& e) {
      why = fmt::format("cannot read the output: {}", e.what());
    }
    if (!why.empty()) return {false, out.size() > 1 ? fmt::format("output {}: {}", i, why) : why};
  }
  if (c.contains("grads")) return check_grads(p.grads, p.op, got_grads);
  return {true, ""};
}

CaseResult run_case(const json& c, const std::map<std::string, Tensor>& tensors, bool compiled,
                    Device device) {
  PreparedCase p = prepare_case(c, tensors, /*fresh=*/compiled, device);
  if (!p.error.empty()) return {false, p.error};
  // --compiled: the same function through smelt::compile (fullgraph, so that a
  // graph break is reported instead of silently running eagerly).
  auto core = std::make_shared<detail::CompiledCore>(
      CompileOptions{.fullgraph = !kMayBreakGraph.count(p.op)}, nullptr, nullptr);
  Runner run = compiled ? Runner([core, eager = p.eager](const std::vector<Tensor>& in) {
    return core->call(in, eager);
  })
                        : p.eager;

  // ---- error cases: only smelt::Error counts ----
  if (c.contains("error")) {
    std::string want = c.at("error").get<std::string>();
    try {
      std::vector<Tensor> out = run(p.inputs);
      synchronize(device);
      return {false, fmt::format("returned a result; PyTorch raises {}", want)};
    } catch (const Error&) {
      return {true, ""};
    } catch (const std::exception& e) {
      return {false,
              fmt::format("threw a non-smelt exception ({}); PyTorch raises {}", e.what(), want)};
    } catch (...) {
      return {false, fmt::format("threw a non-std exception; PyTorch raises {}", want)};
    }
  }

  // ---- value cases ----
  std::vector<Tensor> out;
  try {
    out = run(p.inputs);
    synchronize(device);
  } catch (const std::exception& e) {
    return {false, fmt::format("raised: {}", e.what())};
  } catch (...) {
    return {false, "threw a non-std exception"};
  }
  return check_outputs(c, tensors, p, std::move(out));
}

/// Whether a case may share one compiled function with others (--compiled):
/// a value case whose op cannot break the graph.
bool batchable(const json& c) {
  return !c.contains("error") && !c.contains("grads") &&
         !kMayBreakGraph.count(c.at("op").get<std::string>());
}

/// --compiled, several value cases through ONE compiled function: a graph of
/// all their ops, its kernels built in one go, where a function per case costs
/// a system-compiler start each (~0.3 s of a core). A case that fails here, or
/// every case of a batch that raises, is run again alone: a failure alone is
/// reported as such; a case that passes alone but fails beside others is a
/// failure of compiling them together, reported with both results.
std::vector<CaseResult> run_batch_compiled(const std::vector<const json*>& batch,
                                           const std::map<std::string, Tensor>& tensors,
                                           Device device) {
  std::vector<CaseResult> results(batch.size());
  std::vector<PreparedCase> ps;
  std::vector<size_t> first{0};  // case k's inputs are all[first[k], first[k + 1])
  std::vector<Tensor> all;
  for (const json* c : batch) {
    ps.push_back(prepare_case(*c, tensors, /*fresh=*/true, device));
    all.insert(all.end(), ps.back().inputs.begin(), ps.back().inputs.end());
    first.push_back(all.size());
  }
  std::vector<size_t> n_out(batch.size(), 0);
  Runner whole = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> outs;
    for (size_t k = 0; k < ps.size(); ++k) {
      if (!ps[k].error.empty()) continue;
      std::vector<Tensor> mine(in.begin() + static_cast<std::ptrdiff_t>(first[k]),
                               in.begin() + static_cast<std::ptrdiff_t>(first[k + 1]));
      std::vector<Tensor> o = ps[k].eager(mine);
      n_out[k] = o.size();
      outs.insert(outs.end(), o.begin(), o.end());
    }
    return outs;
  };
  std::vector<Tensor> out;
  std::string raised;
  try {
    detail::CompiledCore core(CompileOptions{.fullgraph = true}, nullptr, nullptr);
    out = core.call(all, whole);
    synchronize(device);
  } catch (const std::exception& e) {
    raised = e.what();
  }
  size_t at = 0;
  for (size_t k = 0; k < batch.size(); ++k) {
    if (!ps[k].error.empty()) {
      results[k] = {false, ps[k].error};
      continue;
    }
    CaseResult together{false, "the batch raised: " + raised};
    if (raised.empty()) {
      std::vector<Tensor> mine(out.begin() + static_cast<std::ptrdiff_t>(at),
                               out.begin() + static_cast<std::ptrdiff_t>(at + n_out[k]));
      at += n_out[k];
      together = check_outputs(*batch[k], tensors, ps[k], std::move(mine));
    }
    if (together.pass) {
      results[k] = together;
      continue;
    }
    CaseResult alone = run_case(*batch[k], tensors, /*compiled=*/true, device);
    results[k] = alone.pass
                     ? CaseResult{false, fmt::format("passes compiled alone, fails compiled "
                                                     "in one function with {} other cases: {}",
                                                     batch.size() - 1, together.reason)}
                     : alone;
  }
  return results;
}

}  // namespace

int cmd_golden(const GoldenOptions& opts) {
  std::ifstream f(opts.manifest);
  SMELT_CHECK(f.is_open(), "smelt golden: cannot open manifest '{}'", opts.manifest);
  json manifest;
  try {
    manifest = json::parse(f);
  } catch (const json::exception& e) {
    detail::throw_error(
        fmt::format("smelt golden: '{}' is not valid JSON: {}", opts.manifest, e.what()));
  }
  SMELT_CHECK(manifest.is_object() && manifest.contains("cases") && manifest["cases"].is_array(),
              "smelt golden: '{}' has no \"cases\" list", opts.manifest);
  std::string base = opts.manifest;
  if (base.size() > 5 && base.substr(base.size() - 5) == ".json") base.resize(base.size() - 5);
  const std::map<std::string, Tensor> tensors = load_safetensors(base + ".safetensors");

  std::vector<const json*> cases;
  for (const json& c : manifest["cases"]) {
    std::string id = c.value("id", std::string("?"));
    if (!opts.filter.empty() && id.find(opts.filter) == std::string::npos) continue;
    cases.push_back(&c);
  }
  SMELT_CHECK(!cases.empty() || opts.filter.empty(),
              "smelt golden: no case of {} has an id containing '{}' (--filter matches part of a "
              "case id, e.g. 'softmax'; run with -v and no --filter to list them)",
              opts.manifest, opts.filter);
  const Device device(opts.device);
  if (device.is_cuda()) (void)zeros({1}, TensorOptions().device(device));  // Error without a GPU
  // Work items: one case, or (--compiled) a batch of value cases compiled as one function.
  constexpr size_t kBatch = 48;
  std::vector<std::vector<size_t>> items;
  std::vector<size_t> pending;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (opts.compiled && batchable(*cases[i])) {
      pending.push_back(i);
      if (pending.size() == kBatch) items.push_back(std::exchange(pending, {}));
    } else {
      items.push_back({i});
    }
  }
  if (!pending.empty()) items.push_back(pending);
  std::vector<CaseResult> results(cases.size());
  std::atomic<int64_t> done{0}, failed_so_far{0};
  auto guarded = [](auto&& f) -> std::vector<CaseResult> {
    try {
      return f();
    } catch (const std::exception& e) {
      return {{false, fmt::format("malformed case or harness error: {}", e.what())}};
    } catch (...) {
      return {{false, "malformed case: unknown exception"}};
    }
  };
  auto run_item = [&](const std::vector<size_t>& item) {
    std::vector<CaseResult> r;
    if (item.size() > 1) {
      std::vector<const json*> batch;
      for (size_t i : item) batch.push_back(cases[i]);
      r = guarded([&] { return run_batch_compiled(batch, tensors, device); });
    } else {
      r = guarded([&] {
        return std::vector<CaseResult>{run_case(*cases[item[0]], tensors, opts.compiled, device)};
      });
    }
    r.resize(item.size(), r.empty() ? CaseResult{} : r.front());
    for (size_t k = 0; k < item.size(); ++k) {
      results[item[k]] = r[k];
      if (!r[k].pass) ++failed_so_far;
      ++done;
    }
  };
  // Compiled cases spend their time in the system compiler: run them on all cores.
  size_t workers = opts.compiled ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i = next++; i < items.size(); i = next++) run_item(items[i]);
    });
  {
    Progress progress(std::string("smelt golden") + (opts.compiled ? " --compiled" : "") +
                          (device.is_cpu() ? "" : " --device " + opts.device),
                      static_cast<int64_t>(cases.size()));
    while (progress.active() && done.load() < static_cast<int64_t>(cases.size())) {
      progress.update(done.load(), failed_so_far.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : pool) t.join();
    progress.update(done.load(), failed_so_far.load());
  }  // the progress line is erased before the results are printed
  int passed = 0, failed = 0, deviations = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string id = cases[i]->value("id", std::string("?"));
    const CaseResult& r = results[i];
    auto dev = kDeliberateDeviations.find(id);
    if (r.pass) {
      ++passed;
      if (opts.verbose) std::printf("PASS %s\n", id.c_str());
    } else if (dev != kDeliberateDeviations.end()) {
      ++deviations;
      std::printf("DEVIATION %s: %s (%s)\n", id.c_str(), r.reason.c_str(), dev->second);
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", id.c_str(), r.reason.c_str());
    }
  }
  std::fflush(stdout);
  if (deviations)
    std::printf("%d deliberate deviation(s) from PyTorch, listed above with their reasons\n",
                deviations);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace smelt::cli
